use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, NodeRegistered};
use crate::state::{
    require_operator_apart, seeds::*, ChallengeRecord, Config, HardwareProfile, Node, NodeStatus,
    Provider, MAX_READINESS,
};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct RegisterNodeArgs {
    pub index: u32,
    /// The key the node's agent signs with; never the provider's wallet.
    pub operator: Pubkey,
    pub hardware: HardwareProfile,
    pub readiness: u8,
    pub price_per_gpu_hour: u64,
}

#[derive(Accounts)]
#[instruction(args: RegisterNodeArgs)]
pub struct RegisterNode<'info> {
    #[account(mut)]
    pub owner: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Account<'info, Config>,
    #[account(
        mut,
        seeds = [SEED_PREFIX, owner.key().as_ref(), SEED_PROVIDER],
        bump = provider.bump,
        has_one = owner @ McjsError::NotOwner,
    )]
    pub provider: Account<'info, Provider>,
    #[account(
        init,
        payer = owner,
        space = 8 + Node::INIT_SPACE,
        seeds = [SEED_PREFIX, provider.key().as_ref(), SEED_NODE, &args.index.to_le_bytes()],
        bump,
    )]
    pub node: Account<'info, Node>,
    pub system_program: Program<'info, System>,
}

impl RegisterNode<'_> {
    fn validate(&self, args: &RegisterNodeArgs) -> Result<()> {
        require!(!self.config.paused, McjsError::ProgramPaused);
        self.provider
            .require_min_stake(self.config.params.min_provider_stake)?;
        args.hardware.validate()?;
        require!(args.readiness <= MAX_READINESS, McjsError::InvalidReadiness);
        require_operator_apart(&args.operator, &self.owner.key())?;
        require!(args.price_per_gpu_hour > 0, McjsError::InvalidPrice);
        Ok(())
    }

    /// Registers a node of a provider that holds at least the minimum stake.
    #[access_control(ctx.accounts.validate(&args))]
    pub fn register_node(ctx: Context<Self>, args: RegisterNodeArgs) -> Result<()> {
        let provider = &mut ctx.accounts.provider;
        provider.node_count = provider
            .node_count
            .checked_add(1)
            .ok_or(McjsError::Overflow)?;
        let node = &mut ctx.accounts.node;
        node.set_inner(Node {
            provider: provider.key(),
            index: args.index,
            operator: args.operator,
            hardware: args.hardware,
            readiness: args.readiness,
            price_per_gpu_hour: args.price_per_gpu_hour,
            status: NodeStatus::Available,
            status_since: Clock::get()?.unix_timestamp,
            current_job: None,
            bump: ctx.bumps.node,
            failures: 0,
            service_secs: 0,
            challenge: ChallengeRecord::default(),
        });
        node.invariant()?;
        emit_event(NodeRegistered {
            node: node.key(),
            provider: node.provider,
            index: node.index,
            operator: node.operator,
            hardware: node.hardware.clone(),
            readiness: node.readiness,
            price_per_gpu_hour: node.price_per_gpu_hour,
        });
        Ok(())
    }
}
