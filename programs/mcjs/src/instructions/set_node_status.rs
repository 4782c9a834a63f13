use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, NodeStatusChanged};
use crate::instructions::provider_node::*;
use crate::state::NodeStatus;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct SetNodeStatusArgs {
    pub status: NodeStatus,
}

#[derive(Accounts)]
pub struct SetNodeStatus<'info> {
    /// The provider's wallet or the node's operator key.
    pub authority: Signer<'info>,
    pub provider_node: ProvidersNode<'info>,
}

impl SetNodeStatus<'_> {
    fn validate(&self, args: &SetNodeStatusArgs) -> Result<()> {
        let authority = self.authority.key();
        require!(
            authority == self.provider_node.provider.owner
                || self.provider_node.node.is_operator(&authority),
            McjsError::NotOwner
        );
        require!(
            matches!(args.status, NodeStatus::Available | NodeStatus::Offline),
            McjsError::InvalidNodeStatus
        );
        require!(
            self.provider_node.node.current_job.is_none(),
            McjsError::NodeBusy
        );
        Ok(())
    }

    /// Takes an idle node offline or brings it back; Busy is set by assignments only.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn set_node_status(ctx: Context<Self>, args: SetNodeStatusArgs) -> Result<()> {
        let node = &mut ctx.accounts.provider_node.node;
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
