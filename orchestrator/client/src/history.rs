//! Every event of the program, decoded from transaction logs, and the
//! history of an account as a list of those events in chain order.

use anchor_lang::prelude::Pubkey;
use anchor_lang::{AnchorDeserialize, Discriminator};
use mcjs::events as ev;
use mcjs::instructions::CheckerStep;
use mcjs::state::{
    CheckAnswer, FailureCause, NodeStatus, PauseReason, VerificationOutcome, VerificationState,
};

use crate::events::data_lines;

/// USDC base units as the CLI shows them ("12.50", "0.000001").
pub fn usdc(base_units: u64) -> String {
    mcjs_spec::units::Usdc(base_units).to_string()
}

fn short(hash: &[u8; 32]) -> String {
    hex::encode(&hash[..8])
}

macro_rules! program_events {
    ($($name:ident),* $(,)?) => {
        /// One event of the MCJS program.
        pub enum McjsEvent {
            $($name(ev::$name),)*
        }

        impl McjsEvent {
            /// Decodes the payload of one `Program data:` log line.
            pub fn decode(data: &[u8]) -> Option<Self> {
                $(
                    if let Some(body) = data.strip_prefix(ev::$name::DISCRIMINATOR) {
                        return ev::$name::deserialize(&mut &body[..]).ok().map(Self::$name);
                    }
                )*
                None
            }

            /// The event's type name, e.g. `CheckpointAttested`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$name(_) => stringify!($name),)*
                }
            }
        }
    };
}

program_events![
    ConfigInitialized,
    ConfigUpdated,
    SchedulersSet,
    LeaseTaken,
    ProviderRegistered,
    StakeAdded,
    WithdrawalRequested,
    StakeWithdrawn,
    NodeRegistered,
    NodeUpdated,
    NodeStatusChanged,
    JobSubmitted,
    JobAssigned,
    JobStarted,
    CheckpointAttested,
    SegmentSettled,
    OutputAttested,
    JobCompleted,
    FailureReported,
    JobPaused,
    JobResumed,
    BondToppedUp,
    JobCancelled,
    JobExpired,
    JobClosed,
    OwnerCompensated,
    SegmentHeld,
    SegmentReleased,
    VerificationOpened,
    VerificationAttested,
    CheckerReplaced,
    SecondRoundOpened,
    VerificationResolved,
    CheckerSlashed,
    ChallengeRequested,
    ChallengeAnswered,
    ChallengeRecorded,
    ChallengeLapsed,
];

impl std::fmt::Debug for McjsEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.name(), self.describe())
    }
}

impl McjsEvent {
    /// Every event the program logged in its own invocations, in log order
    /// ([`crate::events::data_lines`]: never another program's lines).
    pub fn all_in_logs(logs: &[String]) -> Vec<McjsEvent> {
        data_lines(logs)
            .iter()
            .filter_map(|data| McjsEvent::decode(data))
            .collect()
    }

    /// The job the event is about, for job events.
    pub fn job(&self) -> Option<Pubkey> {
        use McjsEvent::*;
        Some(match self {
            JobSubmitted(e) => e.job,
            JobAssigned(e) => e.job,
            JobStarted(e) => e.job,
            CheckpointAttested(e) => e.job,
            SegmentSettled(e) => e.job,
            OutputAttested(e) => e.job,
            JobCompleted(e) => e.job,
            FailureReported(e) => e.job,
            JobPaused(e) => e.job,
            JobResumed(e) => e.job,
            BondToppedUp(e) => e.job,
            JobCancelled(e) => e.job,
            JobExpired(e) => e.job,
            JobClosed(e) => e.job,
            OwnerCompensated(e) => e.job,
            SegmentHeld(e) => e.job,
            SegmentReleased(e) => e.job,
            VerificationOpened(e) => e.job,
            VerificationAttested(e) => e.job,
            CheckerReplaced(e) => e.job,
            SecondRoundOpened(e) => e.job,
            VerificationResolved(e) => e.job,
            CheckerSlashed(e) => e.job,
            _ => return None,
        })
    }

    /// The Provider account the event is about, where it names one.
    pub fn provider(&self) -> Option<Pubkey> {
        use McjsEvent::*;
        Some(match self {
            ProviderRegistered(e) => e.provider,
            StakeAdded(e) => e.provider,
            WithdrawalRequested(e) => e.provider,
            StakeWithdrawn(e) => e.provider,
            NodeRegistered(e) => e.provider,
            JobAssigned(e) => e.provider,
            SegmentSettled(e) => e.provider,
            FailureReported(e) => e.provider,
            SegmentHeld(e) => e.provider,
            SegmentReleased(e) => e.provider,
            VerificationOpened(e) => e.provider,
            VerificationResolved(e) => return e.slashed_provider,
            CheckerSlashed(e) => e.provider,
            _ => return None,
        })
    }

    /// The key the event says acted, where it records one.
    pub fn by(&self) -> Option<Pubkey> {
        use McjsEvent::*;
        Some(match self {
            JobAssigned(e) => e.by,
            JobStarted(e) => e.by,
            CheckpointAttested(e) => e.by,
            OutputAttested(e) => e.by,
            JobCompleted(e) => e.by,
            FailureReported(e) => e.by,
            JobPaused(e) => e.by,
            JobResumed(e) => e.by,
            BondToppedUp(e) => e.by,
            JobCancelled(e) => e.by,
            JobExpired(e) => e.by,
            JobClosed(e) => e.by,
            OwnerCompensated(e) => e.by,
            NodeUpdated(e) => e.by,
            JobSubmitted(e) => e.owner,
            SegmentReleased(e) => e.by,
            VerificationResolved(e) => e.by,
            _ => return None,
        })
    }

    /// The chain's clock when the event was logged, where it records one.
    pub fn at(&self) -> Option<i64> {
        use McjsEvent::*;
        Some(match self {
            JobSubmitted(e) => e.at,
            JobAssigned(e) => e.at,
            JobStarted(e) => e.at,
            CheckpointAttested(e) => e.at,
            OutputAttested(e) => e.at,
            JobCompleted(e) => e.at,
            FailureReported(e) => e.at,
            JobPaused(e) => e.at,
            JobResumed(e) => e.at,
            BondToppedUp(e) => e.at,
            JobCancelled(e) => e.at,
            JobExpired(e) => e.at,
            SegmentReleased(e) => e.at,
            VerificationOpened(e) => e.at,
            VerificationAttested(e) => e.at,
            CheckerReplaced(e) => e.at,
            SecondRoundOpened(e) => e.at,
            VerificationResolved(e) => e.at,
            CheckerSlashed(e) => e.at,
            ChallengeRequested(e) => e.at,
            ChallengeAnswered(e) => e.at,
            ChallengeRecorded(e) => e.at,
            ChallengeLapsed(e) => e.at,
            _ => return None,
        })
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        use McjsEvent::*;
        match self {
            ConfigInitialized(e) => format!(
                "config initialised: admin {}, scheduler {}, mint {}, treasury {}, insurance pool {}",
                e.admin, e.scheduler, e.usdc_mint, e.treasury, e.insurance_pool
            ),
            ConfigUpdated(e) => format!("config updated: {:?} -> {:?}", e.old, e.new),
            SchedulersSet(e) => format!(
                "schedulers set: {} with standbys {:?}, lease {} slots",
                e.scheduler,
                e.standbys.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
                e.lease_slots
            ),
            LeaseTaken(e) => format!(
                "scheduler {} took the lease from {} (term {} ended, term {} began at slot {})",
                e.holder, e.previous, e.ended_term, e.term, e.slot
            ),
            ProviderRegistered(e) => format!(
                "provider {} registered by {} with stake {} USDC",
                e.provider,
                e.owner,
                usdc(e.stake)
            ),
            StakeAdded(e) => format!("stake +{} USDC, now {} USDC", usdc(e.amount), usdc(e.stake)),
            WithdrawalRequested(e) => format!(
                "withdrawal of {} USDC requested, available at {}",
                usdc(e.amount),
                e.available_at
            ),
            StakeWithdrawn(e) => format!(
                "{} USDC withdrawn, stake now {} USDC{}",
                usdc(e.amount),
                usdc(e.stake),
                swept(e.swept)
            ),
            NodeRegistered(e) => format!(
                "node {} (index {}) registered with operator key {}: {}x {}, readiness {}, {} USDC/GPU-hour",
                e.node,
                e.index,
                e.operator,
                e.hardware.gpu_count,
                e.hardware.gpu_model,
                e.readiness,
                usdc(e.price_per_gpu_hour)
            ),
            NodeUpdated(e) => format!(
                "node {} updated by {}{}: {}x {}, readiness {}, {} USDC/GPU-hour",
                e.node,
                e.by,
                if e.old_operator != e.operator {
                    format!(", operator key {} -> {}", e.old_operator, e.operator)
                } else {
                    String::new()
                },
                e.hardware.gpu_count,
                e.hardware.gpu_model,
                e.readiness,
                usdc(e.price_per_gpu_hour)
            ),
            NodeStatusChanged(e) => format!(
                "node {} {} -> {}",
                e.node,
                node_status(e.old),
                node_status(e.new)
            ),
            JobSubmitted(e) => format!(
                "submitted (job id {}, spec {}, bond {} USDC)",
                e.job_id,
                hex::encode(e.spec_hash),
                usdc(e.bond)
            ),
            JobAssigned(e) => format!(
                "assigned to node {} (generation {}, {} USDC/hour)",
                e.node,
                e.generation,
                usdc(e.rate_per_hour)
            ),
            JobStarted(e) => format!("started on node {} (generation {})", e.node, e.generation),
            CheckpointAttested(e) => format!(
                "checkpoint epoch {} step {} hash {}… (generation {}), chain {}…, accrued {} USDC",
                e.epoch,
                e.step,
                short(&e.checkpoint_hash),
                e.generation,
                short(&e.chain),
                usdc(e.accrued)
            ),
            SegmentSettled(e) => format!(
                "segment of generation {} settled: {} USDC to the provider, {} USDC commission",
                e.generation,
                usdc(e.provider_amount),
                usdc(e.commission)
            ),
            OutputAttested(e) => format!(
                "output {} attested on node {} (generation {}) as interval {}: the job completes once the draw has had its time and any check of it is done",
                hex::encode(e.output_hash),
                e.node,
                e.generation,
                e.interval
            ),
            JobCompleted(e) => format!(
                "completed on node {} (generation {}), output {}, refund {} USDC",
                e.node,
                e.generation,
                hex::encode(e.output_hash),
                usdc(e.refund)
            ),
            FailureReported(e) => format!(
                "failure of generation {} on node {}: {}, slashed {} USDC to the insurance pool {}, restarts used {}{}",
                e.failed_generation,
                e.node,
                failure_cause(e.cause),
                usdc(e.slashed),
                e.slashed_to,
                e.restarts_used,
                if e.job_failed {
                    format!(", job failed, refund {} USDC", usdc(e.refund))
                } else {
                    String::new()
                }
            ),
            JobPaused(e) => format!(
                "paused ({}), generation {}",
                match e.reason {
                    PauseReason::Owner => "by its owner",
                    PauseReason::InsufficientBond => "bond exhausted",
                },
                e.generation
            ),
            JobResumed(_) => "resumed: back in the queue".to_string(),
            BondToppedUp(e) => format!("bond +{} USDC, now {} USDC", usdc(e.amount), usdc(e.bond)),
            JobCancelled(e) => format!("cancelled, refund {} USDC", usdc(e.refund)),
            JobExpired(e) => format!("expired, refund {} USDC", usdc(e.refund)),
            JobClosed(e) => format!("closed{}", swept(e.swept)),
            OwnerCompensated(e) => format!(
                "owner compensated {} USDC from the insurance pool (to {}, {} USDC in all), pool now {} USDC",
                usdc(e.amount),
                e.owner_token,
                usdc(e.compensated),
                usdc(e.pool_balance)
            ),
            SegmentHeld(e) => format!(
                "payment of generation {} held: {} USDC until {}",
                e.generation,
                usdc(e.gross),
                e.release_at
            ),
            SegmentReleased(e) if e.refunded => format!(
                "segment of generation {} closed (its payment went back to the owner)",
                e.generation
            ),
            SegmentReleased(e) => format!(
                "segment of generation {} released: {} USDC to the provider, {} USDC commission",
                e.generation,
                usdc(e.provider_amount),
                usdc(e.commission)
            ),
            VerificationOpened(e) => format!(
                "interval {} ({} -> step {}, hash {}…) drawn for verification: verifier node {}, referee node {}",
                e.interval,
                e.from_step
                    .map_or_else(|| "start".to_string(), |s| format!("step {s}")),
                e.to_step,
                short(&e.claimed_hash),
                e.verifier_node,
                e.referee_node
            ),
            CheckerReplaced(e) => format!(
                "interval {}: the {} node {} did not seal its answer in time, replaced by node {} ({} of {} replacements; the window starts again)",
                e.interval,
                match e.role {
                    mcjs::state::Party::Verifier => "verifier",
                    mcjs::state::Party::Referee => "referee",
                },
                e.replaced_node,
                e.node,
                e.replacements,
                mcjs::state::MAX_CHECKER_REPLACEMENTS
            ),
            SecondRoundOpened(e) => format!(
                "interval {}: the checkers disagreed (verifier node {}: {}, referee node {}: {}), so two more check it: verifier node {}, referee node {}",
                e.interval,
                e.first_round.verifier_node,
                revealed(e.first_round.verifier_answer),
                e.first_round.referee_node,
                revealed(e.first_round.referee_answer),
                e.verifier_node,
                e.referee_node
            ),
            VerificationAttested(e) => match e.answer {
                CheckerStep::Seal { .. } => format!(
                    "interval {} sealed by node {} ({})",
                    e.interval,
                    e.node,
                    verification_state(&e.state)
                ),
                CheckerStep::Reveal { answer, .. } => format!(
                    "interval {} checked by node {}: {} ({})",
                    e.interval,
                    e.node,
                    match answer {
                        CheckAnswer::Reproduced { hash, .. } => format!("hash {}…", short(&hash)),
                        CheckAnswer::StartUnavailable => "start unavailable".to_string(),
                    },
                    verification_state(&e.state)
                ),
            },
            VerificationResolved(e) => format!(
                "interval {} {}{}{}{}",
                e.interval,
                verification_outcome(e.outcome),
                match e.slashed_provider {
                    Some(p) if e.slashed > 0 =>
                        format!(", provider {p} slashed {} USDC", usdc(e.slashed)),
                    _ => String::new(),
                },
                if e.refund > 0 {
                    format!(", owner refunded {} USDC", usdc(e.refund))
                } else {
                    String::new()
                },
                match (e.rolled_back, e.restore_point) {
                    (true, Some(c)) => format!(", job back to step {}", c.step),
                    (true, None) => ", job back to its start".to_string(),
                    (false, _) if e.fees > 0 => format!(", checker paid {} USDC", usdc(e.fees)),
                    (false, _) => String::new(),
                }
            ),
            CheckerSlashed(e) => format!(
                "interval {}: the first round's {} (provider {}) revealed a checkpoint the second round did not reproduce: slashed {} USDC",
                e.interval,
                match e.role {
                    mcjs::state::Party::Verifier => "verifier",
                    mcjs::state::Party::Referee => "referee",
                },
                e.provider,
                usdc(e.amount)
            ),
            ChallengeRequested(e) => format!(
                "hardware challenge of node {} ({} × {}, {} MiB) requested at slot {}",
                e.node,
                e.hardware.gpu_count,
                e.hardware.gpu_model,
                e.hardware.vram_per_gpu_mib,
                e.requested_slot
            ),
            ChallengeAnswered(e) => format!(
                "node {} answered its challenge's {} to the seed of slot {}",
                e.node,
                match e.step {
                    mcjs::state::ChallengeStep::Commit { .. } => "commitment",
                    mcjs::state::ChallengeStep::Hold { .. } => "held digest",
                },
                e.seed_slot
            ),
            ChallengeLapsed(e) => format!(
                "hardware challenge of node {} lapsed: its verdict came after slot {}'s \
                 successor left the slot hashes, so it proves and fails nothing",
                e.node, e.held_slot
            ),
            ChallengeRecorded(e) => format!(
                "hardware challenge of node {}: {}{}",
                e.node,
                challenge_verdict(&e.verdict),
                match (e.commit_secs, e.held_secs) {
                    (Some(c), Some(h)) => format!(" (product {c} s, held passes {h} s)"),
                    _ => String::new(),
                }
            ),
        }
    }
}

/// A hardware challenge's verdict, for people.
pub fn challenge_verdict(verdict: &mcjs::state::ChallengeVerdict) -> String {
    use mcjs::state::ChallengeVerdict;
    match verdict {
        ChallengeVerdict::Passed { held_kib_per_gpu } => {
            format!("passed, {held_kib_per_gpu} KiB held per GPU: the profile is proven")
        }
        ChallengeVerdict::Unbounded => {
            "answered right, but the model has no measured bound: the lowest class".into()
        }
        ChallengeVerdict::Failed(failure) => {
            format!("failed ({failure:?}): the lowest class")
        }
    }
}

/// What a verification's outcome means, for people.
pub fn verification_outcome(outcome: VerificationOutcome) -> &'static str {
    match outcome {
        VerificationOutcome::Confirmed => "confirmed",
        VerificationOutcome::ProviderWrong => "proven wrong",
        VerificationOutcome::Nondeterministic => {
            "nondeterministic (nobody slashed; the interval not paid)"
        }
        VerificationOutcome::Inconclusive => "inconclusive (nobody slashed; the interval not paid)",
    }
}

fn verification_state(state: &VerificationState) -> &'static str {
    match state {
        VerificationState::Open => "waiting for the checkers' sealed answers",
        VerificationState::Revealing => "waiting for the sealed answers to be revealed",
        VerificationState::Disputed => {
            "the checkers disagreed: waiting for two more to be named (a second round)"
        }
        VerificationState::Decided { outcome } | VerificationState::Resolved { outcome } => {
            verification_outcome(*outcome)
        }
    }
}

/// A revealed answer, as a history line shows it.
fn revealed(answer: Option<mcjs::state::CheckAnswer>) -> String {
    match answer {
        Some(mcjs::state::CheckAnswer::Reproduced { hash, .. }) => {
            format!("hash {}…", short(&hash))
        }
        Some(mcjs::state::CheckAnswer::StartUnavailable) => "start unavailable".to_string(),
        None => "no answer".to_string(),
    }
}

pub fn node_status(status: NodeStatus) -> &'static str {
    match status {
        NodeStatus::Available => "available",
        NodeStatus::Busy => "busy",
        NodeStatus::Offline => "offline",
    }
}

/// A failure cause's names: for machines (logs, JSON, metric labels, the
/// scheduler's actions) and for people (histories, audits). The one place
/// they are written; every crate calls [`cause_name`] or [`failure_cause`].
fn cause_names(cause: FailureCause) -> (&'static str, &'static str) {
    match cause {
        FailureCause::NodeLost => ("node_lost", "node lost"),
        FailureCause::ContainerDied => ("container_died", "container died"),
        FailureCause::CheckpointOverdue => ("checkpoint_overdue", "checkpoint overdue"),
        FailureCause::JobError => ("job_error", "job error"),
        FailureCause::JobYielded => ("job_yielded", "job yielded"),
        FailureCause::JobFatal => ("job_fatal", "job fatal"),
    }
}

/// `node_lost`: the cause in logs, JSON and metric labels.
pub fn cause_name(cause: &FailureCause) -> &'static str {
    cause_names(*cause).0
}

/// `node lost`: the cause as people read it.
pub fn failure_cause(cause: FailureCause) -> &'static str {
    cause_names(cause).1
}

/// Stray tokens returned with a vault, when there were any.
fn swept(amount: u64) -> String {
    if amount == 0 {
        String::new()
    } else {
        format!(
            " (+{} USDC sent into the vault from outside, returned)",
            usdc(amount)
        )
    }
}

/// One event of an account's history, with the transaction that logged it.
#[derive(Debug)]
pub struct HistoryEntry {
    /// Base-58 transaction signature.
    pub signature: String,
    pub slot: u64,
    /// The block time the node reports for the slot.
    pub block_time: Option<i64>,
    /// Every key that signed the transaction, fee payer first.
    pub signers: Vec<Pubkey>,
    pub event: McjsEvent,
}

#[cfg(test)]
mod tests {
    #[test]
    fn usdc_amounts_show_cents_and_only_the_decimals_present() {
        assert_eq!(super::usdc(100_000_000), "100.00");
        assert_eq!(super::usdc(12_500_000), "12.50");
        assert_eq!(super::usdc(1), "0.000001");
        assert_eq!(super::usdc(1_234_500), "1.2345");
    }

    #[test]
    fn a_causes_names_for_people_and_machines_say_the_same() {
        use mcjs::state::FailureCause::*;
        for cause in [
            NodeLost,
            ContainerDied,
            CheckpointOverdue,
            JobError,
            JobYielded,
            JobFatal,
        ] {
            let name = super::cause_name(&cause);
            assert_eq!(super::failure_cause(cause), name.replace('_', " "));
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
    }
}
