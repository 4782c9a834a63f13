use anchor_lang::prelude::*;

use crate::errors::McjsError;
use crate::events::{emit_event, VerificationAttested};
use crate::state::{CheckAnswer, Config, Node, Verification};

/// A checker's two steps: seal its answer, then (once both are sealed)
/// reveal it.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckerStep {
    /// `check_commitment(verification, node, answer, salt)`.
    Seal {
        commitment: [u8; 32],
    },
    Reveal {
        answer: CheckAnswer,
        salt: [u8; 32],
    },
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct AttestVerificationArgs {
    pub step: CheckerStep,
}

#[derive(Accounts)]
pub struct AttestVerification<'info> {
    /// The checking node's operator key.
    pub authority: Signer<'info>,
    /// The Config: the only one (state/seeds.rs), no seeds check.
    pub config: Box<Account<'info, Config>>,
    #[account(
        constraint = node.is_operator(&authority.key()) @ McjsError::NotNodeOperator,
    )]
    pub node: Box<Account<'info, Node>>,
    #[account(mut)]
    pub verification: Box<Account<'info, Verification>>,
}

impl AttestVerification<'_> {
    /// Answers are taken only within the challenge window of the opening:
    /// after it, the verification resolves on what it has.
    fn validate(&self, now: i64) -> Result<()> {
        let deadline = self
            .verification
            .opened_at
            .saturating_add(i64::from(self.config.params.challenge_window_secs));
        require!(now <= deadline, McjsError::NotVerifierTurn);
        Ok(())
    }

    /// The verifier or the referee seals its answer (both must before
    /// either may reveal), then reveals it. Both revealed decides
    /// (`Verification::decide`). Nothing moves here: `resolve_verification`
    /// applies the outcome.
    #[access_control(ctx.accounts.validate(Clock::get()?.unix_timestamp))]
    pub fn attest_verification(ctx: Context<Self>, args: AttestVerificationArgs) -> Result<()> {
        let now = Clock::get()?.unix_timestamp;
        let node = ctx.accounts.node.key();
        let key = ctx.accounts.verification.key();
        let verification = &mut ctx.accounts.verification;
        let state = match args.step {
            CheckerStep::Seal { commitment } => verification.seal(&node, commitment)?,
            CheckerStep::Reveal { answer, salt } => {
                verification.reveal(&key, &node, answer, &salt, now)?
            }
        };
        emit_event(VerificationAttested {
            job: verification.job,
            verification: key,
            interval: verification.interval,
            node,
            answer: args.step,
            state,
            at: now,
        });
        Ok(())
    }
}
