//! Which of the node's GPUs each container gets: a check never runs on the
//! GPUs of the node's own paid job.
//!
//! A node runs one paid job at a time (the program's `Node.current_job`), and
//! may be drawn to check another provider's interval meanwhile: checkers are
//! drawn busy or idle alike, by stake (docs/verification.md, "Who checks").
//! Docker's `--gpus N` takes the first N devices, so a check and the paid job
//! would share GPU 0: the check could push the paid job out of memory (a job
//! fault its owner pays for) or slow it past its checkpoint deadline. So the
//! GPUs are given by index:
//!
//! - the paid job takes the lowest indices, `0..paid`, as many as the jobs
//!   assigned to the node on chain ask for;
//! - a check takes the highest free indices, and only when enough are free;
//!   otherwise it waits and tries again ([`Busy`]);
//! - the paid job comes first: when the chain assigns the node a job whose
//!   GPUs a running check holds, the check is stopped ([`GpuLedger::set_paid`]
//!   returns its stop token) and the paid run waits until the check has let
//!   them go ([`GpuLedger::clear_for_paid`]).
//!
//! A check that cannot get GPUs before its window ends stays silent: the
//! verification is Inconclusive, nobody is slashed and the checked interval
//! is not paid. Pure; the shell holds it behind a mutex.

use std::collections::{BTreeMap, BTreeSet};

use mcjs_client::Pubkey;
use tokio_util::sync::CancellationToken;

/// The node's GPUs and who holds which.
#[derive(Debug)]
pub struct GpuLedger {
    count: u32,
    /// The node's paid jobs' GPUs: indices `0..paid`, the most that the
    /// chain's assignments ask for or that a paid container still running
    /// holds (a job that left the node keeps its GPUs until its container
    /// is gone).
    paid: u32,
    assigned: u32,
    running: BTreeMap<(Pubkey, u32), u32>,
    checks: BTreeMap<u64, CheckHold>,
    next_id: u64,
}

#[derive(Debug)]
struct CheckHold {
    gpus: BTreeSet<u32>,
    stop: CancellationToken,
}

/// A check's GPUs, until [`GpuLedger::release`].
#[derive(Debug, Clone)]
pub struct Held {
    pub id: u64,
    /// Device indices, as Docker's `device_ids` takes them.
    pub gpus: Vec<u32>,
    /// Cancelled when the node's paid job needs these GPUs.
    pub stop: CancellationToken,
}

/// Why a check cannot have GPUs now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the check needs {needed} GPU(s); {free} of this node's {count} are free (its paid job holds {paid})"
)]
pub struct Busy {
    pub needed: u32,
    pub free: u32,
    pub count: u32,
    pub paid: u32,
}

impl GpuLedger {
    /// A node with `count` GPUs (its profile on chain).
    pub fn new(count: u32) -> Self {
        Self {
            count,
            paid: 0,
            assigned: 0,
            running: BTreeMap::new(),
            checks: BTreeMap::new(),
            next_id: 0,
        }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The paid job's devices: `0..n`, within the node.
    pub fn paid_devices(&self, n: u32) -> Vec<u32> {
        (0..n.min(self.count)).collect()
    }

    /// The node's paid jobs now ask for `n` GPUs (from the chain's view of
    /// the jobs assigned to it). Returns the stop tokens of the checks that
    /// hold any of the paid GPUs, already cancelled: they must let them go.
    pub fn set_paid(&mut self, n: u32) -> Vec<CancellationToken> {
        self.assigned = n;
        self.settle()
    }

    /// A paid container of `(job, generation)` runs on `0..n`.
    pub fn paid_started(&mut self, run: (Pubkey, u32), n: u32) -> Vec<CancellationToken> {
        self.running.insert(run, n);
        self.settle()
    }

    /// The paid container of `(job, generation)` is gone.
    pub fn paid_gone(&mut self, run: (Pubkey, u32)) {
        self.running.remove(&run);
        self.settle();
    }

    fn settle(&mut self) -> Vec<CancellationToken> {
        let running = self.running.values().copied().max().unwrap_or(0);
        self.paid = self.assigned.max(running).min(self.count);
        let paid = self.paid;
        self.checks
            .values()
            .filter(|h| h.gpus.iter().any(|g| *g < paid))
            .map(|h| {
                h.stop.cancel();
                h.stop.clone()
            })
            .collect()
    }

    /// Whether the paid job's `0..n` are free of checks, so its container
    /// may start.
    pub fn clear_for_paid(&self, n: u32) -> bool {
        self.checks.values().all(|h| h.gpus.iter().all(|g| *g >= n))
    }

    /// Holds `n` GPUs for a check: the highest ones neither the paid job
    /// nor another check holds.
    pub fn hold_check(&mut self, n: u32) -> Result<Held, Busy> {
        let taken: BTreeSet<u32> = self.checks.values().flat_map(|h| h.gpus.clone()).collect();
        let free: Vec<u32> = (self.paid..self.count)
            .rev()
            .filter(|g| !taken.contains(g))
            .collect();
        if n == 0 || free.len() < n as usize {
            return Err(Busy {
                needed: n,
                free: free.len() as u32,
                count: self.count,
                paid: self.paid,
            });
        }
        let gpus: BTreeSet<u32> = free.into_iter().take(n as usize).collect();
        let id = self.next_id;
        self.next_id += 1;
        let stop = CancellationToken::new();
        self.checks.insert(
            id,
            CheckHold {
                gpus: gpus.clone(),
                stop: stop.clone(),
            },
        );
        Ok(Held {
            id,
            gpus: gpus.into_iter().collect(),
            stop,
        })
    }

    /// The check's container is gone: its GPUs are free again.
    pub fn release(&mut self, id: u64) {
        self.checks.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_takes_the_highest_free_gpus_and_never_the_paid_jobs() {
        let mut l = GpuLedger::new(8);
        assert!(l.set_paid(3).is_empty());
        let a = l.hold_check(2).expect("5 free");
        assert_eq!(a.gpus, vec![6, 7]);
        let b = l.hold_check(3).expect("3 free");
        assert_eq!(b.gpus, vec![3, 4, 5]);
        for g in a.gpus.iter().chain(&b.gpus) {
            assert!(!l.paid_devices(3).contains(g));
        }
        assert_eq!(
            l.hold_check(1).unwrap_err(),
            Busy {
                needed: 1,
                free: 0,
                count: 8,
                paid: 3
            }
        );
        l.release(a.id);
        assert_eq!(l.hold_check(2).expect("freed").gpus, vec![6, 7]);
    }

    #[test]
    fn on_a_single_gpu_node_a_check_waits_for_the_paid_job_to_leave() {
        let mut l = GpuLedger::new(1);
        l.set_paid(1);
        let busy = l.hold_check(1).unwrap_err();
        assert_eq!((busy.free, busy.paid), (0, 1));
        assert!(busy.to_string().contains("0 of this node's 1 are free"));
        l.set_paid(0);
        assert_eq!(l.hold_check(1).expect("the job left").gpus, vec![0]);
    }

    #[test]
    fn a_paid_job_assigned_over_a_running_check_stops_it_and_waits_for_its_gpus() {
        let mut l = GpuLedger::new(2);
        let check = l.hold_check(2).expect("idle node");
        assert_eq!(check.gpus, vec![0, 1]);
        assert!(l.clear_for_paid(0));
        // The chain assigns the node a one-GPU job.
        let stopped = l.set_paid(1);
        assert_eq!(stopped.len(), 1);
        assert!(check.stop.is_cancelled(), "the check is told to stop");
        assert!(!l.clear_for_paid(1), "the paid run waits for the GPU");
        l.release(check.id);
        assert!(l.clear_for_paid(1));
        // A later check fits beside the paid job.
        let next = l.hold_check(1).expect("one free");
        assert_eq!(next.gpus, vec![1]);
        assert!(!next.stop.is_cancelled());
        assert!(l.set_paid(1).is_empty(), "the same demand stops nothing");
    }

    #[test]
    fn a_check_that_does_not_meet_the_paid_job_is_left_running() {
        let mut l = GpuLedger::new(4);
        let check = l.hold_check(1).expect("idle");
        assert_eq!(check.gpus, vec![3]);
        assert!(l.set_paid(2).is_empty());
        assert!(!check.stop.is_cancelled());
        assert!(l.clear_for_paid(2));
        // Demand above the node is held to the node.
        assert_eq!(l.set_paid(9).len(), 1);
        assert_eq!(l.paid_devices(9), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_job_that_left_the_node_keeps_its_gpus_until_its_container_is_gone() {
        let mut l = GpuLedger::new(1);
        let run = (Pubkey::new_unique(), 3);
        l.set_paid(1);
        l.paid_started(run, 1);
        // The chain moved the job away; its container is still being removed.
        l.set_paid(0);
        assert!(l.hold_check(1).is_err());
        l.paid_gone(run);
        assert_eq!(l.hold_check(1).expect("gone").gpus, vec![0]);
    }

    #[test]
    fn zero_gpus_is_never_a_hold() {
        let mut l = GpuLedger::new(2);
        assert!(l.hold_check(0).is_err());
    }
}
