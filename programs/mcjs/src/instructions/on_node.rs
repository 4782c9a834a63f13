//! The accounts every instruction that takes a job off its node names
//! (`complete_job`, `pause_job`, `report_failure`), declared once and nested
//! in each (as an `Accounts` struct of their own), so that no copy of a pin
//! (the vault's seeds, the mint, the provider's payout, the treasury, the
//! owner's refund account) can drift from the others.

use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::instructions::job_bond::*;
use crate::instructions::settlement::{Hold, OffNode, SettlementAccounts};
use crate::state::{Node, Provider, Segment};

/// A job on its node and where the assignment's pay goes. No seeds are
/// checked on the node or provider (state/seeds.rs, "Where a program
/// account's seeds are not checked again"): the job names its node and
/// provider, the node its provider (`has_one`). The payout and treasury are
/// pinned by address.
#[derive(Accounts)]
pub struct JobOnNode<'info> {
    pub bond: JobBond<'info>,
    #[account(
        mut,
        constraint = bond.job.provider == Some(provider.key()) @ McjsError::NotAssignedProvider,
        constraint = bond.job.node == Some(node.key()) @ McjsError::WrongNode,
    )]
    pub provider: Box<Account<'info, Provider>>,
    #[account(
        mut,
        has_one = provider @ McjsError::WrongProvider,
    )]
    pub node: Box<Account<'info, Node>>,
    /// CHECK: pinned to the provider's payout account by address; paid
    /// only if it can receive (`token::can_receive`: a closed one stops
    /// nothing, its share goes back to the bond).
    #[account(mut, address = provider.payout @ McjsError::WrongTokenAccount)]
    pub provider_payout: UncheckedAccount<'info>,
    /// CHECK: pinned to the Config's treasury by address; paid only if it
    /// can receive, as the payout.
    #[account(mut, address = bond.config.treasury @ McjsError::WrongTokenAccount)]
    pub treasury: UncheckedAccount<'info>,
    /// CHECK: the job owner's refund account, pinned by address: receives
    /// the rest of the bond when leaving the node ends the job, if it can
    /// receive (a closed one keeps the refund in the vault for
    /// `close_job`). Omitted where leaving cannot end the job
    /// (`pause_job`); a transition that ends it without this account fails
    /// (`take_off_node`).
    #[account(mut, address = bond.job.refund_account @ McjsError::WrongTokenAccount)]
    pub owner_token: Option<UncheckedAccount<'info>>,
    /// The current assignment's Segment, when the job's payment is held
    /// (a verified job); checked against the job when it is settled.
    #[account(mut)]
    pub segment: Option<Box<Account<'info, Segment>>>,
}

impl<'info> JobOnNode<'info> {
    /// What `take_off_node` moves and pays through.
    pub fn off_node(&mut self) -> OffNode<'_, 'info> {
        let vault = self.bond.vault();
        let bond = &mut self.bond;
        OffNode {
            job: &mut bond.job,
            node: &mut self.node,
            provider: &mut self.provider,
            settlement: SettlementAccounts {
                vault,
                provider_payout: self.provider_payout.to_account_info(),
                treasury: self.treasury.to_account_info(),
            },
            commission_bps: bond.config.params.commission_bps,
            hold: Hold {
                segment: self.segment.as_deref_mut(),
                challenge_window_secs: bond.config.params.challenge_window_secs,
            },
            owner_token: self.owner_token.as_ref().map(|a| a.to_account_info()),
        }
    }
}
