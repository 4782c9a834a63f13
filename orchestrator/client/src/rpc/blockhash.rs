//! The recent blockhash a client signs with, shared by its transactions:
//! one `getLatestBlockhash` serves every transaction signed in the next
//! [`BLOCKHASH_REUSE`], instead of one each. A blockhash is accepted for
//! 150 slots (about 60 s at 400 ms), so one at most 20 s old leaves a
//! transaction 40 s or more to land before it is re-signed.
//!
//! Two identical transactions signed with the same blockhash have the same
//! signature, and a signature lands at most once: a transaction signed
//! again (a retry of a refused one, the same instruction sent twice on
//! purpose) is told apart by [`Recent::first_use`] and signed with a newer
//! blockhash.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use solana_hash::Hash;
use solana_signature::Signature;

/// How long a fetched blockhash is signed with.
pub const BLOCKHASH_REUSE: Duration = Duration::from_secs(20);

/// A blockhash fetched ahead of a send ([`crate::ChainClient::warm`]) is
/// fetched when the held one has less than this left to be signed with.
pub const WARM_FOR: Duration = Duration::from_secs(10);

/// The blockhash held, when it was fetched, and what was signed with it.
#[derive(Debug, Default)]
pub(super) struct Recent {
    held: Option<(Hash, Instant)>,
    signed: HashSet<Signature>,
}

impl Recent {
    /// The held blockhash, if fetched less than [`BLOCKHASH_REUSE`] before `now`.
    pub fn reusable(&self, now: Instant) -> Option<Hash> {
        self.held
            .filter(|(_, at)| now.saturating_duration_since(*at) < BLOCKHASH_REUSE)
            .map(|(hash, _)| hash)
    }

    /// Whether a send expected soon would find no held blockhash, or one
    /// with less than [`WARM_FOR`] of its reuse left.
    pub fn needs_warming(&self, now: Instant) -> bool {
        self.held
            .is_none_or(|(_, at)| now.saturating_duration_since(at) + WARM_FOR >= BLOCKHASH_REUSE)
    }

    /// `hash` was fetched at `now`.
    pub fn hold(&mut self, hash: Hash, now: Instant) {
        if self.held.is_none_or(|(held, _)| held != hash) {
            self.signed.clear();
        }
        self.held = Some((hash, now));
    }

    /// Whether `signature`, made with `hash`, is new: false when the same
    /// transaction was already signed with it.
    pub fn first_use(&mut self, hash: Hash, signature: Signature) -> bool {
        if self.held.is_some_and(|(held, _)| held == hash) {
            self.signed.insert(signature)
        } else {
            true
        }
    }

    /// Forgets the held blockhash: the next transaction fetches one.
    pub fn drop_held(&mut self) {
        self.held = None;
        self.signed.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blockhash_is_reused_for_20_s_and_a_repeated_transaction_is_told_apart() {
        let t0 = Instant::now();
        let (a, b) = (Hash::new_from_array([1; 32]), Hash::new_from_array([2; 32]));
        let (s1, s2) = (Signature::from([1; 64]), Signature::from([2; 64]));
        let mut recent = Recent::default();
        assert_eq!(recent.reusable(t0), None, "nothing fetched yet");
        assert!(recent.needs_warming(t0), "nothing to sign with");
        recent.hold(a, t0);
        assert_eq!(recent.reusable(t0 + Duration::from_secs(19)), Some(a));
        assert_eq!(
            recent.reusable(t0 + BLOCKHASH_REUSE),
            None,
            "too old to sign with"
        );
        assert!(recent.needs_warming(t0 + Duration::from_secs(10)));
        assert!(!recent.needs_warming(t0 + Duration::from_secs(9)));
        assert!(recent.first_use(a, s1));
        assert!(recent.first_use(a, s2));
        assert!(
            !recent.first_use(a, s1),
            "the same transaction with the same blockhash"
        );
        // Fetched again in the same slot: what was signed still counts.
        recent.hold(a, t0 + Duration::from_secs(1));
        assert!(!recent.first_use(a, s1));
        // A newer blockhash: every transaction is new again.
        recent.hold(b, t0 + Duration::from_secs(2));
        assert!(recent.first_use(b, s1));
        recent.drop_held();
        assert_eq!(recent.reusable(t0 + Duration::from_secs(2)), None);
    }
}
