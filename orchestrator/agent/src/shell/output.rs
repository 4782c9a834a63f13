//! A finished job's output, stored with its hash (`crate::output`): again
//! and again while the store fails, since a store that fails is not the
//! job's fault.

use super::JobRunner;
use crate::chain::AgentChain;
use crate::core::Event;
use crate::output::store_output;
use mcjs_client::Pubkey;
use mcjs_runtime::engine::ContainerEngine;
use std::time::{Duration, Instant};

/// How long a finished job's output is stored again while the store fails
/// (unreachable, or refusing): after that the job stops as `output_missing`
/// (docs/job-contract.md) and resumes elsewhere from its last checkpoint.
pub const OUTPUT_RETRY_FOR: Duration = Duration::from_secs(600);

/// The first wait between two tries, doubled after each up to
/// [`OUTPUT_RETRY_MAX_WAIT`].
const OUTPUT_RETRY_FIRST_WAIT: Duration = Duration::from_secs(1);
const OUTPUT_RETRY_MAX_WAIT: Duration = Duration::from_secs(30);

impl<C: AgentChain, E: ContainerEngine + 'static> JobRunner<C, E> {
    /// Stores the output of the assignment's finished container: its hash,
    /// or why there is none to report. A failing store is tried again, 1 s
    /// to 30 s apart, for up to [`OUTPUT_RETRY_FOR`]; what the job left (a
    /// missing or oversized output) is reported at once.
    pub(super) async fn store_output(&self, job: Pubkey, generation: u32) -> Event {
        let ctx = match self.ctx(job, generation).await {
            Ok(ctx) => ctx,
            Err(reason) => return Event::OutputMissing { reason },
        };
        let started = Instant::now();
        let mut wait = OUTPUT_RETRY_FIRST_WAIT;
        loop {
            match store_output(
                &self.node.store,
                &job.to_string(),
                generation,
                &ctx.output_dir,
                &ctx.spec,
                crate::fault::output_limits(&ctx.spec),
            )
            .await
            {
                Ok(hash) => return Event::OutputStored { hash },
                Err(e) if e.is_store_failure() && started.elapsed() + wait < OUTPUT_RETRY_FOR => {
                    tracing::warn!(%job, generation, error = %e, retry_in_s = wait.as_secs(), "cannot store the output; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(OUTPUT_RETRY_MAX_WAIT);
                }
                Err(e) => {
                    return Event::OutputMissing {
                        reason: e.to_string(),
                    };
                }
            }
        }
    }
}
