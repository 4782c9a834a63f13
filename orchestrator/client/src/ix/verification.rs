//! Verified progress's instructions (docs/verification.md): opening a
//! check, replacing a silent checker, a disputed check's second round, the checkers' answers, resolving the
//! check and releasing held pay.

use super::*;

/// An open verification the scheduler acts on (the program's `OpenCheck`).
fn open_check(
    scheduler: &Pubkey,
    verification: &Pubkey,
    job: &Pubkey,
    segment: &Pubkey,
) -> acc::OpenCheck {
    acc::OpenCheck {
        scheduler: *scheduler,
        config: pda::config(),
        lease: pda::lease(),
        verification: *verification,
        job: *job,
        segment: *segment,
    }
}

/// A checker's node and provider (the program's `Checker`).
fn checker(node: &Pubkey, provider: &Pubkey) -> acc::Checker {
    acc::Checker {
        node: *node,
        provider: *provider,
    }
}

/// The checkers an open verification names: a verifier and a referee node
/// (with their Provider accounts) of two providers other than the job's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkers {
    pub verifier_node: Pubkey,
    pub verifier_provider: Pubkey,
    pub referee_node: Pubkey,
    pub referee_provider: Pubkey,
}

/// How the pool's draw reached the checkers an instruction names: the pool
/// (of the attester's GPU model), and each member drawn and passed over, its
/// node and its provider, in the order drawn (the accounts that show it
/// cannot check).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrawProof {
    pub pool: Pubkey,
    pub passed_over: Vec<(Pubkey, Pubkey)>,
}

impl DrawProof {
    /// A draw from `gpu_model`'s pool that passed nobody over.
    pub fn of(gpu_model: &str) -> Self {
        DrawProof {
            pool: pda::checker_pool(gpu_model),
            passed_over: Vec::new(),
        }
    }

    /// `ix` with the members passed over appended, as the program reads them.
    fn append_to(&self, mut ix: Instruction) -> Instruction {
        for (node, provider) in &self.passed_over {
            ix.accounts.push(AccountMeta::new_readonly(*node, false));
            ix.accounts
                .push(AccountMeta::new_readonly(*provider, false));
        }
        ix
    }
}

/// The checkers `pool`'s draw gives, as the program checks it
/// (`mcjs::instructions::require_drawn`): `picks` members drawn from
/// `draw`'s seed, each drawn member judged by its node's and provider's
/// accounts (`accounts`; a member whose accounts cannot be read ends the
/// draw, for nothing could show it unfit). The members taken, in the order
/// drawn, and the proof to send; `None` when the pool runs out first.
pub fn drawn_checkers(
    draw: &mcjs::instructions::Draw<'_>,
    pool_key: Pubkey,
    picks: usize,
    accounts: impl Fn(&mcjs::state::PoolMember) -> Option<(mcjs::state::Node, mcjs::state::Provider)>,
) -> Option<(Vec<mcjs::state::PoolMember>, DrawProof)> {
    let mut proof = DrawProof {
        pool: pool_key,
        passed_over: Vec::new(),
    };
    let mut exclude = draw.exclude.clone();
    let taken = draw
        .pool
        .walk::<()>(&draw.seed, picks, &mut exclude, draw.now, |member| {
            let (node, provider) = accounts(member).ok_or(())?;
            if mcjs::instructions::member_fits(draw, member, &node, &provider) {
                return Ok(true);
            }
            proof.passed_over.push((member.node, member.provider));
            Ok(false)
        })
        .ok()??;
    Some((taken, proof))
}

/// A node's operator key enters the node in the checker pool of its GPU
/// model, or renews its entry.
pub fn enter_checker_pool(
    operator: &Pubkey,
    node: &Pubkey,
    provider: &Pubkey,
    gpu_model: &str,
) -> Instruction {
    build(
        acc::EnterCheckerPool {
            operator: *operator,
            config: pda::config(),
            node: *node,
            provider: *provider,
            pool: pda::checker_pool(gpu_model),
            system_program: SYSTEM_PROGRAM,
        },
        data::EnterCheckerPool {},
    )
}

/// `segment_generation` is the generation that attested the job's latest
/// checkpoint; `interval` the job's checkpoint count; `draw` how the pool's
/// draw reached `checkers`.
pub fn open_verification(
    scheduler: &Pubkey,
    job: &Pubkey,
    segment_generation: u32,
    interval: u32,
    checkers: &Checkers,
    draw: &DrawProof,
) -> Instruction {
    draw.append_to(build(
        acc::OpenVerification {
            scheduler: *scheduler,
            config: pda::config(),
            lease: pda::lease(),
            job: *job,
            segment: pda::segment(job, segment_generation),
            verification: pda::verification(job, interval),
            verifier: checker(&checkers.verifier_node, &checkers.verifier_provider),
            referee: checker(&checkers.referee_node, &checkers.referee_provider),
            pool: draw.pool,
            slot_hashes: anchor_lang::compat::solana_sysvar::slot_hashes::ID,
            system_program: SYSTEM_PROGRAM,
        },
        data::OpenVerification {},
    ))
}

/// The scheduler names `node` of `provider` as `role` of `verification` in
/// place of a checker that has not sealed its answer by half the window;
/// `draw` how the pool's draw reached it.
#[allow(clippy::too_many_arguments)]
pub fn replace_checker(
    scheduler: &Pubkey,
    verification: &Pubkey,
    job: &Pubkey,
    segment: &Pubkey,
    role: mcjs::state::Party,
    node: &Pubkey,
    provider: &Pubkey,
    draw: &DrawProof,
) -> Instruction {
    draw.append_to(build(
        acc::ReplaceChecker {
            check: open_check(scheduler, verification, job, segment),
            checker: checker(node, provider),
            pool: draw.pool,
        },
        data::ReplaceChecker {
            args: args::ReplaceCheckerArgs { role },
        },
    ))
}

/// The scheduler sends `verification` (of `job`, `segment`), disputed by
/// its first round's checkers, to a second round with two fresh checkers.
pub fn open_second_round(
    scheduler: &Pubkey,
    verification: &Pubkey,
    job: &Pubkey,
    segment: &Pubkey,
    checkers: &Checkers,
    draw: &DrawProof,
) -> Instruction {
    draw.append_to(build(
        acc::OpenSecondRound {
            check: open_check(scheduler, verification, job, segment),
            verifier: checker(&checkers.verifier_node, &checkers.verifier_provider),
            referee: checker(&checkers.referee_node, &checkers.referee_provider),
            pool: draw.pool,
            slot_hashes: anchor_lang::compat::solana_sysvar::slot_hashes::ID,
        },
        data::OpenSecondRound {},
    ))
}

/// `authority` is the checking node's operator key; `step` seals its
/// answer or reveals it.
pub fn attest_verification(
    authority: &Pubkey,
    node: &Pubkey,
    verification: &Pubkey,
    step: args::CheckerStep,
) -> Instruction {
    build(
        acc::AttestVerification {
            authority: *authority,
            config: pda::config(),
            node: *node,
            verification: *verification,
        },
        data::AttestVerification {
            args: args::AttestVerificationArgs { step },
        },
    )
}

/// The job's current assignment, when resolving a proven-wrong interval
/// must take the job off its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub node: Pubkey,
    /// `None` when it is the loser's (passed as the loser).
    pub provider: Option<Pubkey>,
    pub provider_payout: Pubkey,
    /// `None` when it is the verified segment or the payment is not held.
    pub segment: Option<Pubkey>,
}

/// Resolves a decided verification. `loser` is the Provider account whose
/// hash lost (none for a confirmation or an inconclusive one); first-round
/// checkers a second round proved wrong are read from `verification`.
#[allow(clippy::too_many_arguments)]
pub fn resolve_verification(
    resolver: &Pubkey,
    job: &Pubkey,
    verification: &mcjs::state::Verification,
    owner_token: &Pubkey,
    deployment: &Deployment,
    loser: Option<Pubkey>,
    current: Option<CurrentAssignment>,
) -> Instruction {
    // First-round checkers the second round proved wrong are slashed; one
    // that is the job's current provider is passed once, as the provider.
    let [first_verifier, first_referee] = verification.wrong_first_round_checkers();
    let current_provider = current.and_then(|c| c.provider);
    build(
        acc::ResolveVerification {
            resolver: *resolver,
            config: pda::config(),
            job: *job,
            verification: pda::verification(job, verification.interval),
            rent_payer: verification.rent_payer,
            segment: verification.segment,
            job_vault: pda::vault(job),
            usdc_mint: deployment.usdc_mint,
            owner_token: *owner_token,
            treasury: deployment.treasury,
            insurance_pool: pda::insurance_pool(),
            verifier_payout: verification.verifier_payout,
            referee_payout: verification.referee_payout,
            loser,
            loser_stake_vault: loser.map(|l| pda::vault(&l)),
            node: current.map(|c| c.node),
            provider: current.and_then(|c| c.provider),
            // A checker's payout account is passed once, as the checker's.
            provider_payout: current.map(|c| c.provider_payout).filter(|p| {
                *p != verification.verifier_payout && *p != verification.referee_payout
            }),
            current_segment: current.and_then(|c| c.segment),
            token_program: TOKEN_PROGRAM,
            first_verifier: first_verifier.filter(|p| Some(*p) != current_provider),
            first_verifier_vault: first_verifier.map(|p| pda::vault(&p)),
            first_referee: first_referee.filter(|p| Some(*p) != current_provider),
            first_referee_vault: first_referee.map(|p| pda::vault(&p)),
        },
        data::ResolveVerification {},
    )
}

/// Pays (or closes, once refunded) a held segment.
pub fn release_segment(
    payer: &Pubkey,
    job: &Pubkey,
    segment: &mcjs::state::Segment,
    deployment: &Deployment,
) -> Instruction {
    build(
        acc::ReleaseSegment {
            payer: *payer,
            bond: crate::ix::job_bond(job, &deployment.usdc_mint),
            segment: pda::segment(job, segment.generation),
            provider: segment.provider,
            rent_payer: segment.rent_payer,
            provider_payout: segment.provider_payout,
            treasury: deployment.treasury,
        },
        data::ReleaseSegment {},
    )
}
