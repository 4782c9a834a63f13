use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, NodeUpdated};
use crate::instructions::provider_node::*;
use crate::state::{require_operator_apart, HardwareProfile, MAX_READINESS};

/// Each field left `None` keeps its value. A running job keeps the rate it
/// was assigned at; requirements are checked again at the next assignment.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, Default)]
pub struct UpdateNodeArgs {
    pub hardware: Option<HardwareProfile>,
    pub readiness: Option<u8>,
    pub price_per_gpu_hour: Option<u64>,
    /// Rotates the operator key: the old key is refused from this
    /// transaction on. Provider's wallet only.
    pub operator: Option<Pubkey>,
}

#[derive(Accounts)]
pub struct UpdateNode<'info> {
    /// The provider's wallet (any field), or the node's operator key (its
    /// measured profile and readiness only).
    pub authority: Signer<'info>,
    pub provider_node: ProvidersNode<'info>,
}

impl UpdateNode<'_> {
    fn validate(&self, args: &UpdateNodeArgs) -> Result<()> {
        let authority = self.authority.key();
        if authority != self.provider_node.provider.owner {
            require!(
                self.provider_node.node.is_operator(&authority),
                McjsError::NotOwner
            );
            require!(
                args.price_per_gpu_hour.is_none() && args.operator.is_none(),
                McjsError::OperatorNotAllowed
            );
        }
        if let Some(hardware) = &args.hardware {
            hardware.validate()?;
        }
        if let Some(readiness) = args.readiness {
            require!(readiness <= MAX_READINESS, McjsError::InvalidReadiness);
        }
        if let Some(price) = args.price_per_gpu_hour {
            require!(price > 0, McjsError::InvalidPrice);
        }
        if let Some(operator) = &args.operator {
            require_operator_apart(operator, &self.provider_node.provider.owner)?;
        }
        Ok(())
    }

    /// Updates a node's measured profile, readiness score, price or operator key.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn update_node(ctx: Context<Self>, args: UpdateNodeArgs) -> Result<()> {
        let node = &mut ctx.accounts.provider_node.node;
        let old_operator = node.operator;
        if let Some(hardware) = args.hardware {
            node.set_hardware(hardware);
        }
        if let Some(readiness) = args.readiness {
            node.readiness = readiness;
        }
        if let Some(price) = args.price_per_gpu_hour {
            node.price_per_gpu_hour = price;
        }
        if let Some(operator) = args.operator {
            node.operator = operator;
        }
        node.invariant()?;
        emit_event(NodeUpdated {
            node: node.key(),
            old_operator,
            operator: node.operator,
            by: ctx.accounts.authority.key(),
            hardware: node.hardware.clone(),
            readiness: node.readiness,
            price_per_gpu_hour: node.price_per_gpu_hour,
        });
        Ok(())
    }
}
