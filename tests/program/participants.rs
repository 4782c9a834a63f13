//! Participants who each keep to one strategy for a whole sequence: three
//! providers, each honest or playing one greed (lie, stall, close its
//! payout account, rename its GPU, withdraw its stake early), an owner who
//! is honest or griefs (pauses and resumes, reports, closes its refund
//! account, cancels), and a stranger who reports the job with any cause.
//! The scheduler, the honest providers and the checkers play by the book
//! between the moves: the scheduler renews its lease, places the job,
//! reports a stalled one, opens a check of every interval of a verified
//! job and releases held pay when due; an honest provider attests each
//! interval on time and completes after its share of the work.
//!
//! After every move: the harness's invariants (tokens conserved, vaults
//! match their books), and no provider that kept its word (attested on
//! time, truthfully) was slashed. At the end, with the greed stopped:
//! - every job ends, at its cap, on completion or at its owner's word,
//!   within a bounded number of turns;
//! - every provider that kept its word (and kept its payout account) was
//!   paid at least its share of what its attestations earned;
//! - on a verified job, a liar whose lie was checked is paid nothing, and
//!   the owner paid no more than the attestations earned;
//! - every account that holds tokens is emptied by its rightful party: the
//!   owner closes the job (its vault to the owner), every provider
//!   withdraws its whole stake.
//!
//! Every checker is the program's draw from the checker pool, which every
//! provider's node and four reserve providers' nodes enter; the reserves
//! only ever check, and wait offline (passed over by the draw, shown) until
//! the scheduler needs them, so that a first round draws the two providers
//! other than the attester. A provider may also stay silent whenever it is
//! named to check another's interval. The scheduler then replaces it, past
//! half the window, with the reserve the pool draws (`replace_checker`: the
//! three providers are excluded), so that an honest provider is still paid
//! and a liar still caught; the other checkers answer honestly. A provider
//! may instead vouch for whatever it checks (the claimed hash, with bytes a
//! liar would share): against an honest checker that is a dispute, and the
//! scheduler sends it to a second round of the two reserves the pool draws,
//! honest (`open_second_round`), so that the liar is still caught and the
//! honest provider still paid.
//! Checkers that answer at random are played by `properties.rs`.
//!
//! `PROPTEST_CASES` sets the number of sequences (default 1000).

use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, ix, pda};
use proptest::prelude::*;
use solana_signer::Signer;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::harness::*;

const INTERVAL: i64 = 900;
const STAKE: u64 = 150 * USDC;

/// A provider's strategy for the whole sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Play {
    /// Attests every interval on time, truthfully.
    Honest,
    /// Attests made-up checkpoint hashes.
    Liar,
    /// Starts the job, then never attests.
    Staller,
    /// Attests honestly, and closes its payout account while it holds the job.
    Closer,
    /// Attests honestly, and renames its node's GPU model while busy.
    Renamer,
    /// Attests honestly, asks for its whole stake back once it holds the
    /// job, and tries to withdraw at every turn.
    EarlyWithdrawer,
    /// Attests honestly, and never answers a check it is named to.
    SilentChecker,
    /// Attests honestly, and vouches for whatever it is named to check:
    /// the claimed hash, with the digest of bytes a liar would share with
    /// it (a checker in league with every liar).
    VouchingChecker,
}

impl Play {
    /// Attests on time and truthfully, and answers checks truthfully or
    /// not at all: never to be slashed. (A vouching checker outvoted by a
    /// second round is slashed.)
    fn keeps_its_word(self) -> bool {
        !matches!(self, Play::Liar | Play::Staller | Play::VouchingChecker)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OwnerPlay {
    Honest,
    Griefer,
}

#[derive(Clone, Debug)]
enum Move {
    /// Time passes (at most half an interval); the honest parties act.
    Wait { secs: i64 },
    /// The griefing owner's move; an honest owner lets it pass.
    Grief { kind: u8 },
    /// A stranger reports the job, with any cause.
    StrangerReport { cause: u8 },
    /// A greedy provider plays its greed; an honest one lets it pass.
    Greed { provider: usize },
}

#[derive(Clone, Debug)]
struct Case {
    plays: [Play; 3],
    owner: OwnerPlay,
    verified: bool,
    /// The job's cap, in checkpoint intervals.
    cap_intervals: u32,
    /// An honest provider completes after this many attestations of its own.
    finish_after: u32,
    moves: Vec<Move>,
}

fn play() -> impl Strategy<Value = Play> {
    prop_oneof![
        4 => Just(Play::Honest),
        2 => Just(Play::Liar),
        2 => Just(Play::Staller),
        1 => Just(Play::Closer),
        1 => Just(Play::Renamer),
        1 => Just(Play::EarlyWithdrawer),
        1 => Just(Play::SilentChecker),
        1 => Just(Play::VouchingChecker),
    ]
}

fn a_move() -> impl Strategy<Value = Move> {
    prop_oneof![
        8 => (60i64..=INTERVAL / 2).prop_map(|secs| Move::Wait { secs }),
        2 => (0u8..5).prop_map(|kind| Move::Grief { kind }),
        1 => (0u8..6).prop_map(|cause| Move::StrangerReport { cause }),
        2 => (0usize..3).prop_map(|provider| Move::Greed { provider }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        // Two providers vouching for whatever they check hold both seats of
        // a check between them: the limit of any check by comparison
        // (docs/verification.md, "Who can collude with whom"), not a
        // guarantee the protocol makes. At most one plays so.
        [play(), play(), play()].prop_filter("at most one provider vouches", |plays| {
            plays
                .iter()
                .filter(|p| **p == Play::VouchingChecker)
                .count()
                <= 1
        }),
        prop_oneof![Just(OwnerPlay::Honest), Just(OwnerPlay::Griefer)],
        any::<bool>(),
        2u32..8,
        1u32..5,
        prop::collection::vec(a_move(), 10..60),
    )
        .prop_map(
            |(plays, owner, verified, cap_intervals, finish_after, moves)| Case {
                plays,
                owner,
                verified,
                cap_intervals,
                finish_after,
                moves,
            },
        )
}

fn cause(n: u8) -> FailureCause {
    match n % 6 {
        0 => FailureCause::NodeLost,
        1 => FailureCause::ContainerDied,
        2 => FailureCause::CheckpointOverdue,
        3 => FailureCause::JobError,
        4 => FailureCause::JobYielded,
        _ => FailureCause::JobFatal,
    }
}

struct Template {
    env: Env,
    owner: Wallet,
    stranger: Wallet,
    providers: Vec<ProviderActor>,
    /// Providers that never take the job: the first two check in place of
    /// a silent checker, the last two in second rounds.
    reserves: Vec<ProviderActor>,
}

impl Template {
    fn new() -> Self {
        let mut env = Env::initialised(default_params(), false);
        let owner = env.wallet(500 * USDC);
        let stranger = env.wallet(10 * USDC);
        let providers: Vec<ProviderActor> = (0..3)
            .map(|_| env.provider_with_nodes(STAKE, &[a100_80gb()], 2 * USDC))
            .collect();
        let reserves: Vec<ProviderActor> = (0..4)
            .map(|_| env.provider_with_nodes(STAKE, &[a100_80gb()], 2 * USDC))
            .collect();
        // Everyone's agent enters its node in the checker pool; the
        // reserves then wait offline (the draw passes them over, shown)
        // until the scheduler needs them, so that a first round draws the
        // two providers other than the attester.
        for p in &providers {
            env.enter_pool(p, 0).expect("a provider enters the pool");
        }
        for r in &reserves {
            env.enter_pool(r, 0).expect("a reserve enters the pool");
            set_online(&mut env, r, false);
        }
        Self {
            env,
            owner,
            stranger,
            providers,
            reserves,
        }
    }
}

struct World {
    env: Env,
    owner: Wallet,
    stranger: Wallet,
    providers: Vec<ProviderActor>,
    reserves: Vec<ProviderActor>,
    /// Checkers replaced for silence.
    replaced: u32,
    /// Disputed checks sent to a second round.
    second_rounds: u32,
    plays: [Play; 3],
    owner_play: OwnerPlay,
    job: Pubkey,
    verified: bool,
    finish_after: u32,
    /// Attestations of the current assignment.
    attested_here: u32,
    /// Each assignment's earnings by its attestations: (provider, amount).
    earned: Vec<(usize, u64)>,
    /// Lies attested on a verified job that no check could be opened on.
    unchecked_lies: [u32; 3],
    withdrawn: [u64; 3],
    /// Fees each provider was paid as a checker.
    checker_fees: [u64; 3],
    next_step: u64,
    next_provider: usize,
}

impl World {
    fn new(template: &Template, case: &Case) -> Self {
        let mut env = template.env.fork();
        let owner = template.owner.fork();
        let mut args = job_args(1, 100 * USDC);
        args.terms.max_duration_secs = case.cap_intervals * INTERVAL as u32;
        if case.verified {
            args.verification_ppm = PPM;
        }
        let job = env.submit(&owner, args).expect("submit");
        Self {
            env,
            owner,
            stranger: template.stranger.fork(),
            providers: template.providers.iter().map(ProviderActor::fork).collect(),
            reserves: template.reserves.iter().map(ProviderActor::fork).collect(),
            replaced: 0,
            second_rounds: 0,
            plays: case.plays,
            owner_play: case.owner,
            job,
            verified: case.verified,
            finish_after: case.finish_after,
            attested_here: 0,
            earned: Vec::new(),
            unchecked_lies: [0; 3],
            withdrawn: [0; 3],
            checker_fees: [0; 3],
            next_step: 1,
            next_provider: 0,
        }
    }

    fn state(&self) -> Job {
        self.env.job(&self.job)
    }

    /// The provider index the job is on, if it is on a node.
    fn holder(&self) -> Option<usize> {
        let job = self.state();
        if !job.state.is_on_node() {
            return None;
        }
        self.providers
            .iter()
            .position(|p| Some(p.pda) == job.provider)
    }

    // ----- the honest parties' turn -----

    fn drive(&mut self) {
        let scheduler = self.env.scheduler.insecure_clone();
        let _ = self
            .env
            .send(&[ix::hold_lease(&scheduler.pubkey())], &[&scheduler]);
        self.release_due();
        let job = self.state();
        if job.state.is_terminal() {
            return;
        }
        if job.state.can_assign() {
            self.place();
            return;
        }
        let Some(p) = self.holder() else {
            return;
        };
        if job.output_attested() {
            // Its run is over: it completes once the draw has had its time
            // and no check is open (by anyone's call; the scheduler's here).
            let (token, provider) = (job.refund_account, self.providers[p].fork());
            let _ = self
                .env
                .complete(&self.job, &token, &provider, 0, job.generation);
            return;
        }
        let now = self.env.now();
        // At its cap the agent stops the job and reports it (`cap_reached`).
        if job.at_cap() {
            self.report(&scheduler, p, FailureCause::JobFatal);
            return;
        }
        let progress = job.progress_mark.max(job.checks_settled_at);
        if now - progress >= INTERVAL * i64::from(default_params().liveness_factor) {
            self.report(&scheduler, p, FailureCause::CheckpointOverdue);
            return;
        }
        if !matches!(job.state, JobState::Running { .. }) {
            return;
        }
        if self.attested_here >= self.finish_after
            && self.plays[p].keeps_its_word()
            && job.open_verifications == 0
        {
            let generation = job.generation;
            let token = job.refund_account;
            let provider = self.providers[p].fork();
            if self
                .env
                .complete(&self.job, &token, &provider, 0, generation)
                .is_ok()
            {
                // A verified job's first call attests its output: the
                // run's last interval, earned and drawn like any other.
                if self.state().output_attested() {
                    let amount = self.state().last_interval_amount;
                    self.earned.last_mut().expect("an assignment").1 += amount;
                    self.check(p);
                }
                return;
            }
        }
        if now - job.progress_mark >= INTERVAL && self.plays[p] != Play::Staller {
            self.attest(p);
        }
    }

    fn place(&mut self) {
        for i in 0..3 {
            let p = (self.next_provider + i) % 3;
            let provider = self.providers[p].fork();
            if self.env.assign(&self.job, &provider, 0).is_ok() {
                self.next_provider = p + 1;
                self.attested_here = 0;
                self.earned.push((p, 0));
                self.env
                    .start(&self.job, &provider, 0)
                    .expect("the assigned node starts");
                return;
            }
        }
    }

    fn report(&mut self, reporter: &solana_keypair::Keypair, p: usize, cause: FailureCause) {
        let token = self.state().refund_account;
        let provider = self.providers[p].fork();
        self.env
            .report_live(reporter, &self.job, &token, &provider, 0, cause)
            .expect("the scheduler's report of a job on its node goes through");
    }

    fn attest(&mut self, p: usize) {
        let job = self.state();
        let step = self.next_step;
        self.next_step += 1;
        let provider = self.providers[p].fork();
        let lie = self.plays[p] == Play::Liar;
        let operator = provider.operator(0).insecure_clone();
        let settle = self.env.attest_needs_settlement(&self.job);
        let attest = self
            .env
            .job_accounts(&self.job, &provider, 0, &self.job, job.generation)
            .attest(
                &operator.pubkey(),
                settle,
                0,
                step,
                if lie {
                    [0x5a; 32]
                } else {
                    checkpoint_hash(0, step)
                },
            );
        if self.env.send(&[attest], &[&operator]).is_err() {
            return;
        }
        self.attested_here += 1;
        let amount = self.state().last_interval_amount;
        self.earned.last_mut().expect("an assignment").1 += amount;
        if self.verified {
            let checked = self.check(p);
            if lie && !checked {
                self.unchecked_lies[p] += 1;
            }
        }
    }

    /// The scheduler opens a check of the interval just attested by `p`,
    /// the two other providers answer it honestly, and anyone resolves it.
    /// Returns whether a check was opened.
    fn check(&mut self, p: usize) -> bool {
        // The draw's slot, and the one that records its hash.
        let now = self.env.now();
        self.env.set_time(now);
        self.env.set_time(now);
        let job = self.state();
        let (v, r) = ((p + 1) % 3, (p + 2) % 3);
        let checkers = ix::Checkers {
            verifier_node: self.providers[v].nodes[0],
            verifier_provider: self.providers[v].pda,
            referee_node: self.providers[r].nodes[0],
            referee_provider: self.providers[r].pda,
        };
        let scheduler = self.env.scheduler.insecure_clone();
        let generation = job.last_checkpoint.map_or(0, |c| c.generation);
        // The pool draws the two others (in either order), the offline
        // reserves passed over; a renamed node leaves it too few.
        let Some((drawn, proof)) = self.env.first_round_draw(&self.job) else {
            return false;
        };
        let pair = [drawn.verifier_provider, drawn.referee_provider];
        assert!(
            pair.contains(&checkers.verifier_provider) && pair.contains(&checkers.referee_provider),
            "the draw names the two providers other than the attester"
        );
        let open = ix::open_verification(
            &scheduler.pubkey(),
            &self.job,
            generation,
            job.checkpoint_count,
            &checkers,
            &proof,
        );
        if self.env.send(&[open], &[&scheduler]).is_err() {
            return false;
        }
        let key = pda::verification(&self.job, job.checkpoint_count);
        let verification = |env: &Env| {
            mcjs_client::decode::verification(&env.account(&key).unwrap().data).unwrap()
        };
        let v0 = verification(&self.env);
        // What an honest node reproduces: the checkpoint at the interval's
        // end, or the output the harness's honest completions name.
        let truth = if v0.output {
            OUTPUT_HASH
        } else {
            checkpoint_hash(v0.to.epoch, v0.to.step)
        };
        let answer = CheckAnswer::Reproduced {
            hash: truth,
            possession: possession_of(&v0.possession_key, &truth),
        };
        let vouch = CheckAnswer::Reproduced {
            hash: v0.to.hash,
            possession: possession_of(&v0.possession_key, &[0xee; 32]),
        };
        // Each named checker and its answer: a provider (silent or vouching
        // if it plays so), or a reserve once it replaced a silent one.
        let mut named: Vec<(Party, Option<(ProviderActor, CheckAnswer)>)> =
            [(Party::Verifier, v), (Party::Referee, r)]
                .into_iter()
                .map(|(role, c)| {
                    let checker = self.providers[c].fork();
                    let seat = match self.plays[c] {
                        Play::SilentChecker => None,
                        Play::VouchingChecker => Some((checker, vouch)),
                        _ => Some((checker, answer)),
                    };
                    (role, seat)
                })
                .collect();
        let seal = |env: &mut Env, checker: &ProviderActor, key: &Pubkey, answer: &CheckAnswer| {
            let operator = checker.operator(0).insecure_clone();
            let salt = checker.nodes[0].to_bytes();
            let step = CheckerStep::Seal {
                commitment: check_commitment(key, &checker.nodes[0], answer, &salt),
            };
            let ix = ix::attest_verification(&operator.pubkey(), &checker.nodes[0], key, step);
            env.send(&[ix], &[&operator]).expect("a checker seals");
        };
        let reveal = |env: &mut Env, checker: &ProviderActor, key: &Pubkey, answer: CheckAnswer| {
            let operator = checker.operator(0).insecure_clone();
            let salt = checker.nodes[0].to_bytes();
            let step = CheckerStep::Reveal { answer, salt };
            let ix = ix::attest_verification(&operator.pubkey(), &checker.nodes[0], key, step);
            env.send(&[ix], &[&operator]).expect("a checker reveals");
        };
        for (checker, answer) in named.iter().flat_map(|(_, seat)| seat) {
            seal(&mut self.env, checker, &key, answer);
        }
        // Past half the window, the scheduler replaces each silent one with
        // the reserve the pool draws (the three providers are all excluded:
        // the attester and the two named), which answers.
        let window = i64::from(default_params().challenge_window_secs);
        let reserves: Vec<ProviderActor> = self.reserves.iter().map(ProviderActor::fork).collect();
        let needed =
            named.iter().any(|(_, c)| c.is_none()) || self.plays.contains(&Play::VouchingChecker);
        // While the reserves stand in, the two other providers' idle nodes
        // wait offline: a checker replaced for its silence is no longer
        // named, so a later draw could take it again (the draw passes over
        // an offline node, shown).
        let mut stood_down = Vec::new();
        if needed {
            for r in &reserves {
                set_online(&mut self.env, r, true);
                self.env
                    .enter_pool(r, 0)
                    .expect("a reserve renews its entry");
            }
            for c in (0..3).filter(|c| *c != p) {
                let provider = self.providers[c].fork();
                let node = self.env.node(&provider.nodes[0]);
                if node.current_job.is_none() && node.status != NodeStatus::Offline {
                    set_online(&mut self.env, &provider, false);
                    stood_down.push(provider);
                }
            }
        }
        for (role, checker) in named.iter_mut().filter(|(_, c)| c.is_none()) {
            let (member, proof) = self
                .env
                .replacement_draw(&key)
                .expect("a reserve is drawn for each silent checker");
            let reserve = reserves
                .iter()
                .find(|r| r.pda == member.provider)
                .expect("the replacement is a reserve")
                .fork();
            let opened_at = verification(&self.env).opened_at;
            self.env.set_time(opened_at + window / 2 + 1);
            let _ = self
                .env
                .send(&[ix::hold_lease(&scheduler.pubkey())], &[&scheduler]);
            let segment = verification(&self.env).segment;
            let replace = ix::replace_checker(
                &scheduler.pubkey(),
                &key,
                &self.job,
                &segment,
                *role,
                &reserve.nodes[0],
                &reserve.pda,
                &proof,
            );
            self.env
                .send(&[replace], &[&scheduler])
                .expect("a checker silent past half the window is replaced");
            self.replaced += 1;
            seal(&mut self.env, &reserve, &key, &answer);
            *checker = Some((reserve, answer));
        }
        for (_, seat) in &named {
            let (checker, answer) = seat.as_ref().expect("every seat answered");
            reveal(&mut self.env, checker, &key, *answer);
        }
        if verification(&self.env).state == VerificationState::Disputed {
            // The checkers disagreed: the scheduler names the two other
            // reserves, which answer honestly under the new key.
            let _ = self
                .env
                .send(&[ix::hold_lease(&scheduler.pubkey())], &[&scheduler]);
            let (pair, proof) = self
                .env
                .second_round_draw(&key)
                .expect("two reserves are drawn for the second round");
            let reserve = |key: &Pubkey| {
                reserves
                    .iter()
                    .find(|r| r.pda == *key)
                    .expect("the second round's checkers are reserves")
                    .fork()
            };
            let (d, e) = (
                reserve(&pair.verifier_provider),
                reserve(&pair.referee_provider),
            );
            let second = ix::open_second_round(
                &scheduler.pubkey(),
                &key,
                &self.job,
                &v0.segment,
                &pair,
                &proof,
            );
            self.env
                .send(&[second], &[&scheduler])
                .expect("a disputed check goes to a second round");
            self.second_rounds += 1;
            let new_key = verification(&self.env).possession_key;
            let answer = CheckAnswer::Reproduced {
                hash: truth,
                possession: possession_of(&new_key, &truth),
            };
            for checker in [&d, &e] {
                seal(&mut self.env, checker, &key, &answer);
            }
            for checker in [&d, &e] {
                reveal(&mut self.env, checker, &key, answer);
            }
        }
        if needed {
            for r in &reserves {
                set_online(&mut self.env, r, false);
            }
            for provider in &stood_down {
                set_online(&mut self.env, provider, true);
            }
        }
        let v1 = verification(&self.env);
        let VerificationState::Decided { outcome } = v1.state else {
            panic!("both answered: decided, not {:?}", v1.state)
        };
        let loser = (outcome == VerificationOutcome::ProviderWrong).then_some(v1.provider);
        let state = self.state();
        let current = match (state.node, state.provider) {
            (Some(node), Some(provider)) if state.state.is_on_node() => {
                let segment = pda::segment(&self.job, state.generation);
                Some(ix::CurrentAssignment {
                    node,
                    provider: (Some(provider) != loser).then_some(provider),
                    provider_payout: self.env.provider(&provider).payout,
                    segment: (state.holds_payment && segment != v1.segment).then_some(segment),
                })
            }
            _ => None,
        };
        let resolver = self.stranger.kp.insecure_clone();
        let before = [v, r].map(|c| self.env.balance(&self.providers[c].payout));
        let resolve = ix::resolve_verification(
            &resolver.pubkey(),
            &self.job,
            &v1,
            &state.refund_account,
            &self.env.deployment(),
            loser,
            current,
        );
        let logs = self
            .env
            .send(&[resolve], &[&resolver])
            .expect("a decided check resolves");
        // A verdict sends the job back exactly to the checkpoint the job
        // named (and the store therefore kept) as its restore floor.
        for resolved in events::<mcjs::events::VerificationResolved>(&logs) {
            if resolved.rolled_back {
                assert_eq!(
                    resolved.restore_point, state.restore_floor,
                    "a roll-back went elsewhere than the job's restore floor"
                );
            }
        }
        for (c, before) in [v, r].into_iter().zip(before) {
            self.checker_fees[c] += self.env.balance(&self.providers[c].payout) - before;
        }
        true
    }

    fn release_due(&mut self) {
        let now = self.env.now();
        let resolver = self.stranger.kp.insecure_clone();
        let Some(job) = self.env.try_job(&self.job) else {
            return;
        };
        for generation in 0..=job.generation {
            let key = pda::segment(&self.job, generation);
            let Some(account) = self.env.account(&key) else {
                continue;
            };
            let segment = mcjs_client::decode::segment(&account.data).unwrap();
            let due = match segment.state {
                SegmentState::Held { release_at } => release_at <= now,
                SegmentState::Refunded => true,
                SegmentState::OnNode => false,
            };
            if due && segment.open_verifications == 0 {
                let release = ix::release_segment(
                    &resolver.pubkey(),
                    &self.job,
                    &segment,
                    &self.env.deployment(),
                );
                self.env
                    .send(&[release], &[&resolver])
                    .expect("a due segment is released");
            }
        }
    }

    // ----- the greedy moves -----

    fn play(&mut self, m: &Move) {
        match *m {
            Move::Wait { secs } => self.env.warp(secs),
            Move::Grief { kind } if self.owner_play == OwnerPlay::Griefer => self.grief(kind),
            Move::Grief { .. } => {}
            Move::StrangerReport { cause: c } => {
                if let Some(p) = self.holder() {
                    let stranger = self.stranger.kp.insecure_clone();
                    let token = self.state().refund_account;
                    let provider = self.providers[p].fork();
                    let _ =
                        self.env
                            .report_live(&stranger, &self.job, &token, &provider, 0, cause(c));
                }
            }
            Move::Greed { provider } => self.greed(provider),
        }
        self.drive();
    }

    fn grief(&mut self, kind: u8) {
        let job = self.state();
        let owner = self.owner.kp.insecure_clone();
        match kind {
            0 => {
                if let Some(p) = self.holder() {
                    let provider = &self.providers[p];
                    let pause = self
                        .env
                        .job_accounts(&self.job, provider, 0, &self.job, 0)
                        .pause(&owner.pubkey());
                    let _ = self.env.send(&[pause], &[&owner]);
                }
            }
            1 => {
                let _ = self
                    .env
                    .send(&[ix::resume_job(&owner.pubkey(), &self.job)], &[&owner]);
            }
            2 => {
                if let Some(p) = self.holder() {
                    let provider = self.providers[p].fork();
                    let _ = self.env.report_live(
                        &owner,
                        &self.job,
                        &job.refund_account,
                        &provider,
                        0,
                        FailureCause::NodeLost,
                    );
                }
            }
            3 => {
                if self.env.account(&job.refund_account).is_some() {
                    self.owner.token = self.env.close_token_account(&job.refund_account, &owner);
                }
            }
            _ => self.cancel(),
        }
    }

    fn cancel(&mut self) {
        // Any token account of the owner's takes the refund.
        let owner = self.owner.kp.insecure_clone();
        let token = self.owner.token;
        let cancel = ix::cancel_job(&owner.pubkey(), &self.job, &token, &self.env.mint);
        let _ = self.env.send(&[cancel], &[&owner]);
    }

    fn greed(&mut self, p: usize) {
        let provider = self.providers[p].fork();
        let holds = self.holder() == Some(p);
        match self.plays[p] {
            Play::Closer if holds => {
                if self.env.account(&provider.payout).is_some() {
                    self.env
                        .close_token_account(&provider.payout, &provider.wallet.kp);
                }
            }
            Play::Renamer if holds => {
                let _ = self.env.rename_gpu(&provider, 0);
            }
            Play::EarlyWithdrawer => {
                let record = self.env.provider(&provider.pda);
                if holds && record.pending_withdrawal.is_none() && record.stake > 0 {
                    let request = ix::request_withdrawal(&provider.key(), record.stake);
                    let _ = self.env.send(&[request], &[&provider.wallet.kp]);
                }
                self.withdraw(p);
            }
            _ => {}
        }
    }

    fn withdraw(&mut self, p: usize) -> bool {
        let provider = self.providers[p].fork();
        let record = self.env.provider(&provider.pda);
        let Some(request) = record.pending_withdrawal else {
            return false;
        };
        let ok = self.env.withdraw(&provider).is_ok();
        if ok {
            self.withdrawn[p] += request.amount.min(record.stake);
        }
        ok
    }

    // ----- what every participant is owed -----

    fn check_step(&self, case: &Case) -> Result<(), TestCaseError> {
        self.env.assert_invariants();
        for (p, provider) in self.providers.iter().enumerate() {
            let record = self.env.provider(&provider.pda);
            if case.plays[p].keeps_its_word() {
                prop_assert_eq!(
                    record.slashed_total,
                    0,
                    "provider {} ({:?}) kept its word and was slashed",
                    p,
                    case.plays[p]
                );
            }
            prop_assert_eq!(
                record.stake + record.slashed_total + self.withdrawn[p],
                STAKE,
                "provider {}'s stake is not accounted for",
                p
            );
        }
        Ok(())
    }

    /// The greed stops; the honest parties play on. Every job ends, at its
    /// cap, on completion or at its owner's word (a paused one, or one no
    /// provider can take any more, is cancelled).
    fn finish(&mut self, case: &Case) -> Result<(), TestCaseError> {
        let mut queued_turns = 0;
        for _ in 0..400 {
            let job = self.state();
            if job.state.is_terminal() {
                break;
            }
            if matches!(job.state, JobState::Paused { .. }) {
                self.cancel();
            } else if job.state.can_assign() {
                queued_turns += 1;
                if queued_turns > 3 {
                    self.cancel();
                }
            } else {
                queued_turns = 0;
            }
            self.env.warp(INTERVAL / 2);
            self.drive();
            self.check_step(case)?;
        }
        let job = self.state();
        prop_assert!(
            job.state.is_terminal(),
            "the job never ended: {:?}",
            job.state
        );
        // Past the challenge window every held payment is released.
        self.env
            .warp(i64::from(default_params().challenge_window_secs) + 1);
        self.release_due();
        let job = self.state();
        prop_assert_eq!(job.live_segments, 0, "a segment was never released");
        prop_assert_eq!(job.held, 0);
        Ok(())
    }

    fn check_end(&mut self, case: &Case) -> Result<(), TestCaseError> {
        let job = self.state();
        let commission_bps = default_params().commission_bps;
        let mut owed = [0u64; 3];
        for (p, amount) in &self.earned {
            owed[*p] += mcjs::token::split_commission(*amount, commission_bps)
                .unwrap()
                .0;
        }
        for (p, provider) in self.providers.iter().enumerate() {
            let paid = self.env.balance(&provider.payout);
            let closed = self.env.closed_accounts.contains(&provider.payout);
            if case.plays[p].keeps_its_word() && !closed {
                prop_assert!(
                    paid >= owed[p],
                    "provider {} ({:?}) kept its word and was paid {} of the {} its attestations earned",
                    p,
                    case.plays[p],
                    paid,
                    owed[p]
                );
            }
            if self.verified && case.plays[p] == Play::Liar && self.unchecked_lies[p] == 0 {
                prop_assert_eq!(
                    paid - self.checker_fees[p],
                    0,
                    "a liar whose lies were checked was paid for them"
                );
            }
        }
        if self.verified {
            let earned: u64 = self.earned.iter().map(|(_, a)| a).sum();
            prop_assert!(
                job.paid <= earned,
                "the owner paid {} where the attestations earned {}",
                job.paid,
                earned
            );
        }

        // Every account is emptied by its rightful party.
        let owner = self.owner.kp.insecure_clone();
        let token = self.owner.token;
        self.env
            .close(&owner, &self.job, &token)
            .map_err(|f| TestCaseError::fail(format!("the owner cannot close its job: {f:?}")))?;
        prop_assert_eq!(self.env.balance(&pda::vault(&self.job)), 0);
        let cooldown = i64::from(default_params().withdrawal_cooldown_secs);
        for p in 0..3 {
            let provider = self.providers[p].fork();
            let record = self.env.provider(&provider.pda);
            if record.pending_withdrawal.is_none() && record.stake > 0 {
                let request = ix::request_withdrawal(&provider.key(), record.stake);
                self.env
                    .send(&[request], &[&provider.wallet.kp])
                    .map_err(|f| TestCaseError::fail(format!("withdrawal request: {f:?}")))?;
            }
        }
        self.env.warp(cooldown);
        for p in 0..3 {
            let provider = self.providers[p].fork();
            let record = self.env.provider(&provider.pda);
            if record.stake > 0 {
                // A partial request (an early withdrawer's) leaves the rest
                // for a second one.
                let left_after = record.stake
                    - record
                        .pending_withdrawal
                        .map_or(0, |w| w.amount)
                        .min(record.stake);
                prop_assert!(self.withdraw(p), "provider {} cannot withdraw its stake", p);
                if left_after > 0 {
                    let request = ix::request_withdrawal(&provider.key(), left_after);
                    self.env.send(&[request], &[&provider.wallet.kp]).unwrap();
                    self.env.warp(cooldown);
                    prop_assert!(self.withdraw(p));
                }
            }
            prop_assert_eq!(self.env.provider(&provider.pda).stake, 0);
            prop_assert_eq!(self.env.balance(&pda::vault(&provider.pda)), 0);
        }
        self.env.assert_invariants();
        Ok(())
    }
}

fn possession_of(key: &[u8; 32], hash: &[u8; 32]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest([key.as_slice(), hash.as_slice()].concat()).into()
}

/// What the sequences reached, counted over a run: a property over
/// sequences that never slash a liar or never end a job at its cap would
/// prove little.
#[derive(Default)]
struct Reached {
    completed: AtomicU32,
    expired: AtomicU32,
    cancelled: AtomicU32,
    liar_slashed: AtomicU32,
    staller_slashed: AtomicU32,
    closed_payout: AtomicU32,
    checker_replaced: AtomicU32,
    second_round: AtomicU32,
    voucher_slashed: AtomicU32,
}

fn run_case(template: &Template, case: &Case, reached: &Reached) -> Result<(), TestCaseError> {
    let mut world = World::new(template, case);
    world.drive();
    world.check_step(case)?;
    for m in &case.moves {
        world.play(m);
        world.check_step(case)?;
    }
    world.finish(case)?;
    let count = |c: &AtomicU32| {
        c.fetch_add(1, Ordering::Relaxed);
    };
    if world.replaced > 0 {
        count(&reached.checker_replaced);
    }
    if world.second_rounds > 0 {
        count(&reached.second_round);
    }
    match world.state().state {
        JobState::Completed { .. } => count(&reached.completed),
        JobState::Expired { .. } => count(&reached.expired),
        JobState::Cancelled { .. } => count(&reached.cancelled),
        _ => {}
    }
    for (p, provider) in world.providers.iter().enumerate() {
        let slashed = world.env.provider(&provider.pda).slashed_total > 0;
        match case.plays[p] {
            Play::Liar if slashed => count(&reached.liar_slashed),
            Play::Staller if slashed => count(&reached.staller_slashed),
            Play::VouchingChecker if slashed => count(&reached.voucher_slashed),
            _ => {}
        }
        if world.env.closed_accounts.contains(&provider.payout) {
            count(&reached.closed_payout);
        }
    }
    world.check_end(case)
}

#[test]
fn participants_keeping_to_one_strategy_take_nothing_from_the_others() {
    let (mut runner, cases) = property_runner();
    let template = Template::new();
    let reached = Reached::default();
    runner
        .run(&case(), |c| run_case(&template, &c, &reached))
        .unwrap();
    if cases >= 200 {
        for (what, count) in [
            ("a completion", &reached.completed),
            ("an end at the cap", &reached.expired),
            ("a cancellation", &reached.cancelled),
            ("a liar slashed", &reached.liar_slashed),
            ("a staller slashed", &reached.staller_slashed),
            ("a payout account closed", &reached.closed_payout),
            ("a silent checker replaced", &reached.checker_replaced),
            ("a dispute settled by a second round", &reached.second_round),
            ("a vouching checker slashed", &reached.voucher_slashed),
        ] {
            assert!(
                count.load(Ordering::Relaxed) > 0,
                "no sequence reached {what} in {cases} cases"
            );
        }
    }
}

/// Takes `provider`'s node 0 offline or brings it back (its provider's word).
fn set_online(env: &mut Env, provider: &ProviderActor, online: bool) {
    let status = if online {
        NodeStatus::Available
    } else {
        NodeStatus::Offline
    };
    let ix = ix::set_node_status(&provider.key(), &provider.pda, 0, status);
    let kp = provider.wallet.kp.insecure_clone();
    env.send(&[ix], &[&kp]).expect("a node changes status");
}
