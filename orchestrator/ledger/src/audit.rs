//! Auditing a job from its public record alone.
//!
//! The program keeps one 32-byte commitment per job,
//! `chain = sha256(prev ‖ generation u32 LE ‖ epoch u32 LE ‖ step u64 LE ‖ hash)`
//! folded over every checkpoint attestation from 32 zero bytes, and logs each
//! attestation as an event. An auditor replays the events in chain order,
//! recomputes the chain independently of the program, and checks it against
//! every event's own `chain` field and against the Job account.

use anchor_lang::prelude::Pubkey;
use mcjs::state::Job;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::reliability::{ProviderReliability, provider_reliability};
use mcjs_client::history::{HistoryEntry, McjsEvent};

/// A check's answer when its checker could not restore the interval's start.
pub const START_UNAVAILABLE: &str = "start-unavailable";

/// One link of the checkpoint chain.
pub fn chain_link(
    prev: &[u8; 32],
    generation: u32,
    epoch: u32,
    step: u64,
    checkpoint_hash: &[u8; 32],
) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    hasher.update(generation.to_le_bytes());
    hasher.update(epoch.to_le_bytes());
    hasher.update(step.to_le_bytes());
    hasher.update(checkpoint_hash);
    hasher.finalize().into()
}

/// One step of the rebuilt history.
#[derive(Debug, Clone, Serialize)]
pub struct AuditStep {
    pub signature: String,
    pub slot: u64,
    pub block_time: Option<i64>,
    /// Base-58 keys that signed the transaction, fee payer first.
    pub signers: Vec<String>,
    pub event: &'static str,
    pub description: String,
    /// For attestations: the chain as the event recorded it, and as recomputed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainCheck>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChainCheck {
    pub index: u32,
    pub generation: u32,
    pub epoch: u32,
    pub step: u64,
    pub checkpoint_hash: String,
    pub recorded: String,
    pub recomputed: String,
}

/// Where the record stops agreeing with itself or with the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Divergence {
    /// An attestation event's `chain` differs from the recomputed chain.
    EventChain {
        signature: String,
        index: u32,
        recorded: String,
        recomputed: String,
    },
    /// An attestation carries a generation other than the job's current assignment.
    Generation {
        signature: String,
        index: u32,
        attested: u32,
        assigned: Option<u32>,
    },
    /// An attestation does not advance past the previous (epoch, step) of
    /// its assignment (labels are the job's own, ordered within an
    /// assignment only: the program's rule).
    NotAdvancing {
        signature: String,
        index: u32,
        previous: (u32, u64),
        attested: (u32, u64),
    },
    /// The Job account's commitment differs from the chain recomputed from the events.
    Commitment {
        on_chain: String,
        recomputed: String,
    },
    /// The Job account counts a different number of attestations than the logs hold.
    CheckpointCount { on_chain: u32, in_history: u32 },
    /// The Job account's last checkpoint is not the last attested one.
    LastCheckpoint {
        on_chain: String,
        in_history: String,
    },
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Divergence::EventChain {
                signature,
                index,
                recorded,
                recomputed,
            } => write!(
                f,
                "attestation #{index} (transaction {signature}) records chain {recorded}, but the chain recomputed up to it is {recomputed}"
            ),
            Divergence::Generation {
                signature,
                index,
                attested,
                assigned,
            } => write!(
                f,
                "attestation #{index} (transaction {signature}) carries generation {attested}, but the job's current assignment is {}",
                assigned.map_or("none".to_string(), |g| format!("generation {g}"))
            ),
            Divergence::NotAdvancing {
                signature,
                index,
                previous,
                attested,
            } => write!(
                f,
                "attestation #{index} (transaction {signature}) at epoch {} step {} does not advance past epoch {} step {}",
                attested.0, attested.1, previous.0, previous.1
            ),
            Divergence::Commitment {
                on_chain,
                recomputed,
            } => write!(
                f,
                "the Job account commits to chain {on_chain}, but its history recomputes to {recomputed}"
            ),
            Divergence::CheckpointCount {
                on_chain,
                in_history,
            } => write!(
                f,
                "the Job account counts {on_chain} checkpoints, but its history holds {in_history} attestations"
            ),
            Divergence::LastCheckpoint {
                on_chain,
                in_history,
            } => write!(
                f,
                "the Job account's last checkpoint is {on_chain}, but the last attested one is {in_history}"
            ),
        }
    }
}

/// The verdict on one job.
#[derive(Debug, Clone, Serialize)]
pub struct JobAudit {
    pub job: String,
    /// The job's current state on chain; `None` when the account is closed.
    pub state: Option<&'static str>,
    pub steps: Vec<AuditStep>,
    pub attestations: u32,
    pub recomputed_chain: String,
    pub on_chain_commitment: Option<String>,
    /// The intervals drawn for verification: who checked them, with what result.
    pub verifications: Vec<VerificationRecord>,
    /// The first divergence found, in chain order; `None` when the record verifies.
    pub divergence: Option<Divergence>,
}

/// One verified interval, from its events.
#[derive(Debug, Clone, Serialize)]
pub struct VerificationRecord {
    pub interval: u32,
    /// `None`: from the job's start.
    pub from_step: Option<u64>,
    pub to_step: u64,
    /// The Provider account whose attestation was checked.
    pub provider: String,
    pub claimed_hash: String,
    pub verifier_node: String,
    pub referee_node: String,
    /// Each checker's revealed answer: node and hash (or
    /// [`START_UNAVAILABLE`]), both rounds' where there were two.
    pub checks: Vec<(String, String)>,
    /// The first round's checkers disagreed and two more decided.
    pub second_round: bool,
    /// `confirmed`, `proven wrong`, …; `None` while it is open.
    pub outcome: Option<&'static str>,
    pub slashed_provider: Option<String>,
    pub slashed: u64,
    /// Paid back to the owner (a proven-wrong interval's segment).
    pub refund: u64,
    /// First-round checkers the second round proved wrong: Provider
    /// account and what was slashed.
    pub checkers_slashed: Vec<(String, u64)>,
}

impl JobAudit {
    pub fn verified(&self) -> bool {
        self.divergence.is_none()
    }
}

fn checkpoint_label(epoch: u32, step: u64, generation: u32, hash: &[u8; 32]) -> String {
    format!(
        "epoch {epoch} step {step} generation {generation} hash {}",
        hex::encode(hash)
    )
}

/// Replays a job's history (oldest first) against its account (`None` once closed).
pub fn audit_job(job_key: &Pubkey, job: Option<&Job>, history: &[HistoryEntry]) -> JobAudit {
    let mut chain = [0u8; 32];
    let mut steps = Vec::new();
    let mut divergence = None;
    let mut attestations = 0u32;
    let mut assigned: Option<u32> = None;
    // The last (generation, epoch, step) of the history.
    let mut previous: Option<(u32, u32, u64)> = None;
    let mut last: Option<String> = None;
    let mut verifications: Vec<VerificationRecord> = Vec::new();
    let mut output_next = false;

    for entry in history
        .iter()
        .filter(|e| e.event.job().as_ref() == Some(job_key))
    {
        let mut check = None;
        match &entry.event {
            McjsEvent::JobAssigned(e) => assigned = Some(e.generation),
            McjsEvent::FailureReported(_)
            | McjsEvent::JobPaused(_)
            | McjsEvent::JobCompleted(_) => assigned = None,
            McjsEvent::VerificationOpened(e) => verifications.push(VerificationRecord {
                interval: e.interval,
                from_step: e.from_step,
                to_step: e.to_step,
                provider: e.provider.to_string(),
                claimed_hash: hex::encode(e.claimed_hash),
                verifier_node: e.verifier_node.to_string(),
                referee_node: e.referee_node.to_string(),
                checks: Vec::new(),
                second_round: false,
                outcome: None,
                slashed_provider: None,
                slashed: 0,
                refund: 0,
                checkers_slashed: Vec::new(),
            }),
            // A checker silent past half the window was replaced: the
            // record names who checks now.
            McjsEvent::CheckerReplaced(e) => {
                if let Some(v) = verifications.iter_mut().find(|v| v.interval == e.interval) {
                    let seat = match e.role {
                        mcjs::state::Party::Verifier => &mut v.verifier_node,
                        mcjs::state::Party::Referee => &mut v.referee_node,
                    };
                    *seat = e.node.to_string();
                }
            }
            // The first round's checkers disagreed: two more check it, and
            // their answers decide (the first round's stay in `checks`).
            McjsEvent::SecondRoundOpened(e) => {
                if let Some(v) = verifications.iter_mut().find(|v| v.interval == e.interval) {
                    v.verifier_node = e.verifier_node.to_string();
                    v.referee_node = e.referee_node.to_string();
                    v.second_round = true;
                }
            }
            McjsEvent::VerificationAttested(e) => {
                // A sealed answer says nothing yet; a revealed one is a check.
                let found = match e.answer {
                    mcjs::instructions::CheckerStep::Seal { .. } => None,
                    mcjs::instructions::CheckerStep::Reveal { answer, .. } => Some(match answer {
                        mcjs::state::CheckAnswer::Reproduced { hash, .. } => hex::encode(hash),
                        mcjs::state::CheckAnswer::StartUnavailable => START_UNAVAILABLE.to_string(),
                    }),
                };
                if let (Some(found), Some(v)) = (
                    found,
                    verifications.iter_mut().find(|v| v.interval == e.interval),
                ) {
                    v.checks.push((e.node.to_string(), found));
                }
            }
            McjsEvent::VerificationResolved(e) => {
                if let Some(v) = verifications.iter_mut().find(|v| v.interval == e.interval) {
                    v.outcome = Some(mcjs_client::history::verification_outcome(e.outcome));
                    v.slashed_provider = e.slashed_provider.map(|p| p.to_string());
                    v.slashed = e.slashed;
                    v.refund = e.refund;
                }
                // A proven-wrong interval moved the job back: its restore
                // point is the last checkpoint from here on.
                if e.rolled_back {
                    assigned = None;
                    previous = e.restore_point.map(|c| (c.generation, c.epoch, c.step));
                    last = e
                        .restore_point
                        .map(|c| checkpoint_label(c.epoch, c.step, c.generation, &c.hash));
                }
            }
            McjsEvent::CheckerSlashed(e) => {
                if let Some(v) = verifications.iter_mut().find(|v| v.interval == e.interval) {
                    v.checkers_slashed.push((e.provider.to_string(), e.amount));
                }
            }
            // The attestation that follows is the job's output: its record
            // repeats the last checkpoint's labels (`Job::attest_output`).
            McjsEvent::OutputAttested(_) => output_next = true,
            McjsEvent::CheckpointAttested(e) => {
                attestations += 1;
                let index = attestations;
                let output = std::mem::take(&mut output_next);
                if divergence.is_none() && assigned != Some(e.generation) {
                    divergence = Some(Divergence::Generation {
                        signature: entry.signature.clone(),
                        index,
                        attested: e.generation,
                        assigned,
                    });
                }
                if let Some((generation, epoch, step)) = previous
                    && generation == e.generation
                    && ((e.epoch, e.step) < (epoch, step)
                        || ((e.epoch, e.step) == (epoch, step) && !output))
                    && divergence.is_none()
                {
                    divergence = Some(Divergence::NotAdvancing {
                        signature: entry.signature.clone(),
                        index,
                        previous: (epoch, step),
                        attested: (e.epoch, e.step),
                    });
                }
                previous = Some((e.generation, e.epoch, e.step));
                chain = chain_link(&chain, e.generation, e.epoch, e.step, &e.checkpoint_hash);
                if divergence.is_none() && chain != e.chain {
                    divergence = Some(Divergence::EventChain {
                        signature: entry.signature.clone(),
                        index,
                        recorded: hex::encode(e.chain),
                        recomputed: hex::encode(chain),
                    });
                }
                last = Some(checkpoint_label(
                    e.epoch,
                    e.step,
                    e.generation,
                    &e.checkpoint_hash,
                ));
                check = Some(ChainCheck {
                    index,
                    generation: e.generation,
                    epoch: e.epoch,
                    step: e.step,
                    checkpoint_hash: hex::encode(e.checkpoint_hash),
                    recorded: hex::encode(e.chain),
                    recomputed: hex::encode(chain),
                });
            }
            _ => {}
        }
        steps.push(AuditStep {
            signature: entry.signature.clone(),
            slot: entry.slot,
            block_time: entry.block_time,
            signers: entry.signers.iter().map(|k| k.to_string()).collect(),
            event: entry.event.name(),
            description: entry.event.describe(),
            chain: check,
        });
    }

    if let (None, Some(job)) = (&divergence, job) {
        if job.checkpoint_chain != chain {
            divergence = Some(Divergence::Commitment {
                on_chain: hex::encode(job.checkpoint_chain),
                recomputed: hex::encode(chain),
            });
        } else if job.checkpoint_count != attestations {
            divergence = Some(Divergence::CheckpointCount {
                on_chain: job.checkpoint_count,
                in_history: attestations,
            });
        } else {
            let on_chain = job
                .last_checkpoint
                .map(|c| checkpoint_label(c.epoch, c.step, c.generation, &c.hash));
            if on_chain != last {
                divergence = Some(Divergence::LastCheckpoint {
                    on_chain: on_chain.unwrap_or_else(|| "none".into()),
                    in_history: last.unwrap_or_else(|| "none".into()),
                });
            }
        }
    }

    JobAudit {
        job: job_key.to_string(),
        state: job.map(|j| j.state.name()),
        steps,
        attestations,
        recomputed_chain: hex::encode(chain),
        on_chain_commitment: job.map(|j| hex::encode(j.checkpoint_chain)),
        verifications,
        divergence,
    }
}

/// A provider's record, from its account and the events that name it.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderAudit {
    pub provider: String,
    pub owner: String,
    pub stake: u64,
    pub nodes: u32,
    pub active_assignments: u32,
    pub jobs_completed: u64,
    pub failures: u64,
    pub slashed_total: u64,
    /// The account's counters: completed over completed plus `failures`
    /// (every slash: infrastructure failures and verifications lost);
    /// `None` before any ended.
    pub completion_rate: Option<f64>,
    /// The failures reported against the provider, oldest first.
    pub failure_reports: Vec<FailureRecord>,
    /// The provider's and each of its nodes' reliability record, from the
    /// history ([`crate::reliability`]).
    pub reliability: ProviderReliability,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailureRecord {
    pub signature: String,
    pub job: String,
    pub node: String,
    pub generation: u32,
    pub cause: &'static str,
    pub slashed: u64,
    /// Where the slash went: the insurance pool.
    pub slashed_to: String,
    pub reported_by: String,
    pub at: i64,
}

/// Summarises a provider from its account and its history (oldest first);
/// `now` is the chain's clock, up to which open assignments count.
pub fn audit_provider(
    provider_key: &Pubkey,
    provider: &mcjs::state::Provider,
    history: &[HistoryEntry],
    now: i64,
) -> ProviderAudit {
    let failure_reports = history
        .iter()
        .filter_map(|entry| match &entry.event {
            McjsEvent::FailureReported(e) if e.provider == *provider_key => Some(FailureRecord {
                signature: entry.signature.clone(),
                job: e.job.to_string(),
                node: e.node.to_string(),
                generation: e.failed_generation,
                cause: mcjs_client::history::failure_cause(e.cause),
                slashed: e.slashed,
                slashed_to: e.slashed_to.to_string(),
                reported_by: e.by.to_string(),
                at: e.at,
            }),
            _ => None,
        })
        .collect();
    let ended = provider.jobs_completed + provider.failures;
    ProviderAudit {
        provider: provider_key.to_string(),
        owner: provider.owner.to_string(),
        stake: provider.stake,
        nodes: provider.node_count,
        active_assignments: provider.active_assignments,
        jobs_completed: provider.jobs_completed,
        failures: provider.failures,
        slashed_total: provider.slashed_total,
        completion_rate: (ended > 0).then(|| provider.jobs_completed as f64 / ended as f64),
        failure_reports,
        reliability: provider_reliability(provider_key, history, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs::events::{CheckpointAttested, JobAssigned};

    fn key(n: u8) -> Pubkey {
        Pubkey::new_from_array([n; 32])
    }

    fn entry(n: u8, event: McjsEvent) -> HistoryEntry {
        HistoryEntry {
            signature: format!("sig{n}"),
            slot: u64::from(n),
            block_time: None,
            signers: vec![key(9)],
            event,
        }
    }

    fn assigned(job: Pubkey, generation: u32) -> McjsEvent {
        McjsEvent::JobAssigned(JobAssigned {
            job,
            node: key(2),
            provider: key(3),
            generation,
            rate_per_hour: 1,
            by: key(4),
            at: 0,
        })
    }

    fn attested(job: Pubkey, generation: u32, step: u64, prev: &mut [u8; 32]) -> McjsEvent {
        let hash = [step as u8; 32];
        *prev = mcjs::state::extend_chain(prev, generation, 1, step, &hash);
        McjsEvent::CheckpointAttested(CheckpointAttested {
            job,
            node: key(2),
            generation,
            epoch: 1,
            step,
            checkpoint_hash: hash,
            chain: *prev,
            accrued: 0,
            by: key(5),
            at: 0,
        })
    }

    /// The record of a check names the checkers that answered it: a
    /// replaced one gives its seat to its replacement.
    #[test]
    fn a_replaced_checker_gives_its_seat_in_the_record() {
        use mcjs::events::{CheckerReplaced, VerificationOpened};
        let job = key(1);
        let opened = McjsEvent::VerificationOpened(VerificationOpened {
            job,
            verification: key(6),
            interval: 1,
            provider: key(3),
            from_step: None,
            to_step: 10,
            claimed_hash: [1; 32],
            verifier_node: key(21),
            referee_node: key(22),
            draw_slot: 0,
            at: 0,
        });
        let replaced = McjsEvent::CheckerReplaced(CheckerReplaced {
            job,
            verification: key(6),
            interval: 1,
            role: mcjs::state::Party::Referee,
            replaced_node: key(22),
            node: key(23),
            replacements: 1,
            at: 0,
        });
        let audit = audit_job(&job, None, &[entry(1, opened), entry(2, replaced)]);
        let v = &audit.verifications[0];
        assert_eq!(
            (v.verifier_node.as_str(), v.referee_node.as_str()),
            (key(21).to_string().as_str(), key(23).to_string().as_str())
        );
    }

    #[test]
    fn the_independent_chain_matches_the_programs() {
        let prev = [7u8; 32];
        let hash = [9u8; 32];
        assert_eq!(
            chain_link(&prev, 3, 4, 5, &hash),
            mcjs::state::extend_chain(&prev, 3, 4, 5, &hash)
        );
    }

    #[test]
    fn an_honest_history_verifies_and_a_rewritten_link_is_found() {
        let job = key(1);
        let mut chain = [0u8; 32];
        let mut history = vec![
            entry(1, assigned(job, 1)),
            entry(2, attested(job, 1, 10, &mut chain)),
            entry(3, attested(job, 1, 20, &mut chain)),
            entry(4, attested(job, 1, 30, &mut chain)),
        ];
        let audit = audit_job(&job, None, &history);
        assert!(audit.verified(), "{:?}", audit.divergence);
        assert_eq!(audit.attestations, 3);
        assert_eq!(audit.recomputed_chain, hex::encode(chain));

        if let McjsEvent::CheckpointAttested(e) = &mut history[2].event {
            e.checkpoint_hash = [0xee; 32];
        }
        let audit = audit_job(&job, None, &history);
        match audit.divergence {
            Some(Divergence::EventChain {
                index, signature, ..
            }) => {
                assert_eq!(index, 2);
                assert_eq!(signature, "sig3");
            }
            other => panic!("expected the second attestation to diverge, got {other:?}"),
        }
    }

    #[test]
    fn an_attestation_of_a_fenced_generation_is_a_divergence() {
        let job = key(1);
        let mut chain = [0u8; 32];
        let history = vec![
            entry(1, assigned(job, 2)),
            entry(2, attested(job, 1, 10, &mut chain)),
        ];
        let audit = audit_job(&job, None, &history);
        assert!(matches!(
            audit.divergence,
            Some(Divergence::Generation {
                attested: 1,
                assigned: Some(2),
                ..
            })
        ));
    }

    /// Labels must grow within an assignment, as the program requires; a
    /// later assignment may start from any (it restored an older
    /// checkpoint, or an earlier one made a label up).
    /// A verified job's output is attested with its last checkpoint's
    /// labels, announced as such first: no divergence, and it counts in the
    /// chain. The same labels without that announcement are one.
    #[test]
    fn an_output_attested_with_the_last_checkpoints_labels_verifies() {
        let job = key(1);
        let output = |chain: &mut [u8; 32]| {
            let hash = [0xee; 32];
            *chain = mcjs::state::extend_chain(chain, 1, 1, 30, &hash);
            McjsEvent::CheckpointAttested(CheckpointAttested {
                job,
                node: key(2),
                generation: 1,
                epoch: 1,
                step: 30,
                checkpoint_hash: hash,
                chain: *chain,
                accrued: 0,
                by: key(5),
                at: 0,
            })
        };
        let announced = McjsEvent::OutputAttested(mcjs::events::OutputAttested {
            job,
            node: key(2),
            generation: 1,
            output_hash: [0xee; 32],
            interval: 2,
            by: key(5),
            at: 0,
        });
        let mut chain = [0u8; 32];
        let history = vec![
            entry(1, assigned(job, 1)),
            entry(2, attested(job, 1, 30, &mut chain)),
            entry(3, announced),
            entry(3, output(&mut chain)),
        ];
        let audit = audit_job(&job, None, &history);
        assert!(audit.verified(), "{:?}", audit.divergence);
        assert_eq!(audit.attestations, 2);

        let mut chain = [0u8; 32];
        let history = vec![
            entry(1, assigned(job, 1)),
            entry(2, attested(job, 1, 30, &mut chain)),
            entry(3, output(&mut chain)),
        ];
        assert!(matches!(
            audit_job(&job, None, &history).divergence,
            Some(Divergence::NotAdvancing { index: 2, .. })
        ));
    }

    #[test]
    fn labels_grow_within_an_assignment_and_start_anew_with_the_next() {
        let job = key(1);
        let mut chain = [0u8; 32];
        let history = vec![
            entry(1, assigned(job, 1)),
            entry(2, attested(job, 1, 30, &mut chain)),
            entry(3, assigned(job, 3)),
            entry(4, attested(job, 3, 20, &mut chain)),
            entry(5, attested(job, 3, 40, &mut chain)),
        ];
        let audit = audit_job(&job, None, &history);
        assert!(audit.verified(), "{:?}", audit.divergence);

        let mut chain = [0u8; 32];
        let history = vec![
            entry(1, assigned(job, 1)),
            entry(2, attested(job, 1, 30, &mut chain)),
            entry(3, attested(job, 1, 20, &mut chain)),
        ];
        let audit = audit_job(&job, None, &history);
        assert!(matches!(
            audit.divergence,
            Some(Divergence::NotAdvancing {
                index: 2,
                previous: (1, 30),
                attested: (1, 20),
                ..
            })
        ));
    }

    #[test]
    fn events_of_other_jobs_are_ignored() {
        let job = key(1);
        let other = key(8);
        let mut chain = [0u8; 32];
        let mut other_chain = [0u8; 32];
        let history = vec![
            entry(1, assigned(job, 1)),
            entry(2, assigned(other, 1)),
            entry(3, attested(other, 1, 5, &mut other_chain)),
            entry(4, attested(job, 1, 10, &mut chain)),
        ];
        let audit = audit_job(&job, None, &history);
        assert!(audit.verified(), "{:?}", audit.divergence);
        assert_eq!(audit.steps.len(), 2);
        assert_eq!(audit.recomputed_chain, hex::encode(chain));
    }
}
