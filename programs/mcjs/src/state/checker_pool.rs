//! The checkers of one GPU model, from which the program draws who checks
//! an interval.
//!
//! A verified job declares bitwise determinism, which holds only within a
//! hardware class, so an interval is checked by nodes of the attester's GPU
//! model. Each model has one `CheckerPool`: at most one node per provider
//! (entered by that node's operator key, renewed by its agent), weighted by
//! the stake its provider had committed when it entered. `open_verification`,
//! `replace_checker` and `open_second_round` draw from it by a seed nobody
//! chooses ([`draw_seed`]) and take only the checkers drawn: the scheduler
//! may name them in either role, and may pass over a drawn member only by
//! showing its accounts, which must prove that it cannot check (offline, too
//! little stake, another GPU model now, unfit for the job). A member whose
//! agent has not renewed its entry for a day is passed over without proof.

use anchor_lang::prelude::*;

use crate::state::MAX_GPU_MODEL_LEN;

/// The most members a pool holds; a newcomer then takes the place of a
/// lapsed member, or of the lightest one if it outweighs it.
pub const MAX_POOL_MEMBERS: usize = 64;

/// How long an entry stands without being renewed: a node whose agent has
/// not renewed it for this long is not drawn (a registered node whose agent
/// is gone would only stay silent).
pub const POOL_MEMBERSHIP_SECS: i64 = 86_400;

/// How often an agent renews its node's entry.
pub const POOL_RENEW_SECS: i64 = POOL_MEMBERSHIP_SECS / 4;

/// The most drawn members one instruction may pass over (each shown by its
/// node's and provider's accounts, which a transaction must carry).
pub const MAX_DRAW_SKIPS: usize = 8;

#[account]
#[derive(Debug, PartialEq, Eq)]
pub struct CheckerPool {
    /// The GPU model (a node's `hardware.gpu_model`): also its address's seed.
    pub gpu_model: String,
    pub bump: u8,
    pub members: Vec<PoolMember>,
}

/// One provider's place in a pool.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct PoolMember {
    pub provider: Pubkey,
    /// The node that checks for it.
    pub node: Pubkey,
    /// The provider's committed stake when it entered or last renewed: its
    /// weight in the draw. A provider whose stake has fallen below it since
    /// is passed over (its accounts show it) until it renews.
    pub weight: u64,
    pub renewed_at: i64,
}

impl PoolMember {
    /// Whether the entry stands at `now`.
    pub fn live(&self, now: i64) -> bool {
        now <= self.renewed_at.saturating_add(POOL_MEMBERSHIP_SECS)
    }
}

/// The seed of a draw: `sha256(tag ‖ parts…)`.
pub fn draw_seed(tag: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
    all.push(tag);
    all.extend_from_slice(parts);
    solana_sha256_hasher::hashv(&all).to_bytes()
}

impl CheckerPool {
    /// The account's size holding `members` members.
    pub const fn space(members: usize) -> usize {
        8 + (4 + MAX_GPU_MODEL_LEN) + 1 + 4 + members * PoolMember::INIT_SPACE
    }

    /// Enters (or renews) `member`'s provider: its entry is replaced; a new
    /// provider takes a free place, else a lapsed member's, else the
    /// lightest member's if it outweighs it.
    pub fn enter(&mut self, member: PoolMember, now: i64) -> Result<()> {
        if let Some(entry) = self
            .members
            .iter_mut()
            .find(|m| m.provider == member.provider)
        {
            *entry = member;
            return Ok(());
        }
        if self.members.len() < MAX_POOL_MEMBERS {
            self.members.push(member);
            return Ok(());
        }
        let lapsed = self.members.iter().position(|m| !m.live(now));
        let lightest = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.weight < member.weight)
            .min_by_key(|(_, m)| m.weight)
            .map(|(i, _)| i);
        let at = lapsed
            .or(lightest)
            .ok_or(crate::errors::McjsError::CheckerPoolFull)?;
        self.members[at] = member;
        Ok(())
    }

    /// The member the `n`th draw of `seed` lands on: among the live members
    /// whose provider is not in `exclude`, each as likely as its weight, by
    /// the first eight bytes of `sha256("mcjs-checker-draw/1" ‖ seed ‖ n)`
    /// read as a little-endian u64, modulo the total weight. `None` when no
    /// such member has weight.
    pub fn draw(&self, seed: &[u8; 32], n: u8, exclude: &[Pubkey], now: i64) -> Option<usize> {
        let eligible =
            |m: &PoolMember| m.live(now) && m.weight > 0 && !exclude.contains(&m.provider);
        let total: u128 = self
            .members
            .iter()
            .filter(|m| eligible(m))
            .map(|m| u128::from(m.weight))
            .sum();
        if total == 0 {
            return None;
        }
        let digest = draw_seed(b"mcjs-checker-draw/1", &[seed, &[n]]);
        let mut word = [0u8; 8];
        word.copy_from_slice(&digest[..8]);
        let mut at = u128::from(u64::from_le_bytes(word)) % total;
        for (i, m) in self.members.iter().enumerate() {
            if !eligible(m) {
                continue;
            }
            if at < u128::from(m.weight) {
                return Some(i);
            }
            at -= u128::from(m.weight);
        }
        None
    }

    /// Draws `picks` checkers from `seed`, never of a provider in `exclude`
    /// (each drawn member is added to it): draw after draw, `judge` says
    /// whether the drawn member checks (`true`) or is passed over
    /// (`false`), at most [`MAX_DRAW_SKIPS`] times. The members taken, in
    /// the order drawn; `None` when the pool runs out first.
    pub fn walk<E>(
        &self,
        seed: &[u8; 32],
        picks: usize,
        exclude: &mut Vec<Pubkey>,
        now: i64,
        mut judge: impl FnMut(&PoolMember) -> core::result::Result<bool, E>,
    ) -> core::result::Result<Option<Vec<PoolMember>>, E> {
        let mut taken = Vec::with_capacity(picks);
        let mut skipped = 0usize;
        let mut n: u8 = 0;
        while taken.len() < picks {
            let Some(i) = self.draw(seed, n, exclude, now) else {
                return Ok(None);
            };
            n = n.wrapping_add(1);
            let member = self.members[i];
            exclude.push(member.provider);
            if judge(&member)? {
                taken.push(member);
            } else {
                skipped += 1;
                if skipped > MAX_DRAW_SKIPS {
                    return Ok(None);
                }
            }
        }
        Ok(Some(taken))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(i: u8, weight: u64, renewed_at: i64) -> PoolMember {
        PoolMember {
            provider: Pubkey::new_from_array([i; 32]),
            node: Pubkey::new_from_array([i.wrapping_add(100); 32]),
            weight,
            renewed_at,
        }
    }

    fn pool(members: Vec<PoolMember>) -> CheckerPool {
        CheckerPool {
            gpu_model: "a100-sxm4-80gb".into(),
            bump: 255,
            members,
        }
    }

    #[test]
    fn draws_follow_the_weights_and_skip_the_excluded_and_the_lapsed() {
        let p = pool(vec![
            member(1, 100, 0),
            member(2, 300, 0),
            member(3, 600, -POOL_MEMBERSHIP_SECS - 1),
        ]);
        let mut hits = [0u32; 3];
        for s in 0..2_000u32 {
            let seed = draw_seed(b"t", &[&s.to_le_bytes()]);
            let i = p.draw(&seed, 0, &[], 0).unwrap();
            hits[i] += 1;
        }
        assert_eq!(hits[2], 0, "a lapsed member is never drawn");
        // One in four draws lands on the lighter member, give or take.
        assert!((400..600).contains(&hits[0]), "{hits:?}");
        let only_two = p.draw(&[7; 32], 0, &[Pubkey::new_from_array([1; 32])], 0);
        assert_eq!(only_two, Some(1));
        assert_eq!(
            p.draw(
                &[7; 32],
                0,
                &[
                    Pubkey::new_from_array([1; 32]),
                    Pubkey::new_from_array([2; 32])
                ],
                0
            ),
            None
        );
    }

    #[test]
    fn a_walk_passes_over_what_its_judge_refuses_within_its_bound() {
        let p = pool((1..=12).map(|i| member(i, 10, 0)).collect());
        let mut exclude = vec![Pubkey::new_from_array([1; 32])];
        let taken = p
            .walk::<()>(&[3; 32], 2, &mut exclude, 0, |m| {
                Ok(m.provider.to_bytes()[0] % 2 == 0)
            })
            .unwrap()
            .unwrap();
        assert_eq!(taken.len(), 2);
        assert!(taken.iter().all(|m| m.provider.to_bytes()[0] % 2 == 0));
        assert_ne!(taken[0].provider, taken[1].provider);
        let none = p
            .walk::<()>(&[3; 32], 1, &mut Vec::new(), 0, |_| Ok(false))
            .unwrap();
        assert_eq!(none, None, "at most MAX_DRAW_SKIPS passed over");
    }

    #[test]
    fn a_full_pool_takes_a_newcomer_in_a_lapsed_or_lighter_place_only() {
        let mut p = pool(
            (0..MAX_POOL_MEMBERS as u8)
                .map(|i| member(i, 50 + u64::from(i), 0))
                .collect(),
        );
        let light = member(200, 40, 0);
        assert!(p.enter(light, 0).is_err());
        let heavy = member(201, 60, 0);
        p.enter(heavy, 0).unwrap();
        assert!(p.members.contains(&heavy));
        assert!(
            !p.members.iter().any(|m| m.weight == 50),
            "the lightest left"
        );
        let later = POOL_MEMBERSHIP_SECS + 1;
        let mut renewed = p.members[5];
        renewed.renewed_at = later;
        p.enter(renewed, later).unwrap();
        p.enter(light, later).unwrap();
        assert!(p.members.contains(&light), "a lapsed member's place");
        assert_eq!(p.members.len(), MAX_POOL_MEMBERS);
    }
}
