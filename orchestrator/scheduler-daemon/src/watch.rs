//! What the scheduler watches beside its rounds: whether the store answers
//! (the failure detector excuses its outages, `crate::sight`), its own SOL
//! (`crate::funds`) and the scheduler lease (`crate::lease`). Each is a
//! loop of its own until the daemon stops.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcjs_client::{ChainClient, Keypair, Pubkey, Signer, ix};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::funds::{FUNDS_EVERY, Funds};
use crate::gateway::S3Store;
use crate::lease::{LEASE_CHECK_EVERY, Leading, LeaseRole, LeaseStep, lease_step};
use crate::metrics::Metrics;
use crate::server::Clock;
use crate::sight::Sight;

/// How often the scheduler asks the store whether it answers, and how long
/// it waits for the answer. A store that does not answer keeps every node
/// from storing checkpoints: the detector excuses the time (see [`Sight`]).
pub const STORE_PROBE_EVERY: Duration = Duration::from_secs(2);
pub const STORE_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks the store whether it answers every [`STORE_PROBE_EVERY`] (a HEAD of
/// a key no one writes: found or not, the store answered) until `cancel`,
/// and keeps `sight` and the `mcjs_store_up` gauge to its answers. A store
/// that refuses the scheduler's own credentials counts as down too: no node
/// could store through the gateway either.
pub async fn probe_store(
    s3: Arc<S3Store>,
    sight: Arc<Mutex<Sight>>,
    metrics: Arc<Metrics>,
    clock: Clock,
    cancel: CancellationToken,
) {
    loop {
        let answer =
            match tokio::time::timeout(STORE_PROBE_TIMEOUT, s3.exists(STORE_PROBE_KEY)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(err)) => Err(err.to_string()),
                Err(_) => Err(format!(
                    "no answer within {} s",
                    STORE_PROBE_TIMEOUT.as_secs()
                )),
            };
        let now = clock();
        {
            let mut sight = sight.lock().expect("store sight");
            match answer {
                Ok(()) => {
                    if let Some((from, to)) = sight.answered(now) {
                        info!(
                            outage_ms = to.saturating_sub(from),
                            "the store answers again; no job is judged late for the time it did not"
                        );
                    }
                    metrics.store_up.set(1);
                }
                Err(reason) => {
                    if sight.failed() {
                        warn!(
                            %reason,
                            "the store does not answer: no checkpoint can be stored, so no job is judged late until it does"
                        );
                    }
                    metrics.store_up.set(0);
                }
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(STORE_PROBE_EVERY) => {}
        }
    }
}

/// Reads the scheduler's SOL balance every [`FUNDS_EVERY`] until `cancel`
/// into `mcjs_scheduler_lamports` and `mcjs_scheduler_spent_lamports_per_hour`,
/// and warns while it cannot cover the next hour at the last hour's rate
/// (fees, and the rent of the Segments and Verifications it opens).
pub async fn watch_funds(
    client: ChainClient,
    scheduler: Pubkey,
    metrics: Arc<Metrics>,
    clock: Clock,
    cancel: CancellationToken,
) {
    let mut funds = Funds::default();
    loop {
        match client.sol_balance(&scheduler).await {
            Ok(lamports) => {
                let view = funds.record(clock(), lamports);
                metrics
                    .scheduler_lamports
                    .set(i64::try_from(lamports).unwrap_or(i64::MAX));
                if let Some(rate) = view.per_hour {
                    metrics
                        .scheduler_spend_per_hour
                        .set(i64::try_from(rate).unwrap_or(i64::MAX));
                }
                if view.short() {
                    warn!(
                        %scheduler,
                        lamports,
                        spent_per_hour = view.per_hour.unwrap_or_default(),
                        "the scheduler's SOL cannot cover the next hour of fees and rent at the last hour's rate: fund it (solana transfer {scheduler} <SOL>) or it will stop placing, reporting and checking"
                    );
                }
            }
            Err(err) => debug!(error = %err, "cannot read the scheduler's balance"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(FUNDS_EVERY) => {}
        }
    }
}

/// Reads the scheduler lease every [`LEASE_CHECK_EVERY`] until `cancel`,
/// renews it while this scheduler holds it, takes it once another member's
/// expires, and keeps `leading` (what the rounds act on) and the
/// `mcjs_scheduler_leader` and `mcjs_scheduler_lease_term` gauges to what
/// it read. A read that fails changes nothing: a leader stays one until
/// the chain shows another holder (its transactions are refused then).
pub async fn hold_lease(
    client: ChainClient,
    scheduler: Keypair,
    leading: Arc<Leading>,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) {
    let me = scheduler.pubkey();
    loop {
        match client.lease_view().await {
            Ok(view) => {
                let step = lease_step(&view, &me);
                let landed = match step {
                    LeaseStep::Renew { .. } | LeaseStep::Take { .. } => {
                        let sent = client.send(&[ix::hold_lease(&me)], &[&scheduler]).await;
                        if let Err(err) = &sent {
                            warn!(error = %err, ?step, "could not hold the scheduler lease; trying again");
                        }
                        sent.is_ok()
                    }
                    _ => false,
                };
                let role = LeaseRole::after(step, landed);
                let was = leading.set(role);
                if was != role {
                    match role {
                        LeaseRole::Leader { term } => info!(
                            term,
                            "this scheduler holds the lease: it places, reports and checks"
                        ),
                        LeaseRole::Standby { holder, term } => info!(
                            %holder,
                            term,
                            "another scheduler holds the lease: this one follows, serving heartbeats and the store"
                        ),
                        LeaseRole::Outsider => warn!(
                            scheduler = %me,
                            "this key is neither the Config's scheduler nor a standby: it will never act (mcjs admin set-schedulers names standbys)"
                        ),
                    }
                }
                metrics.leader.set(i64::from(role.leads()));
                if let LeaseRole::Leader { term } | LeaseRole::Standby { term, .. } = role {
                    metrics
                        .lease_term
                        .set(i64::try_from(term).unwrap_or(i64::MAX));
                }
            }
            Err(err) => debug!(error = %err, "cannot read the scheduler lease"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(LEASE_CHECK_EVERY) => {}
        }
    }
}

/// The key the store probe looks up (under the deployment's prefix).
const STORE_PROBE_KEY: &str = "mcjs-store-probe";
