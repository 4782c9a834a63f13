//! What each [`Action`] of the core does: each runs as a tracked task and,
//! where the core waits on it, reports back as an event.

use super::{EventTx, JobRunner};
use crate::chain::{AgentChain, ChainFailure};
use crate::core::{Action, Event, OUTPUT_ATTESTED, Tx, TxFailure};
use futures_util::FutureExt;
use mcjs_client::Pubkey;
use mcjs_runtime::engine::{ContainerEngine, ContainerId, EngineError, JobSignal};
use std::time::{Duration, Instant};
use tokio_util::task::TaskTracker;

impl<C: AgentChain, E: ContainerEngine + 'static> JobRunner<C, E> {
    pub(super) fn execute_all(&self, actions: Vec<Action>, tx: &EventTx, tracker: &TaskTracker) {
        for action in actions {
            self.execute(action, tx, tracker);
        }
    }

    fn execute(&self, action: Action, tx: &EventTx, tracker: &TaskTracker) {
        let this = self.clone();
        let tx = tx.clone();
        tracker.spawn(async move {
            if let Some((job, generation, event)) = this.perform(action).await {
                let _ = tx.send((job, generation, event));
            }
        });
    }

    /// Carries out `action`; the event the core is told, if any.
    async fn perform(&self, action: Action) -> Option<(Pubkey, u32, Event)> {
        match action {
            Action::Launch {
                job,
                generation,
                restore,
            } => {
                // `start_job` follows the launch: its blockhash is fetched meanwhile.
                self.node.chain.warm();
                Some((job, generation, self.launch(job, generation, restore).await))
            }
            Action::Collect { job, generation } => Some((
                job,
                generation,
                self.collect_reporting(job, generation).await,
            )),
            Action::SignalCheckpoint {
                job,
                container,
                generation,
            } => {
                self.signal_checkpoint(job, generation, container).await;
                None
            }
            Action::Prune {
                job,
                generation,
                below,
                floor,
            } => {
                if let Ok(ctx) = self.ctx(job, generation).await
                    && let Err(e) = ctx
                        .pipeline
                        .store
                        .prune(&job.to_string(), below, floor.as_ref())
                        .await
                {
                    tracing::warn!(%job, error = %e, "cannot prune old checkpoints");
                }
                None
            }
            Action::CollectOutput { job, generation } => {
                Some((job, generation, self.store_output(job, generation).await))
            }
            Action::Send {
                job,
                generation,
                tx,
            } => Some((job, generation, self.transact(job, generation, tx).await)),
            Action::Stop {
                job,
                generation,
                container,
            } => {
                self.stop_fenced(job, generation, container).await;
                None
            }
            Action::Remove {
                job,
                generation,
                container,
            } => {
                if gone(&self.node.engine.remove(&ContainerId(container)).await) {
                    self.run_gone(job, generation).await;
                }
                Some((job, generation, Event::Removed))
            }
            Action::RemoveStray { container, run } => {
                tracing::info!(%container, "removing a container of no current assignment");
                let removed = self.node.engine.remove(&ContainerId(container)).await;
                if let (true, Some((job, generation))) = (gone(&removed), run) {
                    self.run_gone(job, generation).await;
                }
                None
            }
            Action::FlagOverdue {
                job,
                generation,
                late_by,
            } => {
                self.node.metrics.overdue.inc();
                tracing::warn!(%job, generation, late_by_secs = late_by.as_secs(), "the job missed its checkpoint deadline");
                None
            }
        }
    }

    /// Collects the assignment's checkpoints. Whatever happens, the core
    /// hears back: a look that never reported would stop every later one
    /// for the job.
    async fn collect_reporting(&self, job: Pubkey, generation: u32) -> Event {
        let look = async {
            match self.ctx(job, generation).await {
                Ok(ctx) => self.collect(job, &ctx).await,
                Err(reason) => Event::CollectFailed { reason },
            }
        };
        match std::panic::AssertUnwindSafe(look).catch_unwind().await {
            Ok(event) => event,
            Err(panic) => Event::CollectFailed {
                reason: format!(
                    "collecting the checkpoints panicked ({}); they are collected again",
                    panic_message(&*panic)
                ),
            },
        }
    }

    async fn signal_checkpoint(&self, job: Pubkey, generation: u32, container: String) {
        if let Err(e) = self
            .node
            .engine
            .signal(&ContainerId(container), JobSignal::Checkpoint)
            .await
        {
            tracing::warn!(%job, error = %e, "cannot signal the job to checkpoint");
        }
        tracing::info!(%job, generation, "checkpoint signal sent");
    }

    /// Sends `tx` and counts it; what the core is told of it.
    async fn transact(&self, job: Pubkey, generation: u32, tx: Tx) -> Event {
        let started = Instant::now();
        let result = self.send(job, generation, &tx).await;
        self.count_tx(job, generation, &tx, &result, started.elapsed());
        match result {
            Ok(()) => Event::TxConfirmed(tx),
            Err(f) => Event::TxFailed {
                tx,
                failure: TxFailure {
                    message: f.message,
                    retryable: f.retryable,
                    program_error: f.program_error,
                },
            },
        }
    }

    /// A transaction's metrics and log line (an output attested counts as
    /// confirmed), and an attestation's latency from its checkpoint's store.
    fn count_tx(
        &self,
        job: Pubkey,
        generation: u32,
        tx: &Tx,
        result: &Result<(), ChainFailure>,
        took: Duration,
    ) {
        let s = &self.node;
        let kind = match tx {
            Tx::Start => "start_job",
            Tx::Attest { .. } => "attest_checkpoint",
            Tx::Complete { .. } => "complete_job",
        };
        let attested_output =
            matches!(result, Err(f) if f.program_error.as_deref() == Some(OUTPUT_ATTESTED));
        let outcome = if result.is_ok() || attested_output {
            "confirmed"
        } else {
            "failed"
        };
        s.metrics
            .transactions
            .with_label_values(&[kind, outcome])
            .inc();
        match result {
            Ok(()) => {
                tracing::info!(%job, generation, ?tx, ms = took.as_millis() as u64, "transaction confirmed");
                if let Tx::Attest { step, .. } = tx
                    && let Some(at) = self
                        .jobs
                        .stored_at
                        .lock()
                        .expect("lock")
                        .remove(&(job, *step))
                {
                    s.metrics
                        .attestation_latency_seconds
                        .observe(at.elapsed().as_secs_f64());
                }
            }
            Err(e) if attested_output => {
                tracing::info!(%job, generation, %e, "output attested")
            }
            Err(e) => {
                tracing::warn!(%job, generation, ?tx, error = %e, "transaction failed")
            }
        }
    }

    /// Stops the container of an assignment the chain fenced.
    async fn stop_fenced(&self, job: Pubkey, generation: u32, container: String) {
        self.node.metrics.fenced.inc();
        let removed = self
            .node
            .engine
            .remove(&ContainerId(container.clone()))
            .await;
        if gone(&removed) {
            tracing::warn!(%job, generation, %container, "fenced container stopped");
            self.run_gone(job, generation).await;
        } else if let Err(e) = removed {
            tracing::warn!(%job, generation, %container, error = %e, "cannot stop the fenced container");
        }
    }

    /// An assignment's container is gone: its GPUs are free and its
    /// directories deleted.
    async fn run_gone(&self, job: Pubkey, generation: u32) {
        // Its GPUs may go to a check.
        self.gpus.paid_gone((job, generation));
        self.node
            .clear_run(self.node.job_dir(job, generation))
            .await;
    }
}

/// Whether a removal left no container behind (removed now, or already gone).
fn gone(removed: &Result<(), EngineError>) -> bool {
    matches!(removed, Ok(()) | Err(EngineError::UnknownContainer(_)))
}

/// What a caught panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}
