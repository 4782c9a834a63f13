//! How a checker learns of its checks without scanning the program: it asks
//! the scheduler what it owes ([`mcjs_protocol::CHECKS_PATH`], HTTP, no RPC)
//! and reads what is named by address, and only when the list changed, a
//! step of its own finished, or [`CHECK_READ_EVERY`] passed. The chain is
//! scanned only when no scheduler answers (at most every
//! [`CHECK_SCAN_EVERY`]), or every tick where the chain cannot tell of
//! changes (test chains).

use crate::chain::{AgentChain, ChainFailure, Check};
use mcjs_client::Pubkey;
use mcjs_protocol::{CHECKS_PATH, CheckDuties};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often named checks are read again though nothing changed: a reveal
/// falls due when the other checker seals, which the list may not show.
pub(crate) const CHECK_READ_EVERY: Duration = Duration::from_secs(10);

/// How often the chain is scanned for this node's checks while the
/// scheduler does not answer.
pub(crate) const CHECK_SCAN_EVERY: Duration = Duration::from_secs(30);

/// How long the scheduler may take to answer.
const DUTIES_TIMEOUT: Duration = Duration::from_secs(2);

/// What the finder reads this tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CheckRead {
    /// Nothing: the last listing stands.
    Cached,
    /// The named verifications, by address (none: the listing is empty).
    Named(Vec<Pubkey>),
    /// A scan of the program for this node's checks.
    Scan,
}

/// When to read what: the finder's decisions, apart from its I/O.
#[derive(Debug, Default)]
pub(crate) struct FinderState {
    /// The chain tells of changes: scans are to be avoided.
    pub watched: bool,
    named: Option<Vec<Pubkey>>,
    read_at: Option<Instant>,
    answered_at: Option<Instant>,
    scanned_at: Option<Instant>,
}

impl FinderState {
    /// What to read now, given what the scheduler named (`None`: it did not
    /// answer, or there is none) and whether a step of this node's finished
    /// since the last read (`stale`).
    pub fn plan(&mut self, named: Option<Vec<Pubkey>>, stale: bool, now: Instant) -> CheckRead {
        if !self.watched {
            return CheckRead::Scan;
        }
        let older = |t: Option<Instant>, d: Duration| t.is_none_or(|t| now.duration_since(t) >= d);
        match named {
            Some(mut named) => {
                self.answered_at = Some(now);
                named.sort();
                named.dedup();
                let changed = self.named.as_ref() != Some(&named);
                let due = !named.is_empty() && (stale || older(self.read_at, CHECK_READ_EVERY));
                if changed || due {
                    self.named = Some(named.clone());
                    CheckRead::Named(named)
                } else {
                    CheckRead::Cached
                }
            }
            None if !older(self.answered_at, CHECK_SCAN_EVERY) => CheckRead::Cached,
            None if stale || older(self.scanned_at, CHECK_SCAN_EVERY) => CheckRead::Scan,
            None => CheckRead::Cached,
        }
    }

    /// A read of `what` succeeded at `now`.
    pub fn read(&mut self, what: &CheckRead, now: Instant) {
        match what {
            CheckRead::Cached => {}
            CheckRead::Named(_) => self.read_at = Some(now),
            CheckRead::Scan => {
                self.scanned_at = Some(now);
                // What the scheduler names next is read whatever it is.
                self.named = None;
            }
        }
    }

    /// A read failed: the next tick tries it again.
    pub fn failed(&mut self, what: &CheckRead) {
        match what {
            CheckRead::Named(_) => {
                self.named = None;
            }
            CheckRead::Scan => self.scanned_at = None,
            CheckRead::Cached => {}
        }
    }
}

/// The finder: [`FinderState`] with its scheduler connection and the last
/// listing.
pub(super) struct CheckFinder {
    duties_url: Option<String>,
    http: reqwest::Client,
    state: FinderState,
    listed: Vec<Check>,
    /// Set by a check's task when a step finished: the listing is stale.
    pub stale: Arc<AtomicBool>,
}

impl CheckFinder {
    pub fn new(scheduler: Option<&str>, node: Pubkey, watched: bool) -> Self {
        Self {
            duties_url: scheduler
                .map(|url| format!("{}{CHECKS_PATH}/{node}", url.trim_end_matches('/'))),
            http: reqwest::Client::builder()
                .timeout(DUTIES_TIMEOUT)
                .build()
                .expect("an HTTP client"),
            state: FinderState {
                watched,
                ..FinderState::default()
            },
            listed: Vec::new(),
            stale: Arc::default(),
        }
    }

    /// What the scheduler says this node owes; `None` when it cannot say.
    async fn ask(&self) -> Option<Vec<Pubkey>> {
        let url = self.duties_url.as_ref()?;
        let duties: CheckDuties = self
            .http
            .get(url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .ok()?
            .json()
            .await
            .ok()?;
        // An address that does not parse names nothing.
        Some(
            duties
                .verifications
                .iter()
                .filter_map(|k| k.parse().ok())
                .take(mcjs_client::rpc::MAX_NAMED_CHECKS)
                .collect(),
        )
    }

    /// The checks this node must act on, as last read.
    pub async fn find<C: AgentChain>(
        &mut self,
        chain: &C,
        node: Pubkey,
        now: Instant,
    ) -> Result<Vec<Check>, ChainFailure> {
        let named = if self.state.watched {
            self.ask().await
        } else {
            None
        };
        let stale = self.stale.swap(false, Ordering::SeqCst);
        let what = self.state.plan(named, stale, now);
        let read = match &what {
            CheckRead::Cached => return Ok(self.listed.clone()),
            CheckRead::Named(keys) if keys.is_empty() => Ok(Vec::new()),
            CheckRead::Named(keys) => chain.checks_named(node, keys.clone()).await,
            CheckRead::Scan => chain.checks(node).await,
        };
        match read {
            Ok(listed) => {
                self.state.read(&what, now);
                self.listed = listed;
                Ok(self.listed.clone())
            }
            Err(e) => {
                self.state.failed(&what);
                if stale {
                    self.stale.store(true, Ordering::SeqCst);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched() -> FinderState {
        FinderState {
            watched: true,
            ..FinderState::default()
        }
    }

    /// With a scheduler answering, the chain is read by address only when
    /// the list changes, a step finished, or `CHECK_READ_EVERY` passed, and
    /// never scanned.
    #[test]
    fn a_checker_told_its_duties_reads_them_by_address_only_when_something_changed() {
        let (a, b) = (Pubkey::new_unique(), Pubkey::new_unique());
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut f = watched();
        // Nothing owed: nothing read, ever.
        let first = f.plan(Some(vec![]), false, at(0));
        assert_eq!(first, CheckRead::Named(vec![]));
        f.read(&first, at(0));
        assert_eq!(f.plan(Some(vec![]), false, at(500)), CheckRead::Cached);
        assert_eq!(f.plan(Some(vec![]), false, at(60_000)), CheckRead::Cached);
        // A new duty: read at once, in any order the scheduler lists.
        let named = f.plan(Some(vec![b, a]), false, at(60_500));
        let mut both = vec![a, b];
        both.sort();
        assert_eq!(named, CheckRead::Named(both.clone()));
        f.read(&named, at(60_500));
        assert_eq!(
            f.plan(Some(vec![a, b]), false, at(61_000)),
            CheckRead::Cached
        );
        // A step finished: read again.
        let again = f.plan(Some(vec![a, b]), true, at(61_500));
        assert_eq!(again, CheckRead::Named(both.clone()));
        f.read(&again, at(61_500));
        // Unchanged for CHECK_READ_EVERY: read again.
        let late = at(61_500) + CHECK_READ_EVERY;
        assert_eq!(
            f.plan(Some(vec![a, b]), false, late),
            CheckRead::Named(both)
        );
        // A failed read is tried again on the next tick.
        f.failed(&CheckRead::Named(vec![a, b]));
        assert!(matches!(
            f.plan(Some(vec![a, b]), false, late + Duration::from_millis(500)),
            CheckRead::Named(_)
        ));
    }

    /// A scheduler that stops answering costs a scan only after
    /// `CHECK_SCAN_EVERY` of silence, then one per `CHECK_SCAN_EVERY`; a
    /// chain that cannot tell of changes is scanned every tick.
    #[test]
    fn a_silent_scheduler_costs_a_scan_every_thirty_seconds_and_no_more() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut f = watched();
        let first = f.plan(Some(vec![]), false, at(0));
        f.read(&first, at(0));
        assert_eq!(f.plan(None, false, at(10)), CheckRead::Cached);
        assert_eq!(f.plan(None, false, at(29)), CheckRead::Cached);
        let scan = f.plan(None, false, at(30));
        assert_eq!(scan, CheckRead::Scan);
        f.read(&scan, at(30));
        assert_eq!(f.plan(None, false, at(45)), CheckRead::Cached);
        assert_eq!(f.plan(None, false, at(60)), CheckRead::Scan);
        // No scheduler at all: the first tick scans.
        assert_eq!(watched().plan(None, false, at(0)), CheckRead::Scan);
        // The scheduler back: what it names is read.
        f.read(&CheckRead::Scan, at(60));
        assert_eq!(
            f.plan(Some(vec![]), false, at(61)),
            CheckRead::Named(vec![])
        );
        let mut unwatched = FinderState::default();
        for s in 0..3 {
            assert_eq!(unwatched.plan(None, false, at(s)), CheckRead::Scan);
            unwatched.read(&CheckRead::Scan, at(s));
        }
    }
}
