use anchor_lang::compat::solana_sysvar::slot_hashes;
use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, ChallengeLapsed, ChallengeRecorded};
use crate::state::{
    ChallengeVerdict, Config, GpuAttestation, Node, ProvenHardware, SchedulerLease, SlotDraw,
};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct RecordChallengeArgs {
    pub verdict: ChallengeVerdict,
    /// What NVIDIA's attestation proved of the node's GPUs, where the
    /// checker verified any: with a passing verdict only.
    pub attestation: Option<GpuAttestation>,
}

/// The Config and lease are the only ones (state/seeds.rs); the node is
/// checked at its PDA.
#[derive(Accounts)]
pub struct RecordChallenge<'info> {
    /// The scheduler that holds the lease: the checker.
    pub scheduler: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    pub lease: Box<Account<'info, SchedulerLease>>,
    #[account(mut)]
    pub node: Box<Account<'info, Node>>,
    /// CHECK: the SlotHashes sysvar, by address (the open seed).
    #[account(address = slot_hashes::ID)]
    pub slot_hashes: UncheckedAccount<'info>,
}

impl RecordChallenge<'_> {
    fn validate(&self) -> Result<()> {
        self.lease
            .require_holder(&self.config, &self.scheduler.key())?;
        require!(
            self.node.challenge.in_flight.is_some(),
            McjsError::NoChallenge
        );
        Ok(())
    }

    /// The scheduler records its verdict (`mcjs_challenge::judge` on every
    /// GPU's answer, with the draws and times kept here). A pass proves the
    /// node's profile (its model's measured speed, and memory held up to
    /// the claim, never beyond it); any other verdict leaves the node of
    /// the lowest class. A pass may carry what NVIDIA's attestation proved
    /// of the GPUs, kept with the proof. The open seed (the first slot hash after the held
    /// digest landed) is drawn here and logged, so that anyone can judge
    /// the same opening again. A verdict recorded after that slot hash is
    /// gone from the sysvar cannot be judged: the challenge lapses
    /// (`ChallengeLapsed`), the node neither proven nor failed by it.
    #[access_control(ctx.accounts.validate())]
    pub fn record_challenge(ctx: Context<Self>, args: RecordChallengeArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let key = ctx.accounts.node.key();
        let node = &mut ctx.accounts.node;
        let challenge = node
            .challenge
            .in_flight
            .take()
            .ok_or(McjsError::NoChallenge)?;
        let (commit_secs, held_secs) = challenge.phase_secs();
        let open_seed = match challenge.hold {
            Some(hold) => {
                let data = ctx.accounts.slot_hashes.try_borrow_data()?;
                match SlotDraw::after(&data, hold.slot) {
                    Ok(draw) => Some(draw),
                    // Too late to draw the opening: the challenge lapses.
                    Err(_) => {
                        emit_event(ChallengeLapsed {
                            node: key,
                            requested_slot: challenge.requested_slot,
                            held_slot: hold.slot,
                            at: now,
                        });
                        return Ok(());
                    }
                }
            }
            None => None,
        };
        let answered = open_seed.is_some();
        if let Some(attestation) = &args.attestation {
            require!(
                matches!(args.verdict, ChallengeVerdict::Passed { .. }),
                McjsError::InvalidAttestation
            );
            attestation.validate(node.hardware.gpu_count)?;
        }
        node.challenge.proven = match args.verdict {
            ChallengeVerdict::Passed { held_kib_per_gpu } => {
                require!(
                    answered
                        && u64::from(held_kib_per_gpu)
                            <= u64::from(node.hardware.vram_per_gpu_mib) * 1024,
                    McjsError::InvalidChallengeVerdict
                );
                Some(ProvenHardware {
                    gpu_count: node.hardware.gpu_count,
                    vram_per_gpu_mib: node.hardware.vram_per_gpu_mib,
                    held_kib_per_gpu,
                    memory_shift: challenge.sizing.memory_shift,
                    commit_secs: commit_secs.unwrap_or(0),
                    held_secs: held_secs.unwrap_or(0),
                    at: now,
                    attestation: args.attestation,
                })
            }
            ChallengeVerdict::Unbounded => {
                require!(answered, McjsError::InvalidChallengeVerdict);
                None
            }
            ChallengeVerdict::Failed(_) => None,
        };
        if matches!(args.verdict, ChallengeVerdict::Failed(_)) {
            node.challenge.failed = node.challenge.failed.saturating_add(1);
        }
        node.challenge.last = Some(args.verdict.into());
        node.challenge.last_at = now;
        emit_event(ChallengeRecorded {
            node: key,
            verdict: args.verdict,
            sizing: challenge.sizing,
            requested_slot: challenge.requested_slot,
            seed: challenge.commit.map(|c| c.seed),
            commitment: challenge.commit.map(|c| c.answer),
            held_seed: challenge.hold.map(|h| h.seed),
            held_digest: challenge.hold.map(|h| h.answer),
            open_seed,
            commit_secs,
            held_secs,
            at: now,
            attestation: args.attestation,
        });
        Ok(())
    }
}
