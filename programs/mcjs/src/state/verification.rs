use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::{CheckpointRecord, BPS_DENOMINATOR};
use crate::token::split_commission;

/// `Job::last_attest_slot` after a roll-back: no interval may be drawn.
pub const NO_OPEN_INTERVAL: u64 = u64::MAX;

/// Parts per million: the unit of a job's verification sample rate.
pub const PPM: u32 = 1_000_000;

/// One assignment's payment of a job that asked for verification. Created
/// when the job is assigned; the payment is held in the job's vault until
/// the Config's challenge window has passed with no verification open on
/// it, then `release_segment` pays the provider and the treasury and closes
/// this account (rent back to whoever created it).
#[account]
#[derive(InitSpace, Debug)]
pub struct Segment {
    pub job: Pubkey,
    /// The Provider account and payout token account of the assignment.
    pub provider: Pubkey,
    pub provider_payout: Pubkey,
    pub node: Pubkey,
    pub generation: u32,
    /// The commission in force when the job was assigned.
    pub commission_bps: u16,
    /// Tokens held in the job's vault for this segment (not part of the bond).
    pub gross: u64,
    /// Verification fees already paid out of this segment's commission.
    pub fees_paid: u64,
    pub state: SegmentState,
    /// Verifications of this segment's intervals not yet resolved.
    pub open_verifications: u8,
    /// Receives this account's rent when it closes.
    pub rent_payer: Pubkey,
    pub bump: u8,
    /// The job's last checkpoint when the assignment began (attested by an
    /// earlier one): where the job goes back to if this one is proven wrong.
    pub start: Option<CheckpointRecord>,
    /// The end of the latest interval of this segment confirmed by a check.
    pub verified_to: Option<CheckpointRecord>,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum SegmentState {
    /// The assignment is still on its node: its payment accrues on the job.
    OnNode,
    /// Off the node; payable from `release_at` once no verification is open.
    Held { release_at: i64 },
    /// An interval was proven wrong: the payment went back to the owner.
    Refunded,
}

impl Segment {
    /// Where a job goes back to when its interval `from → …` of this
    /// segment is proven wrong: `from` if it can be trusted (the segment's
    /// start, or the end of an interval a check confirmed), otherwise the
    /// segment's start, since every other checkpoint the liar attested in
    /// it may be made up too.
    pub fn restore_point(&self, from: Option<CheckpointRecord>) -> Option<CheckpointRecord> {
        if from == self.start || (from.is_some() && from == self.verified_to) {
            from
        } else {
            self.start
        }
    }

    /// A check confirmed the interval ending at `to`.
    pub fn confirm(&mut self, to: CheckpointRecord) {
        let later = self
            .verified_to
            .is_none_or(|v| (to.epoch, to.step) > (v.epoch, v.step));
        if later {
            self.verified_to = Some(to);
        }
    }

    /// `(provider share, treasury share)` of the held payment: the
    /// commission is taken on the whole segment, less the verification fees
    /// already paid out of it.
    pub fn payout_split(&self) -> Result<(u64, u64)> {
        let total = self
            .gross
            .checked_add(self.fees_paid)
            .ok_or(McjsError::Overflow)?;
        let (_, commission) = split_commission(total, self.commission_bps)?;
        let treasury = commission.saturating_sub(self.fees_paid).min(self.gross);
        Ok((self.gross - treasury, treasury))
    }
}

/// The sampled re-execution of one attested interval: the checkpoint
/// `from` (none: the job's start) restored on a verifier node of another
/// provider and run to the step of `to`, whose hash the job's provider
/// attested. A disagreement goes to a referee of a third provider; two of
/// three decide. Kept after it resolves, as the audit record.
#[account]
#[derive(InitSpace, Debug)]
pub struct Verification {
    // Fixed offsets first, so that agents find their tasks with memcmp
    // filters (`Verification::VERIFIER_NODE_OFFSET`, `REFEREE_NODE_OFFSET`).
    pub job: Pubkey,
    pub verifier_node: Pubkey,
    pub referee_node: Pubkey,
    pub state: VerificationState,
    /// The job's checkpoint count at `to`: interval `interval - 1 → interval`.
    pub interval: u32,
    pub segment: Pubkey,
    /// The Provider account that attested `to`, and its node.
    pub provider: Pubkey,
    pub node: Pubkey,
    pub verifier_provider: Pubkey,
    pub verifier_payout: Pubkey,
    pub referee_provider: Pubkey,
    pub referee_payout: Pubkey,
    pub from: Option<CheckpointRecord>,
    pub to: CheckpointRecord,
    /// What the provider was paid for the interval (its fee base).
    pub interval_amount: u64,
    pub verifier_hash: Option<[u8; 32]>,
    pub referee_hash: Option<[u8; 32]>,
    /// The slot whose hash drew this interval.
    pub draw_slot: u64,
    pub opened_at: i64,
    pub resolved_at: Option<i64>,
    /// Paid to the verifier or the referee; taken from the loser's stake.
    pub fees: u64,
    pub slashed: u64,
    pub bump: u8,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum VerificationState {
    /// Waiting for the verifier's hash.
    Open,
    /// The verifier disagreed: waiting for the referee's hash.
    Disputed,
    /// Decided, consequences not yet applied by `resolve_verification`.
    Decided { outcome: VerificationOutcome },
    /// Applied.
    Resolved { outcome: VerificationOutcome },
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum VerificationOutcome {
    /// The verifier reproduced the attested hash.
    Confirmed,
    /// The referee reproduced the attested hash: the verifier lied.
    VerifierWrong,
    /// The referee reproduced the verifier's hash: the provider lied.
    ProviderWrong,
    /// Three different hashes, or no answer within the challenge window:
    /// nobody is slashed.
    Inconclusive,
}

impl VerificationState {
    pub fn is_pending(&self) -> bool {
        matches!(self, VerificationState::Open | VerificationState::Disputed)
    }
}

impl Verification {
    pub const VERIFIER_NODE_OFFSET: usize = 8 + 32;
    pub const REFEREE_NODE_OFFSET: usize = 8 + 64;
    pub const STATE_OFFSET: usize = 8 + 96;

    /// Records a checker's hash; returns the new state.
    pub fn record(&mut self, node: &Pubkey, hash: [u8; 32]) -> Result<VerificationState> {
        let claimed = self.to.hash;
        self.state = match self.state {
            VerificationState::Open if *node == self.verifier_node => {
                self.verifier_hash = Some(hash);
                if hash == claimed {
                    VerificationState::Decided {
                        outcome: VerificationOutcome::Confirmed,
                    }
                } else {
                    VerificationState::Disputed
                }
            }
            VerificationState::Disputed if *node == self.referee_node => {
                self.referee_hash = Some(hash);
                let outcome = if hash == claimed {
                    VerificationOutcome::VerifierWrong
                } else if Some(hash) == self.verifier_hash {
                    VerificationOutcome::ProviderWrong
                } else {
                    VerificationOutcome::Inconclusive
                };
                VerificationState::Decided { outcome }
            }
            _ => return err!(McjsError::NotVerifierTurn),
        };
        Ok(self.state)
    }

    /// The fee of one check: `fee_bps` of the commission on the interval.
    pub fn fee(&self, commission_bps: u16, fee_bps: u16) -> Result<u64> {
        let (_, commission) = split_commission(self.interval_amount, commission_bps)?;
        let fee = u128::from(commission)
            .checked_mul(u128::from(fee_bps))
            .ok_or(McjsError::Overflow)?
            / u128::from(BPS_DENOMINATOR);
        u64::try_from(fee).map_err(|_| error!(McjsError::Overflow))
    }
}

/// Whether interval `interval` of `job` is sampled at `rate_ppm`, drawn from
/// the hash of the first slot after the one that recorded its attestation
/// (unknown to the provider when it attests).
pub fn sampled(slot_hash: &[u8; 32], job: &Pubkey, interval: u32, rate_ppm: u32) -> bool {
    let digest = solana_sha256_hasher::hashv(&[slot_hash, job.as_ref(), &interval.to_le_bytes()]);
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest.to_bytes()[..8]);
    u64::from_le_bytes(head) % u64::from(PPM) < u64::from(rate_ppm)
}

/// The hash of the first slot after `after` in the SlotHashes sysvar's
/// data (a u64 count, then `(slot u64, hash [32])` entries, newest first).
/// `None` before that slot exists, and once the sysvar no longer reaches
/// back to `after` (the draw can then no longer be checked).
pub fn slot_hash_after(data: &[u8], after: u64) -> Option<(u64, [u8; 32])> {
    let count = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
    let mut first_after = None;
    for i in 0..usize::try_from(count).ok()? {
        let at = 8 + i * 40;
        let entry = data.get(at..at + 40)?;
        let slot = u64::from_le_bytes(entry[..8].try_into().ok()?);
        if slot <= after {
            return first_after;
        }
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&entry[8..]);
        first_after = Some((slot, hash));
    }
    None
}
