//! What the store gateway knows of each node from the chain, kept a moment.
//!
//! A node's request is authorised against its operator key, the jobs
//! assigned to it and the checks it owes. Read for every request, that was
//! three chain calls (two of them `getProgramAccounts`) per store request;
//! a checkpoint upload is several requests, so on a rate-limited endpoint
//! the gateway spent the scheduler's whole budget and its refusals reached
//! the agents as "store unavailable". A view is read once and then serves
//! every request of that node for [`VIEW_FRESH`].
//!
//! When the chain cannot be read, a view up to [`VIEW_STALE_ON_ERROR`] old
//! still serves: an outage of the scheduler's endpoint then does not stop
//! the nodes' uploads. That widens nothing that matters: the URLs the
//! gateway signs are valid for [`mcjs_protocol::store::GRANT_TTL_SECS`]
//! (300 s) anyway, a node fenced off a job cannot attest what it writes
//! after (the program checks the generation), and a restore checks every
//! checkpoint against the hash attested on chain.
//!
//! Only nodes in the scheduler's directory get this far, so the map is
//! bounded by the fleet; entries past the stale bound are dropped as new
//! ones come in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcjs::state::Job;
use mcjs_client::Pubkey;

use crate::store_gate::Checking;

/// How long a view serves without asking the chain again.
pub const VIEW_FRESH: Duration = Duration::from_secs(2);
/// A view that refuses a request is read again if it is older than this:
/// the chain may have given the node a job or a check since. A node whose
/// requests are refused on every read thus costs at most two reads a
/// second (and its requests are rate-limited per signer before that).
pub const VIEW_RECHECK: Duration = Duration::from_millis(500);
/// How old a view may be and still serve while the chain cannot be read.
pub const VIEW_STALE_ON_ERROR: Duration = Duration::from_secs(30);

/// A node as the chain said at one moment.
#[derive(Debug, Clone)]
pub struct NodeView {
    /// The key that speaks for the node.
    pub operator: Pubkey,
    /// The jobs assigned to it.
    pub jobs: Vec<(Pubkey, Job)>,
    /// The open checks it has not answered.
    pub checking: Vec<Checking>,
    /// The jobs it stands by for ([`crate::standby`]), as the scheduler's
    /// last round read them.
    pub standby: Vec<(Pubkey, Job)>,
}

#[derive(Default)]
pub struct NodeViews {
    views: Mutex<HashMap<Pubkey, (Instant, Arc<NodeView>)>>,
    /// When each node's accounts were last read into the index after a
    /// refusal ([`NodeViews::may_refresh`]).
    refreshed: Mutex<HashMap<Pubkey, Instant>>,
}

impl NodeViews {
    /// The node's view if read within [`VIEW_FRESH`] of `now`.
    pub fn fresh(&self, node: &Pubkey, now: Instant) -> Option<Arc<NodeView>> {
        self.within(node, now, VIEW_FRESH)
    }

    /// The node's view if read within `age` of `now`.
    pub fn read_within(&self, node: &Pubkey, now: Instant, age: Duration) -> Option<Arc<NodeView>> {
        self.within(node, now, age)
    }

    /// The node's view if read within [`VIEW_STALE_ON_ERROR`] of `now`: what
    /// serves when the chain cannot be read.
    pub fn stale(&self, node: &Pubkey, now: Instant) -> Option<Arc<NodeView>> {
        self.within(node, now, VIEW_STALE_ON_ERROR)
    }

    fn within(&self, node: &Pubkey, now: Instant, age: Duration) -> Option<Arc<NodeView>> {
        let views = self.views.lock().expect("node views");
        let (at, view) = views.get(node)?;
        (now.saturating_duration_since(*at) <= age).then(|| Arc::clone(view))
    }

    /// Keeps what the chain just said of `node`.
    pub fn put(&self, node: Pubkey, view: NodeView, now: Instant) -> Arc<NodeView> {
        let view = Arc::new(view);
        let mut views = self.views.lock().expect("node views");
        views.retain(|_, (at, _)| now.saturating_duration_since(*at) <= VIEW_STALE_ON_ERROR);
        views.insert(node, (now, Arc::clone(&view)));
        view
    }

    /// Whether a refusal of `node` may read its accounts from the chain
    /// into the index now: at most once per [`VIEW_RECHECK`], as a view
    /// read from the chain is. Records `now` when it may.
    pub fn may_refresh(&self, node: &Pubkey, now: Instant) -> bool {
        let mut refreshed = self.refreshed.lock().expect("node refreshes");
        if refreshed
            .get(node)
            .is_some_and(|at| now.saturating_duration_since(*at) < VIEW_RECHECK)
        {
            return false;
        }
        refreshed.retain(|_, at| now.saturating_duration_since(*at) < VIEW_RECHECK);
        refreshed.insert(*node, now);
        true
    }

    /// How many nodes have a view kept.
    pub fn len(&self) -> usize {
        self.views.lock().expect("node views").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(operator: Pubkey) -> NodeView {
        NodeView {
            operator,
            jobs: Vec::new(),
            checking: Vec::new(),
            standby: Vec::new(),
        }
    }

    #[test]
    fn a_view_is_fresh_for_two_seconds_and_serves_an_outage_for_thirty() {
        let views = NodeViews::default();
        let (node, operator) = (Pubkey::new_unique(), Pubkey::new_unique());
        let t0 = Instant::now();
        assert!(views.fresh(&node, t0).is_none(), "nothing read yet");
        assert!(views.stale(&node, t0).is_none());
        views.put(node, view(operator), t0);
        assert_eq!(views.fresh(&node, t0).unwrap().operator, operator);
        assert!(views.fresh(&node, t0 + VIEW_FRESH).is_some());
        let later = t0 + VIEW_FRESH + Duration::from_millis(1);
        assert!(views.fresh(&node, later).is_none(), "read again after 2 s");
        assert!(views.stale(&node, later).is_some(), "kept for an outage");
        let too_old = t0 + VIEW_STALE_ON_ERROR + Duration::from_millis(1);
        assert!(views.stale(&node, too_old).is_none(), "not past 30 s");
        // Another node's view is its own.
        assert!(views.fresh(&Pubkey::new_unique(), t0).is_none());
    }

    #[test]
    fn a_node_is_refreshed_at_most_once_per_recheck_interval() {
        let views = NodeViews::default();
        let (a, b) = (Pubkey::new_unique(), Pubkey::new_unique());
        let t0 = Instant::now();
        assert!(views.may_refresh(&a, t0));
        assert!(!views.may_refresh(&a, t0 + VIEW_RECHECK / 2));
        assert!(
            views.may_refresh(&b, t0 + VIEW_RECHECK / 2),
            "each node its own"
        );
        assert!(views.may_refresh(&a, t0 + VIEW_RECHECK));
    }

    #[test]
    fn views_past_the_stale_bound_are_dropped_as_new_ones_come() {
        let views = NodeViews::default();
        let t0 = Instant::now();
        for _ in 0..100 {
            views.put(Pubkey::new_unique(), view(Pubkey::new_unique()), t0);
        }
        assert_eq!(views.len(), 100);
        let later = t0 + VIEW_STALE_ON_ERROR + Duration::from_secs(1);
        let node = Pubkey::new_unique();
        views.put(node, view(Pubkey::new_unique()), later);
        assert_eq!(views.len(), 1, "only the view read now is kept");
        assert!(views.fresh(&node, later).is_some());
    }
}
