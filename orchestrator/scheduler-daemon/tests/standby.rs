//! Warm standbys in the decision core: who stands by for which job, and
//! where a job that loses its node goes.

use std::collections::HashSet;

mod common;
use common::*;

use mcjs::state::*;
use mcjs_client::Pubkey;
use mcjs_scheduler_daemon::standby::Standbys;
use mcjs_scheduler_daemon::{Action, Decision, DetectorConfig, Liveness, Observation, reconcile};

fn round(
    now_ms: i64,
    jobs: &[(Pubkey, Job)],
    nodes: &[(Pubkey, Node)],
    live: &Liveness,
    wanted: &[Pubkey],
    standbys: &Standbys,
) -> Decision {
    let wanted: HashSet<Pubkey> = wanted.iter().copied().collect();
    reconcile(
        &Observation {
            now_ms,
            jobs,
            nodes,
            liveness: live,
            understaked: &HashSet::new(),
            outages: &[],
            require_proven_hardware: false,
            standby_wanted: &wanted,
            standbys,
        },
        &DetectorConfig::default(),
    )
}

fn alive(nodes: &[Pubkey], at_ms: i64) -> Liveness {
    let mut live = Liveness::new(T0 * MS);
    for n in nodes {
        live.record(heartbeat(*n, vec![]), at_ms).unwrap();
    }
    live
}

fn standbys(pairs: &[(Pubkey, Pubkey)]) -> Standbys {
    let mut s = Standbys::default();
    for (job, node) in pairs {
        s.insert(*job, *node);
    }
    s
}

#[test]
fn a_job_that_asks_gets_a_free_node_of_another_provider_and_one_that_does_not_gets_none() {
    let (job, on, same, other, p, q) = (key(10), key(20), key(21), key(22), key(30), key(31));
    let live = alive(&[on, same, other], T0 * MS);
    let jobs = [(job, JobBuilder::pending().running_on(on, p, 1, T0).0)];
    let nodes = [
        (on, busy(node(p, 81_920), job)),
        (same, node(p, 81_920)),
        (other, node(q, 81_920)),
    ];
    let none = Standbys::default();
    let asked = round(T0 * MS + 500, &jobs, &nodes, &live, &[job], &none);
    assert_eq!(asked.standbys.node_of(&job), Some(other), "{asked:?}");
    // Standing by is not an action: nothing is sent for it.
    assert!(asked.actions.is_empty(), "{asked:?}");
    let not_asked = round(T0 * MS + 500, &jobs, &nodes, &live, &[], &none);
    assert!(not_asked.standbys.is_empty(), "{not_asked:?}");
    // Only the same provider free: better than no standby.
    let nodes_one = [(on, busy(node(p, 81_920), job)), (same, node(p, 81_920))];
    let alone = round(T0 * MS + 500, &jobs, &nodes_one, &live, &[job], &none);
    assert_eq!(alone.standbys.node_of(&job), Some(same));
}

#[test]
fn a_node_stands_by_for_one_job_and_a_node_placed_this_round_for_none() {
    let (a, b, queued) = (key(10), key(11), key(12));
    let (on_a, on_b, free, p, q) = (key(20), key(21), key(22), key(30), key(31));
    let live = alive(&[on_a, on_b, free], T0 * MS);
    let nodes = [
        (on_a, busy(node(p, 81_920), a)),
        (on_b, busy(node(p, 81_920), b)),
        (free, node(q, 81_920)),
    ];
    let running = [
        (a, JobBuilder::pending().running_on(on_a, p, 1, T0).0),
        (b, JobBuilder::pending().running_on(on_b, p, 1, T0).0),
    ];
    let d = round(
        T0 * MS + 500,
        &running,
        &nodes,
        &live,
        &[a, b],
        &Standbys::default(),
    );
    assert_eq!(d.standbys.len(), 1, "one free node, two jobs: {d:?}");
    assert!(d.standbys.holds(&free));
    // A job waiting in the queue takes the free node: no one stands by on it.
    let mut with_queue = running.to_vec();
    with_queue.push((queued, JobBuilder::pending().0));
    let d = round(
        T0 * MS + 500,
        &with_queue,
        &nodes,
        &live,
        &[a, b],
        &Standbys::default(),
    );
    assert!(
        matches!(&d.actions[..], [Action::Assign { job, node, .. }] if *job == queued && *node == free),
        "{d:?}"
    );
    assert!(d.standbys.is_empty(), "{d:?}");
}

#[test]
fn a_standby_is_kept_while_free_and_replaced_once_it_has_a_job_of_its_own() {
    let (job, elsewhere) = (key(10), key(11));
    let (on, first, second, p, q) = (key(20), key(21), key(22), key(30), key(31));
    let live = alive(&[on, first, second], T0 * MS);
    let jobs = [(job, JobBuilder::pending().running_on(on, p, 1, T0).0)];
    let nodes = [
        (on, busy(node(p, 81_920), job)),
        (first, node(q, 81_920)),
        (second, node(q, 81_920)),
    ];
    // Whichever is chosen first, it is kept round after round.
    let chosen = round(
        T0 * MS + 500,
        &jobs,
        &nodes,
        &live,
        &[job],
        &Standbys::default(),
    )
    .standbys
    .node_of(&job)
    .expect("a standby");
    let unchosen = if chosen == first { second } else { first };
    let kept = round(
        T0 * MS + 1_000,
        &jobs,
        &nodes,
        &live,
        &[job],
        &standbys(&[(job, unchosen)]),
    );
    assert_eq!(kept.standbys.node_of(&job), Some(unchosen), "{kept:?}");
    // Given a job of its own: replaced by the other.
    let mut taken = nodes.clone();
    for (k, n) in taken.iter_mut() {
        if *k == unchosen {
            *n = busy(n.clone(), elsewhere);
        }
    }
    let moved = round(
        T0 * MS + 1_500,
        &jobs,
        &taken,
        &live,
        &[job],
        &standbys(&[(job, unchosen)]),
    );
    assert_eq!(moved.standbys.node_of(&job), Some(chosen), "{moved:?}");
    // Silent: not a standby any more (and nothing replaces it here).
    let quiet = alive(&[on, unchosen], T0 * MS + 5_000);
    let gone = round(
        T0 * MS + 5_500,
        &jobs,
        &nodes,
        &quiet,
        &[job],
        &standbys(&[(job, chosen)]),
    );
    assert_eq!(gone.standbys.node_of(&job), Some(unchosen), "{gone:?}");
}

#[test]
fn a_job_that_loses_its_node_goes_to_its_standby_before_the_node_the_planner_prefers() {
    let (job, lost, small, big) = (key(10), key(20), key(21), key(22));
    let (p, q, r) = (key(30), key(31), key(32));
    let mut live = Liveness::new(T0 * MS);
    live.record(heartbeat(lost, vec![]), T0 * MS).unwrap();
    live.record(heartbeat(small, vec![]), T0 * MS + 3_000)
        .unwrap();
    live.record(heartbeat(big, vec![]), T0 * MS + 3_000)
        .unwrap();
    let nodes = [
        (lost, busy(node(p, 81_920), job)),
        (small, node(q, 40_960)),
        (big, node(r, 81_920)),
    ];
    let jobs = [(job, JobBuilder::pending().running_on(lost, p, 4, T0).0)];
    let now = T0 * MS + 3_001;
    let placed_on = |d: &Decision| {
        d.actions.iter().find_map(|a| match a {
            Action::Assign { job: j, node, .. } if *j == job => Some(*node),
            _ => None,
        })
    };
    // Without a standby the planner keeps the big card free.
    let planned = round(now, &jobs, &nodes, &live, &[job], &Standbys::default());
    assert!(
        matches!(&planned.actions[0], Action::ReportFailure { node, .. } if *node == lost),
        "{planned:?}"
    );
    assert_eq!(placed_on(&planned), Some(small), "{planned:?}");
    // With its standby on the big card: there, in the same round.
    let warm = round(now, &jobs, &nodes, &live, &[job], &standbys(&[(job, big)]));
    assert_eq!(placed_on(&warm), Some(big), "{warm:?}");
    assert_eq!(warm.actions.len(), 2, "{warm:?}");
    // A standby that does not fit the job (too little memory) is passed over.
    let mut needy = jobs.clone();
    needy[0].1.requirements.min_vram_mib = 81_920;
    let unfit = round(
        now,
        &needy,
        &nodes,
        &live,
        &[job],
        &standbys(&[(job, small)]),
    );
    assert_eq!(placed_on(&unfit), Some(big), "{unfit:?}");
    // The job being moved has no standby this round: it is choosing anew.
    assert!(warm.standbys.node_of(&job).is_none(), "{warm:?}");
}
