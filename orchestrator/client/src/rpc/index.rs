//! The program's accounts held in memory and kept current from a stream:
//! one backfill, then a `programSubscribe` subscription, so that a process
//! which needs every job, node or verification reads them from memory
//! instead of scanning the program with `getProgramAccounts` each time.
//!
//! The follower ([`ProgramIndex::follow`]) subscribes first and backfills
//! second, one `getProgramAccounts` per account kind, each answered with
//! the slot it was read at; what the stream delivered meanwhile is applied
//! after it, and an update never replaces a newer one ([`IndexState`]: the
//! slot decides). When the subscription cannot be made, drops, or tells
//! nothing for [`SILENT_AFTER`] (a slot subscription on the same stream
//! says a new slot every 400 ms or so, so silence means the stream is
//! behind), the index stops being [live](ProgramIndex::is_live) until it
//! has subscribed and backfilled again; every [`RECONCILE_EVERY`] it backfills again besides,
//! which removes what the stream did not say was closed (a node need not
//! notify a program subscription of an account that leaves the program).
//!
//! The stream is one source; [`IndexSource`] names what any other must
//! give (a Geyser gRPC stream is the production one).

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use super::*;

/// How often a live index backfills again to drop what the stream missed.
pub const RECONCILE_EVERY: Duration = Duration::from_secs(300);

/// One account of the program as the index holds it: decoded once, when it
/// arrives.
#[derive(Clone, Debug)]
pub enum Indexed {
    Config(Config),
    Provider(Provider),
    Node(Node),
    Job(Job),
    Segment(Segment),
    Verification(Verification),
    /// Another account of the program (a job counter), or one whose data
    /// does not decode: held so that the slot order still holds for it.
    Other,
}

impl Indexed {
    /// `data` decoded by its discriminator.
    pub fn decode(data: &[u8]) -> Self {
        let of = |kind| data.starts_with(decode::discriminator_of(kind));
        let decoded = if of(AccountKind::Job) {
            decode::job(data).map(Self::Job)
        } else if of(AccountKind::Node) {
            decode::node(data).map(Self::Node)
        } else if of(AccountKind::Verification) {
            decode::verification(data).map(Self::Verification)
        } else if of(AccountKind::Segment) {
            decode::segment(data).map(Self::Segment)
        } else if of(AccountKind::Provider) {
            decode::provider(data).map(Self::Provider)
        } else if of(AccountKind::Config) {
            decode::config(data).map(Self::Config)
        } else {
            return Self::Other;
        };
        decoded.unwrap_or(Self::Other)
    }

    pub fn job(&self) -> Option<&Job> {
        match self {
            Self::Job(j) => Some(j),
            _ => None,
        }
    }

    pub fn node(&self) -> Option<&Node> {
        match self {
            Self::Node(n) => Some(n),
            _ => None,
        }
    }

    pub fn provider(&self) -> Option<&Provider> {
        match self {
            Self::Provider(p) => Some(p),
            _ => None,
        }
    }

    pub fn verification(&self) -> Option<&Verification> {
        match self {
            Self::Verification(v) => Some(v),
            _ => None,
        }
    }

    pub fn segment(&self) -> Option<&Segment> {
        match self {
            Self::Segment(s) => Some(s),
            _ => None,
        }
    }

    fn kind(&self) -> Option<AccountKind> {
        Some(match self {
            Self::Config(_) => AccountKind::Config,
            Self::Provider(_) => AccountKind::Provider,
            Self::Node(_) => AccountKind::Node,
            Self::Job(_) => AccountKind::Job,
            Self::Segment(_) => AccountKind::Segment,
            Self::Verification(_) => AccountKind::Verification,
            Self::Other => return None,
        })
    }
}

/// Whether nothing more can happen to `job` but its closing: it ended
/// (completed, failed, cancelled, expired) and none of its pay is still
/// held (no live segment, no open verification). A scheduler's round has
/// nothing to decide about it.
pub fn settled(job: &Job) -> bool {
    job.state.is_terminal() && job.live_segments == 0 && job.open_verifications == 0
}

/// The index's accounts and what it knows of its own freshness. Pure: the
/// follower feeds it, tests drive it directly.
#[derive(Default, Debug)]
pub struct IndexState {
    /// account → (the slot its state is from, the state).
    accounts: HashMap<Pubkey, (u64, Indexed)>,
    /// account → the slot it was seen gone at, so that an older update
    /// still queued cannot bring it back. Cleared of entries from before
    /// the next backfill (its own closes stay until the one after).
    gone: HashMap<Pubkey, u64>,
    /// The jobs not [`settled`]: what a scheduler's round reads, kept apart
    /// so that reading them costs what is live, not what ever ran.
    unsettled: HashSet<Pubkey>,
    /// The highest slot applied.
    slot: u64,
    /// The latest slot the stream has told of since it was subscribed: the
    /// least slot the stream gives its next update (see `follow_once`).
    stream_slot: u64,
    live: bool,
    /// Updates applied from the stream, and backfills done.
    pub updates: u64,
    pub backfills: u64,
}

impl IndexState {
    /// An update of `key` at `slot` (`None`: it left the program or was
    /// closed). Applied unless the index holds a newer state of it;
    /// returns whether it was.
    pub fn apply(&mut self, key: Pubkey, slot: u64, data: Option<&[u8]>) -> bool {
        if self.is_newer_than(&key, slot) {
            return false;
        }
        self.put(key, slot, data);
        true
    }

    /// Holds `data` (`None`: gone) for `key` as of `slot`, whatever it held.
    fn put(&mut self, key: Pubkey, slot: u64, data: Option<&[u8]>) {
        self.slot = self.slot.max(slot);
        match data {
            Some(data) => {
                self.gone.remove(&key);
                let account = Indexed::decode(data);
                match &account {
                    Indexed::Job(job) if !settled(job) => self.unsettled.insert(key),
                    _ => self.unsettled.remove(&key),
                };
                self.accounts.insert(key, (slot, account));
            }
            None => {
                self.accounts.remove(&key);
                self.unsettled.remove(&key);
                self.gone.insert(key, slot);
            }
        }
    }

    /// Every account of `kind` as read at `slot`: each replaces what the
    /// index holds unless that is newer, and an account of `kind` held
    /// from before `slot` that the read does not list is gone. While the
    /// stream is live (a reconcile), what was read is held as of the
    /// stream's clock, as a read by address is ([`Self::apply_read`]): the
    /// stream's next update of an account may carry its subscription's
    /// slot, below `slot`, and must still replace the read. What the read
    /// does not list is gone as of `slot`: no update follows a close.
    pub fn backfill(&mut self, kind: AccountKind, slot: u64, accounts: &[(Pubkey, Vec<u8>)]) {
        let held_at = self.held_at(slot);
        let listed: HashSet<Pubkey> = accounts.iter().map(|(k, _)| *k).collect();
        let missing: Vec<Pubkey> = self
            .accounts
            .iter()
            .filter(|(key, (held, account))| {
                account.kind() == Some(kind) && *held <= slot && !listed.contains(key)
            })
            .map(|(key, _)| *key)
            .collect();
        for key in missing {
            self.apply(key, slot, None);
        }
        for (key, data) in accounts {
            if !self.is_newer_than(key, slot) {
                self.put(*key, held_at, Some(data));
            }
        }
        self.slot = self.slot.max(slot);
        self.gone.retain(|_, at| *at >= slot);
    }

    /// Whether the index holds `key` (or its close) from after `slot`.
    fn is_newer_than(&self, key: &Pubkey, slot: u64) -> bool {
        self.accounts
            .get(key)
            .map(|(s, _)| *s)
            .or_else(|| self.gone.get(key).copied())
            .is_some_and(|held| held > slot)
    }

    /// The slot an account read at `slot` is held as of: the read's own
    /// while no stream is followed, else no later than the stream's clock.
    fn held_at(&self, slot: u64) -> u64 {
        if self.live {
            slot.min(self.stream_slot)
        } else {
            slot
        }
    }

    pub fn get(&self, key: &Pubkey) -> Option<&Indexed> {
        self.accounts.get(key).map(|(_, a)| a)
    }

    /// Every account held, in no order.
    pub fn accounts(&self) -> impl Iterator<Item = (&Pubkey, &Indexed)> {
        self.accounts.iter().map(|(k, (_, a))| (k, a))
    }

    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// Accounts read by address at `slot` (`None`: not the program's).
    /// While the stream is live, what was read is held as of the stream's
    /// clock, not `slot`: a node may stamp every update with its
    /// subscription's slot, so the stream's next update of an account,
    /// though newer than the read, can carry a slot below the read's and
    /// would be refused, leaving the index on the read until the next
    /// backfill. The stream delivers an account's updates in order, so one
    /// older than the read is followed by the newer ones. A close is held
    /// at `slot`: no update follows a close, so none older may undo it.
    pub fn apply_read(&mut self, slot: u64, read: Vec<(Pubkey, Option<Vec<u8>>)>) {
        let held_at = self.held_at(slot);
        for (key, data) in read {
            // An account that is not the program's and never was (a token
            // account a transaction wrote) leaves no trace.
            match data {
                Some(data) => {
                    if !self.is_newer_than(&key, slot) {
                        self.put(key, held_at, Some(&data));
                    }
                }
                None if self.accounts.contains_key(&key) => {
                    self.apply(key, slot, None);
                }
                None => {}
            }
        }
    }

    /// The highest slot applied.
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// The accounts `pick` finds in an entry and `keep` keeps, cloned,
    /// ordered by `order`.
    fn collect<T: Clone, K: Ord>(
        &self,
        pick: fn(&Indexed) -> Option<&T>,
        keep: impl Fn(&T) -> bool,
        order: impl Fn(&Pubkey, &T) -> K,
    ) -> Vec<(Pubkey, T)> {
        // Filtered before anything is cloned: what is left out costs a look.
        let mut out: Vec<(Pubkey, T)> = self
            .accounts()
            .filter_map(|(k, a)| pick(a).filter(|t| keep(t)).map(|t| (*k, t.clone())))
            .collect();
        out.sort_by_cached_key(|(k, t)| order(k, t));
        out
    }

    /// Every job, in submission order (as [`ChainClient::jobs`] gives them).
    pub fn jobs(&self) -> Vec<(Pubkey, Job)> {
        self.jobs_where(|_| true)
    }

    /// The jobs `keep` keeps, in submission order.
    pub fn jobs_where(&self, keep: impl Fn(&Job) -> bool) -> Vec<(Pubkey, Job)> {
        self.collect(Indexed::job, keep, |_, j| (j.submitted_at, j.job_id))
    }

    /// The jobs not [`settled`], in submission order: read without looking
    /// at the settled ones at all.
    pub fn unsettled_jobs(&self) -> Vec<(Pubkey, Job)> {
        self.unsettled_jobs_where(|_| true)
    }

    /// The jobs not [`settled`] that `keep` keeps, in submission order.
    pub fn unsettled_jobs_where(&self, keep: impl Fn(&Job) -> bool) -> Vec<(Pubkey, Job)> {
        let mut out: Vec<(Pubkey, Job)> = self
            .unsettled
            .iter()
            .filter_map(|key| {
                let job = self.get(key)?.job().filter(|j| keep(j))?;
                Some((*key, job.clone()))
            })
            .collect();
        out.sort_by_cached_key(|(_, j)| (j.submitted_at, j.job_id));
        out
    }

    /// The jobs held at `keys` (those the index does not hold as jobs
    /// are left out).
    pub fn jobs_at(&self, keys: &[Pubkey]) -> Vec<(Pubkey, Job)> {
        keys.iter()
            .filter_map(|key| Some((*key, self.get(key)?.job()?.clone())))
            .collect()
    }

    /// Every node, by provider and index (as [`ChainClient::nodes`]).
    pub fn nodes(&self) -> Vec<(Pubkey, Node)> {
        self.collect(Indexed::node, |_| true, |_, n| (n.provider, n.index))
    }

    pub fn providers(&self) -> Vec<(Pubkey, Provider)> {
        self.collect(Indexed::provider, |_| true, |k, _| *k)
    }

    /// Every verification, by job and interval (as
    /// [`ChainClient::verifications`]).
    pub fn verifications(&self) -> Vec<(Pubkey, Verification)> {
        self.verifications_where(|_| true)
    }

    /// The verifications `keep` keeps, by job and interval.
    pub fn verifications_where(
        &self,
        keep: impl Fn(&Verification) -> bool,
    ) -> Vec<(Pubkey, Verification)> {
        self.collect(Indexed::verification, keep, |_, v| (v.job, v.interval))
    }

    pub fn segments(&self) -> Vec<(Pubkey, Segment)> {
        self.collect(Indexed::segment, |_| true, |k, _| *k)
    }

    /// The deployment's Config.
    pub fn config(&self) -> Option<Config> {
        match self.get(&pda::config()) {
            Some(Indexed::Config(c)) => Some(c.clone()),
            _ => None,
        }
    }
}

/// What a source of the program's accounts gives the index: a stream of
/// updates, each with the slot it is from, and of the slots the chain
/// reaches (the index's clock: a stream with no slot for [`SILENT_AFTER`]
/// is behind, or dead); and reads of every account of one kind with the
/// slot they were read at.
pub trait IndexSource: Send + Sync + 'static {
    /// Events from now on; `Err` when the stream cannot be had.
    fn subscribe(
        &self,
    ) -> impl Future<Output = Result<futures_util::stream::BoxStream<'static, Event>, ChainError>> + Send;

    fn backfill(
        &self,
        kind: AccountKind,
    ) -> impl Future<Output = Result<(u64, Vec<(Pubkey, Vec<u8>)>), ChainError>> + Send;
}

/// What a stream tells the index.
#[derive(Clone, Debug)]
pub enum Event {
    Account(Update),
    /// The chain reached this slot.
    Slot(u64),
    /// The stream answered a keep-alive: it is connected, though it may
    /// tell no slot (a gRPC server whose node sends no slot statuses it
    /// can pass on).
    Alive,
}

/// A stream that tells nothing for this long, not even a new slot or an
/// answer to a keep-alive, is behind or dead: the index stops serving and
/// subscribes again.
pub const SILENT_AFTER: Duration = Duration::from_secs(3);

/// One account's state at a slot; `data: None` when it left the program.
/// The follower takes the latest [`Event::Slot`] as the least an update's
/// slot can be: a node may stamp every update of a subscription with the
/// slot the subscription was made at (surfpool 1.6 does).
#[derive(Clone, Debug)]
pub struct Update {
    pub key: Pubkey,
    pub slot: u64,
    pub data: Option<Vec<u8>>,
}

use std::future::Future;

/// The program's accounts in memory, kept current by a follower task (see
/// the module). Clones share one index; the task stops with the last.
#[derive(Clone)]
pub struct ProgramIndex {
    state: Arc<RwLock<IndexState>>,
    /// Told when the stream brings a job waiting for a node (Pending, or
    /// Recovering once taken off its node): what a scheduler places at once
    /// rather than at its next tick.
    to_place: Arc<tokio::sync::Notify>,
    _task: Arc<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ProgramIndex {
    /// An index of the program's accounts from `source`, followed from now
    /// on by a task of the current runtime. It is not live until its first
    /// subscription and backfill are done.
    pub fn follow<S: IndexSource>(source: S) -> Self {
        Self::follow_every(source, RECONCILE_EVERY)
    }

    /// As [`Self::follow`], backfilling again every `reconcile`.
    pub fn follow_every<S: IndexSource>(source: S, reconcile: Duration) -> Self {
        let state = Arc::new(RwLock::new(IndexState::default()));
        let to_place = Arc::new(tokio::sync::Notify::new());
        let task = tokio::spawn(run(
            source,
            Arc::clone(&state),
            Arc::clone(&to_place),
            reconcile,
        ));
        Self {
            state,
            to_place,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// Returns once the stream has brought a job waiting for a node
    /// (Pending or Recovering) since the last call returned: at once when one
    /// came in between, the news kept however many jobs it stands for.
    pub async fn job_to_place(&self) {
        self.to_place.notified().await;
    }

    /// Whether the index is subscribed and backfilled: what it holds is the
    /// chain as of the stream's latest update.
    pub fn is_live(&self) -> bool {
        self.read(|s| s.live)
    }

    /// Reads the index under its lock.
    pub fn read<T>(&self, f: impl FnOnce(&IndexState) -> T) -> T {
        f(&self.state.read().expect("program index"))
    }

    /// What `f` reads of the index while it is live; `None` while it is
    /// not (the caller reads the chain instead).
    pub fn live<T>(&self, f: impl FnOnce(&IndexState) -> T) -> Option<T> {
        let state = self.state.read().expect("program index");
        state.live.then(|| f(&state))
    }

    /// Reads the program's accounts at `keys` by address (one
    /// `getMultipleAccounts` per 100) and applies what it finds, a closed
    /// account included: what a process that has just written them calls,
    /// so that its next read of the index shows its own transaction. A
    /// program subscription is not told of an account that is closed (it
    /// leaves the program), so this is also how the index learns of the
    /// closes its owner makes; others' show at the next backfill.
    pub async fn refresh(&self, client: &ChainClient, keys: &[Pubkey]) -> Result<(), ChainError> {
        let (slot, read) = client.program_owned_at(keys).await?;
        let mut state = self.state.write().expect("program index");
        state.apply_read(slot, read);
        Ok(())
    }
}

async fn run<S: IndexSource>(
    source: S,
    state: Arc<RwLock<IndexState>>,
    to_place: Arc<tokio::sync::Notify>,
    reconcile: Duration,
) {
    let mut wait = RESUBSCRIBE_FIRST;
    loop {
        match follow_once(&source, &state, &to_place, reconcile).await {
            Ok(()) => {
                tracing::warn!("the program subscription ended; subscribing and backfilling again");
                wait = RESUBSCRIBE_FIRST;
            }
            Err(error) => {
                tracing::warn!(%error, retry_in = ?wait, "cannot follow the program's accounts");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RESUBSCRIBE_MOST);
            }
        }
    }
}

/// One subscription: subscribe, backfill, then apply the stream (and
/// backfill again every `reconcile`) until it ends or falls silent.
async fn follow_once<S: IndexSource>(
    source: &S,
    state: &RwLock<IndexState>,
    to_place: &tokio::sync::Notify,
    reconcile: Duration,
) -> Result<(), ChainError> {
    let mut updates = source.subscribe().await?;
    state.write().expect("program index").stream_slot = 0;
    // The latest slot this subscription has told of: the floor of an
    // update's slot, since some nodes (surfpool) give every update of a
    // subscription the slot it was made at. Kept across reconciles, which
    // hold what they read no later than it (`IndexState::backfill`).
    let mut clock = 0u64;
    let result = async {
        loop {
            // Subscribed first, so that nothing changed during the backfill
            // is missed: it waits in the stream and is applied after.
            backfill(source, state).await?;
            let until = tokio::time::Instant::now() + reconcile;
            loop {
                tokio::select! {
                    event = tokio::time::timeout(SILENT_AFTER, updates.next()) => match event {
                        Ok(Some(Event::Account(u))) => {
                            let mut s = state.write().expect("program index");
                            if s.apply(u.key, u.slot.max(clock), u.data.as_deref()) {
                                s.updates += 1;
                                let waiting = s.get(&u.key).and_then(Indexed::job).is_some_and(|j| {
                                    matches!(
                                        j.state,
                                        JobState::Pending { .. } | JobState::Recovering { .. }
                                    )
                                });
                                if waiting {
                                    to_place.notify_one();
                                }
                            }
                        }
                        Ok(Some(Event::Slot(slot))) => {
                            clock = clock.max(slot);
                            let mut s = state.write().expect("program index");
                            s.slot = s.slot.max(slot);
                            s.stream_slot = clock;
                        }
                        Ok(Some(Event::Alive)) => {}
                        Ok(None) => return Ok(()),
                        Err(_) => {
                            tracing::warn!(
                                silent = ?SILENT_AFTER,
                                "the program subscription fell silent (no new slot); resyncing"
                            );
                            return Ok(());
                        }
                    },
                    _ = tokio::time::sleep_until(until) => break,
                }
            }
        }
    }
    .await;
    state.write().expect("program index").live = false;
    result
}

async fn backfill<S: IndexSource>(
    source: &S,
    state: &RwLock<IndexState>,
) -> Result<(), ChainError> {
    // One scan per kind, every kind.
    for kind in AccountKind::ALL {
        let (slot, accounts) = source.backfill(kind).await?;
        state
            .write()
            .expect("program index")
            .backfill(kind, slot, &accounts);
    }
    let mut s = state.write().expect("program index");
    s.backfills += 1;
    s.live = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anchor_lang::AccountSerialize;

    /// A Segment account's data, told apart by its generation.
    fn segment(generation: u32) -> Vec<u8> {
        let segment = Segment {
            job: Pubkey::new_unique(),
            provider: Pubkey::new_unique(),
            provider_payout: Pubkey::new_unique(),
            node: Pubkey::new_unique(),
            generation,
            commission_bps: 0,
            gross: 0,
            fees_paid: 0,
            state: mcjs::state::SegmentState::OnNode,
            open_verifications: 0,
            rent_payer: Pubkey::new_unique(),
            bump: 0,
            start: None,
            verified_to: None,
            gpu_model: "a100-sxm4-80gb".into(),
            earned: 0,
            verified_earned: 0,
            withheld: 0,
            disproven: false,
        };
        let mut out = Vec::new();
        segment.try_serialize(&mut out).unwrap();
        out
    }

    fn generation(index: &IndexState, key: &Pubkey) -> Option<u32> {
        match index.get(key)? {
            Indexed::Segment(s) => Some(s.generation),
            _ => None,
        }
    }

    #[test]
    fn an_update_never_replaces_a_newer_one_and_a_closed_account_stays_closed() {
        let key = Pubkey::new_unique();
        let mut index = IndexState::default();
        assert!(index.apply(key, 10, Some(&segment(1))));
        assert!(!index.apply(key, 9, Some(&segment(2))), "older");
        assert_eq!(generation(&index, &key), Some(1));
        assert!(index.apply(key, 12, None));
        assert!(index.get(&key).is_none());
        assert!(
            !index.apply(key, 11, Some(&segment(3))),
            "an update queued before the close does not bring it back"
        );
        assert!(index.get(&key).is_none());
        assert_eq!(index.slot(), 12);
    }

    #[test]
    fn a_read_by_address_ahead_of_the_streams_clock_does_not_hide_the_next_update() {
        let (key, closed) = (Pubkey::new_unique(), Pubkey::new_unique());
        let mut index = IndexState::default();
        index.backfill(AccountKind::Segment, 5, &[(closed, segment(7))]);
        index.live = true;
        // The stream has told of slot 8; a read by address answers at 10.
        index.stream_slot = 8;
        index.apply_read(10, vec![(key, Some(segment(1))), (closed, None)]);
        assert_eq!(generation(&index, &key), Some(1));
        // The next change, at slot 11, comes stamped with the subscription's
        // slot: its effective slot is the stream's clock, 8.
        assert!(
            index.apply(key, 8, Some(&segment(2))),
            "newer than the read"
        );
        assert_eq!(generation(&index, &key), Some(2));
        // A close read at 10 is not undone by an update the stream sent
        // before it.
        assert!(!index.apply(closed, 8, Some(&segment(7))));
        assert!(index.get(&closed).is_none());
        // Not live (no stream to follow): a read is held at its own slot.
        index.live = false;
        index.apply_read(20, vec![(key, Some(segment(3)))]);
        assert!(!index.apply(key, 19, Some(&segment(4))));
        assert_eq!(generation(&index, &key), Some(3));
    }

    #[test]
    fn a_reconcile_ahead_of_the_streams_clock_does_not_hide_the_next_update() {
        let (key, gone, newer) = (
            Pubkey::new_unique(),
            Pubkey::new_unique(),
            Pubkey::new_unique(),
        );
        let mut index = IndexState::default();
        index.backfill(
            AccountKind::Segment,
            5,
            &[(key, segment(1)), (gone, segment(4))],
        );
        index.live = true;
        index.stream_slot = 8;
        // Seen by the stream (a node that stamps real slots) after the
        // reconcile's read.
        index.apply(newer, 12, Some(&segment(5)));
        // The reconcile reads at 10: the account changed, one closed.
        index.backfill(
            AccountKind::Segment,
            10,
            &[(key, segment(2)), (newer, segment(0))],
        );
        assert_eq!(generation(&index, &key), Some(2));
        assert_eq!(generation(&index, &newer), Some(5), "newer than the read");
        assert!(index.get(&gone).is_none());
        assert_eq!(index.slot(), 12);
        // The next change comes stamped with the subscription's slot: its
        // effective slot is the stream's clock, 8, below the read's.
        assert!(
            index.apply(key, 8, Some(&segment(3))),
            "newer than the read"
        );
        assert_eq!(generation(&index, &key), Some(3));
        // A close is held at the read's slot: an older update cannot undo it.
        assert!(!index.apply(gone, 8, Some(&segment(4))));
        assert!(index.get(&gone).is_none());
    }

    #[test]
    fn a_backfill_drops_what_it_does_not_list_and_keeps_what_is_newer() {
        let (a, b, c) = (
            Pubkey::new_unique(),
            Pubkey::new_unique(),
            Pubkey::new_unique(),
        );
        let mut index = IndexState::default();
        index.apply(a, 5, Some(&segment(1)));
        index.apply(b, 5, Some(&segment(2)));
        // Seen by the stream after the backfill's read.
        index.apply(c, 30, Some(&segment(3)));
        index.backfill(AccountKind::Segment, 20, &[(a, segment(10))]);
        assert_eq!(generation(&index, &a), Some(10));
        assert!(index.get(&b).is_none(), "closed while unwatched");
        assert_eq!(generation(&index, &c), Some(3), "newer than the backfill");
        // A backfill of another kind leaves segments alone.
        index.backfill(AccountKind::Node, 25, &[]);
        assert_eq!(index.segments().len(), 2);
        // Undecodable data is held (for the slot order) but is no segment.
        index.apply(b, 40, Some(&[1, 2, 3]));
        assert!(matches!(index.get(&b), Some(Indexed::Other)));
        assert_eq!(index.segments().len(), 2);
    }
}
