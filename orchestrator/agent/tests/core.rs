//! The decision core with a fake clock: what the agent does for each thing
//! the chain and its containers tell it.

use mcjs_agent::core::{
    Action, AttestedCheckpoint, ChainJob, ChainState, ContainerExit, Core, CorePolicy, Event,
    FoundContainer, Keep, OUTPUT_ATTESTED, RunPhase, Tx, TxFailure, UploadedCheckpoint,
};
use mcjs_client::Pubkey;
use mcjs_client::ix::{Deployment, JobAccounts};
use mcjs_protocol::{Fault, JobOutcome, JobPhase, StopReason};
use mcjs_runtime::checkpoint::Sha256Digest;
use std::time::{Duration, SystemTime};

const T0: SystemTime = SystemTime::UNIX_EPOCH;

fn at(secs: u64) -> SystemTime {
    T0 + Duration::from_secs(1_000_000 + secs)
}

fn key(n: u8) -> Pubkey {
    Pubkey::new_from_array([n; 32])
}

fn job(n: u8, generation: u32, state: ChainState) -> ChainJob {
    ChainJob {
        key: key(n),
        generation,
        state,
        spec_hash: [n; 32],
        last_checkpoint: None,
        checkpoint_interval: Duration::from_secs(60),
        gpus: 1,
        verified: false,
        keep: Keep::Attested,
        at_cap: false,
        accounts: JobAccounts {
            job: key(n),
            node: key(100),
            provider: key(101),
            payout: key(102),
            refund: key(103),
            generation,
            segment: None,
            deployment: Deployment {
                usdc_mint: key(104),
                treasury: key(105),
            },
        },
        bond_exhaustible_from: None,
        completion_attests_output: false,
    }
}

fn hash(n: u8) -> Sha256Digest {
    Sha256Digest([n; 32])
}

fn core() -> Core {
    Core::new(CorePolicy {
        max_checkpoint_interval: None,
    })
}

fn sends(actions: &[Action]) -> Vec<Tx> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { tx, .. } => Some(tx.clone()),
            _ => None,
        })
        .collect()
}

/// A core with job 1 (generation 3) launched in container "c1" and its start confirmed.
fn running() -> Core {
    let mut c = core();
    c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "c1".into(),
        },
        at(1),
    );
    c.on_event(key(1), 3, Event::TxConfirmed(Tx::Start), at(2));
    c
}

fn checkpoints(steps: &[u64]) -> Event {
    Event::CheckpointsCollected {
        stored: steps
            .iter()
            .map(|&s| UploadedCheckpoint {
                epoch: 1,
                step: s,
                hash: hash(s as u8),
            })
            .collect(),
    }
}

#[test]
fn an_assigned_job_is_launched_and_then_started_on_chain() {
    let mut c = core();
    let actions = c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    assert_eq!(
        actions,
        [Action::Launch {
            job: key(1),
            generation: 3,
            restore: None
        }]
    );
    // Nothing is sent while the data is staged: nothing is billed.
    assert!(sends(&c.on_tick(at(30))).is_empty());
    let actions = c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "c1".into(),
        },
        at(31),
    );
    assert_eq!(sends(&actions), [Tx::Start]);
    assert!(actions.contains(&Action::Collect {
        job: key(1),
        generation: 3
    }));
    // A second snapshot does not launch it again.
    let again = c.on_chain(&[job(1, 3, ChainState::Assigned)], at(32));
    assert!(!again.iter().any(|a| matches!(a, Action::Launch { .. })));
}

#[test]
fn a_job_with_a_checkpoint_is_launched_to_restore_it() {
    let mut c = core();
    let mut j = job(1, 4, ChainState::Assigned);
    let last = AttestedCheckpoint {
        epoch: 2,
        step: 40,
        hash: hash(9),
        generation: 3,
    };
    j.last_checkpoint = Some(last);
    let actions = c.on_chain(&[j], at(0));
    assert_eq!(
        actions,
        [Action::Launch {
            job: key(1),
            generation: 4,
            restore: Some(last)
        }]
    );
}

#[test]
fn stored_checkpoints_are_attested_in_order_one_at_a_time() {
    let mut c = running();
    let actions = c.on_event(key(1), 3, checkpoints(&[10, 20]), at(10));
    assert_eq!(
        sends(&actions),
        [Tx::Attest {
            epoch: 1,
            step: 10,
            hash: hash(10)
        }]
    );
    let actions = c.on_event(
        key(1),
        3,
        Event::TxConfirmed(Tx::Attest {
            epoch: 1,
            step: 10,
            hash: hash(10),
        }),
        at(11),
    );
    assert_eq!(
        sends(&actions),
        [Tx::Attest {
            epoch: 1,
            step: 20,
            hash: hash(20)
        }]
    );
    assert_eq!(c.jobs[&key(1)].last_attested, Some((1, 10)));
}

#[test]
fn checkpoints_wait_for_the_start_to_be_confirmed() {
    let mut c = core();
    c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "c1".into(),
        },
        at(1),
    );
    let actions = c.on_event(key(1), 3, checkpoints(&[5]), at(2));
    assert!(
        sends(&actions).is_empty(),
        "the start is in flight: {actions:?}"
    );
    let actions = c.on_event(key(1), 3, Event::TxConfirmed(Tx::Start), at(3));
    assert_eq!(sends(&actions).len(), 1);
}

#[test]
fn a_lost_start_confirmation_is_taken_from_the_chain() {
    let mut c = core();
    c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "c1".into(),
        },
        at(1),
    );
    c.on_event(key(1), 3, checkpoints(&[5]), at(2));
    // The start landed but its confirmation never came back.
    let actions = c.on_chain(&[job(1, 3, ChainState::Running)], at(3));
    assert!(
        matches!(sends(&actions)[..], [Tx::Attest { step: 5, .. }]),
        "{actions:?}"
    );
}

#[test]
fn fencing_stops_the_container_and_drops_what_was_queued() {
    // (what the chain says next, expected new launch)
    let cases: [(Vec<ChainJob>, bool); 3] = [
        (vec![], false),                               // unassigned, or moved to another node
        (vec![job(1, 4, ChainState::Assigned)], true), // reassigned to this node: a new generation
        (vec![job(2, 1, ChainState::Assigned)], false), // only another job is here now
    ];
    for (snapshot, relaunch) in cases {
        let mut c = running();
        c.on_event(key(1), 3, checkpoints(&[10, 20]), at(10));
        let actions = c.on_chain(&snapshot, at(11));
        assert!(
            actions.contains(&Action::Stop {
                job: key(1),
                generation: 3,
                container: "c1".into()
            }),
            "{actions:?}"
        );
        assert!(
            sends(&actions).is_empty(),
            "nothing is sent for a fenced generation"
        );
        assert_eq!(
            actions
                .iter()
                .any(|a| matches!(a, Action::Launch { job, generation: 4, .. } if *job == key(1))),
            relaunch
        );
        // A late result of the fenced generation changes nothing.
        let late = c.on_event(
            key(1),
            3,
            Event::TxConfirmed(Tx::Attest {
                epoch: 1,
                step: 10,
                hash: hash(10),
            }),
            at(12),
        );
        assert!(sends(&late).is_empty());
    }
}

#[test]
fn a_container_launched_after_its_fencing_is_stopped() {
    let mut c = core();
    c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    c.on_chain(&[], at(1));
    let actions = c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "late".into(),
        },
        at(2),
    );
    assert_eq!(
        actions,
        [Action::Stop {
            job: key(1),
            generation: 3,
            container: "late".into()
        }]
    );
}

#[test]
fn a_clean_exit_completes_after_the_last_attestation() {
    let mut c = running();
    c.on_event(key(1), 3, checkpoints(&[10]), at(10));
    let actions = c.on_event(key(1), 3, Event::Exited(exit(0)), at(11));
    assert!(actions.contains(&Action::CollectOutput {
        job: key(1),
        generation: 3
    }));
    let actions = c.on_event(key(1), 3, Event::OutputStored { hash: hash(77) }, at(12));
    assert!(
        sends(&actions).is_empty(),
        "the attestation is still in flight"
    );
    let actions = c.on_event(
        key(1),
        3,
        Event::TxConfirmed(Tx::Attest {
            epoch: 1,
            step: 10,
            hash: hash(10),
        }),
        at(13),
    );
    assert_eq!(
        sends(&actions),
        [Tx::Complete {
            output_hash: hash(77)
        }]
    );
    let actions = c.on_event(
        key(1),
        3,
        Event::TxConfirmed(Tx::Complete {
            output_hash: hash(77),
        }),
        at(14),
    );
    assert!(actions.contains(&Action::Remove {
        job: key(1),
        generation: 3,
        container: "c1".into()
    }));
    assert_eq!(c.jobs[&key(1)].phase, RunPhase::Done);
    // The job leaves the node: nothing to stop.
    let actions = c.on_chain(&[], at(15));
    assert!(!actions.iter().any(|a| matches!(a, Action::Stop { .. })));
}

fn exit(code: i64) -> ContainerExit {
    ContainerExit {
        code,
        oom_killed: false,
        engine_lost: false,
        last_logs: vec![format!("exiting {code}")],
    }
}

/// The agent's rows of the failure table: what it saw, what it reports, and
/// who pays. An exit the agent did not cause is the job's, whatever its code.
#[test]
fn every_way_a_container_ends_is_reported_with_the_tables_payer() {
    use JobOutcome::*;
    let oom = ContainerExit {
        oom_killed: true,
        ..exit(137)
    };
    let lost = ContainerExit {
        engine_lost: true,
        ..exit(-1)
    };
    // (what the shell saw, the reason reported, who pays; None: completes)
    let rows: Vec<(ContainerExit, StopReason, Option<Fault>)> = vec![
        (exit(0), StopReason::Exited { code: 0 }, None),
        (
            exit(1),
            StopReason::Exited { code: 1 },
            Some(Fault::Job(Retry)),
        ),
        (
            exit(2),
            StopReason::Exited { code: 2 },
            Some(Fault::Job(Fatal)),
        ),
        (
            exit(75),
            StopReason::Exited { code: 75 },
            Some(Fault::Job(RetryFree)),
        ),
        (
            exit(86),
            StopReason::Exited { code: 86 },
            Some(Fault::Job(Retry)),
        ),
        (
            exit(137),
            StopReason::Exited { code: 137 },
            Some(Fault::Job(Retry)),
        ),
        (
            exit(143),
            StopReason::Exited { code: 143 },
            Some(Fault::Job(Retry)),
        ),
        (oom, StopReason::OutOfMemory, Some(Fault::Job(Retry))),
        (lost, StopReason::EngineFailure, Some(Fault::Provider)),
    ];
    for (seen, reason, fault) in rows {
        let code = seen.code;
        let mut c = running();
        let actions = c.on_event(key(1), 3, Event::Exited(seen), at(5));
        let collecting = actions.contains(&Action::CollectOutput {
            job: key(1),
            generation: 3,
        });
        assert_eq!(reason.fault(), fault, "{reason:?}");
        assert_eq!(collecting, fault.is_none(), "code {code}");
        let report = &c.reports()[0];
        if fault.is_none() {
            assert_eq!(report.phase, JobPhase::Completing);
            assert!(report.exit.is_none());
        } else {
            assert_eq!(report.phase, JobPhase::Exited, "code {code}");
            let e = report.exit.as_ref().unwrap();
            assert_eq!(e.stop, reason);
            assert_eq!(e.last_logs, [format!("exiting {code}")]);
            assert!(actions.iter().any(|a| matches!(a, Action::Remove { .. })));
        }
    }
}

#[test]
fn a_launch_that_fails_reports_why_and_the_spec_problems_fail_the_job() {
    use JobOutcome::*;
    for (stop, fault) in [
        (StopReason::ImageMissing, Fault::Job(Retry)),
        (StopReason::SpecMissing, Fault::Job(Fatal)),
        (StopReason::SpecMismatch, Fault::Job(Fatal)),
        (StopReason::SpecUnusable, Fault::Job(Fatal)),
        (StopReason::StoreUnavailable, Fault::Job(Retry)),
        (StopReason::RestoreFailed, Fault::Job(Retry)),
        (StopReason::StartRefused, Fault::Job(Retry)),
        (StopReason::EngineFailure, Fault::Provider),
        (StopReason::NodeDiskFull, Fault::Provider),
    ] {
        let mut c = core();
        c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
        let actions = c.on_event(
            key(1),
            3,
            Event::LaunchFailed {
                stop,
                reason: "why".into(),
            },
            at(1),
        );
        assert!(sends(&actions).is_empty(), "never started on chain");
        let r = &c.reports()[0];
        assert_eq!(r.phase, JobPhase::Exited);
        let e = r.exit.as_ref().unwrap();
        assert_eq!((e.stop, e.stop.fault()), (stop, Some(fault)));
        assert_eq!(e.last_logs, ["why"]);
    }
}

#[test]
fn a_container_that_dies_before_its_start_is_never_started_on_chain() {
    let mut c = core();
    c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    let launched = c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "c1".into(),
        },
        at(1),
    );
    assert_eq!(sends(&launched), [Tx::Start]);
    c.on_event(
        key(1),
        3,
        Event::TxFailed {
            tx: Tx::Start,
            failure: TxFailure {
                message: "unreachable".into(),
                retryable: true,
                program_error: None,
            },
        },
        at(2),
    );
    c.on_event(key(1), 3, Event::Exited(exit(1)), at(3));
    assert!(sends(&c.on_tick(at(60))).is_empty());
}

#[test]
fn an_output_missing_after_exit_zero_is_reported_not_completed() {
    let mut c = running();
    c.on_event(key(1), 3, Event::Exited(exit(0)), at(5));
    let actions = c.on_event(
        key(1),
        3,
        Event::OutputMissing {
            reason: "model.bin is missing".into(),
        },
        at(6),
    );
    assert!(sends(&actions).is_empty());
    let r = &c.reports()[0];
    assert_eq!(r.phase, JobPhase::Exited);
    let e = r.exit.as_ref().unwrap();
    assert_eq!(e.stop, StopReason::OutputMissing);
    assert_eq!(e.stop.fault(), Some(Fault::Job(JobOutcome::Retry)));
    assert_eq!(e.last_logs, ["model.bin is missing"]);
}

#[test]
fn a_job_that_breaks_the_contract_is_stopped_as_its_own_fault() {
    let mut c = running();
    let actions = c.on_event(
        key(1),
        3,
        Event::JobFault {
            reason: "checkpoint refused: state.bin is a symlink".into(),
        },
        at(5),
    );
    assert!(
        actions.contains(&Action::Remove {
            job: key(1),
            generation: 3,
            container: "c1".into(),
        }),
        "{actions:?}"
    );
    let r = &c.reports()[0];
    assert_eq!(r.phase, JobPhase::Exited);
    let reported = r.exit.as_ref().unwrap();
    assert_eq!(reported.stop, StopReason::ContractBroken);
    assert!(!reported.stop.slashes(), "the provider must not pay for it");
    assert!(reported.last_logs[0].contains("symlink"));
    // The container's own death after the removal changes nothing.
    let after = c.on_event(key(1), 3, Event::Exited(exit(137)), at(6));
    assert!(sends(&after).is_empty());
    let still = c.reports()[0].exit.clone().unwrap();
    assert_eq!(still.stop, StopReason::ContractBroken);
}

#[test]
fn rejected_data_never_starts_the_job() {
    let mut c = core();
    c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    let actions = c.on_event(
        key(1),
        3,
        Event::DataRejected {
            reason: "sha256 mismatch".into(),
        },
        at(1),
    );
    assert!(actions.is_empty());
    assert_eq!(c.reports()[0].phase, JobPhase::DataRejected);
    let e = c.reports()[0].exit.clone().unwrap();
    assert_eq!(e.stop, StopReason::InputRejected);
    assert!(!e.stop.slashes());
    // Later snapshots neither retry the staging nor start it.
    let later = c.on_chain(&[job(1, 3, ChainState::Assigned)], at(100));
    assert!(later.is_empty(), "{later:?}");
}

#[test]
fn the_job_is_signalled_at_the_interval_and_flagged_once_when_overdue() {
    let mut c = running(); // launched at 1 s, interval 60 s, grace 15 s
    // (time, signal expected, overdue flag expected)
    let timeline = [
        (30, false, false),
        (61, true, false),
        (62, false, false),
        (76, false, false),
        (77, false, true),
        (78, false, false),
        (121, true, false),
    ];
    for (t, signal, overdue) in timeline {
        let actions = c.on_tick(at(t));
        let signalled = actions
            .iter()
            .any(|a| matches!(a, Action::SignalCheckpoint { .. }));
        let flagged = actions
            .iter()
            .any(|a| matches!(a, Action::FlagOverdue { .. }));
        assert_eq!(
            (signalled, flagged),
            (signal, overdue),
            "at {t} s: {actions:?}"
        );
    }
    assert!(c.reports()[0].checkpoint_overdue);
    // A checkpoint clears the flag and restarts the clock.
    c.on_event(key(1), 3, checkpoints(&[10]), at(130));
    assert!(!c.reports()[0].checkpoint_overdue);
    let quiet = c.on_tick(at(180));
    assert!(
        !quiet
            .iter()
            .any(|a| matches!(a, Action::SignalCheckpoint { .. }))
    );
}

#[test]
fn a_verified_job_is_never_signalled_but_still_flagged_when_overdue() {
    // Its spec fixes the checkpoint steps: a signal only paid runs got would
    // tell the job which runs are checks.
    let mut c = core();
    let verified = ChainJob {
        verified: true,
        ..job(1, 3, ChainState::Assigned)
    };
    c.on_chain(std::slice::from_ref(&verified), at(0));
    c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "c1".into(),
        },
        at(1),
    );
    let mut flagged = 0;
    for t in 2..200 {
        let actions = c.on_tick(at(t));
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::SignalCheckpoint { .. })),
            "at {t} s: {actions:?}"
        );
        flagged += actions
            .iter()
            .filter(|a| matches!(a, Action::FlagOverdue { .. }))
            .count();
    }
    assert_eq!(
        flagged, 1,
        "the deadline still holds (interval 60 s + grace 15 s)"
    );
}

#[test]
fn the_agent_cap_shortens_the_checkpoint_interval() {
    let mut c = Core::new(CorePolicy {
        max_checkpoint_interval: Some(Duration::from_secs(4)),
    });
    assert_eq!(
        c.effective_interval(&job(1, 3, ChainState::Assigned)),
        Duration::from_secs(4)
    );
    c.on_chain(&[job(1, 3, ChainState::Assigned)], at(0));
    c.on_event(
        key(1),
        3,
        Event::Launched {
            container: "c1".into(),
        },
        at(0),
    );
    let actions = c.on_tick(at(4));
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::SignalCheckpoint { .. }))
    );
}

#[test]
fn a_transient_failure_is_retried_with_backoff_and_a_refusal_is_not() {
    let mut c = running();
    c.on_event(key(1), 3, checkpoints(&[10]), at(10));
    let attest = Tx::Attest {
        epoch: 1,
        step: 10,
        hash: hash(10),
    };
    let fail = |retryable| Event::TxFailed {
        tx: attest.clone(),
        failure: TxFailure {
            message: "x".into(),
            retryable,
            program_error: None,
        },
    };
    let t = at(20);
    assert!(sends(&c.on_event(key(1), 3, fail(true), t)).is_empty());
    assert!(sends(&c.on_tick(t + Duration::from_millis(400))).is_empty());
    assert_eq!(
        sends(&c.on_tick(t + Duration::from_millis(500))),
        [attest.clone()]
    );
    // Second failure: twice the wait.
    let t2 = t + Duration::from_secs(1);
    c.on_event(key(1), 3, fail(true), t2);
    assert!(sends(&c.on_tick(t2 + Duration::from_millis(900))).is_empty());
    assert_eq!(
        sends(&c.on_tick(t2 + Duration::from_secs(1))),
        [attest.clone()]
    );
    // A refusal by the program is not retried.
    c.on_event(key(1), 3, fail(false), t2 + Duration::from_secs(2));
    assert!(sends(&c.on_tick(t2 + Duration::from_secs(60))).is_empty());
}

#[test]
fn checkpoints_the_chain_already_has_are_not_attested_again() {
    let mut c = running();
    let mut j = job(1, 3, ChainState::Running);
    j.last_checkpoint = Some(AttestedCheckpoint {
        epoch: 1,
        step: 20,
        hash: hash(20),
        generation: 3,
    });
    c.on_chain(&[j], at(5));
    let actions = c.on_event(key(1), 3, checkpoints(&[10, 20, 30]), at(6));
    assert_eq!(
        sends(&actions),
        [Tx::Attest {
            epoch: 1,
            step: 30,
            hash: hash(30)
        }]
    );
}

/// A label an earlier assignment attested binds this one to nothing: a
/// provider that made up `(u32::MAX, u64::MAX)` and left cannot make this
/// node's checkpoints look old (the program orders labels within an
/// assignment only).
#[test]
fn an_earlier_assignments_made_up_label_holds_back_no_attestation() {
    let mut c = running();
    let mut j = job(1, 3, ChainState::Running);
    j.last_checkpoint = Some(AttestedCheckpoint {
        epoch: u32::MAX,
        step: u64::MAX,
        hash: hash(99),
        generation: 2,
    });
    c.on_chain(&[j], at(5));
    let actions = c.on_event(key(1), 3, checkpoints(&[10]), at(6));
    assert_eq!(
        sends(&actions),
        [Tx::Attest {
            epoch: 1,
            step: 10,
            hash: hash(10)
        }]
    );
}

#[test]
fn after_a_restart_containers_are_adopted_or_removed() {
    let mut c = core();
    c.found_containers(vec![
        FoundContainer {
            id: "mine".into(),
            job: key(1),
            generation: 3,
            running: true,
        },
        FoundContainer {
            id: "stale".into(),
            job: key(1),
            generation: 2,
            running: true,
        },
        FoundContainer {
            id: "gone".into(),
            job: key(9),
            generation: 1,
            running: false,
        },
        // A second container of the current generation: removed, but its
        // run's directory is the adopted container's too.
        FoundContainer {
            id: "twin".into(),
            job: key(1),
            generation: 3,
            running: true,
        },
    ]);
    let actions = c.on_chain(
        &[
            job(1, 3, ChainState::Running),
            job(2, 1, ChainState::Assigned),
        ],
        at(0),
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Launch { job, .. } if *job == key(1)))
    );
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Launch { job, .. } if *job == key(2)))
    );
    let mut removed: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::RemoveStray { container, run } => Some((container.as_str(), *run)),
            _ => None,
        })
        .collect();
    removed.sort();
    // The runs no assignment uses go with their containers; the current
    // generation's run stays.
    assert_eq!(
        removed,
        [
            ("gone", Some((key(9), 1))),
            ("stale", Some((key(1), 2))),
            ("twin", None)
        ]
    );
    assert_eq!(
        c.jobs[&key(1)].phase,
        RunPhase::Running {
            container: "mine".into()
        }
    );
    // Already running on chain: no second start.
    assert!(sends(&actions).is_empty());
}

/// What an attested checkpoint lets go of in the store, by what the chain
/// says the job still needs: a plain job keeps only the attested one, a
/// verified job also the previous attested one (a check restores it) and
/// its restore floor (where a lie found later sends it back), and nothing
/// goes while a check is open.
#[test]
fn an_attestation_prunes_only_what_the_job_no_longer_needs() {
    let table = [
        (Keep::Attested, Some((10, None))),
        (
            Keep::FromPrevious {
                previous: Some(6),
                floor: Some(hash(2)),
            },
            Some((6, Some(hash(2)))),
        ),
        (
            Keep::FromPrevious {
                previous: None,
                floor: None,
            },
            None,
        ),
        (Keep::Everything, None),
    ];
    for (keep, expected) in table {
        let mut c = core();
        let chain = ChainJob {
            keep,
            ..job(1, 3, ChainState::Running)
        };
        c.on_chain(std::slice::from_ref(&chain), at(0));
        c.on_event(
            key(1),
            3,
            Event::Launched {
                container: "c1".into(),
            },
            at(1),
        );
        c.on_event(key(1), 3, checkpoints(&[10]), at(10));
        let attest = Tx::Attest {
            epoch: 1,
            step: 10,
            hash: hash(10),
        };
        let confirmed = c.on_event(key(1), 3, Event::TxConfirmed(attest), at(11));
        let pruned: Vec<(u64, Option<Sha256Digest>)> = confirmed
            .iter()
            .filter_map(|a| match a {
                Action::Prune {
                    job,
                    generation,
                    below,
                    floor,
                } if *job == key(1) && *generation == 3 => Some((*below, *floor)),
                _ => None,
            })
            .collect();
        assert_eq!(pruned, expected.into_iter().collect::<Vec<_>>(), "{keep:?}");
    }
}

/// A refusal that time clears (a verified job's draw gap, a completion
/// waiting on a check) is sent again after the pause, as is a completion
/// that attested the job's output (the job completes with a later one);
/// any other refusal waits for the chain to say what changed.
#[test]
fn only_a_refusal_that_time_clears_is_sent_again() {
    for (program_error, again) in [
        (Some("AttestationTooSoon"), true),
        (Some("VerificationOpen"), true),
        (Some(OUTPUT_ATTESTED), true),
        (Some("StaleGeneration"), false),
        (None, false),
    ] {
        let mut c = running();
        c.on_event(key(1), 3, checkpoints(&[10]), at(10));
        let attest = Tx::Attest {
            epoch: 1,
            step: 10,
            hash: hash(10),
        };
        let refused = Event::TxFailed {
            tx: attest.clone(),
            failure: TxFailure {
                message: "refused".into(),
                retryable: false,
                program_error: program_error.map(String::from),
            },
        };
        c.on_event(key(1), 3, refused, at(20));
        let later = sends(&c.on_tick(at(30)));
        assert_eq!(later.contains(&attest), again, "{program_error:?}");
    }
}

fn collects(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Collect { .. }))
        .count()
}

/// A look for checkpoints that failed (the store refusing an upload: the
/// checkpoint stays on the node) neither stops the job nor the looks: the
/// next comes after a backoff that doubles while they keep failing, and a
/// look that succeeds brings them back to every tick.
#[test]
fn a_failed_checkpoint_collection_is_retried_with_backoff_and_the_job_runs_on() {
    let mut c = running();
    let failed = || Event::CollectFailed {
        reason: "store: cannot upload weights.bin (storing part 2 of its multipart upload)".into(),
    };
    let ms = Duration::from_millis;
    assert_eq!(collects(&c.on_event(key(1), 3, failed(), at(10))), 0);
    assert_eq!(collects(&c.on_tick(at(10) + ms(999))), 0, "not before 1 s");
    assert_eq!(collects(&c.on_tick(at(11))), 1, "again after 1 s");
    assert_eq!(
        collects(&c.on_tick(at(11) + ms(100))),
        0,
        "one look at a time"
    );

    assert_eq!(collects(&c.on_event(key(1), 3, failed(), at(12))), 0);
    assert_eq!(collects(&c.on_tick(at(13) + ms(999))), 0, "not before 2 s");
    assert_eq!(collects(&c.on_tick(at(14))), 1, "again after 2 s");
    assert!(matches!(c.jobs[&key(1)].phase, RunPhase::Running { .. }));

    // The retried upload went through: attested, and looks every tick again.
    let actions = c.on_event(key(1), 3, checkpoints(&[10]), at(15));
    assert_eq!(collects(&actions), 1);
    assert_eq!(
        sends(&actions),
        [Tx::Attest {
            epoch: 1,
            step: 10,
            hash: hash(10)
        }]
    );
    assert_eq!(collects(&c.on_event(key(1), 3, failed(), at(16))), 0);
    assert_eq!(
        collects(&c.on_tick(at(17))),
        1,
        "the backoff starts over at 1 s"
    );
}

fn signals(actions: &[Action]) -> Vec<Pubkey> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::SignalCheckpoint { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

#[test]
fn losing_mains_power_asks_every_running_job_for_a_checkpoint_at_once() {
    use mcjs_hal::probe::ups::PowerState;
    let mut c = running();
    // Job 2 is verified: its spec fixes its steps, it is never told.
    let mut verified = job(2, 1, ChainState::Assigned);
    verified.verified = true;
    c.on_chain(&[job(1, 3, ChainState::Running), verified], at(3));
    c.on_event(
        key(2),
        1,
        Event::Launched {
            container: "c2".into(),
        },
        at(3),
    );
    // A minute's interval: nothing is due at 10 s.
    assert!(signals(&c.on_tick(at(10))).is_empty());
    assert!(signals(&c.on_power(PowerState::OnLine, at(10))).is_empty());
    let on_battery = c.on_power(PowerState::OnBattery, at(11));
    assert_eq!(signals(&on_battery), vec![key(1)], "{on_battery:?}");
    assert_eq!(c.power, PowerState::OnBattery);
    // Once per loss of power, not at every read, nor at the low battery
    // that follows it; and the interval counts from that signal.
    assert!(signals(&c.on_power(PowerState::OnBattery, at(12))).is_empty());
    assert!(signals(&c.on_power(PowerState::LowBattery, at(13))).is_empty());
    assert!(signals(&c.on_tick(at(60))).is_empty());
    assert_eq!(signals(&c.on_tick(at(72))), vec![key(1)]);
    // Back on mains, then straight to a low battery: asked again.
    assert!(signals(&c.on_power(PowerState::OnLine, at(80))).is_empty());
    assert_eq!(
        signals(&c.on_power(PowerState::LowBattery, at(81))),
        vec![key(1)]
    );
    // A UPS that cannot be read is no loss of power.
    c.on_power(PowerState::OnLine, at(82));
    assert!(signals(&c.on_power(PowerState::Unknown, at(83))).is_empty());
    assert!(signals(&c.on_power(PowerState::OnLine, at(84))).is_empty());
}

fn removed(actions: &[Action]) -> Vec<Pubkey> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

fn attested(step: u64) -> Event {
    Event::TxConfirmed(Tx::Attest {
        epoch: 1,
        step,
        hash: hash(step as u8),
    })
}

#[test]
fn a_low_battery_stops_the_job_once_a_checkpoint_taken_after_it_is_attested() {
    use mcjs_hal::probe::ups::PowerState;
    let mut c = running();
    assert_eq!(
        signals(&c.on_power(PowerState::OnBattery, at(10))),
        vec![key(1)]
    );
    c.on_event(key(1), 3, checkpoints(&[5]), at(11));
    assert!(
        removed(&c.on_event(key(1), 3, attested(5), at(12))).is_empty(),
        "on battery, the job runs on"
    );
    // The battery runs low: a fresh checkpoint is asked for, and the job
    // stops once it is attested, not before.
    let low = c.on_power(PowerState::LowBattery, at(20));
    assert_eq!(signals(&low), vec![key(1)], "{low:?}");
    assert!(removed(&low).is_empty());
    let collected = c.on_event(key(1), 3, checkpoints(&[9]), at(21));
    assert_eq!(sends(&collected).len(), 1, "{collected:?}");
    assert!(removed(&collected).is_empty(), "not before the attestation");
    let done = c.on_event(key(1), 3, attested(9), at(22));
    assert_eq!(removed(&done), vec![key(1)], "{done:?}");
    let report = &c.reports()[0];
    assert_eq!(report.phase, JobPhase::Exited);
    let stop = report.exit.as_ref().expect("an exit").stop;
    assert_eq!(stop, StopReason::PowerLost);
    assert_eq!(
        stop.fault(),
        Some(Fault::Job(JobOutcome::RetryFree)),
        "no slash, no restart"
    );
    assert_eq!(report.last_checkpoint, Some((1, 9)));
}

#[test]
fn a_low_battery_with_no_checkpoint_coming_stops_the_job_after_the_wait() {
    use mcjs_agent::core::POWER_STOP_WAIT;
    use mcjs_hal::probe::ups::PowerState;
    let mut c = running();
    // Straight to a low battery: one signal, not two.
    let low = c.on_power(PowerState::LowBattery, at(20));
    assert_eq!(signals(&low), vec![key(1)], "{low:?}");
    let wait = POWER_STOP_WAIT.as_secs();
    assert!(removed(&c.on_tick(at(20 + wait - 1))).is_empty());
    assert_eq!(removed(&c.on_tick(at(20 + wait))), vec![key(1)]);
    assert_eq!(
        c.reports()[0].exit.as_ref().unwrap().stop,
        StopReason::PowerLost
    );
}

#[test]
fn mains_power_back_before_the_checkpoint_calls_the_stop_off() {
    use mcjs_hal::probe::ups::PowerState;
    for back in [PowerState::OnLine, PowerState::Unknown] {
        let mut c = running();
        c.on_power(PowerState::LowBattery, at(20));
        c.on_power(back, at(21));
        c.on_event(key(1), 3, checkpoints(&[9]), at(22));
        assert!(
            removed(&c.on_event(key(1), 3, attested(9), at(23))).is_empty(),
            "{back:?}"
        );
        assert!(removed(&c.on_tick(at(200))).is_empty(), "{back:?}");
        assert!(
            matches!(c.jobs[&key(1)].phase, RunPhase::Running { .. }),
            "{back:?}"
        );
    }
}

#[test]
fn a_job_whose_steps_are_fixed_stops_at_once_on_a_low_battery() {
    use mcjs_hal::probe::ups::PowerState;
    let mut c = core();
    let mut verified = job(2, 1, ChainState::Assigned);
    verified.verified = true;
    c.on_chain(&[verified], at(0));
    c.on_event(
        key(2),
        1,
        Event::Launched {
            container: "c2".into(),
        },
        at(1),
    );
    assert!(signals(&c.on_power(PowerState::OnBattery, at(10))).is_empty());
    let low = c.on_power(PowerState::LowBattery, at(20));
    assert!(
        signals(&low).is_empty(),
        "never told to checkpoint off its grid"
    );
    assert_eq!(removed(&low), vec![key(2)]);
}

#[test]
fn a_flapping_ups_gets_one_round_of_checkpoint_signals_per_floor() {
    use mcjs_agent::core::POWER_SIGNAL_FLOOR;
    use mcjs_hal::probe::ups::PowerState;
    let mut c = running();
    let floor = POWER_SIGNAL_FLOOR.as_secs();
    assert_eq!(
        signals(&c.on_power(PowerState::OnBattery, at(10))),
        vec![key(1)]
    );
    let mut quiet = 0;
    let mut t = 12;
    while t < 10 + floor {
        c.on_power(PowerState::OnLine, at(t));
        quiet += signals(&c.on_power(PowerState::OnBattery, at(t + 1))).len();
        t += 2;
    }
    assert_eq!(
        quiet, 0,
        "a flip every 2 s within the floor signals nothing"
    );
    c.on_power(PowerState::OnLine, at(10 + floor));
    assert_eq!(
        signals(&c.on_power(PowerState::OnBattery, at(10 + floor))),
        vec![key(1)],
        "the next loss after the floor is signalled"
    );
}

/// A job the chain says has been billed its whole maximum duration is
/// stopped: its container removed, nothing more attested (it would be
/// refused), and the stop reported as `cap_reached`, which ends the job
/// with nobody slashed. Relaunched nowhere: an agent that restarts after
/// the cap launches nothing.
#[test]
fn a_job_at_its_cap_is_stopped_and_its_stop_reported_as_nobodys_fault() {
    let mut c = running();
    c.on_event(key(1), 3, checkpoints(&[5]), at(10));
    c.on_event(key(1), 3, attested(5), at(11));
    let mut at_cap = job(1, 3, ChainState::Running);
    at_cap.at_cap = true;
    // A checkpoint stored after the cap is not attested.
    c.on_event(key(1), 3, checkpoints(&[9]), at(12));
    let stopped = c.on_chain(std::slice::from_ref(&at_cap), at(13));
    assert_eq!(removed(&stopped), vec![key(1)], "{stopped:?}");
    assert!(sends(&stopped).is_empty(), "{stopped:?}");
    let report = &c.reports()[0];
    assert_eq!(report.phase, JobPhase::Exited);
    let stop = report.exit.as_ref().expect("an exit").stop;
    assert_eq!(stop, StopReason::CapReached);
    assert_eq!(stop.fault(), Some(Fault::Job(JobOutcome::Fatal)));
    assert!(!stop.slashes());
    // Seen again: nothing more.
    let again = c.on_chain(std::slice::from_ref(&at_cap), at(14));
    assert!(removed(&again).is_empty() && sends(&again).is_empty());

    // An agent that restarts after the cap launches nothing.
    let mut fresh = core();
    let actions = fresh.on_chain(std::slice::from_ref(&at_cap), at(20));
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Launch { .. })),
        "{actions:?}"
    );
    assert_eq!(
        fresh.reports()[0].exit.as_ref().map(|e| e.stop),
        Some(StopReason::CapReached)
    );
}
