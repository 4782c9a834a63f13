//! A small world for the program: a mint, a treasury, wallets, providers
//! with nodes, jobs; plus the checks every test ends with.

#![allow(dead_code)]

use std::collections::BTreeMap;

use crate::cu_log;
use anchor_lang::{AccountDeserialize, Discriminator};
use anchor_spl::token::{TokenAccount, spl_token};
use litesvm::LiteSVM;
use mcjs::errors::McjsError;
use mcjs::instructions::*;
use mcjs::state::*;
use mcjs_client::{Pubkey, decode, errors as names, ix, pda};
use solana_account::Account;
use solana_clock::Clock;
use solana_keypair::Keypair;
use solana_signer::Signer;
use solana_transaction::Transaction;
use solana_transaction_error::TransactionError;

use anchor_lang::solana_program::instruction::Instruction;
use anchor_lang::solana_program::system_instruction;
use solana_instruction_error::InstructionError;

pub const USDC: u64 = 1_000_000;
pub const START_TIME: i64 = 1_800_000_000;
pub const HOUR: i64 = 3_600;

pub fn default_params() -> ConfigParams {
    ConfigParams {
        commission_bps: 500,
        slash_amount: 5 * USDC,
        min_provider_stake: 100 * USDC,
        liveness_factor: 3,
        withdrawal_cooldown_secs: 86_400,
        challenge_window_secs: 3_600,
        verification_fee_bps: 2_000,
        draw_secs: 450,
        require_proven_hardware: false,
    }
}

pub fn a100_80gb() -> HardwareProfile {
    HardwareProfile {
        gpu_model: "a100-sxm4-80gb".into(),
        gpu_count: 4,
        vram_per_gpu_mib: 81_920,
        compute_capability: 80,
        cpu_cores: 64,
        ram_mib: 512 * 1024,
        disk_gib: 4_000,
        checkpoint_write_mibps: 1_500,
    }
}

pub fn k80() -> HardwareProfile {
    HardwareProfile {
        gpu_model: "k80".into(),
        gpu_count: 2,
        vram_per_gpu_mib: 12_288,
        compute_capability: 37,
        cpu_cores: 16,
        ram_mib: 64 * 1024,
        disk_gib: 500,
        checkpoint_write_mibps: 200,
    }
}

/// 4× A100 80 GB, 15-minute checkpoints, 2 USDC per GPU-hour at most.
pub fn job_args(job_id: u64, bond: u64) -> SubmitJobArgs {
    SubmitJobArgs {
        job_id,
        spec_hash: [job_id as u8; 32],
        requirements: JobRequirements {
            gpu_count: 4,
            min_vram_mib: 80_000,
            min_compute_capability: 80,
            gpu_models: vec!["a100".into()],
            min_checkpoint_write_mibps: 60,
            attested: false,
        },
        terms: JobTerms {
            checkpoint_interval_secs: 900,
            max_duration_secs: 48 * 3_600,
            deadline: None,
            max_price_per_gpu_hour: 2 * USDC,
            restart_budget: 2,
        },
        bond,
        verification_ppm: 0,
    }
}

pub struct Wallet {
    pub kp: Keypair,
    /// Its USDC token account.
    pub token: Pubkey,
}

impl Wallet {
    pub fn fork(&self) -> Self {
        Self {
            kp: self.kp.insecure_clone(),
            token: self.token,
        }
    }

    pub fn key(&self) -> Pubkey {
        self.kp.pubkey()
    }
}

pub struct ProviderActor {
    pub wallet: Wallet,
    pub payout: Pubkey,
    /// The Provider account.
    pub pda: Pubkey,
    pub nodes: Vec<Pubkey>,
    /// Each node's operator key: what its agent signs with.
    pub operators: Vec<Keypair>,
}

impl ProviderActor {
    /// The accounts of `job`'s assignment `generation` on this provider's
    /// `node`-th node, refunds to `refund`, naming no Segment.
    pub fn assignment(
        &self,
        job: &Pubkey,
        node: usize,
        refund: &Pubkey,
        generation: u32,
        deployment: ix::Deployment,
    ) -> ix::JobAccounts {
        ix::JobAccounts {
            job: *job,
            node: self.nodes[node],
            provider: self.pda,
            payout: self.payout,
            refund: *refund,
            generation,
            segment: None,
            deployment,
        }
    }

    pub fn fork(&self) -> Self {
        Self {
            wallet: self.wallet.fork(),
            payout: self.payout,
            pda: self.pda,
            nodes: self.nodes.clone(),
            operators: self.operators.iter().map(|k| k.insecure_clone()).collect(),
        }
    }

    /// The operator key of node `node`.
    pub fn operator(&self, node: usize) -> &Keypair {
        &self.operators[node]
    }

    pub fn key(&self) -> Pubkey {
        self.wallet.key()
    }
}

/// A failed transaction: its error and its logs.
#[derive(Debug)]
pub struct Failure {
    pub err: TransactionError,
    pub logs: Vec<String>,
}

impl Failure {
    pub fn custom_code(&self) -> Option<u32> {
        match &self.err {
            TransactionError::InstructionError(_, InstructionError::Custom(code)) => Some(*code),
            _ => None,
        }
    }

    pub fn name(&self) -> String {
        self.custom_code()
            .and_then(names::describe)
            .map(|(name, _)| name)
            .unwrap_or_else(|| format!("{:?}", self.err))
    }
}

pub type Outcome = Result<Vec<String>, Failure>;

/// The output every completion by [`Env::complete`] names.
pub const OUTPUT_HASH: [u8; 32] = [0xee; 32];

#[track_caller]
pub fn expect_error(outcome: Outcome, expected: McjsError) {
    match outcome {
        Ok(_) => panic!("expected {expected:?}, but the transaction succeeded"),
        Err(failure) => assert_eq!(
            failure.custom_code(),
            Some(names::code_of(expected)),
            "expected {expected:?}, got {} (logs: {:#?})",
            failure.name(),
            failure.logs
        ),
    }
}

#[track_caller]
pub fn expect_anchor_error(outcome: Outcome, expected: anchor_lang::error::ErrorCode) {
    match outcome {
        Ok(_) => panic!("expected {expected:?}, but the transaction succeeded"),
        Err(failure) => assert_eq!(
            failure.custom_code(),
            Some(expected as u32),
            "expected {expected:?}, got {}",
            failure.name()
        ),
    }
}

#[track_caller]
pub fn expect_failure(outcome: Outcome) -> Failure {
    match outcome {
        Ok(_) => panic!("expected the transaction to fail, but it succeeded"),
        Err(failure) => failure,
    }
}

/// Everything that must not change when a transaction is refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    balances: BTreeMap<Pubkey, u64>,
    program_accounts: BTreeMap<Pubkey, Vec<u8>>,
}

pub struct Env {
    pub svm: LiteSVM,
    pub admin: Keypair,
    pub scheduler: Keypair,
    pub mint_authority: Keypair,
    pub mint: Pubkey,
    pub treasury: Pubkey,
    /// Every token account of the USDC mint this world knows about.
    pub token_accounts: Vec<Pubkey>,
    pub jobs: Vec<Pubkey>,
    pub providers: Vec<Pubkey>,
    pub minted: u64,
    /// Tokens sent into a vault (a job's, a stake vault, the insurance pool)
    /// from outside the program: they sit above the bookkeeping until
    /// `close_job` or `withdraw_stake` sweeps them out.
    pub strays: BTreeMap<Pubkey, u64>,
    /// Paid out of the insurance pool by `compensate_owner` (through [`Env::compensate`]).
    pub compensated: u64,
    /// Fees paid to checkers out of slashes (a proven-wrong provider pays
    /// them; the rest of its slash goes to the insurance pool), as the
    /// `VerificationResolved` events of every transaction sent report them
    /// (a resolved Verification account closes).
    pub slash_fees: u64,
    /// Whether [`Env::send`] records compute units for bench/program_cu.sh
    /// (a test of a deliberately rare case turns it off: the bench's figures
    /// are what the suite's ordinary sequences take).
    pub record_cu: bool,
    /// Token accounts their holders closed ([`Env::close_token_account`]):
    /// only then may a finished job keep a bond (what it could not pay).
    pub closed_accounts: Vec<Pubkey>,
}

impl Env {
    /// A chain with the program initialised with [`default_params`].
    pub fn new() -> Self {
        Self::with_params(default_params())
    }

    pub fn with_params(params: ConfigParams) -> Self {
        Self::initialised(params, true)
    }

    /// `sigverify` false skips the ed25519 checks of transaction signatures
    /// (about 12 ms a transaction in a debug build). Which accounts signed is
    /// still part of each message and enforced by the runtime and the program;
    /// only the property test, which sends tens of thousands of
    /// transactions, turns it off.
    pub fn initialised(params: ConfigParams, sigverify: bool) -> Self {
        let mut env = Self::uninitialised_with(sigverify);
        let ix = ix::initialize(
            &env.admin.pubkey(),
            &env.mint,
            &env.treasury,
            InitializeArgs {
                scheduler: env.scheduler.pubkey(),
                params,
            },
        );
        let admin = env.admin.insecure_clone();
        env.send(&[ix], &[&admin]).expect("initialize");
        env
    }

    /// A chain with the mint and treasury but no Config.
    pub fn uninitialised() -> Self {
        Self::uninitialised_with(true)
    }

    fn uninitialised_with(sigverify: bool) -> Self {
        let mut svm = LiteSVM::new().with_sigverify(sigverify);
        let admin = Keypair::new();
        // The native program, or its SBF build when MCJS_PROGRAM_SO names one
        // (deployed with the admin as its upgrade authority, as on a cluster).
        mcjs_svm::add_mcjs_program_from_env(&mut svm, &admin.pubkey());
        let scheduler = Keypair::new();
        let mint_authority = Keypair::new();
        for kp in [&admin, &scheduler, &mint_authority] {
            svm.airdrop(&kp.pubkey(), 100_000_000_000).unwrap();
        }
        let mut env = Self {
            svm,
            admin,
            scheduler,
            mint_authority,
            mint: Pubkey::default(),
            treasury: Pubkey::default(),
            token_accounts: Vec::new(),
            jobs: Vec::new(),
            providers: Vec::new(),
            minted: 0,
            strays: BTreeMap::new(),
            compensated: 0,
            slash_fees: 0,
            record_cu: true,
            closed_accounts: Vec::new(),
        };
        env.set_time(START_TIME);
        env.mint = env.create_mint(6);
        let admin_key = env.admin.pubkey();
        env.treasury = env.token_account(&env.mint.clone(), &admin_key);
        env
    }

    /// An independent copy of this world (the chain and the bookkeeping).
    pub fn fork(&self) -> Self {
        Self {
            svm: self.svm.clone(),
            admin: self.admin.insecure_clone(),
            scheduler: self.scheduler.insecure_clone(),
            mint_authority: self.mint_authority.insecure_clone(),
            mint: self.mint,
            treasury: self.treasury,
            token_accounts: self.token_accounts.clone(),
            jobs: self.jobs.clone(),
            providers: self.providers.clone(),
            minted: self.minted,
            strays: self.strays.clone(),
            compensated: self.compensated,
            slash_fees: self.slash_fees,
            record_cu: self.record_cu,
            closed_accounts: self.closed_accounts.clone(),
        }
    }

    pub fn deployment(&self) -> ix::Deployment {
        ix::Deployment {
            usdc_mint: self.mint,
            treasury: self.treasury,
        }
    }

    // ----- clock -----

    pub fn now(&self) -> i64 {
        self.svm.get_sysvar::<Clock>().unix_timestamp
    }

    /// Moves the clock to `unix_timestamp` in a new slot; the slot before
    /// it enters the SlotHashes sysvar (as a cluster records each finished
    /// slot's hash), with the hash [`slot_hash`] gives it.
    pub fn set_time(&mut self, unix_timestamp: i64) {
        let mut clock = self.svm.get_sysvar::<Clock>();
        let finished = clock.slot;
        clock.unix_timestamp = unix_timestamp;
        clock.slot += 1;
        self.svm.set_sysvar(&clock);
        let mut hashes: Vec<(u64, solana_hash::Hash)> = self
            .svm
            .get_sysvar::<solana_slot_hashes::SlotHashes>()
            .iter()
            .copied()
            .filter(|(slot, _)| *slot != finished)
            .collect();
        hashes.insert(
            0,
            (
                finished,
                solana_hash::Hash::new_from_array(slot_hash(finished)),
            ),
        );
        hashes.truncate(solana_slot_hashes::MAX_ENTRIES);
        self.svm
            .set_sysvar(&solana_slot_hashes::SlotHashes::new(&hashes));
    }

    pub fn slot(&self) -> u64 {
        self.svm.get_sysvar::<Clock>().slot
    }

    /// Moves the clock `slots` slots on (time as well, 400 ms a slot).
    pub fn advance_slots(&mut self, slots: u64) {
        let mut clock = self.svm.get_sysvar::<Clock>();
        clock.slot += slots - 1;
        self.svm.set_sysvar(&clock);
        self.warp((slots as i64 * 2 + 4) / 5);
    }

    pub fn warp(&mut self, secs: i64) {
        self.set_time(self.now() + secs);
    }

    // ----- transactions -----

    /// Sends `ixs` as the client does: behind the compute-unit limit it asks
    /// for them (`mcjs_client::compute`). On the SBF build an instruction
    /// that takes more than its measured maximum plus the margin fails here.
    pub fn send(&mut self, ixs: &[Instruction], signers: &[&Keypair]) -> Outcome {
        // The client's limits, as every MCJS process sends; while measuring
        // them (bench/program_cu.sh), the most a transaction may have.
        let budgeted = ixs
            .iter()
            .any(|ix| ix.program_id == mcjs_client::compute::COMPUTE_BUDGET_PROGRAM);
        let ixs = &if cu_log::measuring() && !budgeted {
            let mut limited = vec![mcjs_client::compute::set_unit_limit(
                mcjs_client::compute::MAX_LIMIT,
            )];
            limited.extend_from_slice(ixs);
            limited
        } else {
            mcjs_client::compute::with_unit_limit(ixs)
        };
        let payer = signers[0].pubkey();
        let tx = Transaction::new_signed_with_payer(
            ixs,
            Some(&payer),
            signers,
            self.svm.latest_blockhash(),
        );
        let result = self.svm.send_transaction(tx);
        self.svm.expire_blockhash();
        match &result {
            _ if !self.record_cu => {}
            Ok(meta) => cu_log::record(ixs, &meta.logs, meta.compute_units_consumed, true),
            Err(failed) => cu_log::record(
                ixs,
                &failed.meta.logs,
                failed.meta.compute_units_consumed,
                false,
            ),
        }
        match result {
            Ok(meta) => {
                for resolved in events::<mcjs::events::VerificationResolved>(&meta.logs) {
                    if resolved.slashed > 0 {
                        self.slash_fees += resolved.fees;
                    }
                }
                Ok(meta.logs)
            }
            Err(failed) => Err(Failure {
                err: failed.err,
                logs: failed.meta.logs,
            }),
        }
    }

    // ----- tokens -----

    pub fn create_mint(&mut self, decimals: u8) -> Pubkey {
        let mint = Keypair::new();
        let authority = self.mint_authority.insecure_clone();
        let rent = self.svm.minimum_balance_for_rent_exemption(82);
        let ixs = [
            system_instruction::create_account(
                &authority.pubkey(),
                &mint.pubkey(),
                rent,
                82,
                &spl_token::ID,
            ),
            spl_token::instruction::initialize_mint2(
                &spl_token::ID,
                &mint.pubkey(),
                &authority.pubkey(),
                None,
                decimals,
            )
            .unwrap(),
        ];
        self.send(&ixs, &[&authority, &mint]).expect("create mint");
        mint.pubkey()
    }

    /// A new token account of `mint` whose authority is `owner`.
    pub fn token_account(&mut self, mint: &Pubkey, owner: &Pubkey) -> Pubkey {
        let account = Keypair::new();
        let payer = self.mint_authority.insecure_clone();
        let rent = self.svm.minimum_balance_for_rent_exemption(165);
        let ixs = [
            system_instruction::create_account(
                &payer.pubkey(),
                &account.pubkey(),
                rent,
                165,
                &spl_token::ID,
            ),
            spl_token::instruction::initialize_account3(
                &spl_token::ID,
                &account.pubkey(),
                mint,
                owner,
            )
            .unwrap(),
        ];
        self.send(&ixs, &[&payer, &account])
            .expect("create token account");
        if *mint == self.mint {
            self.token_accounts.push(account.pubkey());
        }
        account.pubkey()
    }

    pub fn mint_to(&mut self, mint: &Pubkey, account: &Pubkey, amount: u64) {
        let authority = self.mint_authority.insecure_clone();
        let ix = spl_token::instruction::mint_to(
            &spl_token::ID,
            mint,
            account,
            &authority.pubkey(),
            &[],
            amount,
        )
        .unwrap();
        self.send(&[ix], &[&authority]).expect("mint");
        if *mint == self.mint {
            self.minted += amount;
        }
    }

    /// `amount` base units sent straight into `vault` from outside the
    /// program (minted to a passer-by and transferred), recorded as stray.
    pub fn send_stray(&mut self, vault: &Pubkey, amount: u64) {
        let passer_by = self.wallet(amount);
        let ix = spl_token::instruction::transfer(
            &spl_token::ID,
            &passer_by.token,
            vault,
            &passer_by.key(),
            &[],
            amount,
        )
        .unwrap();
        self.send(&[ix], &[&passer_by.kp])
            .expect("send stray tokens");
        *self.strays.entry(*vault).or_default() += amount;
    }

    /// Stray tokens recorded in `vault`.
    pub fn stray(&self, vault: &Pubkey) -> u64 {
        self.strays.get(vault).copied().unwrap_or(0)
    }

    /// A funded wallet (SOL for fees and rent) with `usdc` base units.
    pub fn wallet(&mut self, usdc: u64) -> Wallet {
        self.wallet_of(Keypair::new(), usdc)
    }

    /// [`Env::wallet`] with a chosen key.
    pub fn wallet_of(&mut self, kp: Keypair, usdc: u64) -> Wallet {
        self.svm.airdrop(&kp.pubkey(), 10_000_000_000).unwrap();
        let mint = self.mint;
        let token = self.token_account(&mint, &kp.pubkey());
        if usdc > 0 {
            self.mint_to(&mint, &token, usdc);
        }
        Wallet { kp, token }
    }

    /// `owner` empties `account` into a new token account of its own and
    /// closes it (the rent back to `owner`), as any holder may at any time.
    /// Returns the new account.
    pub fn close_token_account(&mut self, account: &Pubkey, owner: &Keypair) -> Pubkey {
        let mint = self.mint;
        let spare = self.token_account(&mint, &owner.pubkey());
        let amount = self.balance(account);
        let mut ixs = Vec::new();
        if amount > 0 {
            ixs.push(
                spl_token::instruction::transfer(
                    &spl_token::ID,
                    account,
                    &spare,
                    &owner.pubkey(),
                    &[],
                    amount,
                )
                .unwrap(),
            );
        }
        ixs.push(
            spl_token::instruction::close_account(
                &spl_token::ID,
                account,
                &owner.pubkey(),
                &owner.pubkey(),
                &[],
            )
            .unwrap(),
        );
        self.send(&ixs, &[owner]).expect("close the token account");
        assert!(self.account(account).is_none(), "closed");
        self.closed_accounts.push(*account);
        spare
    }

    pub fn balance(&self, token_account: &Pubkey) -> u64 {
        match self.svm.get_account(token_account) {
            Some(account) if account.owner == spl_token::ID && !account.data.is_empty() => {
                TokenAccount::try_deserialize_unchecked(&mut &account.data[..])
                    .map(|t| t.amount)
                    .unwrap_or(0)
            }
            _ => 0,
        }
    }

    // ----- program accounts -----

    pub fn account(&self, key: &Pubkey) -> Option<Account> {
        self.svm.get_account(key).filter(|a| a.lamports > 0)
    }

    pub fn lease(&self) -> SchedulerLease {
        decode::lease(&self.account(&pda::lease()).unwrap().data).unwrap()
    }

    pub fn config(&self) -> Config {
        decode::config(&self.account(&pda::config()).unwrap().data).unwrap()
    }

    pub fn job(&self, key: &Pubkey) -> Job {
        decode::job(&self.account(key).expect("job account").data).unwrap()
    }

    pub fn try_job(&self, key: &Pubkey) -> Option<Job> {
        self.account(key)
            .filter(|a| a.owner == mcjs::ID)
            .and_then(|a| decode::job(&a.data).ok())
    }

    pub fn pool(&self) -> u64 {
        self.balance(&pda::insurance_pool())
    }

    pub fn segment_of(&self, job: &Pubkey) -> Option<Pubkey> {
        self.try_job(job).and_then(|j| ix::segment_of(job, &j))
    }

    /// The accounts of `job`'s assignment `generation` on `provider`'s
    /// `node`-th node, refunds to `refund`, with the Segment the chain holds
    /// for the job ([`Env::segment_of`]).
    pub fn job_accounts(
        &self,
        job: &Pubkey,
        provider: &ProviderActor,
        node: usize,
        refund: &Pubkey,
        generation: u32,
    ) -> ix::JobAccounts {
        ix::JobAccounts {
            segment: self.segment_of(job),
            ..provider.assignment(job, node, refund, generation, self.deployment())
        }
    }

    pub fn provider(&self, key: &Pubkey) -> Provider {
        decode::provider(&self.account(key).expect("provider account").data).unwrap()
    }

    pub fn node(&self, key: &Pubkey) -> Node {
        decode::node(&self.account(key).expect("node account").data).unwrap()
    }

    /// The checker pool of `gpu_model`, once a node has entered it.
    pub fn checker_pool(&self, gpu_model: &str) -> Option<CheckerPool> {
        self.account(&pda::checker_pool(gpu_model))
            .map(|a| decode::checker_pool(&a.data).unwrap())
    }

    /// `provider`'s node `node` enters its GPU model's checker pool, or
    /// renews its entry, signed by its operator key (its agent's part).
    pub fn enter_pool(&mut self, provider: &ProviderActor, node: usize) -> Outcome {
        let operator = provider.operator(node).insecure_clone();
        let model = self.node(&provider.nodes[node]).hardware.gpu_model;
        let ix = ix::enter_checker_pool(
            &operator.pubkey(),
            &provider.nodes[node],
            &provider.pda,
            &model,
        );
        self.send(&[ix], &[&operator])
    }

    /// What the pool's draw gives a check of the segment at `segment_key`
    /// (`picks` members from `seed`, never of a provider in `exclude`), as
    /// the scheduler computes it; `None` when the pool runs out.
    pub fn draw(
        &self,
        segment_key: &Pubkey,
        seed: [u8; 32],
        exclude: Vec<Pubkey>,
        picks: usize,
    ) -> Option<(Vec<PoolMember>, ix::DrawProof)> {
        let segment = decode::segment(&self.account(segment_key)?.data).ok()?;
        let job = self.job(&segment.job);
        let pool = self.checker_pool(&segment.gpu_model)?;
        let params = self.config().params;
        let draw = Draw {
            pool: &pool,
            seed,
            exclude,
            params: &params,
            job: &job,
            segment: &segment,
            now: self.now(),
        };
        ix::drawn_checkers(&draw, pda::checker_pool(&segment.gpu_model), picks, |m| {
            Some((
                decode::node(&self.account(&m.node)?.data).ok()?,
                decode::provider(&self.account(&m.provider)?.data).ok()?,
            ))
        })
    }

    /// The first round's draw of `job`'s latest attested interval (from
    /// the hash of the slot after the attestation): its checkers, in the
    /// order drawn, and the proof.
    pub fn first_round_draw(&self, job_key: &Pubkey) -> Option<(ix::Checkers, ix::DrawProof)> {
        let job = self.job(job_key);
        let hashes = self.svm.get_sysvar::<solana_slot_hashes::SlotHashes>();
        let hash = hashes
            .iter()
            .filter(|(slot, _)| *slot > job.last_attest_slot)
            .min_by_key(|(slot, _)| *slot)?
            .1
            .to_bytes();
        let seed = first_round_seed(&hash, job_key, job.checkpoint_count);
        let segment_key = pda::segment(job_key, job.last_checkpoint?.generation);
        let segment = decode::segment(&self.account(&segment_key)?.data).ok()?;
        let (taken, proof) = self.draw(&segment_key, seed, vec![segment.provider], 2)?;
        Some((checkers_of(&taken), proof))
    }

    /// The draw of a replacement for a checker of `verification`.
    pub fn replacement_draw(&self, verification: &Pubkey) -> Option<(PoolMember, ix::DrawProof)> {
        let v = decode::verification(&self.account(verification)?.data).ok()?;
        let exclude = vec![v.provider, v.verifier_provider, v.referee_provider];
        let seed = replacement_seed(verification, v.replacements);
        let (taken, proof) = self.draw(&v.segment, seed, exclude, 1)?;
        Some((taken[0], proof))
    }

    /// The draw of `verification`'s second round.
    pub fn second_round_draw(
        &self,
        verification: &Pubkey,
    ) -> Option<(ix::Checkers, ix::DrawProof)> {
        let v = decode::verification(&self.account(verification)?.data).ok()?;
        let seed = second_round_seed(verification);
        let (taken, proof) = self.draw(&v.segment, seed, v.involved_providers().to_vec(), 2)?;
        Some((checkers_of(&taken), proof))
    }

    // ----- actors -----

    /// A registered provider with `stake` and one node per profile
    /// (indices 0, 1, …), each priced at `price` per GPU-hour.
    pub fn provider_with_nodes(
        &mut self,
        stake: u64,
        nodes: &[HardwareProfile],
        price: u64,
    ) -> ProviderActor {
        let wallet = self.wallet(stake + 50 * USDC);
        let mint = self.mint;
        let payout = self.token_account(&mint, &wallet.key());
        let ix = ix::register_provider(&wallet.key(), &wallet.token, &payout, &mint, stake);
        self.send(&[ix], &[&wallet.kp]).expect("register provider");
        let pda = pda::provider(&wallet.key());
        self.providers.push(pda);
        let mut actor = ProviderActor {
            wallet,
            payout,
            pda,
            nodes: Vec::new(),
            operators: Vec::new(),
        };
        for (index, hardware) in nodes.iter().enumerate() {
            let operator = Keypair::new();
            self.svm
                .airdrop(&operator.pubkey(), 1_000_000_000)
                .expect("airdrop to the operator key");
            let ix = ix::register_node(
                &actor.key(),
                RegisterNodeArgs {
                    index: index as u32,
                    operator: operator.pubkey(),
                    hardware: hardware.clone(),
                    readiness: 90,
                    price_per_gpu_hour: price,
                },
            );
            self.send(&[ix], &[&actor.wallet.kp])
                .expect("register node");
            actor.nodes.push(pda::node(&pda, index as u32));
            actor.operators.push(operator);
        }
        actor
    }

    pub fn submit(&mut self, owner: &Wallet, args: SubmitJobArgs) -> Result<Pubkey, Failure> {
        let job = pda::job(&owner.key(), args.job_id);
        let ix = ix::submit_job(&owner.key(), &owner.token, &self.mint, args);
        self.send(&[ix], &[&owner.kp])?;
        self.jobs.push(job);
        Ok(job)
    }

    pub fn assign(&mut self, job: &Pubkey, provider: &ProviderActor, node: usize) -> Outcome {
        let new_segment = self
            .try_job(job)
            .filter(|state| ix::assignment_holds_payment(state, &self.config().params))
            .map(|state| state.generation);
        let ix = ix::assign_job(
            &self.scheduler.pubkey(),
            job,
            &provider.nodes[node],
            &provider.pda,
            new_segment,
        );
        let scheduler = self.scheduler.insecure_clone();
        self.send(&[ix], &[&scheduler])
    }

    pub fn start(&mut self, job: &Pubkey, provider: &ProviderActor, node: usize) -> Outcome {
        let generation = self.job(job).generation;
        let operator = provider.operator(node);
        let ix = ix::start_job(
            &operator.pubkey(),
            job,
            &provider.nodes[node],
            &provider.pda,
            generation,
        );
        self.send(&[ix], &[operator])
    }

    /// Attests as a node agent does: with the settlement accounts only when
    /// the attestation will exhaust the bond (`Job::attestation_may_exhaust_bond`
    /// at the chain's clock, which is exact here).
    pub fn attest(
        &mut self,
        job: &Pubkey,
        provider: &ProviderActor,
        node: usize,
        generation: u32,
        epoch: u32,
        step: u64,
    ) -> Outcome {
        let settle = self.attest_needs_settlement(job);
        self.attest_settling(job, provider, node, generation, epoch, step, settle)
    }

    /// Whether an attestation of `job` now exhausts its bond (an unknown
    /// job or Config: yes).
    pub fn attest_needs_settlement(&self, job: &Pubkey) -> bool {
        let liveness = match self.account(&pda::config()) {
            Some(_) => self.config().params.liveness_factor,
            None => u8::MAX,
        };
        self.try_job(job)
            .is_none_or(|j| j.attestation_may_exhaust_bond(self.now(), liveness))
    }

    /// Attests with (`settle`) or without the settlement accounts.
    #[allow(clippy::too_many_arguments)]
    pub fn attest_settling(
        &mut self,
        job: &Pubkey,
        provider: &ProviderActor,
        node: usize,
        generation: u32,
        epoch: u32,
        step: u64,
        settle: bool,
    ) -> Outcome {
        let operator = provider.operator(node);
        let ix = self
            .job_accounts(job, provider, node, job, generation)
            .attest(
                &operator.pubkey(),
                settle,
                epoch,
                step,
                checkpoint_hash(epoch, step),
            );
        self.send(&[ix], &[operator])
    }

    pub fn complete(
        &mut self,
        job: &Pubkey,
        owner_token: &Pubkey,
        provider: &ProviderActor,
        node: usize,
        generation: u32,
    ) -> Outcome {
        let operator = provider.operator(node);
        let ix = self
            .job_accounts(job, provider, node, owner_token, generation)
            .complete(&operator.pubkey(), OUTPUT_HASH);
        self.send(&[ix], &[operator])
    }

    /// The scheduler's lease runs out now (its holder stopped renewing it):
    /// the slot moves past `expires_slot`, the clock's time does not.
    pub fn lapse_lease(&mut self) {
        let expires = self.lease().expires_slot;
        let mut clock = self.svm.get_sysvar::<Clock>();
        if clock.slot <= expires {
            clock.slot = expires + 1;
            self.svm.set_sysvar(&clock);
        }
    }

    /// `report_failure` signed by `reporter`. Anyone but the lease's holder
    /// reports only while no scheduler acts (`SchedulerLease::lapsed`), so a
    /// report by anyone else is played with the lease lapsed first;
    /// [`Env::report_live`] plays it with the lease as it is.
    pub fn report(
        &mut self,
        reporter: &Keypair,
        job: &Pubkey,
        owner_token: &Pubkey,
        provider: &ProviderActor,
        node: usize,
        cause: FailureCause,
    ) -> Outcome {
        if self.lease().holder != reporter.pubkey() {
            self.lapse_lease();
        }
        self.report_live(reporter, job, owner_token, provider, node, cause)
    }

    /// `report_failure` signed by `reporter`, the lease left as it is.
    pub fn report_live(
        &mut self,
        reporter: &Keypair,
        job: &Pubkey,
        owner_token: &Pubkey,
        provider: &ProviderActor,
        node: usize,
        cause: FailureCause,
    ) -> Outcome {
        let generation = self.job(job).generation;
        let ix = self
            .job_accounts(job, provider, node, owner_token, generation)
            .report_failure(&reporter.pubkey(), cause);
        self.send(&[ix], &[reporter])
    }

    /// `compensate_owner` signed by `signer`; a success is recorded so
    /// that the insurance pool's balance stays accounted for.
    pub fn compensate(
        &mut self,
        signer: &Keypair,
        job: &Pubkey,
        owner_token: &Pubkey,
        amount: u64,
    ) -> Outcome {
        let ix = ix::compensate_owner(&signer.pubkey(), job, owner_token, &self.mint, amount);
        let outcome = self.send(&[ix], &[signer]);
        if outcome.is_ok() {
            self.compensated += amount;
        }
        outcome
    }

    /// `close_job` by `owner`, stray tokens to `owner_token`; a success
    /// clears the vault's stray record.
    pub fn close(&mut self, owner: &Keypair, job: &Pubkey, owner_token: &Pubkey) -> Outcome {
        let ix = ix::close_job(&owner.pubkey(), job, owner_token, &self.mint);
        let outcome = self.send(&[ix], &[owner]);
        if outcome.is_ok() {
            self.strays.remove(&pda::vault(job));
        }
        outcome
    }

    /// `withdraw_stake` by the provider's wallet to its token account; a
    /// success clears the stake vault's stray record.
    pub fn withdraw(&mut self, provider: &ProviderActor) -> Outcome {
        let ix = ix::withdraw_stake(&provider.key(), &provider.wallet.token, &self.mint);
        let outcome = self.send(&[ix], &[&provider.wallet.kp]);
        if outcome.is_ok() {
            self.strays.remove(&pda::vault(&provider.pda));
        }
        outcome
    }

    /// Submit, assign to `provider`'s node 0 and start.
    pub fn running_job(&mut self, owner: &Wallet, provider: &ProviderActor, job_id: u64) -> Pubkey {
        let job = self
            .submit(owner, job_args(job_id, 100 * USDC))
            .expect("submit");
        self.assign(&job, provider, 0).expect("assign");
        self.start(&job, provider, 0).expect("start");
        job
    }

    // ----- the checks every test ends with -----

    pub fn snapshot(&self) -> Snapshot {
        let mut balances = BTreeMap::new();
        for key in self.all_token_accounts() {
            balances.insert(key, self.balance(&key));
        }
        let mut program_accounts = BTreeMap::new();
        let keys = self
            .jobs
            .iter()
            .chain(self.providers.iter())
            .copied()
            .chain([pda::config(), pda::lease()]);
        for key in keys {
            if let Some(account) = self.account(&key) {
                program_accounts.insert(key, account.data);
            }
        }
        for provider in &self.providers {
            for index in 0..8 {
                let node = pda::node(provider, index);
                if let Some(account) = self.account(&node) {
                    program_accounts.insert(node, account.data);
                }
            }
        }
        Snapshot {
            balances,
            program_accounts,
        }
    }

    /// Nothing that existed at `before` changed: balances and account data.
    #[track_caller]
    pub fn assert_unchanged(&self, before: &Snapshot) {
        let now = self.snapshot();
        for (key, balance) in &before.balances {
            assert_eq!(
                now.balances.get(key),
                Some(balance),
                "balance of {key} changed"
            );
        }
        for (key, data) in &before.program_accounts {
            assert_eq!(
                now.program_accounts.get(key),
                Some(data),
                "account {key} changed"
            );
        }
        assert_eq!(
            now.program_accounts.len(),
            before.program_accounts.len(),
            "a program account appeared or vanished"
        );
    }

    fn all_token_accounts(&self) -> Vec<Pubkey> {
        let mut all = self.token_accounts.clone();
        all.push(pda::insurance_pool());
        all.extend(self.jobs.iter().map(pda::vault));
        all.extend(self.providers.iter().map(pda::vault));
        all.sort();
        all.dedup();
        all
    }

    /// Tokens are conserved and every vault holds exactly what its account
    /// says plus the stray tokens sent into it; the insurance pool holds
    /// every slash less every compensation (plus its strays).
    #[track_caller]
    pub fn assert_invariants(&self) {
        let total: u64 = self
            .all_token_accounts()
            .iter()
            .map(|k| self.balance(k))
            .sum();
        assert_eq!(total, self.minted, "tokens were created or destroyed");
        for job_key in &self.jobs {
            let vault = pda::vault(job_key);
            if let Some(job) = self.try_job(job_key) {
                assert_eq!(
                    self.balance(&vault),
                    job.bond + job.held + self.stray(&vault),
                    "job vault differs from the job's bond and held payments plus stray tokens"
                );
                job.invariant().expect("job invariant");
                // A finished job refunds its whole bond, unless a payee
                // closed the account it is paid into (the refund, or a
                // share that went back to the bond, waits for close_job).
                assert!(
                    !job.state.is_terminal() || job.bond == 0 || !self.closed_accounts.is_empty(),
                    "a finished job kept {} of its bond though every payee could receive",
                    job.bond
                );
            } else {
                assert_eq!(self.balance(&vault), 0);
                assert_eq!(self.stray(&vault), 0, "a closed vault keeps no strays");
            }
        }
        let mut slashed = 0;
        for provider_key in &self.providers {
            let provider = self.provider(provider_key);
            let vault = pda::vault(provider_key);
            assert_eq!(
                self.balance(&vault),
                provider.stake + self.stray(&vault),
                "stake vault differs from the provider's stake plus stray tokens"
            );
            slashed += provider.slashed_total;
        }
        if self.account(&pda::config()).is_some() {
            let pool = pda::insurance_pool();
            assert_eq!(
                self.balance(&pool) + self.compensated + self.slash_fees,
                slashed + self.stray(&pool),
                "the insurance pool differs from slashes less compensations and checkers' fees"
            );
        }
    }
}

/// The hash the harness gives a finished slot.
pub fn slot_hash(slot: u64) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest([b"slot".as_slice(), &slot.to_le_bytes()].concat()).into()
}

pub fn checkpoint_hash(epoch: u32, step: u64) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(epoch.to_le_bytes());
    h.update(step.to_le_bytes());
    h.finalize().into()
}

/// The hash chain as an auditor recomputes it.
pub fn chain_of(records: &[(u32, u32, u64, [u8; 32])]) -> [u8; 32] {
    use sha2::Digest;
    let mut chain = [0u8; 32];
    for (generation, epoch, step, hash) in records {
        let mut h = sha2::Sha256::new();
        h.update(chain);
        h.update(generation.to_le_bytes());
        h.update(epoch.to_le_bytes());
        h.update(step.to_le_bytes());
        h.update(hash);
        chain = h.finalize().into();
    }
    chain
}

pub fn events<E>(logs: &[String]) -> Vec<E>
where
    E: anchor_lang::Event + anchor_lang::AnchorDeserialize + Discriminator,
{
    mcjs_client::events::of_type::<E>(logs)
}

/// A property test's runner: `PROPTEST_CASES` sequences (default 1,000),
/// nothing persisted (a failing case is printed whole); and that number.
pub fn property_runner() -> (proptest::test_runner::TestRunner, u32) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    });
    (runner, cases)
}

impl Env {
    /// `provider`'s node `node` renames its GPU model (between the two A100
    /// names), as its operator key may at any time: a provider hoping to
    /// escape a check of its model.
    pub fn rename_gpu(&mut self, provider: &ProviderActor, node: usize) -> Outcome {
        let operator = provider.operator(node).insecure_clone();
        let mut hardware = self.node(&provider.nodes[node]).hardware;
        hardware.gpu_model = if hardware.gpu_model == "a100-sxm4-80gb" {
            "a100-pcie-80gb".into()
        } else {
            "a100-sxm4-80gb".into()
        };
        let rename = ix::update_node(
            &operator.pubkey(),
            &provider.pda,
            node as u32,
            UpdateNodeArgs {
                hardware: Some(hardware),
                ..Default::default()
            },
        );
        self.send(&[rename], &[&operator])
    }
}

/// Two members drawn, as the verifier and the referee.
pub fn checkers_of(taken: &[PoolMember]) -> ix::Checkers {
    ix::Checkers {
        verifier_node: taken[0].node,
        verifier_provider: taken[0].provider,
        referee_node: taken[1].node,
        referee_provider: taken[1].provider,
    }
}
