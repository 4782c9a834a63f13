use anchor_lang::compat::solana_sysvar::slot_hashes;
use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, SecondRoundOpened};
use crate::instructions::open_verification::*;
use crate::state::{
    draw_seed, newest_slot_hash, second_round_possession_key, CheckerPool, NamedChecker, Node,
    Provider,
};

/// No seeds are checked on the checkers' nodes or providers (state/seeds.rs,
/// "Where a program account's seeds are not checked again"): each checker's
/// node names its provider, and the scheduler chooses the checkers (checked
/// in `validate`).
#[derive(Accounts)]
pub struct OpenSecondRound<'info> {
    pub check: OpenCheck<'info>,
    pub verifier: Checker<'info>,
    pub referee: Checker<'info>,
    /// The checker pool of the attester's GPU model (no seeds check:
    /// state/seeds.rs), which draws the second round's checkers.
    #[account(constraint = pool.gpu_model == check.segment.gpu_model @ McjsError::CheckerHardwareClass)]
    pub pool: Box<Account<'info, CheckerPool>>,
    /// CHECK: the SlotHashes sysvar, by address; only its newest entry is
    /// read.
    #[account(address = slot_hashes::ID)]
    pub slot_hashes: UncheckedAccount<'info>,
}

/// The seed of a second round's draw: `sha256("mcjs-second-round/1" ‖
/// verification)`, fixed once the check is open.
pub fn second_round_seed(verification: &Pubkey) -> [u8; 32] {
    draw_seed(b"mcjs-second-round/1", &[verification.as_ref()])
}

impl OpenSecondRound<'_> {
    fn validate(&self) -> Result<()> {
        self.check
            .lease
            .require_holder(&self.check.config, &self.check.scheduler.key())?;
        // Two providers apart from each other and from everyone the check
        // has involved: the attester and both rounds' checkers (a checker
        // of either side of the dispute would only repeat it).
        let (verifier, referee) = (self.verifier.provider.key(), self.referee.provider.key());
        let involved = self.check.verification.involved_providers();
        require!(
            verifier != referee && !involved.contains(&verifier) && !involved.contains(&referee),
            McjsError::InvalidChecker
        );
        for (node, provider) in [
            (&self.verifier.node, &self.verifier.provider),
            (&self.referee.node, &self.referee.provider),
        ] {
            require_fit_checker(
                node,
                provider,
                &self.check.config.params,
                &self.check.job,
                &self.check.segment,
            )?;
        }
        Ok(())
    }

    /// The scheduler sends a disputed check to a second round: the first
    /// round's checkers revealed different answers (or one stayed silent
    /// once the other had revealed), so one of them, or the provider, is
    /// wrong. Two fresh checkers, of providers the check has not involved,
    /// drawn from the pool as `open_verification` draws (by
    /// [`second_round_seed`]) and passing every test it applies, re-execute the
    /// interval under a fresh possession key; their answers decide alone.
    /// Open from the dispute for half the challenge window; once, per
    /// check.
    #[access_control(ctx.accounts.validate())]
    pub fn open_second_round(ctx: Context<Self>) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let proofs = ctx.remaining_accounts;
        let accounts = ctx.accounts;
        let key = accounts.check.verification.key();
        let (_, slot_hash) = {
            let data = accounts.slot_hashes.try_borrow_data()?;
            newest_slot_hash(&data).ok_or(McjsError::DrawUnavailable)?
        };
        let checker = |node: &Account<'_, Node>, provider: &Account<'_, Provider>| NamedChecker {
            node: node.key(),
            provider: provider.key(),
            payout: provider.payout,
        };
        let verifier = checker(&accounts.verifier.node, &accounts.verifier.provider);
        let referee = checker(&accounts.referee.node, &accounts.referee.provider);
        let window = accounts.check.config.params.challenge_window_secs;
        let involved = accounts.check.verification.involved_providers().to_vec();
        let v = &mut accounts.check.verification;
        v.open_second_round(
            verifier,
            referee,
            second_round_possession_key(&slot_hash, &key),
            now,
            window,
        )?;
        let first_round = v.first_round.ok_or(McjsError::SecondRoundNotOpen)?;
        // Drawn among the providers the check had not involved before it
        // (the round's opening above is undone with the transaction if the
        // draw refuses them).
        require_drawn(
            &Draw {
                pool: &accounts.pool,
                seed: second_round_seed(&key),
                exclude: involved,
                params: &accounts.check.config.params,
                job: &accounts.check.job,
                segment: &accounts.check.segment,
                now,
            },
            &[accounts.verifier.named(), accounts.referee.named()],
            proofs,
        )?;
        emit_event(SecondRoundOpened {
            job: v.job,
            verification: key,
            interval: v.interval,
            first_round,
            verifier_node: v.verifier_node,
            referee_node: v.referee_node,
            at: now,
        });
        Ok(())
    }
}
