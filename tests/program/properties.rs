//! Random sequences of instructions by random actors (operator keys of the
//! assigned node, of its sibling and of another provider's node among them),
//! with random arguments, clock jumps and stray tokens sent into vaults.
//! After every step: tokens are conserved (the insurance pool counted),
//! vaults match their accounts plus their strays, a refused transaction
//! changed nothing, only legal state transitions happened, no slash made the
//! job's owner or the reporter richer, and the insurance pool only shrank
//! through `compensate_owner`.
//!
//! `PROPTEST_CASES` sets the number of sequences (default 1000).

use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::harness::*;

#[derive(Clone, Copy, Debug)]
enum Actor {
    /// Whoever the action is meant for: the owner, the assigned node's
    /// operator key, the scheduler, the admin.
    Natural,
    Owner,
    /// The operator key of the node the job is on.
    AssignedOperator,
    /// The wallet of the provider the job is on: not the node's key.
    AssignedProviderWallet,
    /// The operator key of the other node of the same provider.
    SiblingOperator,
    /// The operator key of the other provider's node.
    OtherOperator,
    OtherProvider,
    Scheduler,
    Admin,
    Stranger,
}

#[derive(Clone, Debug)]
enum Action {
    Assign {
        provider: usize,
        node: usize,
    },
    Start,
    Attest {
        stale: bool,
        skip_back: bool,
    },
    Complete {
        stale: bool,
    },
    Report {
        cause: u8,
    },
    Pause,
    Resume,
    TopUp {
        amount: u64,
    },
    Cancel,
    Expire,
    Close,
    Warp {
        secs: i64,
    },
    RequestWithdrawal {
        provider: usize,
        amount: u64,
    },
    Withdraw {
        provider: usize,
    },
    Compensate {
        amount: CompensateAmount,
        to_stranger: bool,
    },
    SendStray {
        target: StrayTarget,
        amount: u64,
    },
}

/// How much `compensate_owner` asks for, against what the job may still get.
#[derive(Clone, Copy, Debug)]
enum CompensateAmount {
    One,
    All,
    OneTooMany,
    Zero,
}

#[derive(Clone, Copy, Debug)]
enum StrayTarget {
    JobVault,
    StakeVault(usize),
    InsurancePool,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (0usize..2, prop::bool::weighted(0.2))
            .prop_map(|(provider, sibling)| Action::Assign { provider, node: usize::from(sibling) }),
        3 => Just(Action::Start),
        6 => (prop::bool::weighted(0.1), prop::bool::weighted(0.1))
            .prop_map(|(stale, skip_back)| Action::Attest { stale, skip_back }),
        2 => prop::bool::weighted(0.2).prop_map(|stale| Action::Complete { stale }),
        3 => (0u8..6).prop_map(|cause| Action::Report { cause }),
        1 => Just(Action::Pause),
        1 => Just(Action::Resume),
        1 => prop_oneof![Just(0u64), 1u64..50 * USDC, Just(u64::MAX)]
            .prop_map(|amount| Action::TopUp { amount }),
        1 => Just(Action::Cancel),
        1 => Just(Action::Expire),
        1 => Just(Action::Close),
        5 => prop_oneof![1i64..900, 900i64..3_600, 3_600i64..30_000, Just(86_400i64)]
            .prop_map(|secs| Action::Warp { secs }),
        1 => (0usize..2, prop_oneof![Just(0u64), 1u64..300 * USDC])
            .prop_map(|(provider, amount)| Action::RequestWithdrawal { provider, amount }),
        1 => (0usize..2).prop_map(|provider| Action::Withdraw { provider }),
        3 => (
            prop_oneof![
                Just(CompensateAmount::One),
                Just(CompensateAmount::All),
                Just(CompensateAmount::OneTooMany),
                Just(CompensateAmount::Zero),
            ],
            prop::bool::weighted(0.1),
        )
            .prop_map(|(amount, to_stranger)| Action::Compensate { amount, to_stranger }),
        1 => (
            prop_oneof![
                Just(StrayTarget::JobVault),
                (0usize..2).prop_map(StrayTarget::StakeVault),
                Just(StrayTarget::InsurancePool),
            ],
            prop_oneof![Just(1u64), 1u64..5 * USDC],
        )
            .prop_map(|(target, amount)| Action::SendStray { target, amount }),
    ]
}

fn actor() -> impl Strategy<Value = Actor> {
    prop_oneof![
        14 => Just(Actor::Natural),
        1 => Just(Actor::Owner),
        1 => Just(Actor::AssignedOperator),
        1 => Just(Actor::AssignedProviderWallet),
        1 => Just(Actor::SiblingOperator),
        1 => Just(Actor::OtherOperator),
        1 => Just(Actor::OtherProvider),
        1 => Just(Actor::Scheduler),
        1 => Just(Actor::Admin),
        1 => Just(Actor::Stranger),
    ]
}

#[derive(Clone, Debug)]
struct Scenario {
    bond: u64,
    restart_budget: u8,
    deadline_in: Option<i64>,
    /// The job starts running on the first provider's node 0 with one
    /// checkpoint attested (and so something paid that a failure may lose).
    head_start: bool,
    steps: Vec<(Actor, Action)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        2 * USDC..60 * USDC,
        prop_oneof![2 => Just(0u8), 1 => 1u8..3],
        prop::option::of(3_600i64..200_000),
        prop::bool::weighted(0.4),
        prop::collection::vec((actor(), action()), 1..30),
    )
        .prop_map(
            |(bond, restart_budget, deadline_in, head_start, steps)| Scenario {
                bond,
                restart_budget,
                deadline_in,
                head_start,
                steps,
            },
        )
}

struct World {
    env: Env,
    owner: Wallet,
    stranger: Wallet,
    providers: [ProviderActor; 2],
    job: Pubkey,
    last_epoch_step: (u32, u64),
}

/// The world before any job: built once, forked for every sequence.
struct Template {
    env: Env,
    owner: Wallet,
    stranger: Wallet,
    providers: [ProviderActor; 2],
}

impl Template {
    fn new() -> Self {
        let mut env = Env::initialised(default_params(), false);
        let owner = env.wallet(500 * USDC);
        let stranger = env.wallet(10 * USDC);
        let providers = [
            env.provider_with_nodes(150 * USDC, &[a100_80gb(), a100_80gb()], 2 * USDC),
            env.provider_with_nodes(150 * USDC, &[a100_80gb(), a100_80gb()], USDC),
        ];
        Self {
            env,
            owner,
            stranger,
            providers,
        }
    }
}

impl World {
    fn new(template: &Template, s: &Scenario) -> Self {
        let mut env = template.env.fork();
        let owner = template.owner.fork();
        let stranger = template.stranger.fork();
        let providers = [template.providers[0].fork(), template.providers[1].fork()];
        let mut args = job_args(1, s.bond);
        args.terms.restart_budget = s.restart_budget;
        args.terms.deadline = s.deadline_in.map(|d| START_TIME + d);
        let job = env.submit(&owner, args).unwrap();
        let mut last_epoch_step = (0, 0);
        if s.head_start {
            env.assign(&job, &providers[0], 0).unwrap();
            env.start(&job, &providers[0], 0).unwrap();
            env.warp(900);
            env.attest(&job, &providers[0], 0, 1, 0, 1).unwrap();
            last_epoch_step = (0, 1);
        }
        Self {
            env,
            owner,
            stranger,
            providers,
            job,
            last_epoch_step,
        }
    }

    /// The provider and node the job is on, or the first provider's node 0.
    fn assigned(&self) -> (usize, usize) {
        let Some(node) = self.env.try_job(&self.job).and_then(|j| j.node) else {
            return (0, 0);
        };
        for (p, provider) in self.providers.iter().enumerate() {
            if let Some(n) = provider.nodes.iter().position(|k| *k == node) {
                return (p, n);
            }
        }
        (0, 0)
    }

    fn signer(&self, actor: Actor, natural: Actor) -> Keypair {
        let actor = if let Actor::Natural = actor {
            natural
        } else {
            actor
        };
        let (p, n) = self.assigned();
        match actor {
            Actor::Owner => self.owner.kp.insecure_clone(),
            Actor::AssignedOperator | Actor::Natural => {
                self.providers[p].operator(n).insecure_clone()
            }
            Actor::AssignedProviderWallet => self.providers[p].wallet.kp.insecure_clone(),
            Actor::SiblingOperator => self.providers[p].operator(1 - n).insecure_clone(),
            Actor::OtherOperator => self.providers[1 - p].operator(n).insecure_clone(),
            Actor::OtherProvider => self.providers[1 - p].wallet.kp.insecure_clone(),
            Actor::Scheduler => self.env.scheduler.insecure_clone(),
            Actor::Admin => self.env.admin.insecure_clone(),
            Actor::Stranger => self.stranger.kp.insecure_clone(),
        }
    }

    /// Every wallet's own token account, by who holds it (payouts and the
    /// treasury excluded: they are paid for attested work).
    fn wallet_tokens(&self) -> Vec<(Pubkey, Pubkey)> {
        let mut tokens = vec![
            (self.owner.key(), self.owner.token),
            (self.stranger.key(), self.stranger.token),
        ];
        for p in &self.providers {
            tokens.push((p.key(), p.wallet.token));
        }
        tokens
    }

    fn generation(&self) -> u32 {
        self.env.try_job(&self.job).map_or(0, |j| j.generation)
    }

    fn run(&mut self, actor: Actor, action: &Action) -> Outcome {
        let d = self.env.deployment();
        let job = self.job;
        let (assigned, assigned_node) = self.assigned();
        let node = self.providers[assigned].nodes[assigned_node];
        let provider_pda = self.providers[assigned].pda;
        let payout = self.providers[assigned].payout;
        let owner_token = self.owner.token;
        let mint = self.env.mint;
        match action {
            Action::Assign { provider, node } => {
                let signer = self.signer(actor, Actor::Scheduler);
                let p = &self.providers[*provider];
                let ix = ix::assign_job(&signer.pubkey(), &job, &p.nodes[*node], &p.pda);
                self.env.send(&[ix], &[&signer])
            }
            Action::Start => {
                let signer = self.signer(actor, Actor::AssignedOperator);
                let ix = ix::start_job(
                    &signer.pubkey(),
                    &job,
                    &node,
                    &provider_pda,
                    self.generation(),
                );
                self.env.send(&[ix], &[&signer])
            }
            Action::Attest { stale, skip_back } => {
                let signer = self.signer(actor, Actor::AssignedOperator);
                let (epoch, step) = if *skip_back {
                    self.last_epoch_step
                } else {
                    (self.last_epoch_step.0, self.last_epoch_step.1 + 1)
                };
                let generation = self.generation().wrapping_sub(u32::from(*stale));
                let ix = ix::attest_checkpoint(
                    &signer.pubkey(),
                    &job,
                    &node,
                    &provider_pda,
                    &payout,
                    &d,
                    AttestCheckpointArgs {
                        generation,
                        epoch,
                        step,
                        checkpoint_hash: checkpoint_hash(epoch, step),
                    },
                );
                let outcome = self.env.send(&[ix], &[&signer]);
                if outcome.is_ok() {
                    self.last_epoch_step = (epoch, step);
                }
                outcome
            }
            Action::Complete { stale } => {
                let signer = self.signer(actor, Actor::AssignedOperator);
                let generation = self.generation().wrapping_sub(u32::from(*stale));
                let ix = ix::complete_job(
                    &signer.pubkey(),
                    &job,
                    &node,
                    &provider_pda,
                    &payout,
                    &owner_token,
                    &d,
                    CompleteJobArgs {
                        generation,
                        output_hash: [7; 32],
                    },
                );
                self.env.send(&[ix], &[&signer])
            }
            Action::Report { cause } => {
                let signer = self.signer(actor, Actor::Scheduler);
                let cause = match cause {
                    0 => FailureCause::NodeLost,
                    1 => FailureCause::ContainerDied,
                    2 => FailureCause::CheckpointOverdue,
                    3 => FailureCause::JobError,
                    4 => FailureCause::JobYielded,
                    _ => FailureCause::JobFatal,
                };
                let ix = ix::report_failure(
                    &signer.pubkey(),
                    &job,
                    &node,
                    &provider_pda,
                    &payout,
                    &owner_token,
                    &d,
                    ReportFailureArgs {
                        generation: self.generation(),
                        cause,
                    },
                );
                self.env.send(&[ix], &[&signer])
            }
            Action::Pause => {
                let signer = self.signer(actor, Actor::Owner);
                let ix = ix::pause_job(&signer.pubkey(), &job, &node, &provider_pda, &payout, &d);
                self.env.send(&[ix], &[&signer])
            }
            Action::Resume => {
                let signer = self.signer(actor, Actor::Owner);
                self.env
                    .send(&[ix::resume_job(&signer.pubkey(), &job)], &[&signer])
            }
            Action::TopUp { amount } => {
                let signer = self.signer(actor, Actor::Owner);
                let ix = ix::top_up(&signer.pubkey(), &job, &owner_token, &mint, *amount);
                self.env.send(&[ix], &[&signer])
            }
            Action::Cancel => {
                let signer = self.signer(actor, Actor::Owner);
                let ix = ix::cancel_job(&signer.pubkey(), &job, &owner_token, &mint);
                self.env.send(&[ix], &[&signer])
            }
            Action::Expire => {
                let signer = self.signer(actor, Actor::Stranger);
                let ix = ix::expire_job(&signer.pubkey(), &job, &owner_token, &mint);
                self.env.send(&[ix], &[&signer])
            }
            Action::Close => {
                let signer = self.signer(actor, Actor::Owner);
                let token = self
                    .wallet_tokens()
                    .into_iter()
                    .find(|(key, _)| *key == signer.pubkey())
                    .map_or(owner_token, |(_, token)| token);
                self.env.close(&signer, &job, &token)
            }
            Action::Warp { secs } => {
                self.env.warp(*secs);
                Ok(vec![])
            }
            Action::RequestWithdrawal { provider, amount } => {
                let p = &self.providers[*provider];
                let ix = ix::request_withdrawal(&p.key(), *amount);
                let kp = p.wallet.kp.insecure_clone();
                self.env.send(&[ix], &[&kp])
            }
            Action::Withdraw { provider } => {
                let p = self.providers[*provider].fork();
                self.env.withdraw(&p)
            }
            Action::Compensate {
                amount,
                to_stranger,
            } => {
                let signer = self.signer(actor, Actor::Admin);
                let compensable = self.env.try_job(&job).map_or(0, |j| j.compensable());
                let amount = match amount {
                    CompensateAmount::One => 1,
                    CompensateAmount::All => compensable,
                    CompensateAmount::OneTooMany => compensable + 1,
                    CompensateAmount::Zero => 0,
                };
                let to = if *to_stranger {
                    self.stranger.token
                } else {
                    owner_token
                };
                self.env.compensate(&signer, &job, &to, amount)
            }
            Action::SendStray { target, amount } => {
                let vault = match target {
                    StrayTarget::JobVault => mcjs_client::pda::vault(&job),
                    StrayTarget::StakeVault(p) => mcjs_client::pda::vault(&self.providers[*p].pda),
                    StrayTarget::InsurancePool => mcjs_client::pda::insurance_pool(),
                };
                // A closed job's vault no longer exists: nothing to send to.
                if self.env.account(&vault).is_none() {
                    return Ok(vec![]);
                }
                self.env.send_stray(&vault, *amount);
                Ok(vec![])
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pending,
    Assigned,
    Running,
    Paused,
    Recovering,
    Completed,
    Failed,
    Cancelled,
    Expired,
    Closed,
}

fn kind(job: Option<&Job>) -> Kind {
    match job.map(|j| j.state) {
        None => Kind::Closed,
        Some(JobState::Pending { .. }) => Kind::Pending,
        Some(JobState::Assigned { .. }) => Kind::Assigned,
        Some(JobState::Running { .. }) => Kind::Running,
        Some(JobState::Paused { .. }) => Kind::Paused,
        Some(JobState::Recovering { .. }) => Kind::Recovering,
        Some(JobState::Completed { .. }) => Kind::Completed,
        Some(JobState::Failed { .. }) => Kind::Failed,
        Some(JobState::Cancelled { .. }) => Kind::Cancelled,
        Some(JobState::Expired { .. }) => Kind::Expired,
    }
}

/// The transitions the state machine allows (staying put included).
fn legal(from: Kind, to: Kind) -> bool {
    use Kind::*;
    from == to
        || matches!(
            (from, to),
            (Pending, Assigned | Cancelled | Expired)
                | (Assigned, Running | Recovering | Failed | Paused)
                | (Running, Paused | Completed | Recovering | Failed)
                | (Paused, Recovering | Cancelled)
                | (Recovering, Assigned | Cancelled | Expired)
                | (Completed | Failed | Cancelled | Expired, Closed)
        )
}

fn check_sequence(template: &Template, s: &Scenario) -> Result<(), TestCaseError> {
    let mut world = World::new(template, s);
    for (actor, action) in &s.steps {
        let before_job = world.env.try_job(&world.job);
        let before = world.env.snapshot();
        let wallets_before: Vec<u64> = world
            .wallet_tokens()
            .iter()
            .map(|(_, token)| world.env.balance(token))
            .collect();
        let pool_before = world.env.pool();
        let outcome = world.run(*actor, action);
        let pool_after = world.env.pool();
        if pool_after < pool_before {
            prop_assert!(
                matches!(action, Action::Compensate { .. }) && outcome.is_ok(),
                "the insurance pool shrank by {} through {action:?}",
                pool_before - pool_after
            );
        }
        if let (Action::Report { .. }, Ok(logs)) = (action, &outcome) {
            let reported = events::<mcjs::events::FailureReported>(logs);
            prop_assert_eq!(reported.len(), 1);
            let reported = &reported[0];
            prop_assert_eq!(
                pool_after,
                pool_before + reported.slashed,
                "the slash lands in the insurance pool"
            );
            // The owner only gets the refund of a bond that ended; the
            // reporter and every other wallet get nothing.
            for ((holder, token), before) in world.wallet_tokens().iter().zip(&wallets_before) {
                let expected = if *token == world.owner.token {
                    before + reported.refund
                } else {
                    *before
                };
                prop_assert_eq!(
                    world.env.balance(token),
                    expected,
                    "a failure report changed the balance of {} (reporter {})",
                    holder,
                    reported.by
                );
            }
        }
        let after_job = world.env.try_job(&world.job);
        let (from, to) = (kind(before_job.as_ref()), kind(after_job.as_ref()));
        match &outcome {
            Ok(_) => {
                prop_assert!(
                    legal(from, to),
                    "illegal transition {from:?} -> {to:?} by {action:?}"
                );
                if let (Some(b), Some(a)) = (&before_job, &after_job) {
                    prop_assert!(a.generation >= b.generation, "generation went back");
                    prop_assert!(a.checkpoint_count >= b.checkpoint_count);
                    prop_assert!(a.paid >= b.paid, "payments are never undone");
                    if matches!(
                        action,
                        Action::Warp { .. }
                            | Action::RequestWithdrawal { .. }
                            | Action::Withdraw { .. }
                            | Action::SendStray { .. }
                    ) {
                        prop_assert_eq!(
                            format!("{a:?}"),
                            format!("{b:?}"),
                            "a step that does not name the job changed it"
                        );
                    }
                }
            }
            Err(_) => {
                world.env.assert_unchanged(&before);
                prop_assert_eq!(from, to);
            }
        }
        world.env.assert_invariants();
    }
    Ok(())
}

#[test]
fn random_instruction_sequences_keep_every_invariant() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let template = Template::new();
    runner
        .run(&scenario(), |s| check_sequence(&template, &s))
        .unwrap();
}

/// The generator reaches the interesting states: a property over sequences
/// that never leave Pending, never slash or never compensate would prove little.
#[test]
fn random_sequences_reach_every_kind_of_state() {
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    let template = Template::new();
    for _ in 0..150 {
        let s = scenario().new_tree(&mut runner).unwrap().current();
        let mut world = World::new(&template, &s);
        for (actor, action) in &s.steps {
            let pool_before = world.env.pool();
            let outcome = world.run(*actor, action);
            let pool_after = world.env.pool();
            match (action, outcome.is_ok()) {
                (Action::Report { .. }, true) if pool_after > pool_before => {
                    seen.insert("slashed".to_string());
                }
                (Action::Compensate { .. }, true) => {
                    seen.insert("compensated".to_string());
                }
                (Action::Withdraw { .. }, true) => {
                    seen.insert("withdrew".to_string());
                }
                (Action::Start | Action::Attest { .. } | Action::Complete { .. }, false)
                    if matches!(
                        actor,
                        Actor::SiblingOperator
                            | Actor::OtherOperator
                            | Actor::AssignedProviderWallet
                    ) =>
                {
                    seen.insert("a foreign key refused".to_string());
                }
                _ => {}
            }
            seen.insert(format!(
                "{:?}",
                kind(world.env.try_job(&world.job).as_ref())
            ));
        }
    }
    for state in [
        "Pending",
        "Assigned",
        "Running",
        "Recovering",
        "Completed",
        "Failed",
        "Cancelled",
        "Closed",
        "slashed",
        "compensated",
        "withdrew",
        "a foreign key refused",
    ] {
        assert!(
            seen.contains(state),
            "no sequence reached {state}: {seen:?}"
        );
    }
}
