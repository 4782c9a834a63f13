//! Config, providers and nodes: every instruction's success and error paths.

use anchor_lang::solana_program::program_pack::Pack;
use anchor_spl::token::spl_token;
use mcjs::errors::McjsError;
use mcjs::events::*;
use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::{ix, pda};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

#[test]
fn initialize_records_the_config_and_logs_it() {
    let mut env = Env::uninitialised();
    let admin = env.admin.insecure_clone();
    let ix = ix::initialize(
        &admin.pubkey(),
        &env.mint,
        &env.treasury,
        InitializeArgs {
            scheduler: env.scheduler.pubkey(),
            params: default_params(),
        },
    );
    let logs = env.send(&[ix], &[&admin]).unwrap();
    let config = env.config();
    assert_eq!(config.admin, admin.pubkey());
    assert_eq!(config.scheduler, env.scheduler.pubkey());
    assert_eq!(config.usdc_mint, env.mint);
    assert_eq!(config.usdc_decimals, 6);
    assert_eq!(config.treasury, env.treasury);
    assert_eq!(config.params, default_params());
    assert!(!config.paused);
    assert_eq!(config.insurance_pool, pda::insurance_pool());
    let pool = env
        .account(&pda::insurance_pool())
        .expect("the insurance pool");
    let pool = spl_token::state::Account::unpack(&pool.data).unwrap();
    assert_eq!(
        (pool.mint, pool.owner, pool.amount),
        (env.mint, pda::config(), 0),
        "an empty pool of the USDC mint whose authority is the Config"
    );
    let initialized = events::<ConfigInitialized>(&logs);
    assert_eq!(initialized.len(), 1);
    assert_eq!(initialized[0].insurance_pool, pda::insurance_pool());
}

/// On a cluster the program is deployed by the upgradeable loader and only
/// its upgrade authority may initialise it, so nobody can front-run the
/// deployment. The native builtin has no programdata to check: this runs
/// against the SBF build (`MCJS_PROGRAM_SO`, deployed with the admin as its
/// upgrade authority) and passes vacuously without it.
#[test]
fn only_the_upgrade_authority_initialises_a_deployed_program() {
    if mcjs_svm::program_elf_from_env().is_none() {
        return;
    }
    let mut env = Env::uninitialised();
    let stranger = Keypair::new();
    env.svm.airdrop(&stranger.pubkey(), 10_000_000_000).unwrap();
    let args = InitializeArgs {
        scheduler: env.scheduler.pubkey(),
        params: default_params(),
    };
    let ix = ix::initialize(&stranger.pubkey(), &env.mint, &env.treasury, args.clone());
    expect_error(
        env.send(&[ix], &[&stranger]),
        McjsError::NotUpgradeAuthority,
    );
    assert!(env.account(&pda::config()).is_none());

    let admin = env.admin.insecure_clone();
    let ix = ix::initialize(&admin.pubkey(), &env.mint, &env.treasury, args);
    env.send(&[ix], &[&admin]).unwrap();
    assert_eq!(env.config().admin, admin.pubkey());
}

/// A bad commission or liveness factor, or a stake withdrawal cooldown
/// shorter than a check can last (a checker could take its stake out before
/// the check that may slash it resolves), is refused.
#[test]
fn initialize_refuses_a_bad_commission_liveness_factor_or_cooldown() {
    let longest = Verification::longest_secs(default_params().challenge_window_secs);
    assert_eq!(
        longest,
        7 * u64::from(default_params().challenge_window_secs)
    );
    for params in [
        ConfigParams {
            commission_bps: 10_001,
            ..default_params()
        },
        ConfigParams {
            liveness_factor: 0,
            ..default_params()
        },
        ConfigParams {
            withdrawal_cooldown_secs: longest as u32 - 1,
            ..default_params()
        },
    ] {
        let mut env = Env::uninitialised();
        let admin = env.admin.insecure_clone();
        let ix = ix::initialize(
            &admin.pubkey(),
            &env.mint,
            &env.treasury,
            InitializeArgs {
                scheduler: env.scheduler.pubkey(),
                params,
            },
        );
        let outcome = env.send(&[ix], &[&admin]);
        let expected = if params.liveness_factor == 0 {
            McjsError::InvalidLivenessFactor
        } else if params.commission_bps > 10_000 {
            McjsError::InvalidCommission
        } else {
            McjsError::CooldownShorterThanCheck
        };
        expect_error(outcome, expected);
        assert!(env.account(&pda::config()).is_none());
    }
}

#[test]
fn initialize_refuses_a_treasury_of_another_mint() {
    let mut env = Env::uninitialised();
    let other_mint = env.create_mint(6);
    let admin = env.admin.insecure_clone();
    let wrong_treasury = env.token_account(&other_mint, &admin.pubkey());
    let ix = ix::initialize(
        &admin.pubkey(),
        &env.mint,
        &wrong_treasury,
        InitializeArgs {
            scheduler: env.scheduler.pubkey(),
            params: default_params(),
        },
    );
    expect_error(env.send(&[ix], &[&admin]), McjsError::WrongMint);
}

#[test]
fn the_config_cannot_be_initialised_twice() {
    let mut env = Env::new();
    let before = env.snapshot();
    let attacker = env.wallet(0);
    let ix = ix::initialize(
        &attacker.key(),
        &env.mint,
        &env.treasury,
        InitializeArgs {
            scheduler: attacker.key(),
            params: default_params(),
        },
    );
    expect_failure(env.send(&[ix], &[&attacker.kp]));
    assert_eq!(env.config().admin, env.admin.pubkey());
    env.assert_unchanged(&before);
}

#[test]
fn update_config_by_the_admin_logs_old_and_new() {
    let mut env = Env::new();
    let admin = env.admin.insecure_clone();
    let new_scheduler = Keypair::new().pubkey();
    let new_treasury = env.token_account(&env.mint.clone(), &admin.pubkey());
    let params = ConfigParams {
        commission_bps: 250,
        ..default_params()
    };
    let ix = ix::update_config(
        &admin.pubkey(),
        Some(new_treasury),
        UpdateConfigArgs {
            scheduler: Some(new_scheduler),
            params: Some(params),
            paused: Some(true),
            ..Default::default()
        },
    );
    let logs = env.send(&[ix], &[&admin]).unwrap();
    let updated = events::<ConfigUpdated>(&logs);
    assert_eq!(updated.len(), 1);
    assert_eq!(updated[0].old.scheduler, env.scheduler.pubkey());
    assert_eq!(updated[0].new.scheduler, new_scheduler);
    assert_eq!(updated[0].old.params.commission_bps, 500);
    assert_eq!(updated[0].new.params.commission_bps, 250);
    assert_eq!(updated[0].new.treasury, new_treasury);
    assert!(updated[0].new.paused && !updated[0].old.paused);
    let config = env.config();
    assert_eq!(config.scheduler, new_scheduler);
    assert_eq!(config.treasury, new_treasury);
    assert!(config.paused);
}

#[test]
fn update_config_refuses_anyone_but_the_admin_and_bad_values() {
    let mut env = Env::new();
    let before = env.snapshot();
    let stranger = env.wallet(0);
    let ix = ix::update_config(
        &stranger.key(),
        None,
        UpdateConfigArgs {
            admin: Some(stranger.key()),
            ..Default::default()
        },
    );
    expect_error(env.send(&[ix], &[&stranger.kp]), McjsError::NotAdmin);
    let admin = env.admin.insecure_clone();
    let ix = ix::update_config(
        &admin.pubkey(),
        None,
        UpdateConfigArgs {
            params: Some(ConfigParams {
                commission_bps: 20_000,
                ..default_params()
            }),
            ..Default::default()
        },
    );
    expect_error(env.send(&[ix], &[&admin]), McjsError::InvalidCommission);
    // Nor may a longer challenge window outgrow the cooldown.
    let ix = ix::update_config(
        &admin.pubkey(),
        None,
        UpdateConfigArgs {
            params: Some(ConfigParams {
                challenge_window_secs: default_params().withdrawal_cooldown_secs / 7 + 1,
                ..default_params()
            }),
            ..Default::default()
        },
    );
    expect_error(
        env.send(&[ix], &[&admin]),
        McjsError::CooldownShorterThanCheck,
    );
    let other_mint = env.create_mint(6);
    let foreign_treasury = env.token_account(&other_mint, &admin.pubkey());
    let ix = ix::update_config(&admin.pubkey(), Some(foreign_treasury), Default::default());
    expect_error(env.send(&[ix], &[&admin]), McjsError::WrongMint);
    env.assert_unchanged(&before);
}

#[test]
fn a_paused_program_takes_no_new_jobs_or_nodes_but_lets_money_out() {
    let mut env = Env::new();
    let owner = env.wallet(500 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let queued = env.submit(&owner, job_args(1, 50 * USDC)).unwrap();
    let admin = env.admin.insecure_clone();
    let ix = ix::update_config(
        &admin.pubkey(),
        None,
        UpdateConfigArgs {
            paused: Some(true),
            ..Default::default()
        },
    );
    env.send(&[ix], &[&admin]).unwrap();

    expect_error(
        env.submit(&owner, job_args(2, 50 * USDC)).map(|_| vec![]),
        McjsError::ProgramPaused,
    );
    expect_error(env.assign(&queued, &provider, 0), McjsError::ProgramPaused);
    let ix = ix::register_node(
        &provider.key(),
        RegisterNodeArgs {
            index: 7,
            operator: Keypair::new().pubkey(),
            hardware: k80(),
            readiness: 50,
            price_per_gpu_hour: USDC,
        },
    );
    expect_error(
        env.send(&[ix], &[&provider.wallet.kp]),
        McjsError::ProgramPaused,
    );
    let ix = ix::cancel_job(&owner.key(), &queued, &owner.token, &env.mint);
    env.send(&[ix], &[&owner.kp]).unwrap();
    assert_eq!(env.balance(&owner.token), 500 * USDC);
    env.assert_invariants();
}

#[test]
fn a_provider_registers_adds_stake_and_withdraws_after_the_cooldown() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(150 * USDC, &[], USDC);
    let p = env.provider(&provider.pda);
    assert_eq!(p.owner, provider.key());
    assert_eq!(p.payout, provider.payout);
    assert_eq!(p.stake, 150 * USDC);
    assert_eq!(env.balance(&pda::vault(&provider.pda)), 150 * USDC);

    let ix = ix::add_stake(
        &provider.key(),
        &provider.wallet.token,
        &env.mint,
        25 * USDC,
    );
    let logs = env.send(&[ix], &[&provider.wallet.kp]).unwrap();
    assert_eq!(events::<StakeAdded>(&logs)[0].stake, 175 * USDC);

    let ix = ix::withdraw_stake(&provider.key(), &provider.wallet.token, &env.mint);
    expect_error(
        env.send(&[ix.clone()], &[&provider.wallet.kp]),
        McjsError::NoWithdrawalRequested,
    );

    let request = ix::request_withdrawal(&provider.key(), 75 * USDC);
    let logs = env.send(&[request], &[&provider.wallet.kp]).unwrap();
    assert_eq!(
        events::<WithdrawalRequested>(&logs)[0].available_at,
        START_TIME + 86_400
    );
    env.warp(86_399);
    expect_error(
        env.send(&[ix.clone()], &[&provider.wallet.kp]),
        McjsError::CooldownNotElapsed,
    );
    env.warp(1);
    let before = env.balance(&provider.wallet.token);
    env.send(&[ix.clone()], &[&provider.wallet.kp]).unwrap();
    assert_eq!(env.balance(&provider.wallet.token), before + 75 * USDC);
    let p = env.provider(&provider.pda);
    assert_eq!(p.stake, 100 * USDC);
    assert!(p.pending_withdrawal.is_none());
    expect_error(
        env.send(&[ix], &[&provider.wallet.kp]),
        McjsError::NoWithdrawalRequested,
    );
    env.assert_invariants();
}

#[test]
fn stake_cannot_leave_while_a_job_is_assigned() {
    let mut env = Env::new();
    let owner = env.wallet(500 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    let job = env.running_job(&owner, &provider, 1);
    let request = ix::request_withdrawal(&provider.key(), 200 * USDC);
    env.send(&[request], &[&provider.wallet.kp]).unwrap();
    env.warp(86_400);
    let ix = ix::withdraw_stake(&provider.key(), &provider.wallet.token, &env.mint);
    expect_error(
        env.send(&[ix.clone()], &[&provider.wallet.kp]),
        McjsError::ActiveAssignments,
    );
    env.warp(900);
    env.attest(&job, &provider, 0, 1, 0, 1).unwrap();
    env.complete(&job, &owner.token, &provider, 0, 1).unwrap();
    env.send(&[ix], &[&provider.wallet.kp]).unwrap();
    assert_eq!(env.provider(&provider.pda).stake, 0);
    env.assert_invariants();
}

#[test]
fn provider_amounts_must_be_positive_and_within_the_stake() {
    let mut env = Env::new();
    let wallet = env.wallet(100 * USDC);
    let payout = env.token_account(&env.mint.clone(), &wallet.key());
    let ix = ix::register_provider(&wallet.key(), &wallet.token, &payout, &env.mint, 0);
    expect_error(env.send(&[ix], &[&wallet.kp]), McjsError::ZeroAmount);
    let ix = ix::register_provider(&wallet.key(), &wallet.token, &payout, &env.mint, 101 * USDC);
    expect_failure(env.send(&[ix], &[&wallet.kp]));
    assert!(env.account(&pda::provider(&wallet.key())).is_none());
    assert_eq!(env.balance(&wallet.token), 100 * USDC);

    let provider = env.provider_with_nodes(100 * USDC, &[], USDC);
    let ix = ix::add_stake(&provider.key(), &provider.wallet.token, &env.mint, 0);
    expect_error(
        env.send(&[ix], &[&provider.wallet.kp]),
        McjsError::ZeroAmount,
    );
    let ix = ix::request_withdrawal(&provider.key(), 0);
    expect_error(
        env.send(&[ix], &[&provider.wallet.kp]),
        McjsError::ZeroAmount,
    );
    let ix = ix::request_withdrawal(&provider.key(), 100 * USDC + 1);
    expect_error(
        env.send(&[ix], &[&provider.wallet.kp]),
        McjsError::InsufficientStake,
    );
    env.assert_invariants();
}

#[test]
fn a_provider_cannot_register_twice() {
    let mut env = Env::new();
    let provider = env.provider_with_nodes(100 * USDC, &[], USDC);
    let before = env.snapshot();
    let ix = ix::register_provider(
        &provider.key(),
        &provider.wallet.token,
        &provider.payout,
        &env.mint,
        10 * USDC,
    );
    expect_failure(env.send(&[ix], &[&provider.wallet.kp]));
    env.assert_unchanged(&before);
}

#[test]
fn nodes_need_the_minimum_stake_and_a_sane_profile() {
    let mut env = Env::new();
    let small = env.provider_with_nodes(99 * USDC, &[], USDC);
    let register = |index, hardware: HardwareProfile, readiness, price| {
        ix::register_node(
            &small.key(),
            RegisterNodeArgs {
                index,
                operator: Keypair::new().pubkey(),
                hardware,
                readiness,
                price_per_gpu_hour: price,
            },
        )
    };
    expect_error(
        env.send(&[register(0, k80(), 50, USDC)], &[&small.wallet.kp]),
        McjsError::StakeBelowMinimum,
    );
    let ix = ix::add_stake(&small.key(), &small.wallet.token, &env.mint, USDC);
    env.send(&[ix], &[&small.wallet.kp]).unwrap();
    let mut nameless = k80();
    nameless.gpu_model = String::new();
    expect_error(
        env.send(&[register(0, nameless, 50, USDC)], &[&small.wallet.kp]),
        McjsError::InvalidGpuModel,
    );
    let mut long_name = k80();
    long_name.gpu_model = "x".repeat(33);
    expect_error(
        env.send(&[register(0, long_name, 50, USDC)], &[&small.wallet.kp]),
        McjsError::InvalidGpuModel,
    );
    expect_error(
        env.send(&[register(0, k80(), 101, USDC)], &[&small.wallet.kp]),
        McjsError::InvalidReadiness,
    );
    expect_error(
        env.send(&[register(0, k80(), 50, 0)], &[&small.wallet.kp]),
        McjsError::InvalidPrice,
    );
    let logs = env
        .send(&[register(3, k80(), 50, USDC)], &[&small.wallet.kp])
        .unwrap();
    let registered = events::<NodeRegistered>(&logs);
    assert_eq!(registered[0].index, 3);
    assert_eq!(registered[0].hardware, k80());
    let node = env.node(&pda::node(&small.pda, 3));
    assert_eq!(node.provider, small.pda);
    assert_eq!(node.status, NodeStatus::Available);
    assert_eq!(env.provider(&small.pda).node_count, 1);
    // The same index twice is refused.
    expect_failure(env.send(&[register(3, k80(), 50, USDC)], &[&small.wallet.kp]));
}

#[test]
fn a_provider_updates_its_node_and_its_status_but_not_another_providers() {
    let mut env = Env::new();
    let alice = env.provider_with_nodes(100 * USDC, &[k80()], USDC);
    let bob = env.provider_with_nodes(100 * USDC, &[k80()], USDC);
    let ix = ix::update_node(
        &alice.key(),
        &alice.pda,
        0,
        UpdateNodeArgs {
            readiness: Some(77),
            price_per_gpu_hour: Some(3 * USDC),
            ..Default::default()
        },
    );
    let logs = env.send(&[ix], &[&alice.wallet.kp]).unwrap();
    assert_eq!(events::<NodeUpdated>(&logs)[0].readiness, 77);
    let node = env.node(&alice.nodes[0]);
    assert_eq!((node.readiness, node.price_per_gpu_hour), (77, 3 * USDC));
    for bad in [
        UpdateNodeArgs {
            readiness: Some(200),
            ..Default::default()
        },
        UpdateNodeArgs {
            price_per_gpu_hour: Some(0),
            ..Default::default()
        },
    ] {
        expect_failure(env.send(
            &[ix::update_node(&alice.key(), &alice.pda, 0, bad)],
            &[&alice.wallet.kp],
        ));
    }

    // Bob cannot touch Alice's node: his Provider account does not own it.
    let mut ix = ix::update_node(&bob.key(), &bob.pda, 0, UpdateNodeArgs::default());
    mcjs_client::ix::tamper::substitute_account(&mut ix, &bob.nodes[0], &alice.nodes[0]);
    expect_failure(env.send(&[ix], &[&bob.wallet.kp]));

    let offline = ix::set_node_status(&alice.key(), &alice.pda, 0, NodeStatus::Offline);
    let logs = env.send(&[offline], &[&alice.wallet.kp]).unwrap();
    let changed = events::<NodeStatusChanged>(&logs);
    assert_eq!(
        (changed[0].old, changed[0].new),
        (NodeStatus::Available, NodeStatus::Offline)
    );
    let busy = ix::set_node_status(&alice.key(), &alice.pda, 0, NodeStatus::Busy);
    expect_error(
        env.send(&[busy], &[&alice.wallet.kp]),
        McjsError::InvalidNodeStatus,
    );
}

#[test]
fn a_busy_node_keeps_its_status() {
    let mut env = Env::new();
    let owner = env.wallet(500 * USDC);
    let provider = env.provider_with_nodes(200 * USDC, &[a100_80gb()], USDC);
    env.running_job(&owner, &provider, 1);
    let offline = ix::set_node_status(&provider.key(), &provider.pda, 0, NodeStatus::Offline);
    expect_error(
        env.send(&[offline], &[&provider.wallet.kp]),
        McjsError::NodeBusy,
    );
    assert_eq!(env.node(&provider.nodes[0]).status, NodeStatus::Busy);
}

#[test]
fn account_sizes_stay_small() {
    use anchor_lang::Space;
    let sizes = [
        ("Config", 8 + Config::INIT_SPACE),
        ("Provider", 8 + Provider::INIT_SPACE),
        ("Node", 8 + Node::INIT_SPACE),
        ("Job", 8 + Job::INIT_SPACE),
    ];
    for (name, size) in sizes {
        eprintln!("{name}: {size} bytes");
        // Well under the 10 KiB a CPI may allocate, so every account is one `init`.
        assert!(size < 1_024, "{name} is {size} bytes");
    }
}
