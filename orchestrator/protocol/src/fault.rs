//! Who pays for a failure: every way a job can stop, and whose fault it is.
//!
//! This is the one place the rule is written. The agent reports *what
//! happened* ([`StopReason`], a fact it observed); the scheduler turns that
//! fact into a verdict with [`StopReason::fault`] and reports the matching
//! on-chain cause ([`StopReason::chain_cause`]). docs/job-contract.md holds
//! the same table, and a test in each core walks every row.
//!
//! The doctrine (docs, "Who is trusted with what"): a provider is slashed
//! only on evidence that the job's owner cannot fabricate. Everything a job
//! controls — its exit code, its memory use, its image, its spec, its data,
//! its output, whether it checkpoints — is the job's own fault: it uses the
//! restart budget, or ends the job, but never slashes. Only the agent knows
//! whether it stopped a container itself, so an exit it did not cause is the
//! job's, whatever the code (137 included).

use serde::{Deserialize, Serialize};

/// Why a job stopped on its node: what the agent (or, for silence, the
/// scheduler) observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    /// The container exited by itself with this code: the agent did not stop
    /// it. Codes ≥ 128 (a signal the job received, e.g. 137) are included.
    Exited { code: i64 },
    /// The kernel killed the container for exceeding its memory limit, which
    /// is the memory the job itself declared.
    OutOfMemory,
    /// The image the spec pins could not be found or pulled.
    ImageMissing,
    /// The spec the chain names is not in the spec store.
    SpecMissing,
    /// The spec store's bytes do not hash to the spec hash the chain records.
    SpecMismatch,
    /// The spec is there but cannot run (not a valid spec, or asks for what
    /// the contract does not offer, such as a non-default output dir).
    SpecUnusable,
    /// The job exited 0 without its declared output.
    OutputMissing,
    /// An input was refused before the job started: its sha256 differs from
    /// the declared one, it is over its declared size, it could not be
    /// fetched, or it is not where the provider allows (docs/job-contract.md,
    /// "Inputs").
    InputRejected,
    /// The spec store could not be read (neither the job's nor provably the
    /// node's doing: never a slash).
    StoreUnavailable,
    /// No attested checkpoint could be fetched and verified to resume from.
    RestoreFailed,
    /// The engine refused to create or start the job's container (the job's
    /// own image or command can cause this, e.g. a missing entrypoint).
    StartRefused,
    /// The job wrote no checkpoint for its interval plus grace, despite the
    /// agent's signal.
    CheckpointMissed,
    /// The agent stopped the job because it broke the contract or its limits
    /// where the agent reads (a symlink or special file, a checkpoint or
    /// output over its caps, more disk than it declared).
    ContractBroken,
    /// Staging the job's declared inputs took longer than the start timeout.
    StagingTooSlow,
    /// The node's UPS reported a low battery and the agent stopped the job
    /// once a checkpoint taken after the warning was attested (or, where
    /// none came, the wait for it ran out): the provider warned in time and
    /// the job lost at most that checkpoint's write, so nobody pays; it is
    /// requeued as a yield.
    PowerLost,
    /// The chain says the job has been billed its whole maximum duration
    /// (`max_duration_secs`): the agent stopped it, since nothing more of
    /// its work would be paid or attested. Nobody's fault; it ends (the
    /// program ends a job at its cap `Expired`, nobody slashed), and its
    /// last attested checkpoint is its partial output.
    CapReached,
    /// The agent stopped the container itself for a reason of its own (not a
    /// fencing, not a broken contract).
    StoppedByAgent,
    /// The container engine could not be reached or lost the running container.
    EngineFailure,
    /// The node's own storage failed the agent's writes for the job (full,
    /// or an I/O error) while staging its inputs (bounded by their declared
    /// sizes) or preparing its directories.
    NodeDiskFull,
    /// Observed by the scheduler: no signed heartbeat for the timeout (the
    /// node or its agent died, or the node is partitioned away).
    NodeLost,
    /// Observed by the scheduler: an assignment whose container did not start
    /// within the start timeout while its agent was not staging.
    NeverStarted,
    /// Observed by the scheduler: nothing attested for the overdue window
    /// while the agent did not report that the job itself missed a checkpoint.
    AttestationOverdue,
}

/// What a job's own failure does to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// Resume from the last checkpoint, using one restart of the budget
    /// (the job fails when the budget is spent).
    Retry,
    /// Resume from the last checkpoint without using the budget.
    RetryFree,
    /// The job cannot succeed anywhere: retrying cannot help. That is one
    /// node's word, so the program (`Job::fail`, `Job::fatal_claim`) fails
    /// the job, refunding the rest of its bond, when a second provider's
    /// node says so too; until then it counts as a `Retry`.
    Fatal,
}

/// Who pays for a stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "fault", content = "outcome")]
pub enum Fault {
    /// The job's own doing: never a slash.
    Job(JobOutcome),
    /// The provider's: its stake is slashed and its node marked failed.
    Provider,
}

/// The program's `FailureCause`, named here so that this crate needs no
/// Solana types; the scheduler maps it one to one (a test holds the two
/// together).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainCause {
    NodeLost,
    ContainerDied,
    CheckpointOverdue,
    JobError,
    JobYielded,
    JobFatal,
}

/// Exit codes of the job contract.
pub const EXIT_DONE: i64 = 0;
pub const EXIT_BAD_INPUT: i64 = 2;
pub const EXIT_PREEMPTED: i64 = 75;

impl StopReason {
    /// Every reason, for tables and tests (`Exited` once per kind of code).
    pub const ROWS: [StopReason; 28] = [
        StopReason::Exited { code: EXIT_DONE },
        StopReason::Exited {
            code: EXIT_BAD_INPUT,
        },
        StopReason::Exited {
            code: EXIT_PREEMPTED,
        },
        StopReason::Exited { code: 1 },
        StopReason::Exited { code: 86 },
        StopReason::Exited { code: 137 },
        StopReason::Exited { code: 143 },
        StopReason::OutOfMemory,
        StopReason::ImageMissing,
        StopReason::SpecMissing,
        StopReason::SpecMismatch,
        StopReason::SpecUnusable,
        StopReason::OutputMissing,
        StopReason::InputRejected,
        StopReason::StoreUnavailable,
        StopReason::RestoreFailed,
        StopReason::StartRefused,
        StopReason::CheckpointMissed,
        StopReason::ContractBroken,
        StopReason::StagingTooSlow,
        StopReason::PowerLost,
        StopReason::CapReached,
        StopReason::StoppedByAgent,
        StopReason::EngineFailure,
        StopReason::NodeDiskFull,
        StopReason::NodeLost,
        StopReason::NeverStarted,
        StopReason::AttestationOverdue,
    ];

    /// Who pays, or `None` when the job simply finished (exit 0 with its
    /// output: it is completed, not reported).
    pub fn fault(self) -> Option<Fault> {
        use JobOutcome::*;
        Some(match self {
            StopReason::Exited { code: EXIT_DONE } => return None,
            StopReason::Exited {
                code: EXIT_PREEMPTED,
            } => Fault::Job(RetryFree),
            StopReason::Exited {
                code: EXIT_BAD_INPUT,
            } => Fault::Job(Fatal),
            StopReason::Exited { .. } => Fault::Job(Retry),
            StopReason::OutOfMemory => Fault::Job(Retry),
            // Another node may reach the registry; an image that exists
            // nowhere ends the job when its budget is spent.
            StopReason::ImageMissing => Fault::Job(Retry),
            StopReason::SpecMissing | StopReason::SpecMismatch | StopReason::SpecUnusable => {
                Fault::Job(Fatal)
            }
            // A later run may write it, or the store may take it then.
            StopReason::OutputMissing => Fault::Job(Retry),
            // Retried rather than failed at once: one node's word (a provider
            // may lie, or its cache be corrupt) must not end a job outright.
            StopReason::InputRejected | StopReason::StoreUnavailable => Fault::Job(Retry),
            StopReason::RestoreFailed => Fault::Job(Retry),
            // The job's own image or command can make the engine refuse.
            StopReason::StartRefused => Fault::Job(Retry),
            StopReason::CheckpointMissed => Fault::Job(Retry),
            // Retried: one node's word must not end a job outright, and the
            // budget bounds a job that breaks the contract every time.
            StopReason::ContractBroken => Fault::Job(Retry),
            StopReason::StagingTooSlow => Fault::Job(Retry),
            // Warned in time: not a slash, and no restart used. A job
            // with nothing attested on the assignment pays one restart
            // all the same (the program's rule for every yield).
            StopReason::PowerLost => Fault::Job(RetryFree),
            // Retrying cannot help: no more of its work is paid.
            StopReason::CapReached => Fault::Job(Fatal),
            StopReason::StoppedByAgent
            | StopReason::EngineFailure
            | StopReason::NodeDiskFull
            | StopReason::NodeLost
            | StopReason::NeverStarted
            | StopReason::AttestationOverdue => Fault::Provider,
        })
    }

    /// The cause reported on chain, or `None` when nothing is reported.
    pub fn chain_cause(self) -> Option<ChainCause> {
        Some(match self.fault()? {
            Fault::Job(JobOutcome::Retry) => ChainCause::JobError,
            Fault::Job(JobOutcome::RetryFree) => ChainCause::JobYielded,
            Fault::Job(JobOutcome::Fatal) => ChainCause::JobFatal,
            Fault::Provider => match self {
                StopReason::NodeLost | StopReason::NeverStarted => ChainCause::NodeLost,
                StopReason::AttestationOverdue => ChainCause::CheckpointOverdue,
                _ => ChainCause::ContainerDied,
            },
        })
    }

    /// Whether the provider is slashed for this stop.
    pub fn slashes(self) -> bool {
        self.fault() == Some(Fault::Provider)
    }

    /// A short name for logs and metric labels (`exited_137`, `node_lost`).
    pub fn label(self) -> String {
        match self {
            StopReason::Exited { code } => format!("exited_{code}"),
            other => serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("reason").and_then(|r| r.as_str().map(str::to_string)))
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobOutcome::*;

    /// The table of docs/job-contract.md, row by row.
    #[test]
    fn every_stop_has_the_documented_payer_and_cause() {
        use ChainCause as C;
        use StopReason as S;
        let table: Vec<(S, Option<Fault>, Option<C>)> = vec![
            (S::Exited { code: 0 }, None, None),
            (
                S::Exited { code: 2 },
                Some(Fault::Job(Fatal)),
                Some(C::JobFatal),
            ),
            (
                S::Exited { code: 75 },
                Some(Fault::Job(RetryFree)),
                Some(C::JobYielded),
            ),
            (
                S::Exited { code: 1 },
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::Exited { code: 86 },
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::Exited { code: -1 },
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::Exited { code: 137 },
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::Exited { code: 143 },
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::Exited { code: 255 },
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (S::OutOfMemory, Some(Fault::Job(Retry)), Some(C::JobError)),
            (S::ImageMissing, Some(Fault::Job(Retry)), Some(C::JobError)),
            (S::SpecMissing, Some(Fault::Job(Fatal)), Some(C::JobFatal)),
            (S::SpecMismatch, Some(Fault::Job(Fatal)), Some(C::JobFatal)),
            (S::SpecUnusable, Some(Fault::Job(Fatal)), Some(C::JobFatal)),
            (S::OutputMissing, Some(Fault::Job(Retry)), Some(C::JobError)),
            (S::InputRejected, Some(Fault::Job(Retry)), Some(C::JobError)),
            (
                S::ContractBroken,
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::StoreUnavailable,
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (S::RestoreFailed, Some(Fault::Job(Retry)), Some(C::JobError)),
            (S::StartRefused, Some(Fault::Job(Retry)), Some(C::JobError)),
            (
                S::CheckpointMissed,
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::StagingTooSlow,
                Some(Fault::Job(Retry)),
                Some(C::JobError),
            ),
            (
                S::PowerLost,
                Some(Fault::Job(RetryFree)),
                Some(C::JobYielded),
            ),
            (S::CapReached, Some(Fault::Job(Fatal)), Some(C::JobFatal)),
            (
                S::StoppedByAgent,
                Some(Fault::Provider),
                Some(C::ContainerDied),
            ),
            (
                S::EngineFailure,
                Some(Fault::Provider),
                Some(C::ContainerDied),
            ),
            (
                S::NodeDiskFull,
                Some(Fault::Provider),
                Some(C::ContainerDied),
            ),
            (S::NodeLost, Some(Fault::Provider), Some(C::NodeLost)),
            (S::NeverStarted, Some(Fault::Provider), Some(C::NodeLost)),
            (
                S::AttestationOverdue,
                Some(Fault::Provider),
                Some(C::CheckpointOverdue),
            ),
        ];
        for (reason, fault, cause) in table {
            assert_eq!(reason.fault(), fault, "{reason:?}");
            assert_eq!(reason.chain_cause(), cause, "{reason:?}");
        }
    }

    /// docs/job-contract.md carries the same table: every row there agrees
    /// with the code, and every reason here has a row there.
    #[test]
    fn the_job_contract_says_exactly_what_the_table_does() {
        let doc = include_str!("../../../docs/job-contract.md");
        let start = doc
            .find("## Who pays when a job stops")
            .expect("the section");
        let mut seen = std::collections::HashSet::new();
        for line in doc[start..]
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains("| `"))
        {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (how, reason, whose, what, cause) =
                (cells[1], cells[2], cells[3], cells[4], cells[5]);
            let label = reason.split('`').nth(1).expect("the reason in backticks");
            let stop = if label == "exited" {
                let code: i64 = how
                    .split(|c: char| !c.is_ascii_digit())
                    .find(|n| !n.is_empty())
                    .expect("an exit row names its code")
                    .parse()
                    .unwrap();
                StopReason::Exited { code }
            } else {
                StopReason::ROWS
                    .into_iter()
                    .find(|r| r.label() == label)
                    .unwrap_or_else(|| panic!("no reason {label:?} in the code"))
            };
            seen.insert(label.to_string());
            let fault = stop.fault();
            match whose {
                "nobody's" => assert_eq!(fault, None, "{line}"),
                "the job's"
                | "nobody provably: as the job's"
                | "nobody's: warned in time, as a yield" => {
                    assert!(matches!(fault, Some(Fault::Job(_))), "{line}")
                }
                "the provider's" => assert_eq!(fault, Some(Fault::Provider), "{line}"),
                other => panic!("unknown payer {other:?} in {line}"),
            }
            let said = match fault {
                None => "completed",
                Some(Fault::Job(Retry)) => "one restart used",
                Some(Fault::Job(RetryFree)) => "no restart used",
                // The chain itself says the job is at its cap: no node's
                // word is needed to end it.
                Some(Fault::Job(Fatal)) if stop == StopReason::CapReached => "fails now",
                Some(Fault::Job(Fatal)) => "fails when a second provider's node says so too",
                Some(Fault::Provider) => "slash",
            };
            assert!(what.contains(said), "{line}: expected {said:?}");
            let cause_doc = cause.trim_matches('`');
            let cause_code = stop
                .chain_cause()
                .map(|c| format!("{c:?}"))
                .unwrap_or_else(|| "—".into());
            assert_eq!(cause_doc, cause_code, "{line}");
        }
        for reason in StopReason::ROWS {
            let label = match reason {
                StopReason::Exited { .. } => "exited".to_string(),
                other => other.label(),
            };
            assert!(
                seen.contains(&label),
                "{label} has no row in docs/job-contract.md"
            );
        }
    }

    #[test]
    fn no_exit_the_job_causes_itself_slashes_its_provider() {
        for code in -1..=300 {
            assert!(!StopReason::Exited { code }.slashes(), "exit {code}");
        }
    }

    #[test]
    fn reasons_round_trip_as_tagged_json() {
        for reason in StopReason::ROWS {
            let text = serde_json::to_string(&reason).unwrap();
            assert_eq!(serde_json::from_str::<StopReason>(&text).unwrap(), reason);
        }
        assert_eq!(
            serde_json::to_string(&StopReason::Exited { code: 137 }).unwrap(),
            r#"{"reason":"exited","code":137}"#
        );
        assert_eq!(StopReason::Exited { code: 137 }.label(), "exited_137");
        assert_eq!(StopReason::NodeDiskFull.label(), "node_disk_full");
    }
}
