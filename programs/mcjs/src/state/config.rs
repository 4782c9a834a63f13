use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::state::Verification;

/// Basis points in one whole.
pub const BPS_DENOMINATOR: u64 = 10_000;

/// The program's single configuration account.
#[account]
#[derive(InitSpace, Debug)]
pub struct Config {
    pub admin: Pubkey,
    /// The key the MCJS scheduler signs assignments and failure reports with.
    pub scheduler: Pubkey,
    pub usdc_mint: Pubkey,
    pub usdc_decimals: u8,
    /// Token account that receives the commission.
    pub treasury: Pubkey,
    /// Program-owned token account (authority: this Config) that receives
    /// every slash. It only leaves through `compensate_owner`, to the owner
    /// of a job that ended unfinished after its providers failed it.
    pub insurance_pool: Pubkey,
    pub params: ConfigParams,
    /// While paused no job is submitted or assigned and no node registered;
    /// every way out (cancel, withdraw, complete, report) still works.
    pub paused: bool,
    pub bump: u8,
    pub pool_bump: u8,
}

/// The tunable economics of the program.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub struct ConfigParams {
    /// The MCJS commission on every payment to a provider, in basis points.
    pub commission_bps: u16,
    /// Taken from a provider's stake into the insurance pool for each infrastructure failure.
    pub slash_amount: u64,
    /// The stake a provider must hold to register nodes and receive jobs.
    pub min_provider_stake: u64,
    /// How many checkpoint intervals without progress before anyone may
    /// report a job as failed; also caps the time one attestation can bill.
    pub liveness_factor: u8,
    /// Seconds between a stake-withdrawal request and the withdrawal.
    pub withdrawal_cooldown_secs: u32,
    /// How long a verified job's segment payment is held after it leaves
    /// its node, and how long after an attestation its interval may be
    /// sampled; 0 turns verification off (payments are made at once).
    pub challenge_window_secs: u32,
    /// The share of the commission on a verified interval paid to the node
    /// that verified it, in basis points.
    pub verification_fee_bps: u16,
    /// A verified job's attestations (and its completion) are at least this
    /// far apart: the time the scheduler has to draw the latest interval
    /// before the next one replaces it.
    pub draw_secs: u32,
    /// Whether a job that names a GPU model or a memory floor goes only to
    /// a node whose profile a passed hardware challenge proved (an unproven
    /// node is of the lowest class). Off on a local chain, whose nodes have
    /// no measured bound to pass.
    pub require_proven_hardware: bool,
}

impl ConfigParams {
    pub fn validate(&self) -> Result<()> {
        require!(
            u64::from(self.commission_bps) <= BPS_DENOMINATOR,
            McjsError::InvalidCommission
        );
        require!(self.liveness_factor >= 1, McjsError::InvalidLivenessFactor);
        require!(
            u64::from(self.verification_fee_bps) <= BPS_DENOMINATOR,
            McjsError::InvalidCommission
        );
        // A checker named to a check could otherwise withdraw its stake
        // before the check that may slash it resolves.
        require!(
            u64::from(self.withdrawal_cooldown_secs)
                >= Verification::longest_secs(self.challenge_window_secs),
            McjsError::CooldownShorterThanCheck
        );
        Ok(())
    }
}

/// What `update_config` logs as old and new.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigSnapshot {
    pub admin: Pubkey,
    pub scheduler: Pubkey,
    pub treasury: Pubkey,
    pub params: ConfigParams,
    pub paused: bool,
}

impl Config {
    pub fn snapshot(&self) -> ConfigSnapshot {
        ConfigSnapshot {
            admin: self.admin,
            scheduler: self.scheduler,
            treasury: self.treasury,
            params: self.params,
            paused: self.paused,
        }
    }

    pub fn invariant(&self) -> Result<()> {
        self.params.validate()
    }
}
