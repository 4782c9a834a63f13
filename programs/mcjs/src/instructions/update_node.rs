use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, NodeUpdated};
use crate::state::{seeds::*, HardwareProfile, Node, Provider};

/// Each field left `None` keeps its value. A running job keeps the rate it
/// was assigned at; requirements are checked again at the next assignment.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, Default)]
pub struct UpdateNodeArgs {
    pub hardware: Option<HardwareProfile>,
    pub readiness: Option<u8>,
    pub price_per_gpu_hour: Option<u64>,
}

#[derive(Accounts)]
pub struct UpdateNode<'info> {
    pub owner: Signer<'info>,
    #[account(
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_PROVIDER],
        bump = provider.bump,
        has_one = owner @ McjsError::NotOwner,
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

impl UpdateNode<'_> {
    fn validate(&self, args: &UpdateNodeArgs) -> Result<()> {
        if let Some(hardware) = &args.hardware {
            hardware.validate()?;
        }
        if let Some(readiness) = args.readiness {
            require!(readiness <= 100, McjsError::InvalidReadiness);
        }
        if let Some(price) = args.price_per_gpu_hour {
            require!(price > 0, McjsError::InvalidPrice);
        }
        Ok(())
    }

    /// Updates a node's measured profile, readiness score or price.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn update_node(ctx: Context<Self>, args: UpdateNodeArgs) -> Result<()> {
        let node = &mut ctx.accounts.node;
        if let Some(hardware) = args.hardware {
            node.hardware = hardware;
        }
        if let Some(readiness) = args.readiness {
            node.readiness = readiness;
        }
        if let Some(price) = args.price_per_gpu_hour {
            node.price_per_gpu_hour = price;
        }
        node.invariant()?;
        emit_event(NodeUpdated {
            node: node.key(),
            hardware: node.hardware.clone(),
            readiness: node.readiness,
            price_per_gpu_hour: node.price_per_gpu_hour,
        });
        Ok(())
    }
}
