//! The node's GPUs as an actor: one task owns the [`GpuLedger`] (the pure
//! rule of who holds which GPU) and answers, in the order asked, the job
//! runner and the checker, which hold only a [`GpuDesk`], a channel to it.

use crate::gpus::{Busy, GpuLedger, Held};
use mcjs_client::Pubkey;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What the desk is asked; a question carries where its answer goes.
enum Ask {
    SetPaid(u32, oneshot::Sender<usize>),
    PaidStarted((Pubkey, u32), u32),
    PaidGone((Pubkey, u32)),
    ClearForPaid(u32, oneshot::Sender<bool>),
    PaidDevices(u32, oneshot::Sender<Vec<u32>>),
    HoldCheck(u32, oneshot::Sender<Result<Held, Busy>>),
    Release(u64),
}

/// A channel to the task that owns the node's [`GpuLedger`]. The task runs
/// as long as a desk (or a check's [`CheckGpus`]) is held.
#[derive(Clone)]
pub(super) struct GpuDesk {
    asks: mpsc::UnboundedSender<Ask>,
}

impl GpuDesk {
    /// Starts the ledger of a node with `count` GPUs (its profile on chain).
    pub(super) fn open(count: u32) -> Self {
        let (asks, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut ledger = GpuLedger::new(count);
            while let Some(ask) = rx.recv().await {
                match ask {
                    Ask::SetPaid(n, answer) => {
                        let _ = answer.send(ledger.set_paid(n).len());
                    }
                    Ask::PaidStarted(run, n) => {
                        ledger.paid_started(run, n);
                    }
                    Ask::PaidGone(run) => ledger.paid_gone(run),
                    Ask::ClearForPaid(n, answer) => {
                        let _ = answer.send(ledger.clear_for_paid(n));
                    }
                    Ask::PaidDevices(n, answer) => {
                        let _ = answer.send(ledger.paid_devices(n));
                    }
                    Ask::HoldCheck(n, answer) => {
                        let held = ledger.hold_check(n);
                        if let Err(unsent) = answer.send(held)
                            && let Ok(held) = unsent
                        {
                            // The asking check is gone: nobody holds these.
                            ledger.release(held.id);
                        }
                    }
                    Ask::Release(id) => ledger.release(id),
                }
            }
        });
        Self { asks }
    }

    fn tell(&self, ask: Ask) {
        // The desk's task outlives every sender: a send cannot fail while
        // the runtime runs, and a runtime shutting down needs no answer.
        let _ = self.asks.send(ask);
    }

    async fn ask<T>(&self, ask: impl FnOnce(oneshot::Sender<T>) -> Ask) -> Option<T> {
        let (answer, answered) = oneshot::channel();
        self.tell(ask(answer));
        answered.await.ok()
    }

    /// The node's paid jobs now ask for `n` GPUs ([`GpuLedger::set_paid`]):
    /// how many checks were told to give theirs back.
    pub(super) async fn set_paid(&self, n: u32) -> usize {
        self.ask(|a| Ask::SetPaid(n, a)).await.unwrap_or_default()
    }

    /// A paid container of `run` runs on `0..n`.
    pub(super) fn paid_started(&self, run: (Pubkey, u32), n: u32) {
        self.tell(Ask::PaidStarted(run, n));
    }

    /// The paid container of `run` is gone: its GPUs may go to a check.
    pub(super) fn paid_gone(&self, run: (Pubkey, u32)) {
        self.tell(Ask::PaidGone(run));
    }

    /// Whether no check holds any of the paid job's `0..n`.
    pub(super) async fn clear_for_paid(&self, n: u32) -> bool {
        self.ask(|a| Ask::ClearForPaid(n, a)).await.unwrap_or(true)
    }

    /// The paid job's devices.
    pub(super) async fn paid_devices(&self, n: u32) -> Vec<u32> {
        self.ask(|a| Ask::PaidDevices(n, a))
            .await
            .unwrap_or_default()
    }

    /// Holds `n` GPUs for a check, given back when the [`CheckGpus`] drops.
    pub(super) async fn hold_check(&self, n: u32) -> Result<CheckGpus, Busy> {
        let held = self
            .ask(|a| Ask::HoldCheck(n, a))
            .await
            .unwrap_or(Err(Busy {
                needed: n,
                free: 0,
                count: 0,
                paid: 0,
            }))?;
        Ok(CheckGpus {
            held,
            desk: self.clone(),
        })
    }
}

/// A check's GPUs, given back when the check is done with them (its
/// container is removed before this drops).
pub(super) struct CheckGpus {
    held: Held,
    desk: GpuDesk,
}

impl CheckGpus {
    /// The device indices, as Docker's `device_ids` takes them.
    pub(super) fn devices(&self) -> Vec<u32> {
        self.held.gpus.clone()
    }

    /// Cancelled when the node's paid job needs these GPUs.
    pub(super) fn stop(&self) -> &CancellationToken {
        &self.held.stop
    }
}

impl Drop for CheckGpus {
    fn drop(&mut self) {
        self.desk.tell(Ask::Release(self.held.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_check_gives_its_gpus_back_when_dropped_and_is_stopped_by_the_paid_job() {
        let desk = GpuDesk::open(2);
        let run = (Pubkey::new_unique(), 1);
        let check = desk.hold_check(1).await.expect("a free GPU");
        assert_eq!(
            check.devices(),
            vec![1],
            "a check takes the highest free GPU"
        );
        assert!(desk.hold_check(2).await.is_err(), "one GPU is held");
        assert_eq!(desk.set_paid(2).await, 1, "the check is told to stop");
        assert!(check.stop().is_cancelled());
        assert!(!desk.clear_for_paid(2).await, "the check still holds GPU 1");
        drop(check);
        assert!(desk.clear_for_paid(2).await, "given back on drop");
        desk.paid_started(run, 2);
        assert_eq!(desk.paid_devices(2).await, vec![0, 1]);
        desk.set_paid(0).await;
        assert!(
            desk.hold_check(1).await.is_err(),
            "the running paid container holds both"
        );
        desk.paid_gone(run);
        assert_eq!(
            desk.hold_check(2).await.expect("all free").devices(),
            vec![0, 1]
        );
    }
}
