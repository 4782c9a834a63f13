//! Confirmation by batched status polls: every transaction a client (and
//! its clones) waits for is asked about in one `getSignatureStatuses` call
//! per poll, up to [`PER_CALL`] signatures a call, and polls start at most
//! once per poll interval. Whichever waiter finds no poll in flight makes
//! the next one; the others read its answers. A scheduler confirming 16
//! placements at once makes one call per interval, not 16.

use std::collections::HashMap;
use std::sync::Mutex;

use solana_transaction_status_client_types::TransactionStatus;
use tokio::sync::Notify;

use super::*;

/// The most signatures `getSignatureStatuses` takes in one call.
pub const PER_CALL: usize = 256;

#[derive(Default)]
pub(super) struct StatusPolls {
    state: Mutex<State>,
    /// Held by the waiter making the current poll.
    poller: tokio::sync::Mutex<()>,
    /// Woken when a poll ends, answered or not.
    ended: Notify,
}

#[derive(Default)]
struct State {
    /// Signatures waited for, with how many wait for each.
    waiting: HashMap<Signature, usize>,
    /// The latest answer for each signature waited for.
    answers: HashMap<Signature, Option<TransactionStatus>>,
    /// Polls ended so far.
    polls: u64,
    last_started: Option<Instant>,
}

/// The poll in flight: when it ends, however it ends (a waiter's future
/// may be dropped mid-call), the next may start and the other waiters wake.
struct Polling<'a> {
    poller: Option<tokio::sync::MutexGuard<'a, ()>>,
    ended: &'a Notify,
}

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        self.poller.take();
        self.ended.notify_waiters();
    }
}

/// Unregisters a waiter, however its wait ends.
struct Waiting<'a>(&'a Mutex<State>, Signature);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = state.waiting.get_mut(&self.1) {
            *count -= 1;
            if *count == 0 {
                state.waiting.remove(&self.1);
                state.answers.remove(&self.1);
            }
        }
    }
}

impl StatusPolls {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `signature`'s status from a poll that starts after this call, no
    /// sooner than `interval` after the previous poll started.
    pub(super) async fn status(
        &self,
        rpc: &RpcClient,
        signature: &Signature,
        interval: Duration,
    ) -> Result<Option<TransactionStatus>, ClientError> {
        let registered = {
            let mut state = self.state();
            *state.waiting.entry(*signature).or_default() += 1;
            state.polls
        };
        let _waiting = Waiting(&self.state, *signature);
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            {
                let state = self.state();
                if state.polls > registered
                    && let Some(answer) = state.answers.get(signature)
                {
                    return Ok(answer.clone());
                }
            }
            let Ok(poller) = self.poller.try_lock() else {
                ended.await;
                continue;
            };
            let _polling = Polling {
                poller: Some(poller),
                ended: &self.ended,
            };
            let since = self.state().last_started.map(|t| t.elapsed());
            if let Some(since) = since.filter(|since| *since < interval) {
                tokio::time::sleep(interval - since).await;
            }
            let signatures: Vec<Signature> = {
                let mut state = self.state();
                state.last_started = Some(Instant::now());
                state.waiting.keys().copied().collect()
            };
            let mut answers = Vec::with_capacity(signatures.len());
            let outcome = async {
                for chunk in signatures.chunks(PER_CALL) {
                    let statuses = rpc.get_signature_statuses(chunk).await?.value;
                    answers.extend(chunk.iter().copied().zip(statuses));
                }
                Ok::<_, ClientError>(())
            }
            .await;
            let mut state = self.state();
            state.polls += 1;
            for (signature, status) in answers {
                if state.waiting.contains_key(&signature) {
                    state.answers.insert(signature, status);
                }
            }
            outcome?;
            return Ok(state.answers.get(signature).cloned().flatten());
        }
    }
}
