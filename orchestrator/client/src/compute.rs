//! The compute-unit limit every MCJS transaction asks for, and the price
//! it offers per unit.
//!
//! A transaction that sets no limit is given 200,000 CU per instruction and
//! pays priority fees on all of it; one that sets too little fails. MCJS
//! sets the measured maximum plus a margin: each program instruction's
//! maximum over the program suite's sequences, executed as SBF bytecode
//! (`bench/program_cu.sh`, checked into `bench/results/program-cu.txt`; a
//! test below holds this table to that file), succeeding or refused, plus a
//! quarter (at least [`MIN_MARGIN`]) and an allowance for each address it
//! finds by a bump search ([`BUMP_TRIES_ALLOWED`]), rounded up to the next
//! thousand. The other programs MCJS calls cost fixed, small amounts. No simulation is spent on it: on a public endpoint every extra
//! call counts against the rate limit.
//!
//! The price (the priority fee, in micro-lamports per unit) follows what
//! transactions writing the same accounts paid in recent slots
//! (`getRecentPrioritizationFees`): their [`FeePolicy::percentile`], doubled
//! each time a transaction is signed again after its blockhash expired,
//! never above the operator's [`FeePolicy::ceiling`]. A transaction costs at
//! most `ceiling × limit / 10⁶` lamports over the base fee.

use anchor_lang::Discriminator;
use anchor_lang::prelude::Pubkey;
use anchor_lang::solana_program::instruction::Instruction;
use mcjs::instruction as data;

/// The ComputeBudget program.
pub use solana_compute_budget_interface::ID as COMPUTE_BUDGET_PROGRAM;

/// What the runtime grants a transaction at most.
pub const MAX_LIMIT: u32 = 1_400_000;
/// What the runtime grants an instruction of a transaction that sets no
/// limit; used for a program this table does not know.
pub const UNKNOWN_PROGRAM: u32 = 200_000;

/// The least margin over an instruction's measured maximum: enough for an
/// error path the suite did not take to log its error (about 1,500 units
/// more than the instruction's success, measured) with its compared values.
pub const MIN_MARGIN: u32 = 5_000;

/// What the runtime charges for each bump a program tries while it derives
/// an address (`create_program_address`, and each try of
/// `find_program_address`).
pub const BUMP_TRY: u32 = 1_500;

/// The tries granted, beyond the measured maximum, to each address an
/// instruction finds by searching its bump (Anchor's `init` with a bare
/// `bump`). An address's bump is fixed by its seeds, and a search takes `k`
/// or more tries with probability 2^-(k-1); without this an address
/// needing a few more tries than any in the suite (a user's job, a job's
/// next Segment) would fail its instruction every time it was sent, for
/// good. With it, one address in about 65,000 still could.
pub const BUMP_TRIES_ALLOWED: u32 = 16;

macro_rules! measured {
    ($($ty:ident $name:literal $max:literal $searches:literal,)*) => {
        /// Every MCJS instruction: its discriminator, its name as
        /// `#[program]` spells it, the most compute units it took as SBF
        /// bytecode over the program suite, succeeding or refused (a
        /// refusal logs its error, and must read as that error, not as an
        /// exhausted budget), and how many addresses it finds by a bump
        /// search.
        const MCJS: &[(&[u8], &str, u32, u32)] = &[
            $((<data::$ty as Discriminator>::DISCRIMINATOR, $name, $max, $searches),)*
        ];
    };
}

measured! {
    Initialize "initialize" 26_351 3,
    UpdateConfig "update_config" 4_738 0,
    SetSchedulers "set_schedulers" 4_747 0,
    HoldLease "hold_lease" 4_635 0,
    RegisterProvider "register_provider" 40_456 2,
    AddStake "add_stake" 18_712 0,
    RequestWithdrawal "request_withdrawal" 6_876 0,
    WithdrawStake "withdraw_stake" 18_670 0,
    RegisterNode "register_node" 31_935 1,
    UpdateNode "update_node" 9_684 0,
    SetNodeStatus "set_node_status" 8_184 0,
    SubmitJob "submit_job" 49_056 3,
    AssignJob "assign_job" 36_385 1,
    StartJob "start_job" 7_729 0,
    AttestCheckpoint "attest_checkpoint" 22_455 0,
    CompleteJob "complete_job" 29_475 0,
    ReportFailure "report_failure" 34_320 0,
    PauseJob "pause_job" 26_711 0,
    ResumeJob "resume_job" 8_091 0,
    TopUp "top_up" 17_153 0,
    CancelJob "cancel_job" 17_148 0,
    ExpireJob "expire_job" 13_437 0,
    CloseJob "close_job" 13_292 0,
    OpenVerification "open_verification" 44_242 1,
    EnterCheckerPool "enter_checker_pool" 10_695 1,
    AttestVerification "attest_verification" 11_857 0,
    ReplaceChecker "replace_checker" 16_467 0,
    OpenSecondRound "open_second_round" 24_472 0,
    ResolveVerification "resolve_verification" 41_467 0,
    ReleaseSegment "release_segment" 22_971 0,
    CompensateOwner "compensate_owner" 14_004 0,
    RequestChallenge "request_challenge" 7_534 0,
    AnswerChallenge "answer_challenge" 6_841 0,
    RecordChallenge "record_challenge" 18_427 0,
    PublishIdl "publish_idl" 14_880 0,
}

/// The builtins and programs MCJS's transactions call besides its own, with
/// what one instruction of theirs may take. Builtins charge fixed amounts
/// (System and ComputeBudget 150, the upgradeable loader 2,370 and the
/// system call a deployment makes); the token programs run as SBF: an SPL
/// Token instruction takes at most about 5,000 CU, creating an associated
/// token account (with its CPIs) about 25,000.
const OTHERS: &[(Pubkey, u32)] = &[
    (COMPUTE_BUDGET_PROGRAM, 150),
    (anchor_lang::solana_program::system_program::ID, 300),
    (
        anchor_lang::solana_program::bpf_loader_upgradeable::ID,
        10_000,
    ),
    (anchor_spl::token::ID, 6_000),
    (anchor_spl::associated_token::ID, 40_000),
];

/// The MCJS instruction `data` encodes, by its discriminator.
pub fn instruction_name(data: &[u8]) -> Option<&'static str> {
    MCJS.iter()
        .find(|(disc, ..)| data.starts_with(disc))
        .map(|(_, name, ..)| *name)
}

/// The most compute units the program suite saw `name` take, as SBF.
pub fn measured_max(name: &str) -> Option<u32> {
    MCJS.iter()
        .find(|(_, n, ..)| *n == name)
        .map(|(_, _, max, _)| *max)
}

/// Every MCJS instruction's name.
pub fn instruction_names() -> impl Iterator<Item = &'static str> {
    MCJS.iter().map(|(_, name, ..)| *name)
}

/// The units one instruction is granted: an MCJS instruction's measured
/// maximum plus a quarter (at least [`MIN_MARGIN`]), plus
/// [`BUMP_TRIES_ALLOWED`] tries for each address it finds by a bump search,
/// rounded up to a thousand; another
/// program's fixed figure; [`UNKNOWN_PROGRAM`] for a program not listed.
pub fn instruction_limit(ix: &Instruction) -> u32 {
    if ix.program_id == mcjs::ID {
        return match MCJS.iter().find(|(disc, ..)| ix.data.starts_with(disc)) {
            Some((_, _, max, searches)) => {
                (max + (max / 4).max(MIN_MARGIN) + searches * BUMP_TRIES_ALLOWED * BUMP_TRY)
                    .div_ceil(1_000)
                    * 1_000
            }
            None => UNKNOWN_PROGRAM,
        };
    }
    OTHERS
        .iter()
        .find(|(program, _)| *program == ix.program_id)
        .map_or(UNKNOWN_PROGRAM, |(_, units)| *units)
}

/// The limit a transaction of `ixs` asks for (its own ComputeBudget
/// instruction included), at most [`MAX_LIMIT`].
pub fn unit_limit(ixs: &[Instruction]) -> u32 {
    let own = OTHERS[0].1;
    ixs.iter()
        .map(instruction_limit)
        .fold(own, u32::saturating_add)
        .min(MAX_LIMIT)
}

/// `ixs` behind a `SetComputeUnitLimit` of [`unit_limit`]; unchanged when
/// they already set a limit (the caller knows better).
pub fn with_unit_limit(ixs: &[Instruction]) -> Vec<Instruction> {
    if ixs
        .iter()
        .any(|ix| ix.program_id == COMPUTE_BUDGET_PROGRAM && ix.data.first() == Some(&2))
    {
        return ixs.to_vec();
    }
    let mut out = Vec::with_capacity(ixs.len() + 1);
    out.push(set_unit_limit(unit_limit(ixs)));
    out.extend_from_slice(ixs);
    out
}

/// How much a transaction offers per compute unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeePolicy {
    /// The most it offers, in micro-lamports per unit; 0 never pays a
    /// priority fee (and never asks for recent fees).
    pub ceiling: u64,
    /// Which percentile of the recent slots' fees it offers (0 to 100).
    pub percentile: u8,
}

impl FeePolicy {
    /// The default ceiling: one lamport per unit, which is at most 0.00008
    /// SOL for the largest MCJS transaction.
    pub const DEFAULT_CEILING: u64 = 1_000_000;
    /// Where a re-signed transaction starts when recent slots paid nothing
    /// (it expired all the same: the leader had better offers).
    pub const ESCALATION_FLOOR: u64 = 10_000;

    /// Never pays a priority fee.
    pub const NONE: FeePolicy = FeePolicy {
        ceiling: 0,
        percentile: 75,
    };

    pub fn with_ceiling(ceiling: u64) -> Self {
        Self {
            ceiling,
            ..Self::default()
        }
    }

    /// The price for the `attempt`-th signing (from 1) of a transaction
    /// when recent slots paid `recent` for its writable accounts: the
    /// percentile of `recent` (nearest rank; 0 when empty), doubled for
    /// each earlier attempt (from [`Self::ESCALATION_FLOOR`] at least), at
    /// most the ceiling.
    pub fn price(&self, recent: &[u64], attempt: u32) -> u64 {
        let mut sorted = recent.to_vec();
        sorted.sort_unstable();
        let observed = match sorted.len() {
            0 => 0,
            n => {
                let rank = (usize::from(self.percentile.min(100)) * n).div_ceil(100);
                sorted[rank.clamp(1, n) - 1]
            }
        };
        let price = match attempt {
            0 | 1 => observed,
            n => observed
                .max(Self::ESCALATION_FLOOR)
                .saturating_mul(1u64 << (n - 1).min(32)),
        };
        price.min(self.ceiling)
    }
}

impl Default for FeePolicy {
    fn default() -> Self {
        Self {
            ceiling: Self::DEFAULT_CEILING,
            percentile: 75,
        }
    }
}

/// The accounts `ixs` write (the fee payer's among them), once each, at
/// most the 128 that `getRecentPrioritizationFees` takes.
pub fn writable_accounts(ixs: &[Instruction], payer: &Pubkey) -> Vec<Pubkey> {
    let mut out = vec![*payer];
    for meta in ixs.iter().flat_map(|ix| &ix.accounts) {
        if meta.is_writable && !out.contains(&meta.pubkey) {
            out.push(meta.pubkey);
        }
    }
    out.truncate(128);
    out
}

/// `ixs` behind a `SetComputeUnitLimit` of [`unit_limit`] (unless they set
/// one) and, for a price above 0, a `SetComputeUnitPrice` (unless they set
/// one).
pub fn with_budget(ixs: &[Instruction], micro_lamports: u64) -> Vec<Instruction> {
    let mut out = with_unit_limit(ixs);
    let priced = ixs
        .iter()
        .any(|ix| ix.program_id == COMPUTE_BUDGET_PROGRAM && ix.data.first() == Some(&3));
    if micro_lamports > 0 && !priced {
        out.insert(0, set_unit_price(micro_lamports));
    }
    out
}

/// `SetComputeUnitPrice(micro_lamports)`.
pub fn set_unit_price(micro_lamports: u64) -> Instruction {
    solana_compute_budget_interface::ComputeBudgetInstruction::set_compute_unit_price(
        micro_lamports,
    )
}

/// `SetComputeUnitLimit(units)`.
pub fn set_unit_limit(units: u32) -> Instruction {
    solana_compute_budget_interface::ComputeBudgetInstruction::set_compute_unit_limit(units)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ix;

    /// `bench/results/program-cu.txt`: name → the larger of the max of
    /// the successful and of the refused.
    fn bench_results() -> Vec<(String, u32)> {
        include_str!("../../../bench/results/program-cu.txt")
            .lines()
            .filter(|line| !line.starts_with('#') && !line.starts_with("instruction"))
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let ok: u32 = fields.get(3)?.parse().ok()?;
                let refused: u32 = fields.get(4)?.parse().ok()?;
                Some((fields.first()?.to_string(), ok.max(refused)))
            })
            .collect()
    }

    #[test]
    fn the_table_covers_every_measured_instruction_at_its_measured_maximum() {
        let measured = bench_results();
        assert!(measured.len() >= 20, "{measured:?}");
        for (name, max) in &measured {
            let table = measured_max(name)
                .unwrap_or_else(|| panic!("{name} is measured but has no compute limit"));
            assert!(
                table >= *max,
                "{name}: bench/results/program-cu.txt measured {max} CU, the client grants from {table}"
            );
        }
    }

    #[test]
    fn every_instruction_is_named_by_its_discriminator_and_limited_above_its_maximum() {
        for (disc, name, max, searches) in MCJS {
            assert_eq!(instruction_name(disc), Some(*name));
            let limit = instruction_limit(&Instruction {
                program_id: mcjs::ID,
                accounts: Vec::new(),
                data: disc.to_vec(),
            });
            assert!(
                limit >= max + (max / 4).max(MIN_MARGIN) + searches * BUMP_TRIES_ALLOWED * BUMP_TRY
                    && limit % 1_000 == 0
                    && limit <= UNKNOWN_PROGRAM,
                "{name}: {limit}"
            );
        }
        assert_eq!(instruction_name(&[0; 8]), None);
    }

    #[test]
    fn the_price_is_the_recent_percentile_doubled_per_resigning_and_capped() {
        let policy = FeePolicy::with_ceiling(50_000);
        // Nothing known, nothing paid recently: no priority fee.
        assert_eq!(policy.price(&[], 1), 0);
        assert_eq!(policy.price(&[0; 150], 1), 0);
        // The 75th percentile by nearest rank: the 3rd of 4, the 75th of 100.
        assert_eq!(policy.price(&[400, 100, 300, 200], 1), 300);
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(policy.price(&hundred, 1), 75);
        assert_eq!(
            FeePolicy {
                percentile: 100,
                ..policy
            }
            .price(&hundred, 1),
            100
        );
        assert_eq!(
            FeePolicy {
                percentile: 0,
                ..policy
            }
            .price(&hundred, 1),
            1
        );
        // Signed again after expiring: doubled, from the floor at least.
        assert_eq!(policy.price(&[0; 150], 2), 2 * FeePolicy::ESCALATION_FLOOR);
        assert_eq!(policy.price(&[20_000], 2), 40_000);
        // Never above the ceiling, however high recent fees or attempts go.
        assert_eq!(policy.price(&[u64::MAX], 1), 50_000);
        assert_eq!(policy.price(&[20_000], 64), 50_000);
        assert_eq!(FeePolicy::NONE.price(&[u64::MAX], 3), 0);
    }

    #[test]
    fn a_priced_transaction_carries_one_price_and_one_limit() {
        let payer = Pubkey::new_unique();
        let ixs = [ix::request_withdrawal(&payer, 1)];
        let budget = with_budget(&ixs, 7_000);
        assert_eq!(budget.len(), 3);
        assert_eq!(budget[0], set_unit_price(7_000));
        assert_eq!(budget[1], set_unit_limit(unit_limit(&ixs)));
        assert_eq!(with_budget(&budget, 9_000), budget);
        // A zero price adds no instruction.
        assert_eq!(with_budget(&ixs, 0), with_unit_limit(&ixs));
        // The payer first, then each writable account once; readonly ones not.
        let job = Pubkey::new_unique();
        let read = Pubkey::new_unique();
        let touch = |writable: bool, key: Pubkey| Instruction {
            program_id: mcjs::ID,
            accounts: vec![if writable {
                anchor_lang::solana_program::instruction::AccountMeta::new(key, false)
            } else {
                anchor_lang::solana_program::instruction::AccountMeta::new_readonly(key, false)
            }],
            data: Vec::new(),
        };
        assert_eq!(
            writable_accounts(
                &[
                    touch(true, job),
                    touch(false, read),
                    touch(true, job),
                    touch(true, payer)
                ],
                &payer
            ),
            vec![payer, job]
        );
    }

    #[test]
    fn a_transaction_asks_for_the_sum_of_its_instructions_once() {
        let payer = Pubkey::new_unique();
        let mint = Pubkey::new_unique();
        let ixs = [
            ix::create_usdc_account(&payer, &payer, &mint),
            ix::request_withdrawal(&payer, 1),
        ];
        let limited = with_unit_limit(&ixs);
        assert_eq!(limited.len(), 3);
        assert_eq!(limited[0].program_id, COMPUTE_BUDGET_PROGRAM);
        let expected = 150 + 40_000 + instruction_limit(&ixs[1]);
        assert_eq!(limited[0], set_unit_limit(expected));
        assert!(expected < UNKNOWN_PROGRAM, "{expected}");
        // Already limited: left alone.
        assert_eq!(with_unit_limit(&limited), limited);
        // Unknown programs get the runtime's default; the total is capped.
        let unknown = Instruction {
            program_id: Pubkey::new_unique(),
            accounts: Vec::new(),
            data: Vec::new(),
        };
        assert_eq!(unit_limit(&vec![unknown; 10]), MAX_LIMIT);
    }
}
