//! Node operator keys: what a node's agent signs with. It starts, attests
//! and completes its own node's jobs and reports its node's profile and
//! status; it never moves the provider's money, prices, keys or nodes. The
//! provider's wallet no longer acts as a node.

use anchor_lang::error::ErrorCode as Anchor;
use anchor_lang::solana_program::instruction::Instruction;
use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

/// `start_job` for `node` of `provider`, signed by `signer`.
fn start_by(
    env: &Env,
    signer: &Keypair,
    job: &Pubkey,
    p: &ProviderActor,
    node: usize,
) -> Instruction {
    ix::start_job(
        &signer.pubkey(),
        job,
        &p.nodes[node],
        &p.pda,
        env.job(job).generation,
    )
}

/// `attest_checkpoint` for `node` of `provider` at the job's generation, signed by `signer`.
fn attest_by(
    env: &Env,
    signer: &Keypair,
    job: &Pubkey,
    p: &ProviderActor,
    node: usize,
    step: u64,
) -> Instruction {
    p.assignment(job, node, job, env.job(job).generation, env.deployment())
        .attest(
            &signer.pubkey(),
            env.attest_needs_settlement(job),
            0,
            step,
            checkpoint_hash(0, step),
        )
}

/// `complete_job` for `node` of `provider` at the job's generation, signed by `signer`.
fn complete_by(
    env: &Env,
    signer: &Keypair,
    job: &Pubkey,
    owner_token: &Pubkey,
    p: &ProviderActor,
    node: usize,
) -> Instruction {
    p.assignment(
        job,
        node,
        owner_token,
        env.job(job).generation,
        env.deployment(),
    )
    .complete(&signer.pubkey(), [0xee; 32])
}

/// Replaces `from` by `to` among an instruction's accounts, signer flags kept.
fn signed_by(mut ix: Instruction, from: &Pubkey, to: &Pubkey) -> Instruction {
    assert!(ix::tamper::substitute_account(&mut ix, from, to) > 0);
    ix
}

#[test]
fn an_operator_key_cannot_withdraw_add_stake_or_register_nodes() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let operator = provider.operator(0).insecure_clone();
    let wallet = provider.key();
    // A withdrawal requested by the wallet and past its cooldown: only the
    // signer stands between the stake and the operator.
    let request = ix::request_withdrawal(&wallet, 50 * USDC);
    env.send(&[request], &[&provider.wallet.kp]).unwrap();
    env.warp(86_400);
    let operator_token = env.token_account(&env.mint.clone(), &operator.pubkey());
    let before = env.snapshot();

    // Its own key names no Provider account; the provider's accounts are
    // derived from the wallet, which did not sign.
    let attempts: Vec<(Anchor, Instruction)> = vec![
        (
            Anchor::AccountNotInitialized,
            ix::withdraw_stake(&operator.pubkey(), &operator_token, &env.mint),
        ),
        (
            Anchor::ConstraintSeeds,
            signed_by(
                ix::withdraw_stake(&wallet, &operator_token, &env.mint),
                &wallet,
                &operator.pubkey(),
            ),
        ),
        (
            Anchor::AccountNotInitialized,
            ix::request_withdrawal(&operator.pubkey(), 10 * USDC),
        ),
        (
            Anchor::ConstraintSeeds,
            signed_by(
                ix::request_withdrawal(&wallet, 10 * USDC),
                &wallet,
                &operator.pubkey(),
            ),
        ),
        (
            Anchor::ConstraintSeeds,
            signed_by(
                ix::add_stake(&wallet, &provider.wallet.token, &env.mint, USDC),
                &wallet,
                &operator.pubkey(),
            ),
        ),
        (
            Anchor::ConstraintSeeds,
            signed_by(
                ix::register_node(
                    &wallet,
                    RegisterNodeArgs {
                        index: 1,
                        operator: operator.pubkey(),
                        hardware: a100_80gb(),
                        readiness: 90,
                        price_per_gpu_hour: USDC,
                    },
                ),
                &wallet,
                &operator.pubkey(),
            ),
        ),
        (
            Anchor::AccountNotInitialized,
            ix::register_node(
                &operator.pubkey(),
                RegisterNodeArgs {
                    index: 1,
                    operator: Keypair::new().pubkey(),
                    hardware: a100_80gb(),
                    readiness: 90,
                    price_per_gpu_hour: USDC,
                },
            ),
        ),
    ];
    for (expected, ix) in attempts {
        expect_anchor_error(env.send(&[ix], &[&operator]), expected);
    }
    env.assert_unchanged(&before);
    assert_eq!(env.balance(&operator_token), 0);
    assert_eq!(env.provider(&provider.pda).stake, 200 * USDC);
    assert_eq!(env.provider(&provider.pda).node_count, 1);
    env.assert_invariants();
}

#[test]
fn an_operator_key_cannot_change_its_nodes_price_or_operator() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let operator = provider.operator(0).insecure_clone();
    let successor = Keypair::new().pubkey();
    let before = env.snapshot();
    for args in [
        UpdateNodeArgs {
            price_per_gpu_hour: Some(100 * USDC),
            ..Default::default()
        },
        UpdateNodeArgs {
            operator: Some(successor),
            ..Default::default()
        },
        // Smuggled beside fields it may set.
        UpdateNodeArgs {
            readiness: Some(50),
            hardware: Some(k80()),
            price_per_gpu_hour: Some(USDC / 2),
            ..Default::default()
        },
        UpdateNodeArgs {
            readiness: Some(50),
            operator: Some(operator.pubkey()),
            ..Default::default()
        },
    ] {
        let update = ix::update_node(&operator.pubkey(), &provider.pda, 0, args);
        expect_error(
            env.send(&[update], &[&operator]),
            McjsError::OperatorNotAllowed,
        );
    }
    env.assert_unchanged(&before);
    let node = env.node(&provider.nodes[0]);
    assert_eq!(
        (node.price_per_gpu_hour, node.operator),
        (USDC, operator.pubkey())
    );
}

#[test]
fn an_operator_key_reports_its_nodes_profile_readiness_and_status() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb(), k80()], USDC);
    let operator = provider.operator(0).insecure_clone();
    let mut measured = a100_80gb();
    measured.checkpoint_write_mibps = 900;
    measured.ram_mib = 256 * 1024;
    let update = ix::update_node(
        &operator.pubkey(),
        &provider.pda,
        0,
        UpdateNodeArgs {
            hardware: Some(measured.clone()),
            readiness: Some(64),
            ..Default::default()
        },
    );
    let logs = env.send(&[update], &[&operator]).unwrap();
    let updated = &events::<NodeUpdated>(&logs)[0];
    assert_eq!(updated.by, operator.pubkey());
    assert_eq!(updated.old_operator, operator.pubkey());
    assert_eq!(updated.operator, operator.pubkey());
    let node = env.node(&provider.nodes[0]);
    assert_eq!(node.hardware, measured);
    assert_eq!(node.readiness, 64);
    assert_eq!(node.price_per_gpu_hour, USDC, "the price is the wallet's");

    let offline = ix::set_node_status(&operator.pubkey(), &provider.pda, 0, NodeStatus::Offline);
    env.send(&[offline], &[&operator]).unwrap();
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Offline);
    let available =
        ix::set_node_status(&operator.pubkey(), &provider.pda, 0, NodeStatus::Available);
    env.send(&[available], &[&operator]).unwrap();
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Available);

    // Node 1's key cannot speak for node 0, nor another provider's key.
    let stranger_provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let before = env.snapshot();
    for other in [provider.operator(1), stranger_provider.operator(0)] {
        let update = ix::update_node(
            &other.pubkey(),
            &provider.pda,
            0,
            UpdateNodeArgs {
                readiness: Some(1),
                ..Default::default()
            },
        );
        expect_error(env.send(&[update], &[other]), McjsError::NotOwner);
        let offline = ix::set_node_status(&other.pubkey(), &provider.pda, 0, NodeStatus::Offline);
        expect_error(env.send(&[offline], &[other]), McjsError::NotOwner);
    }
    env.assert_unchanged(&before);
}

#[test]
fn an_operator_key_cannot_start_attest_or_complete_for_another_node() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb(), a100_80gb()], USDC);
    let rival = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    env.assign(&job, &provider, 0).unwrap();
    let sibling = provider.operator(1).insecure_clone();
    let foreign = rival.operator(0).insecure_clone();

    let before = env.snapshot();
    for (signer, expected) in [
        (&sibling, McjsError::NotNodeOperator),
        (&foreign, McjsError::NotNodeOperator),
    ] {
        // Naming the job's node and provider: the key is not that node's.
        expect_error(
            env.send(&[start_by(&env, signer, &job, &provider, 0)], &[signer]),
            expected,
        );
    }
    // Naming its own node: the job is not on it.
    expect_error(
        env.send(&[start_by(&env, &sibling, &job, &provider, 1)], &[&sibling]),
        McjsError::WrongNode,
    );
    expect_error(
        env.send(&[start_by(&env, &foreign, &job, &rival, 0)], &[&foreign]),
        McjsError::NotAssignedProvider,
    );
    env.assert_unchanged(&before);

    env.start(&job, &provider, 0).unwrap();
    env.warp(900);
    let before = env.snapshot();
    for signer in [&sibling, &foreign] {
        expect_error(
            env.send(&[attest_by(&env, signer, &job, &provider, 0, 1)], &[signer]),
            McjsError::NotNodeOperator,
        );
        expect_error(
            env.send(
                &[complete_by(&env, signer, &job, &owner.token, &provider, 0)],
                &[signer],
            ),
            McjsError::NotNodeOperator,
        );
    }
    expect_error(
        env.send(
            &[attest_by(&env, &sibling, &job, &provider, 1, 1)],
            &[&sibling],
        ),
        McjsError::WrongNode,
    );
    expect_error(
        env.send(
            &[complete_by(&env, &foreign, &job, &owner.token, &rival, 0)],
            &[&foreign],
        ),
        McjsError::NotAssignedProvider,
    );
    env.assert_unchanged(&before);

    // The node's own key does all three.
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    env.complete(&job, &owner.token, &provider, 0, 1).unwrap();
    assert!(matches!(env.job(&job).state, JobState::Completed { .. }));
    env.assert_invariants();
}

#[test]
fn the_providers_wallet_can_no_longer_start_attest_or_complete() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.submit(&owner, job_args(1, 100 * USDC)).unwrap();
    env.assign(&job, &provider, 0).unwrap();
    let wallet = provider.wallet.kp.insecure_clone();
    let before = env.snapshot();
    expect_error(
        env.send(&[start_by(&env, &wallet, &job, &provider, 0)], &[&wallet]),
        McjsError::NotNodeOperator,
    );
    env.assert_unchanged(&before);
    env.start(&job, &provider, 0).unwrap();
    env.warp(900);
    let before = env.snapshot();
    expect_error(
        env.send(
            &[attest_by(&env, &wallet, &job, &provider, 0, 1)],
            &[&wallet],
        ),
        McjsError::NotNodeOperator,
    );
    expect_error(
        env.send(
            &[complete_by(&env, &wallet, &job, &owner.token, &provider, 0)],
            &[&wallet],
        ),
        McjsError::NotNodeOperator,
    );
    env.assert_unchanged(&before);
}

#[test]
fn a_rotated_operator_key_is_refused_at_once_and_its_successor_accepted() {
    let mut env = Env::new();
    let owner = env.wallet(1_000 * USDC);
    let mut provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    let old = provider.operator(0).insecure_clone();
    let new = Keypair::new();
    env.svm.airdrop(&new.pubkey(), 1_000_000_000).unwrap();

    // The wallet alone rotates, and never to no key or to itself.
    let before = env.snapshot();
    for (operator, expected) in [
        (Pubkey::default(), McjsError::InvalidOperator),
        (provider.key(), McjsError::InvalidOperator),
    ] {
        let rotate = ix::update_node(
            &provider.key(),
            &provider.pda,
            0,
            UpdateNodeArgs {
                operator: Some(operator),
                ..Default::default()
            },
        );
        expect_error(env.send(&[rotate], &[&provider.wallet.kp]), expected);
    }
    env.assert_unchanged(&before);

    let rotate = ix::update_node(
        &provider.key(),
        &provider.pda,
        0,
        UpdateNodeArgs {
            operator: Some(new.pubkey()),
            ..Default::default()
        },
    );
    let logs = env.send(&[rotate], &[&provider.wallet.kp]).unwrap();
    let updated = &events::<NodeUpdated>(&logs)[0];
    assert_eq!(
        (updated.old_operator, updated.operator, updated.by),
        (old.pubkey(), new.pubkey(), provider.key())
    );
    assert_eq!(env.node(&provider.nodes[0]).operator, new.pubkey());

    env.warp(900);
    let before = env.snapshot();
    expect_error(
        env.send(&[attest_by(&env, &old, &job, &provider, 0, 2)], &[&old]),
        McjsError::NotNodeOperator,
    );
    expect_error(
        env.send(
            &[complete_by(&env, &old, &job, &owner.token, &provider, 0)],
            &[&old],
        ),
        McjsError::NotNodeOperator,
    );
    // Nor may it still report the node's status or profile.
    let offline = ix::set_node_status(&old.pubkey(), &provider.pda, 0, NodeStatus::Offline);
    expect_error(env.send(&[offline], &[&old]), McjsError::NotOwner);
    env.assert_unchanged(&before);

    provider.operators[0] = new;
    env.attest(&job, &provider, 0, 1, 0, 2).unwrap();
    env.warp(900);
    env.complete(&job, &owner.token, &provider, 0, 1).unwrap();
    let done = env.job(&job);
    assert!(matches!(done.state, JobState::Completed { .. }));
    assert_eq!(done.paid, 3 * USDC, "45 attested minutes at 4 USDC/h");
    env.assert_invariants();
}

#[test]
fn a_node_is_registered_only_with_an_operator_key_of_its_own() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(200 * USDC, &[], USDC);
    let before = env.snapshot();
    for operator in [Pubkey::default(), provider.key()] {
        let register = ix::register_node(
            &provider.key(),
            RegisterNodeArgs {
                index: 0,
                operator,
                hardware: a100_80gb(),
                readiness: 90,
                price_per_gpu_hour: USDC,
            },
        );
        expect_error(
            env.send(&[register], &[&provider.wallet.kp]),
            McjsError::InvalidOperator,
        );
    }
    env.assert_unchanged(&before);
    assert!(
        env.account(&mcjs_client::pda::node(&provider.pda, 0))
            .is_none()
    );
    let operator = Keypair::new().pubkey();
    let register = ix::register_node(
        &provider.key(),
        RegisterNodeArgs {
            index: 0,
            operator,
            hardware: a100_80gb(),
            readiness: 90,
            price_per_gpu_hour: USDC,
        },
    );
    let logs = env.send(&[register], &[&provider.wallet.kp]).unwrap();
    assert_eq!(events::<NodeRegistered>(&logs)[0].operator, operator);
    assert_eq!(
        env.node(&mcjs_client::pda::node(&provider.pda, 0)).operator,
        operator
    );
}
