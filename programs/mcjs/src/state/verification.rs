use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::{CheckpointRecord, BPS_DENOMINATOR, MAX_GPU_MODEL_LEN};
use crate::token::split_commission;

/// The most Segments a job may hold unreleased at once. Each assignment of
/// a verified job creates one, paid for by the scheduler until its
/// challenge window passes: an owner that pauses and resumes its job in a
/// loop would otherwise lock the scheduler's SOL in their rent, one
/// Segment per loop. Beyond this the job waits in its queue until one is
/// released.
pub const MAX_LIVE_SEGMENTS: u32 = 8;

/// `Job::last_attest_slot` after a roll-back: no interval may be drawn.
pub const NO_OPEN_INTERVAL: u64 = u64::MAX;

/// Parts per million: the unit of a job's verification sample rate.
pub const PPM: u32 = 1_000_000;

/// The most checkers one verification may have replaced for silence: each
/// replacement starts the challenge window again, so this bounds how long
/// a check can hold the segment's payment and the job's completion.
pub const MAX_CHECKER_REPLACEMENTS: u8 = 2;

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
    /// The node's GPU model when it was assigned: the hardware class the
    /// segment's intervals ran on, and so the one their checkers must be
    /// of, whatever the node's profile says later.
    #[max_len(MAX_GPU_MODEL_LEN)]
    pub gpu_model: String,
    /// What the assignment's attestations accrued in all
    /// (`Job::assignment_earned`, kept when it leaves its node).
    pub earned: u64,
    /// Of `earned`, what was accrued up to `verified_to`: the confirmed
    /// work a later proven-wrong interval does not refund.
    pub verified_earned: u64,
    /// Intervals' amounts given back to the owner by inconclusive checks.
    pub withheld: u64,
    /// An interval of the segment was proven wrong: its provider was
    /// slashed once, and the segment holds at most its confirmed work.
    pub disproven: bool,
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
    /// segment is proven wrong: the latest checkpoint at or before `from`
    /// that can be trusted: the end of the latest interval a check
    /// confirmed if it is no later than `from`, otherwise the segment's
    /// start, since every other checkpoint the liar attested in it may be
    /// made up too.
    pub fn restore_point(&self, from: Option<CheckpointRecord>) -> Option<CheckpointRecord> {
        match (self.verified_to, from) {
            (Some(v), Some(f)) if (v.epoch, v.step) <= (f.epoch, f.step) => Some(v),
            _ => self.start,
        }
    }

    /// A check confirmed the interval ending at `to`, where the segment had
    /// earned `earned_to`.
    pub fn confirm(&mut self, to: CheckpointRecord, earned_to: u64) {
        let later = self
            .verified_to
            .is_none_or(|v| (to.epoch, to.step) > (v.epoch, v.step));
        if later {
            self.verified_to = Some(to);
            self.verified_earned = earned_to;
        }
    }

    /// An inconclusive check gave `amount` of the segment's pay back to the
    /// owner.
    pub fn withhold(&mut self, amount: u64) -> Result<()> {
        self.withheld = self
            .withheld
            .checked_add(amount)
            .ok_or(McjsError::Overflow)?;
        Ok(())
    }

    /// What a proven-wrong segment may still hold once its job goes back
    /// to `restore`: the confirmed work up to it (less the fees already
    /// paid out of it and any interval withheld), nothing if the job goes
    /// back to the segment's start.
    pub fn confirmed_pay(&self, restore: Option<CheckpointRecord>) -> u64 {
        if restore.is_none() || restore != self.verified_to {
            return 0;
        }
        self.verified_earned
            .saturating_sub(self.fees_paid)
            .saturating_sub(self.withheld)
            .min(self.gross)
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
/// `from` (none: the job's start) restored on two checker nodes of two
/// other providers (a verifier and a referee) and run to the step of `to`,
/// whose hash the job's provider attested.
///
/// Answers must be earned. Besides the hash it reproduced, a checker gives a
/// *possession digest* of the checkpoint's bytes under `possession_key`
/// (derived from a slot hash after the attestation, so no attestation,
/// descriptor or store object carries it), and seals both in a commitment
/// before either checker's answer is revealed. Copying the claimed hash
/// from the chain gives no possession digest: an answer counts only where
/// both checkers agree, bytes and all. Closed when resolved (its rent back
/// to `rent_payer`); the history keeps its events (docs/verification.md).
#[account]
#[derive(InitSpace, Debug)]
pub struct Verification {
    // Fixed offsets first, so that agents find their tasks with memcmp
    // filters (`Verification::VERIFIER_NODE_OFFSET` and friends).
    pub job: Pubkey,
    pub verifier_node: Pubkey,
    pub referee_node: Pubkey,
    /// The node that attested `to`.
    pub node: Pubkey,
    pub state: VerificationState,
    /// The job's checkpoint count at `to`: interval `interval - 1 → interval`.
    pub interval: u32,
    pub segment: Pubkey,
    /// The Provider account that attested `to`.
    pub provider: Pubkey,
    pub verifier_provider: Pubkey,
    pub verifier_payout: Pubkey,
    pub referee_provider: Pubkey,
    pub referee_payout: Pubkey,
    pub from: Option<CheckpointRecord>,
    pub to: CheckpointRecord,
    /// What the provider was paid for the interval (its fee base, and what
    /// goes back to the owner when the check is inconclusive).
    pub interval_amount: u64,
    /// What the segment's attestations had accrued up to `to`, this
    /// interval included (`Segment::verified_earned` once confirmed).
    pub earned_to: u64,
    /// The key of the possession digests (`possession_key`).
    pub possession_key: [u8; 32],
    /// Each party's sealed answer (`check_commitment`), then its revealed one.
    pub verifier_commitment: Option<[u8; 32]>,
    pub referee_commitment: Option<[u8; 32]>,
    pub verifier_answer: Option<CheckAnswer>,
    pub referee_answer: Option<CheckAnswer>,
    /// The slot whose hash drew this interval.
    pub draw_slot: u64,
    pub opened_at: i64,
    pub resolved_at: Option<i64>,
    /// Paid to the checkers; from the segment's commission or the loser's stake.
    pub fees: u64,
    pub slashed: u64,
    /// Receives this account's rent when it closes (the scheduler that opened it).
    pub rent_payer: Pubkey,
    pub bump: u8,
    /// Checkers replaced for not sealing in time (`replace_checker`), in
    /// the current round.
    pub replacements: u8,
    /// The first round, once its checkers' disagreement sent the check to
    /// a second (`open_second_round`): the named checkers and answers above
    /// are then the second round's, and decide.
    pub first_round: Option<FirstRound>,
    /// The interval is the run's last, from its last checkpoint to its
    /// output (`Job::attest_output`): a checker runs it to the job's exit
    /// and answers the output's hash, not a checkpoint's.
    pub output: bool,
}

/// A first round's checkers and what they revealed, kept when the check
/// went to a second round.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct FirstRound {
    pub verifier_node: Pubkey,
    pub verifier_provider: Pubkey,
    pub verifier_answer: Option<CheckAnswer>,
    pub referee_node: Pubkey,
    pub referee_provider: Pubkey,
    pub referee_answer: Option<CheckAnswer>,
    /// The first round's possession key.
    pub possession_key: [u8; 32],
}

/// A checker named by the scheduler: its node, Provider account and payout
/// token account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedChecker {
    pub node: Pubkey,
    pub provider: Pubkey,
    pub payout: Pubkey,
}

/// What a checker found when it re-executed the interval.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum CheckAnswer {
    /// It restored the start, ran to the end step and hashed the checkpoint
    /// written there: its hash as attestations define it, and its
    /// possession digest under the verification's key.
    Reproduced {
        hash: [u8; 32],
        possession: [u8; 32],
    },
    /// The interval's start could not be restored from the store (missing,
    /// or not matching its attested hash).
    StartUnavailable,
}

/// Which checker is answering a verification.
#[derive(
    AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, InitSpace,
)]
pub enum Party {
    Verifier,
    Referee,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum VerificationState {
    /// Waiting for both checkers' sealed answers.
    Open,
    /// Both checkers sealed: waiting for the reveals.
    Revealing,
    /// Decided, consequences not yet applied by `resolve_verification`.
    Decided { outcome: VerificationOutcome },
    /// Applied.
    Resolved { outcome: VerificationOutcome },
    /// The first round's checkers revealed different answers: one of them
    /// (or the provider) is wrong, and which cannot be told from two. The
    /// scheduler may name two fresh checkers (`open_second_round`) until
    /// half the challenge window from here; after that it is decided on
    /// what was revealed. (Last, so that the other states keep their
    /// encoding.)
    Disputed,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum VerificationOutcome {
    /// Both checkers reproduced the attested hash with the same bytes: both
    /// paid a fee.
    Confirmed,
    /// Both checkers reproduced the same other checkpoint (same hash, same
    /// bytes), or both found a start the provider attested itself
    /// unavailable: the provider is slashed and the owner refunded.
    ProviderWrong,
    /// Three different checkpoints (the two checkers' and the attested
    /// one): the job is not bitwise deterministic on this hardware class
    /// (its own fault: nobody slashed, the segment not refunded), or a liar
    /// was helped by a checker answering at random; the two look the same,
    /// so the interval is not paid.
    Nondeterministic,
    /// Anything else (a checker silent, checkers holding different bytes
    /// for the same hash, a start attested by an earlier assignment
    /// unavailable): nobody is slashed, but the interval is not paid: its
    /// amount goes back to the owner.
    Inconclusive,
}

impl VerificationState {
    pub fn is_pending(&self) -> bool {
        matches!(self, VerificationState::Open | VerificationState::Revealing)
    }
}

/// What a checker seals: `sha256("mcjs-check-commit/1" ‖ verification ‖
/// node ‖ borsh(answer) ‖ salt)`. Binding the verification and the node
/// stops one checker from replaying the other's commitment; the salt hides even
/// a guessable answer (`StartUnavailable`).
pub fn check_commitment(
    verification: &Pubkey,
    node: &Pubkey,
    answer: &CheckAnswer,
    salt: &[u8; 32],
) -> [u8; 32] {
    let mut bytes = Vec::with_capacity(1 + 64);
    answer
        .serialize(&mut bytes)
        .expect("a CheckAnswer serialises into a Vec");
    solana_sha256_hasher::hashv(&[
        b"mcjs-check-commit/1",
        verification.as_ref(),
        node.as_ref(),
        &bytes,
        salt,
    ])
    .to_bytes()
}

/// The key of a verification's possession digests:
/// `sha256("mcjs-possession-key/1" ‖ draw slot hash ‖ verification)`.
pub fn possession_key(slot_hash: &[u8; 32], verification: &Pubkey) -> [u8; 32] {
    solana_sha256_hasher::hashv(&[b"mcjs-possession-key/1", slot_hash, verification.as_ref()])
        .to_bytes()
}

/// The key of a second round's possession digests:
/// `sha256("mcjs-possession-key/2" ‖ newest slot hash at its opening ‖
/// verification)`, known to nobody before the round opened.
pub fn second_round_possession_key(slot_hash: &[u8; 32], verification: &Pubkey) -> [u8; 32] {
    solana_sha256_hasher::hashv(&[b"mcjs-possession-key/2", slot_hash, verification.as_ref()])
        .to_bytes()
}

impl Verification {
    pub const VERIFIER_NODE_OFFSET: usize = 8 + 32;
    pub const REFEREE_NODE_OFFSET: usize = 8 + 64;
    pub const ATTESTER_NODE_OFFSET: usize = 8 + 96;
    pub const STATE_OFFSET: usize = 8 + 128;

    /// Which checker `node` is, if any.
    pub fn party(&self, node: &Pubkey) -> Option<Party> {
        if *node == self.verifier_node {
            Some(Party::Verifier)
        } else if *node == self.referee_node {
            Some(Party::Referee)
        } else {
            None
        }
    }

    /// The sealed answer of `party`, if it sealed.
    pub fn commitment(&self, party: Party) -> Option<[u8; 32]> {
        match party {
            Party::Verifier => self.verifier_commitment,
            Party::Referee => self.referee_commitment,
        }
    }

    /// Until when the named checkers have to seal before one that has not
    /// may be replaced: half the challenge window after the opening (or the
    /// latest replacement).
    pub fn seal_deadline(&self, challenge_window_secs: u32) -> i64 {
        self.opened_at
            .saturating_add(i64::from(challenge_window_secs / 2))
    }

    /// Names `node` of `provider` (paid at `payout`) as `party` in place of
    /// the checker that did not seal, and starts the window again. Returns
    /// the replaced node.
    pub fn replace(
        &mut self,
        party: Party,
        node: Pubkey,
        provider: Pubkey,
        payout: Pubkey,
        now: i64,
    ) -> Result<Pubkey> {
        require!(
            self.state == VerificationState::Open && self.commitment(party).is_none(),
            McjsError::CheckerNotReplaceable
        );
        let replaced = match party {
            Party::Verifier => {
                let old = self.verifier_node;
                (
                    self.verifier_node,
                    self.verifier_provider,
                    self.verifier_payout,
                ) = (node, provider, payout);
                old
            }
            Party::Referee => {
                let old = self.referee_node;
                (
                    self.referee_node,
                    self.referee_provider,
                    self.referee_payout,
                ) = (node, provider, payout);
                old
            }
        };
        self.replacements = self
            .replacements
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        self.opened_at = now;
        Ok(replaced)
    }

    /// Records a checker's sealed answer; both sealed opens the reveals.
    pub fn seal(&mut self, node: &Pubkey, commitment: [u8; 32]) -> Result<VerificationState> {
        require!(
            self.state == VerificationState::Open,
            McjsError::NotVerifierTurn
        );
        let slot = match self.party(node) {
            Some(Party::Verifier) => &mut self.verifier_commitment,
            Some(Party::Referee) => &mut self.referee_commitment,
            None => return err!(McjsError::NotVerifierTurn),
        };
        require!(slot.is_none(), McjsError::NotVerifierTurn);
        *slot = Some(commitment);
        if self.verifier_commitment.is_some() && self.referee_commitment.is_some() {
            self.state = VerificationState::Revealing;
        }
        Ok(self.state)
    }

    /// Records a checker's revealed answer, which must open its commitment;
    /// both revealed decides.
    pub fn reveal(
        &mut self,
        verification: &Pubkey,
        node: &Pubkey,
        answer: CheckAnswer,
        salt: &[u8; 32],
        now: i64,
    ) -> Result<VerificationState> {
        require!(
            self.state == VerificationState::Revealing,
            McjsError::NotVerifierTurn
        );
        let (commitment, slot) = match self.party(node) {
            Some(Party::Verifier) => (self.verifier_commitment, &mut self.verifier_answer),
            Some(Party::Referee) => (self.referee_commitment, &mut self.referee_answer),
            None => return err!(McjsError::NotVerifierTurn),
        };
        require!(slot.is_none(), McjsError::NotVerifierTurn);
        require!(
            commitment == Some(check_commitment(verification, node, &answer, salt)),
            McjsError::CommitmentMismatch
        );
        *slot = Some(answer);
        if self.verifier_answer.is_some() && self.referee_answer.is_some() {
            self.state = if self.disputable() {
                // The second round's time counts from here.
                self.opened_at = now;
                VerificationState::Disputed
            } else {
                VerificationState::Decided {
                    outcome: self.decide(),
                }
            };
        }
        Ok(self.state)
    }

    /// Whether what the first round revealed can go to a second: its
    /// checkers revealed different answers, or only one revealed. One of
    /// the two is wrong (or, with one answer, silent after it saw the
    /// other's): a checker in league with a liar that vouches for its
    /// made-up checkpoint, or one that answers wrongly to withhold an
    /// honest provider's pay, would otherwise decide the check as
    /// Inconclusive on its own. Two fresh checkers settle it.
    pub fn disputable(&self) -> bool {
        self.first_round.is_none()
            && self.verifier_answer != self.referee_answer
            && (self.verifier_answer.is_some() || self.referee_answer.is_some())
    }

    /// When the scheduler may open the second round, inclusive: from the
    /// dispute for half the challenge window; for a first round where only
    /// one checker revealed, from the end of its window for half a window
    /// more. `None` where no second round can be opened.
    pub fn second_round_window(&self, challenge_window_secs: u32) -> Option<(i64, i64)> {
        if !self.disputable() {
            return None;
        }
        let window = i64::from(challenge_window_secs);
        let half = i64::from(challenge_window_secs / 2);
        match self.state {
            VerificationState::Disputed => {
                Some((self.opened_at, self.opened_at.saturating_add(half)))
            }
            VerificationState::Revealing => {
                let end = self.opened_at.saturating_add(window);
                Some((end.saturating_add(1), end.saturating_add(half)))
            }
            _ => None,
        }
    }

    /// The outcome `resolve_verification` applies at `now`: the decided
    /// one, or, for a check still waiting, what was revealed once nobody
    /// may answer any more (past its window, and past the time a second
    /// round could have been opened). `None` while it must wait, and once
    /// applied.
    pub fn resolution(&self, now: i64, challenge_window_secs: u32) -> Option<VerificationOutcome> {
        match self.state {
            VerificationState::Decided { outcome } => Some(outcome),
            VerificationState::Resolved { .. } => None,
            VerificationState::Open
            | VerificationState::Revealing
            | VerificationState::Disputed => {
                let deadline = match self.second_round_window(challenge_window_secs) {
                    Some((_, until)) => until,
                    None => self
                        .opened_at
                        .saturating_add(i64::from(challenge_window_secs)),
                };
                (now > deadline).then(|| self.decide())
            }
        }
    }

    /// Sends a disputed check to its second round: two fresh checkers, a
    /// fresh possession key (so that no first-round answer can be
    /// replayed), a fresh window and replacements. The first round is kept
    /// for the record; the second decides alone.
    pub fn open_second_round(
        &mut self,
        verifier: NamedChecker,
        referee: NamedChecker,
        possession_key: [u8; 32],
        now: i64,
        challenge_window_secs: u32,
    ) -> Result<()> {
        let open = self
            .second_round_window(challenge_window_secs)
            .is_some_and(|(from, until)| from <= now && now <= until);
        require!(open, McjsError::SecondRoundNotOpen);
        self.first_round = Some(FirstRound {
            verifier_node: self.verifier_node,
            verifier_provider: self.verifier_provider,
            verifier_answer: self.verifier_answer,
            referee_node: self.referee_node,
            referee_provider: self.referee_provider,
            referee_answer: self.referee_answer,
            possession_key: self.possession_key,
        });
        (
            self.verifier_node,
            self.verifier_provider,
            self.verifier_payout,
        ) = (verifier.node, verifier.provider, verifier.payout);
        (
            self.referee_node,
            self.referee_provider,
            self.referee_payout,
        ) = (referee.node, referee.provider, referee.payout);
        self.verifier_commitment = None;
        self.referee_commitment = None;
        self.verifier_answer = None;
        self.referee_answer = None;
        self.possession_key = possession_key;
        self.state = VerificationState::Open;
        self.opened_at = now;
        self.replacements = 0;
        Ok(())
    }

    /// Every provider the check has involved: the attester and each
    /// round's checkers (none of them may sit in a second round).
    pub fn involved_providers(&self) -> [Pubkey; 5] {
        let first = self
            .first_round
            .map_or([self.verifier_provider, self.referee_provider], |f| {
                [f.verifier_provider, f.referee_provider]
            });
        [
            self.provider,
            self.verifier_provider,
            self.referee_provider,
            first[0],
            first[1],
        ]
    }

    /// The outcome on what was revealed (what is missing counts as silence).
    ///
    /// Two checkers agreeing, bytes and all, decide for or against the
    /// provider. Anything else (silence, a copied hash whose bytes the other
    /// checker does not hold, three different checkpoints) cannot be told
    /// apart from a liar helped by a lazy or absent checker: the interval is
    /// not paid, and nobody is slashed.
    pub fn decide(&self) -> VerificationOutcome {
        let claimed = self.to.hash;
        let (v, r) = (self.verifier_answer, self.referee_answer);
        match (v, r) {
            (Some(CheckAnswer::Reproduced { hash, .. }), Some(_)) if v == r => {
                if hash == claimed {
                    VerificationOutcome::Confirmed
                } else {
                    VerificationOutcome::ProviderWrong
                }
            }
            // A start the checked assignment attested itself must be in
            // the store while it can be checked (the gateway refuses its
            // deletion): its absence is that provider's.
            (Some(CheckAnswer::StartUnavailable), Some(CheckAnswer::StartUnavailable))
                if self
                    .from
                    .is_some_and(|f| f.generation == self.to.generation) =>
            {
                VerificationOutcome::ProviderWrong
            }
            (
                Some(CheckAnswer::Reproduced { hash: a, .. }),
                Some(CheckAnswer::Reproduced { hash: b, .. }),
            ) if a != b && a != claimed && b != claimed => VerificationOutcome::Nondeterministic,
            _ => VerificationOutcome::Inconclusive,
        }
    }

    /// The first-round checkers a second round proved wrong: its two
    /// checkers reproduced one checkpoint, bytes and all, and a first-round
    /// checker revealed a different one (on the hardware class the job
    /// declares bitwise deterministic). A first-round checker that found
    /// the start unavailable, or stayed silent, is not: a store or node
    /// outage looks the same. Their Provider accounts, verifier's first.
    pub fn wrong_first_round_checkers(&self) -> [Option<Pubkey>; 2] {
        let (Some(first), Some(CheckAnswer::Reproduced { hash: agreed, .. })) =
            (self.first_round, self.verifier_answer)
        else {
            return [None, None];
        };
        if self.verifier_answer != self.referee_answer {
            return [None, None];
        }
        let wrong = |answer: Option<CheckAnswer>, provider: Pubkey| match answer {
            Some(CheckAnswer::Reproduced { hash, .. }) if hash != agreed => Some(provider),
            _ => None,
        };
        [
            wrong(first.verifier_answer, first.verifier_provider),
            wrong(first.referee_answer, first.referee_provider),
        ]
    }

    /// The longest a check can run from its opening to the time anyone may
    /// resolve it: a first round whose window starts again with each
    /// replaced checker, half a window for the second round to be opened,
    /// and a second round as long as the first (with a window of slack). A
    /// checker's stake must stay that long after it is named
    /// (`ConfigParams::validate` bounds the withdrawal cooldown by it).
    pub fn longest_secs(challenge_window_secs: u32) -> u64 {
        let rounds = 2 * (1 + u64::from(MAX_CHECKER_REPLACEMENTS));
        u64::from(challenge_window_secs) * (rounds + 1)
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

/// The newest entry of the SlotHashes sysvar's data.
pub fn newest_slot_hash(data: &[u8]) -> Option<(u64, [u8; 32])> {
    let count = u64::from_le_bytes(data.get(..8)?.try_into().ok()?);
    if count == 0 {
        return None;
    }
    let entry = data.get(8..48)?;
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&entry[8..]);
    Some((u64::from_le_bytes(entry[..8].try_into().ok()?), hash))
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
