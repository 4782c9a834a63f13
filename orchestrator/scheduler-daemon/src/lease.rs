//! Which scheduler acts: the lease the program arbitrates
//! (`programs/mcjs/src/state/lease.rs`). Several schedulers may run; the
//! one that holds the lease places, reports and opens checks, the others
//! follow the chain and serve heartbeats and the store gateway, ready to
//! take over once the holder stops renewing.
//!
//! Pure decisions on what one read of the lease shows ([`LeaseView`]); the
//! shell reads it every [`LEASE_CHECK_EVERY`] and sends what [`lease_step`]
//! says (`crate::watch::hold_lease`).

use std::sync::Mutex;
use std::time::Duration;

use mcjs_client::Pubkey;
use mcjs_client::rpc::LeaseView;

/// How often a scheduler reads the lease (one `getMultipleAccounts`). A
/// standby takes an expired lease within this of its expiry, plus one
/// confirmation.
pub const LEASE_CHECK_EVERY: Duration = Duration::from_secs(1);

/// What one read of the lease asks of this scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseStep {
    /// It holds the lease, which needs no renewal yet (more than half of
    /// it left).
    Lead { term: u64 },
    /// It holds the lease and half of it has run: renew.
    Renew { term: u64 },
    /// Another member's lease expired, or its holder left the members: take it.
    Take { from: Pubkey, term: u64 },
    /// Another member holds a running lease.
    Follow { holder: Pubkey, term: u64 },
    /// This key is not a member: it may never act.
    Outsider,
}

/// What `me` should do about the lease `view` shows.
pub fn lease_step(view: &LeaseView, me: &Pubkey) -> LeaseStep {
    let LeaseView {
        lease,
        config,
        slot,
    } = view;
    if !lease.is_member(config, me) {
        return LeaseStep::Outsider;
    }
    let term = lease.term;
    if lease.holder == *me {
        // Renewed even without standbys: a live lease is what tells the
        // program a scheduler acts, and so holds strangers' reports off
        // while this scheduler excuses an outage (`SchedulerLease::lapsed`).
        let left = lease.expires_slot.saturating_sub(*slot);
        return if left <= lease.lease_slots / 2 {
            LeaseStep::Renew { term }
        } else {
            LeaseStep::Lead { term }
        };
    }
    if *slot > lease.expires_slot || !lease.is_member(config, &lease.holder) {
        LeaseStep::Take {
            from: lease.holder,
            term,
        }
    } else {
        LeaseStep::Follow {
            holder: lease.holder,
            term,
        }
    }
}

/// This scheduler's part, as the last read of the lease showed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseRole {
    /// It holds the lease in `term` (0: not read yet, as a lone scheduler
    /// that has always held it).
    Leader { term: u64 },
    /// Another member leads; this one follows.
    Standby { holder: Pubkey, term: u64 },
    /// Not a member of the lease: it serves, it never acts.
    Outsider,
}

impl LeaseRole {
    pub fn leads(&self) -> bool {
        matches!(self, LeaseRole::Leader { .. })
    }

    /// The role after a read showed `step` (a renewal or a takeover that
    /// landed leads in the term it renewed or started).
    pub fn after(step: LeaseStep, landed: bool) -> Self {
        match step {
            LeaseStep::Lead { term } | LeaseStep::Renew { term } => LeaseRole::Leader { term },
            LeaseStep::Take { term, .. } if landed => LeaseRole::Leader { term: term + 1 },
            LeaseStep::Take { from, term } => LeaseRole::Standby { holder: from, term },
            LeaseStep::Follow { holder, term } => LeaseRole::Standby { holder, term },
            LeaseStep::Outsider => LeaseRole::Outsider,
        }
    }
}

/// The role the rounds act on, shared with the task that holds the lease.
#[derive(Debug)]
pub struct Leading(Mutex<LeaseRole>);

impl Default for Leading {
    /// A scheduler leads until a read of the lease says otherwise.
    fn default() -> Self {
        Self(Mutex::new(LeaseRole::Leader { term: 0 }))
    }
}

impl Leading {
    pub fn new(role: LeaseRole) -> Self {
        Self(Mutex::new(role))
    }

    pub fn role(&self) -> LeaseRole {
        *self.0.lock().expect("leading")
    }

    /// Records `role`; returns the one it replaced.
    pub fn set(&self, role: LeaseRole) -> LeaseRole {
        std::mem::replace(&mut *self.0.lock().expect("leading"), role)
    }
}
