use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, ChallengeRequested};
use crate::state::{ChallengeSizing, Config, HardwareChallenge, Node, NodeStatus, SchedulerLease};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct RequestChallengeArgs {
    pub sizing: ChallengeSizing,
}

/// The Config and lease are the only ones (state/seeds.rs); the node is
/// checked at its PDA.
#[derive(Accounts)]
pub struct RequestChallenge<'info> {
    /// The scheduler that holds the lease.
    pub scheduler: Signer<'info>,
    pub config: Box<Account<'info, Config>>,
    pub lease: Box<Account<'info, SchedulerLease>>,
    #[account(mut)]
    pub node: Box<Account<'info, Node>>,
}

impl RequestChallenge<'_> {
    fn validate(&self, args: &RequestChallengeArgs) -> Result<()> {
        self.lease
            .require_holder(&self.config, &self.scheduler.key())?;
        args.sizing.validate()?;
        // Only a free node: a challenge takes every GPU, and a node that
        // is offline cannot answer.
        require!(
            self.node.status == NodeStatus::Available,
            McjsError::NodeNotAvailable
        );
        require!(
            self.node.challenge.in_flight.is_none(),
            McjsError::ChallengeInFlight
        );
        Ok(())
    }

    /// The scheduler challenges a free node's claimed hardware: at its
    /// registration, after a change of profile, and at random. The seed is
    /// the hash of the first slot after this one, drawn when the node
    /// commits; the node takes no job until the verdict is recorded.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn request_challenge(ctx: Context<Self>, args: RequestChallengeArgs) -> Result<()> {
        let clock = Clock::get()?;
        let node = &mut ctx.accounts.node;
        node.challenge.in_flight = Some(HardwareChallenge::new(
            args.sizing,
            clock.slot,
            clock.unix_timestamp,
        ));
        node.challenge.requested = node.challenge.requested.saturating_add(1);
        emit_event(ChallengeRequested {
            node: node.key(),
            hardware: node.hardware.clone(),
            sizing: args.sizing,
            requested_slot: clock.slot,
            at: clock.unix_timestamp,
        });
        Ok(())
    }
}
