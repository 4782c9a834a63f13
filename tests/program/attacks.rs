//! Attacks: each must fail, and move neither tokens nor state.

use anchor_lang::AccountSerialize;
use anchor_lang::error::ErrorCode as Anchor;
use anchor_spl::token::spl_token;
use mcjs::errors::McjsError;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix, pda};
use solana_account::Account;
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

/// A world with one running job on `provider`'s node 0 and one attested checkpoint.
struct Scene {
    env: Env,
    owner: Wallet,
    provider: ProviderActor,
    rival: ProviderActor,
    job: Pubkey,
}

fn scene() -> Scene {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let rival = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    env.warp(900);
    Scene {
        env,
        owner,
        provider,
        rival,
        job,
    }
}

impl Scene {
    fn complete_ix(&self) -> anchor_lang::solana_program::instruction::Instruction {
        self.provider
            .assignment(&self.job, 0, &self.owner.token, 1, self.env.deployment())
            .complete(&self.provider.operator(0).pubkey(), [1; 32])
    }

    /// The key that signs for the job's node.
    fn operator(&self) -> Keypair {
        self.provider.operator(0).insecure_clone()
    }

    fn cancel_ix(&self) -> anchor_lang::solana_program::instruction::Instruction {
        ix::cancel_job(
            &self.owner.key(),
            &self.job,
            &self.owner.token,
            &self.env.mint,
        )
    }
}

#[test]
fn a_missing_signer_is_refused() {
    let mut s = scene();
    let before = s.env.snapshot();
    // The rival pays and signs; the operator key's signature is missing.
    let mut complete = s.complete_ix();
    ix::tamper::unsign(&mut complete, &s.provider.operator(0).pubkey());
    let outcome = s.env.send(&[complete], &[&s.rival.wallet.kp]);
    expect_anchor_error(outcome, Anchor::AccountNotSigner);
    let mut assign = ix::assign_job(
        &s.env.scheduler.pubkey(),
        &s.job,
        &s.rival.nodes[0],
        &s.rival.pda,
        None,
    );
    ix::tamper::unsign(&mut assign, &s.env.scheduler.pubkey());
    expect_anchor_error(
        s.env.send(&[assign], &[&s.rival.wallet.kp]),
        Anchor::AccountNotSigner,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

#[test]
fn a_token_account_of_someone_else_is_refused() {
    let mut s = scene();
    let before = s.env.snapshot();
    // Stake paid from the rival's tokens by a provider who does not own them.
    let ix = ix::add_stake(&s.provider.key(), &s.rival.wallet.token, &s.env.mint, USDC);
    expect_error(
        s.env.send(&[ix], &[&s.provider.wallet.kp]),
        McjsError::NotOwner,
    );
    // A refund steered to the provider's own account.
    let mut complete = s.complete_ix();
    ix::tamper::substitute_account(&mut complete, &s.owner.token, &s.provider.wallet.token);
    expect_error(
        s.env.send(&[complete], &[&s.operator()]),
        McjsError::WrongTokenAccount,
    );
    // Payment steered away from the registered payout account.
    let mut complete = s.complete_ix();
    ix::tamper::substitute_account(&mut complete, &s.provider.payout, &s.provider.wallet.token);
    expect_error(
        s.env.send(&[complete], &[&s.operator()]),
        McjsError::WrongTokenAccount,
    );
    // Commission steered away from the treasury.
    let mut complete = s.complete_ix();
    let treasury = s.env.treasury;
    ix::tamper::substitute_account(&mut complete, &treasury, &s.provider.wallet.token);
    expect_error(
        s.env.send(&[complete], &[&s.operator()]),
        McjsError::WrongTokenAccount,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

#[test]
fn a_completion_without_the_owners_refund_account_is_refused() {
    let mut s = scene();
    let before = s.env.snapshot();
    // The refund account is optional where leaving cannot end the job
    // (`pause_job`); a completion ends it, so omitting it (the program's
    // id in its place, as for any omitted account) changes nothing.
    let mut complete = s.complete_ix();
    assert_eq!(
        ix::tamper::substitute_account(&mut complete, &s.owner.token, &mcjs::ID),
        1
    );
    expect_error(
        s.env.send(&[complete], &[&s.operator()]),
        McjsError::WrongTokenAccount,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
    // With it, the same completion goes through.
    s.env.send(&[s.complete_ix()], &[&s.operator()]).unwrap();
}

/// Writes `data` into a new account owned by `owner` at a fresh address.
fn plant(env: &mut Env, owner: Pubkey, data: Vec<u8>) -> Pubkey {
    let key = Keypair::new().pubkey();
    let lamports = env.svm.minimum_balance_for_rent_exemption(data.len());
    env.svm
        .set_account(
            key,
            Account {
                lamports,
                data,
                owner,
                executable: false,
                rent_epoch: 0,
            },
        )
        .unwrap();
    key
}

fn serialized<T: AccountSerialize>(account: &T) -> Vec<u8> {
    let mut data = Vec::new();
    account.try_serialize(&mut data).unwrap();
    data
}

#[test]
fn type_cosplay_is_refused() {
    let mut s = scene();
    let before = s.env.snapshot();
    // A Provider account passed where the Job goes.
    let mut complete = s.complete_ix();
    ix::tamper::substitute_account(&mut complete, &s.job, &s.provider.pda);
    expect_anchor_error(
        s.env.send(&[complete], &[&s.operator()]),
        Anchor::AccountDiscriminatorMismatch,
    );
    // A Node account passed where the Config goes.
    let mut assign = ix::assign_job(
        &s.env.scheduler.pubkey(),
        &s.job,
        &s.rival.nodes[0],
        &s.rival.pda,
        None,
    );
    ix::tamper::substitute_account(&mut assign, &pda::config(), &s.rival.nodes[0]);
    let scheduler = s.env.scheduler.insecure_clone();
    expect_failure(s.env.send(&[assign], &[&scheduler]));
    s.env.assert_unchanged(&before);
}

#[test]
fn look_alike_accounts_are_refused() {
    let mut s = scene();
    let attacker = s.env.wallet(0);
    // A Config naming the attacker as scheduler, owned by another program.
    let mut fake_config = s.env.config();
    fake_config.scheduler = attacker.key();
    let data = serialized(&fake_config);
    let foreign = plant(&mut s.env, spl_token::ID, data.clone());
    // An account a stranger makes the MCJS program own (the system
    // program lets anyone create an account for any owner) is all zeros:
    // only the program writes its data, and it writes a Config only at the
    // Config PDA (`initialize`). Its type is refused, so the Config's seeds
    // need no second check (state/seeds.rs).
    let misplaced = Keypair::new();
    let lamports = s.env.svm.minimum_balance_for_rent_exemption(data.len());
    let create = anchor_lang::solana_program::system_instruction::create_account(
        &attacker.key(),
        &misplaced.pubkey(),
        lamports,
        data.len() as u64,
        &mcjs::ID,
    );
    s.env.svm.airdrop(&attacker.key(), 1_000_000_000).unwrap();
    s.env
        .send(&[create], &[&attacker.kp, &misplaced])
        .expect("anyone may create an account owned by the program");
    let misplaced = misplaced.pubkey();
    let queued = s.env.submit(&s.owner, job_args(2, 50 * USDC)).unwrap();
    let before = s.env.snapshot();
    let mut assign = ix::assign_job(
        &attacker.key(),
        &queued,
        &s.rival.nodes[0],
        &s.rival.pda,
        None,
    );
    ix::tamper::substitute_account(&mut assign, &pda::config(), &foreign);
    expect_anchor_error(
        s.env.send(&[assign.clone()], &[&attacker.kp]),
        Anchor::AccountOwnedByWrongProgram,
    );
    ix::tamper::substitute_account(&mut assign, &foreign, &misplaced);
    expect_anchor_error(
        s.env.send(&[assign], &[&attacker.kp]),
        Anchor::AccountDiscriminatorMismatch,
    );

    // A Job claiming the attacker's node, planted outside the job PDA.
    let mut fake_job = s.env.job(&s.job);
    fake_job.owner = attacker.key();
    let fake_job_key = plant(&mut s.env, mcjs::ID, serialized(&fake_job));
    let mut cancel = ix::cancel_job(&attacker.key(), &s.job, &attacker.token, &s.env.mint);
    ix::tamper::substitute_account(&mut cancel, &s.job, &fake_job_key);
    expect_anchor_error(
        s.env.send(&[cancel], &[&attacker.kp]),
        Anchor::ConstraintSeeds,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

#[test]
fn another_jobs_vault_is_refused() {
    let mut s = scene();
    let owner = s.owner.kp.insecure_clone();
    let other = s.env.submit(&s.owner, job_args(2, 500 * USDC)).unwrap();
    let paused = s.env.submit(&s.owner, job_args(3, 10 * USDC)).unwrap();
    let before = s.env.snapshot();
    // Cancel job 3 but drain job 2's vault.
    let mut cancel = ix::cancel_job(&owner.pubkey(), &paused, &s.owner.token, &s.env.mint);
    ix::tamper::substitute_account(&mut cancel, &pda::vault(&paused), &pda::vault(&other));
    expect_anchor_error(s.env.send(&[cancel], &[&owner]), Anchor::ConstraintSeeds);
    // A provider stake vault as a job vault.
    let mut complete = s.complete_ix();
    ix::tamper::substitute_account(
        &mut complete,
        &pda::vault(&s.job),
        &pda::vault(&s.provider.pda),
    );
    expect_anchor_error(
        s.env.send(&[complete], &[&s.operator()]),
        Anchor::ConstraintSeeds,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

#[test]
fn a_wrong_mint_is_refused() {
    let mut s = scene();
    let fake_mint = s.env.create_mint(6);
    let fake_token = s.env.token_account(&fake_mint, &s.owner.key());
    s.env.mint_to(&fake_mint, &fake_token, 1_000_000 * USDC);
    let before = s.env.snapshot();
    // A bond in worthless tokens.
    let ix = ix::submit_job(
        &s.owner.key(),
        &fake_token,
        &fake_mint,
        job_args(9, 1_000 * USDC),
    );
    expect_error(s.env.send(&[ix], &[&s.owner.kp]), McjsError::WrongMint);
    // The real mint but a token account of the fake one.
    let ix = ix::submit_job(
        &s.owner.key(),
        &fake_token,
        &s.env.mint,
        job_args(9, 1_000 * USDC),
    );
    expect_error(s.env.send(&[ix], &[&s.owner.kp]), McjsError::WrongMint);
    let ix = ix::top_up(
        &s.owner.key(),
        &s.job,
        &fake_token,
        &s.env.mint,
        1_000 * USDC,
    );
    expect_error(s.env.send(&[ix], &[&s.owner.kp]), McjsError::WrongMint);
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

#[test]
fn a_fake_token_program_is_refused() {
    let mut s = scene();
    let before = s.env.snapshot();
    let impostor = Keypair::new().pubkey();
    let mut cancel = s.cancel_ix();
    ix::tamper::substitute_account(&mut cancel, &spl_token::ID, &impostor);
    expect_anchor_error(
        s.env.send(&[cancel], &[&s.owner.kp]),
        Anchor::InvalidProgramId,
    );
    let mut complete = s.complete_ix();
    ix::tamper::substitute_account(&mut complete, &spl_token::ID, &mcjs::ID);
    expect_anchor_error(
        s.env.send(&[complete], &[&s.operator()]),
        Anchor::InvalidProgramId,
    );
    s.env.assert_unchanged(&before);
}

#[test]
fn the_same_account_twice_cannot_pay_itself() {
    let mut s = scene();
    let before = s.env.snapshot();
    // The job vault as the refund destination (its authority is the job,
    // not the owner), the treasury as the provider's payout: each
    // destination is pinned by address, so either is refused before a
    // token moves.
    let mut complete = s.complete_ix();
    ix::tamper::substitute_account(&mut complete, &s.owner.token, &pda::vault(&s.job));
    expect_error(
        s.env.send(&[complete], &[&s.operator()]),
        McjsError::WrongTokenAccount,
    );
    let mut complete = s.complete_ix();
    ix::tamper::substitute_account(&mut complete, &s.provider.payout, &s.env.treasury.clone());
    expect_error(
        s.env.send(&[complete], &[&s.operator()]),
        McjsError::WrongTokenAccount,
    );
    // A stake paid from the stake vault into itself.
    let stake_vault = pda::vault(&s.provider.pda);
    let mut stake = ix::add_stake(
        &s.provider.key(),
        &s.provider.wallet.token,
        &s.env.mint,
        USDC,
    );
    ix::tamper::substitute_account(&mut stake, &s.provider.wallet.token, &stake_vault);
    expect_anchor_error(
        s.env.send(&[stake], &[&s.provider.wallet.kp]),
        Anchor::ConstraintDuplicateMutableAccount,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

/// A vault named again as the other side of a transfer, where the two sit
/// in different nested account lists (the job's bond and the owner's
/// account, the job on its node and the provider's stake): refused as a
/// duplicate, within the compute units the client grants, before a token
/// moves.
#[test]
fn a_vault_named_twice_across_nested_accounts_is_refused_as_a_duplicate() {
    let mut s = scene();
    let before = s.env.snapshot();
    let job_vault = pda::vault(&s.job);
    let stake_vault = pda::vault(&s.provider.pda);
    let mut top_up = ix::top_up(&s.owner.key(), &s.job, &s.owner.token, &s.env.mint, USDC);
    ix::tamper::substitute_account(&mut top_up, &s.owner.token, &job_vault);
    let mut cancel = s.cancel_ix();
    ix::tamper::substitute_account(&mut cancel, &s.owner.token, &job_vault);
    for ix in [top_up, cancel] {
        expect_anchor_error(
            s.env.send(&[ix], &[&s.owner.kp]),
            Anchor::ConstraintDuplicateMutableAccount,
        );
    }
    let mut withdraw = ix::withdraw_stake(&s.provider.key(), &s.provider.wallet.token, &s.env.mint);
    ix::tamper::substitute_account(&mut withdraw, &s.provider.wallet.token, &stake_vault);
    expect_anchor_error(
        s.env.send(&[withdraw], &[&s.provider.wallet.kp]),
        Anchor::ConstraintDuplicateMutableAccount,
    );
    // The scheduler's report with the job's vault as the provider's stake
    // vault (the slash would be paid out of the bond).
    let scheduler = s.env.scheduler.insecure_clone();
    let mut report = s
        .provider
        .assignment(&s.job, 0, &s.owner.token, 1, s.env.deployment())
        .report_failure(&scheduler.pubkey(), FailureCause::NodeLost);
    ix::tamper::substitute_account(&mut report, &stake_vault, &job_vault);
    expect_anchor_error(
        s.env.send(&[report], &[&scheduler]),
        Anchor::ConstraintDuplicateMutableAccount,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

#[test]
fn a_closed_job_cannot_be_revived() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    let cancel = ix::cancel_job(&owner.key(), &job, &owner.token, &env.mint);
    env.send(&[cancel], &[&owner.kp]).unwrap();
    // Close and send the rent straight back in the same transaction.
    let close = ix::close_job(&owner.key(), &job, &owner.token, &env.mint);
    let refill =
        anchor_lang::solana_program::system_instruction::transfer(&owner.key(), &job, 10_000_000);
    env.send(&[close, refill], &[&owner.kp]).unwrap();
    let revived = env.svm.get_account(&job).unwrap();
    assert_eq!(
        revived.owner,
        anchor_lang::solana_program::system_program::ID
    );
    assert!(revived.data.is_empty());
    let before = env.snapshot();
    expect_anchor_error(
        env.assign(&job, &provider, 0),
        Anchor::AccountOwnedByWrongProgram,
    );
    let top_up = ix::top_up(&owner.key(), &job, &owner.token, &env.mint, USDC);
    expect_failure(env.send(&[top_up], &[&owner.kp]));
    env.assert_unchanged(&before);
}

#[test]
fn a_fenced_node_can_neither_attest_nor_complete_after_reassignment() {
    let mut s = scene();
    let scheduler = s.env.scheduler.insecure_clone();
    s.env
        .report(
            &scheduler,
            &s.job,
            &s.owner.token.clone(),
            &s.provider,
            0,
            FailureCause::NodeLost,
        )
        .unwrap();
    s.env.assign(&s.job, &s.rival, 0).unwrap();
    s.env.start(&s.job, &s.rival, 0).unwrap();
    let before = s.env.snapshot();
    // The old node holds generation 1; the job is at 3 on another node.
    expect_error(
        s.env.attest(&s.job, &s.provider, 0, 1, 5, 5),
        McjsError::WrongNode,
    );
    expect_error(
        s.env.send(&[s.complete_ix()], &[&s.operator()]),
        McjsError::NotAssignedProvider,
    );
    // The rival with the old generation is stale.
    expect_error(
        s.env.attest(&s.job, &s.rival, 0, 1, 5, 5),
        McjsError::StaleGeneration,
    );
    // A late report about generation 1 cannot hit the new assignment.
    let stale_report = s
        .rival
        .assignment(&s.job, 0, &s.owner.token, 1, s.env.deployment())
        .report_failure(&scheduler.pubkey(), FailureCause::NodeLost);
    expect_error(
        s.env.send(&[stale_report], &[&scheduler]),
        McjsError::StaleGeneration,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}

#[test]
fn a_provider_cannot_act_on_another_providers_job() {
    let mut s = scene();
    let before = s.env.snapshot();
    // The rival, with its own accounts, against the provider's job: its
    // node is not the job's (an attestation names no provider unless it
    // settles; one that does is refused the same way).
    for settle in [false, true] {
        expect_error(
            s.env.attest_settling(&s.job, &s.rival, 0, 1, 5, 5, settle),
            McjsError::WrongNode,
        );
    }
    expect_error(
        s.env.start(&s.job, &s.rival, 0),
        McjsError::NotAssignedProvider,
    );
    // The rival's operator naming the provider's node under the rival's Provider account.
    let rival_operator = s.rival.operator(0).insecure_clone();
    let mut attest = ix::JobAccounts {
        node: s.provider.nodes[0],
        ..s.rival.assignment(&s.job, 0, &s.job, 1, s.env.deployment())
    }
    .attest(&rival_operator.pubkey(), true, 5, 5, [0; 32]);
    expect_failure(s.env.send(&[attest.clone()], &[&rival_operator]));
    // ... or the provider's own accounts, signed by the rival's operator key.
    ix::tamper::substitute_account(&mut attest, &s.rival.pda, &s.provider.pda);
    ix::tamper::substitute_account(&mut attest, &s.rival.payout, &s.provider.payout);
    expect_error(
        s.env.send(&[attest], &[&rival_operator]),
        McjsError::NotNodeOperator,
    );
    // Nor can a job's owner be impersonated by another wallet.
    let mut cancel = s.cancel_ix();
    ix::tamper::substitute_account(&mut cancel, &s.owner.key(), &s.rival.key());
    expect_failure(s.env.send(&[cancel], &[&s.rival.wallet.kp]));
    s.env.assert_unchanged(&before);
}

#[test]
fn overflow_sized_amounts_are_refused() {
    let mut s = scene();
    let before = s.env.snapshot();
    let ix = ix::top_up(
        &s.owner.key(),
        &s.job,
        &s.owner.token,
        &s.env.mint,
        u64::MAX,
    );
    expect_failure(s.env.send(&[ix], &[&s.owner.kp]));
    let ix = ix::add_stake(
        &s.provider.key(),
        &s.provider.wallet.token,
        &s.env.mint,
        u64::MAX,
    );
    expect_failure(s.env.send(&[ix], &[&s.provider.wallet.kp]));
    let ix = ix::request_withdrawal(&s.provider.key(), u64::MAX);
    expect_error(
        s.env.send(&[ix], &[&s.provider.wallet.kp]),
        McjsError::InsufficientStake,
    );
    s.env.assert_unchanged(&before);

    // A node price that overflows the rate of a many-GPU job.
    let mut big = a100_80gb();
    big.gpu_count = 16;
    let whale = s
        .env
        .provider_with_nodes(200 * USDC, &[big], u64::MAX / 100);
    let mut args = job_args(7, 100 * USDC);
    args.requirements.gpu_count = 200;
    args.terms.max_price_per_gpu_hour = u64::MAX / 100;
    args.terms.checkpoint_interval_secs = 60;
    args.bond = 900 * USDC;
    // The minimum bond itself overflows: refused at submission.
    expect_error(
        s.env.submit(&s.owner, args.clone()).map(|_| vec![]),
        McjsError::Overflow,
    );
    args.terms.max_price_per_gpu_hour = u64::MAX / 1_000_000_000;
    args.bond = 1;
    expect_error(
        s.env.submit(&s.owner, args).map(|_| vec![]),
        McjsError::BondTooSmall,
    );
    let _ = whale;
    s.env.assert_invariants();
}

/// An instruction takes exactly the accounts it names: one more (here a
/// token account the instruction would never read, then a second job) is
/// refused, not silently ignored, and nothing moves.
#[test]
fn an_account_beyond_those_an_instruction_names_is_refused() {
    use anchor_lang::prelude::AccountMeta;
    let mut s = scene();
    let before = s.env.snapshot();
    let mut complete = s.complete_ix();
    complete
        .accounts
        .push(AccountMeta::new(s.rival.wallet.token, false));
    expect_error(
        s.env.send(&[complete], &[&s.operator()]),
        McjsError::UnexpectedAccounts,
    );
    let mut cancel = s.cancel_ix();
    cancel.accounts.push(AccountMeta::new(s.job, false));
    expect_error(
        s.env.send(&[cancel], &[&s.owner.kp]),
        McjsError::UnexpectedAccounts,
    );
    s.env.assert_unchanged(&before);
    s.env.assert_invariants();
}
