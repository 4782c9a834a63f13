use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, NodeStatusChanged};
use crate::state::{seeds::*, Node, NodeStatus, Provider};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct SetNodeStatusArgs {
    pub status: NodeStatus,
}

#[derive(Accounts)]
pub struct SetNodeStatus<'info> {
    /// The provider's wallet or the node's operator key.
    pub authority: Signer<'info>,
    #[account(
        seeds = [SEED_PREFIX, provider.owner.as_ref(), SEED_PROVIDER],
        bump = provider.bump,
    )]
    pub provider: Account<'info, Provider>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_NODE, &node.index.to_le_bytes()],
        bump = node.bump,
        has_one = provider @ McjsError::WrongProvider,
    )]
    pub node: Account<'info, Node>,
}

impl SetNodeStatus<'_> {
    fn validate(&self, args: &SetNodeStatusArgs) -> Result<()> {
        let authority = self.authority.key();
        require!(
            authority == self.provider.owner || self.node.is_operator(&authority),
            McjsError::NotOwner
        );
        require!(
            matches!(args.status, NodeStatus::Available | NodeStatus::Offline),
            McjsError::InvalidNodeStatus
        );
        require!(self.node.current_job.is_none(), McjsError::NodeBusy);
        Ok(())
    }

    /// Takes an idle node offline or brings it back; Busy is set by assignments only.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn set_node_status(ctx: Context<Self>, args: SetNodeStatusArgs) -> Result<()> {
        let node = &mut ctx.accounts.node;
        let old = node.status;
        node.status = args.status;
        node.status_since = Clock::get()?.unix_timestamp;
        node.invariant()?;
        emit_event(NodeStatusChanged {
            node: node.key(),
            old,
            new: node.status,
        });
        Ok(())
    }
}
