use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, CheckerReplaced};
use crate::instructions::open_verification::*;
use crate::state::{draw_seed, CheckerPool, Party, VerificationState, MAX_CHECKER_REPLACEMENTS};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug)]
pub struct ReplaceCheckerArgs {
    /// The checker that has not sealed its answer.
    pub role: Party,
}

#[derive(Accounts)]
pub struct ReplaceChecker<'info> {
    pub check: OpenCheck<'info>,
    pub checker: Checker<'info>,
    /// The checker pool of the attester's GPU model (no seeds check:
    /// state/seeds.rs), which draws the replacement.
    #[account(constraint = pool.gpu_model == check.segment.gpu_model @ McjsError::CheckerHardwareClass)]
    pub pool: Box<Account<'info, CheckerPool>>,
}

/// The seed of a replacement's draw: `sha256("mcjs-replace-checker/1" ‖
/// verification ‖ replacements so far)`, fixed once the check is open.
pub fn replacement_seed(verification: &Pubkey, replacements: u8) -> [u8; 32] {
    draw_seed(
        b"mcjs-replace-checker/1",
        &[verification.as_ref(), &[replacements]],
    )
}

impl ReplaceChecker<'_> {
    fn validate(&self, now: i64, role: Party) -> Result<()> {
        self.check
            .lease
            .require_holder(&self.check.config, &self.check.scheduler.key())?;
        let v = &self.check.verification;
        let window = self.check.config.params.challenge_window_secs;
        require!(
            v.state == VerificationState::Open
                && v.commitment(role).is_none()
                && v.replacements < MAX_CHECKER_REPLACEMENTS
                && now > v.seal_deadline(window)
                && now <= v.opened_at.saturating_add(i64::from(window)),
            McjsError::CheckerNotReplaceable
        );
        let new = self.checker.provider.key();
        let (replaced, other) = match role {
            Party::Verifier => (v.verifier_provider, v.referee_provider),
            Party::Referee => (v.referee_provider, v.verifier_provider),
        };
        require!(
            new != v.provider && new != other && new != replaced,
            McjsError::InvalidChecker
        );
        require_fit_checker(
            &self.checker.node,
            &self.checker.provider,
            &self.check.config.params,
            &self.check.job,
            &self.check.segment,
        )?;
        Ok(())
    }

    /// The scheduler names another checker in place of one that has not
    /// sealed its answer by half the challenge window (busy with paid work,
    /// offline, or silent on purpose): a silent checker would otherwise
    /// leave the check Inconclusive, so that a liar went unslashed and an
    /// honest provider unpaid for the interval. The new checker is of a
    /// provider other than the attester's, the other checker's and the
    /// replaced one's, drawn from the pool as `open_verification` draws
    /// (by [`replacement_seed`]), and passes every test it applies.
    /// The other checker's seal stands; the window starts again, at most
    /// `MAX_CHECKER_REPLACEMENTS` times.
    #[access_control(ctx.accounts.validate(Clock::get()?.unix_timestamp, args.role))]
    pub fn replace_checker(ctx: Context<Self>, args: ReplaceCheckerArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let proofs = ctx.remaining_accounts;
        let accounts = ctx.accounts;
        let key = accounts.check.verification.key();
        {
            let v = &accounts.check.verification;
            require_drawn(
                &Draw {
                    pool: &accounts.pool,
                    seed: replacement_seed(&key, v.replacements),
                    exclude: vec![v.provider, v.verifier_provider, v.referee_provider],
                    params: &accounts.check.config.params,
                    job: &accounts.check.job,
                    segment: &accounts.check.segment,
                    now,
                },
                &[accounts.checker.named()],
                proofs,
            )?;
        }
        let (node, provider, payout) = (
            accounts.checker.node.key(),
            accounts.checker.provider.key(),
            accounts.checker.provider.payout,
        );
        let v = &mut accounts.check.verification;
        let replaced = v.replace(args.role, node, provider, payout, now)?;
        emit_event(CheckerReplaced {
            job: v.job,
            verification: key,
            interval: v.interval,
            role: args.role,
            replaced_node: replaced,
            node,
            replacements: v.replacements,
            at: now,
        });
        Ok(())
    }
}
