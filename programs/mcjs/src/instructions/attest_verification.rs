use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, VerificationAttested};
use crate::state::{seeds::*, Node, Verification};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct AttestVerificationArgs {
    /// The hash of the checkpoint the node wrote at the interval's end step.
    pub checkpoint_hash: [u8; 32],
}

#[derive(Accounts)]
pub struct AttestVerification<'info> {
    /// The checking node's operator key.
    pub authority: Signer<'info>,
    #[account(
        seeds = [SEED_PREFIX, node.provider.as_ref(), SEED_NODE, &node.index.to_le_bytes()],
        bump = node.bump,
        constraint = node.is_operator(&authority.key()) @ McjsError::NotNodeOperator,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, verification.job.as_ref(), SEED_VERIFICATION, &verification.interval.to_le_bytes()],
        bump = verification.bump,
    )]
    pub verification: Box<Account<'info, Verification>>,
}

impl AttestVerification<'_> {
    /// The verifier (while open) or the referee (once disputed) gives the
    /// hash it reproduced. The verifier agreeing confirms the interval; a
    /// disagreement calls the referee; the referee's hash decides two of
    /// three. Nothing moves here: `resolve_verification` applies the outcome.
    pub fn attest_verification(ctx: Context<Self>, args: AttestVerificationArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let node = ctx.accounts.node.key();
        let verification = &mut ctx.accounts.verification;
        let state = verification.record(&node, args.checkpoint_hash)?;
        emit_event(VerificationAttested {
            job: verification.job,
            verification: verification.key(),
            interval: verification.interval,
            node,
            hash: args.checkpoint_hash,
            state,
            at: now,
        });
        Ok(())
    }
}
