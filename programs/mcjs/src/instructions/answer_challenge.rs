use anchor_lang::compat::solana_sysvar::slot_hashes;
use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, ChallengeAnswered};
use crate::state::{ChallengeStep, Node};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct AnswerChallengeArgs {
    pub step: ChallengeStep,
}

#[derive(Accounts)]
pub struct AnswerChallenge<'info> {
    /// The node's operator key.
    pub authority: Signer<'info>,
    #[account(
        mut,
        constraint = node.is_operator(&authority.key()) @ McjsError::NotNodeOperator,
    )]
    pub node: Box<Account<'info, Node>>,
    /// CHECK: the SlotHashes sysvar, by address; read raw (its newest
    /// entries only) rather than deserialised whole.
    #[account(address = slot_hashes::ID)]
    pub slot_hashes: UncheckedAccount<'info>,
}

impl AnswerChallenge<'_> {
    /// The node's operator gives its commitment, then its held digest. The
    /// program draws and keeps the seed each answered (the first slot hash
    /// after the request, after the commitment), so an answer to another
    /// seed is caught by the check; the landing time is the chain's.
    pub fn answer_challenge(ctx: Context<Self>, args: AnswerChallengeArgs) -> Result<()> {
        let clock = Clock::get()?;
        let key = ctx.accounts.node.key();
        let node = &mut ctx.accounts.node;
        let challenge = node
            .challenge
            .in_flight
            .as_mut()
            .ok_or(McjsError::NoChallenge)?;
        let record = {
            let data = ctx.accounts.slot_hashes.try_borrow_data()?;
            challenge.answer(args.step, &data, clock.slot, clock.unix_timestamp)?
        };
        emit_event(ChallengeAnswered {
            node: key,
            step: args.step,
            seed_slot: record.seed.slot,
            seed: record.seed.hash,
            requested_slot: challenge.requested_slot,
            at: clock.unix_timestamp,
        });
        Ok(())
    }
}
