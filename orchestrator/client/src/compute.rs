//! The compute-unit limit every MCJS transaction asks for.
//!
//! A transaction that sets no limit is given 200,000 CU per instruction and
//! pays priority fees on all of it; one that sets too little fails. MCJS
//! sets the measured maximum plus a margin: each program instruction's
//! maximum over the program suite's sequences, executed as SBF bytecode
//! (`bench/program_cu.sh`, checked into `bench/results/program-cu.txt`; a
//! test below holds this table to that file), plus a quarter, rounded up to
//! the next thousand. The other programs MCJS calls cost fixed, small
//! amounts. No simulation is spent on it: on a public endpoint every extra
//! call counts against the rate limit.

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

macro_rules! measured {
    ($($ty:ident $name:literal $max:literal,)*) => {
        /// Every MCJS instruction: its discriminator, its name as
        /// `#[program]` spells it, and the most compute units it took as
        /// SBF bytecode over the program suite.
        const MCJS: &[(&[u8], &str, u32)] = &[
            $((<data::$ty as Discriminator>::DISCRIMINATOR, $name, $max),)*
        ];
    };
}

measured! {
    Initialize "initialize" 23_589,
    UpdateConfig "update_config" 7_401,
    RegisterProvider "register_provider" 41_326,
    AddStake "add_stake" 17_004,
    RequestWithdrawal "request_withdrawal" 7_758,
    WithdrawStake "withdraw_stake" 17_194,
    RegisterNode "register_node" 32_942,
    UpdateNode "update_node" 12_224,
    SetNodeStatus "set_node_status" 10_201,
    SubmitJob "submit_job" 54_669,
    AssignJob "assign_job" 35_550,
    StartJob "start_job" 12_287,
    AttestCheckpoint "attest_checkpoint" 36_542,
    CompleteJob "complete_job" 43_265,
    ReportFailure "report_failure" 54_085,
    PauseJob "pause_job" 40_896,
    ResumeJob "resume_job" 12_276,
    TopUp "top_up" 22_014,
    CancelJob "cancel_job" 21_690,
    ExpireJob "expire_job" 20_571,
    CloseJob "close_job" 21_676,
    OpenVerification "open_verification" 41_471,
    AttestVerification "attest_verification" 19_112,
    ResolveVerification "resolve_verification" 73_177,
    ReleaseSegment "release_segment" 34_559,
    CompensateOwner "compensate_owner" 22_230,
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
        .find(|(disc, _, _)| data.starts_with(disc))
        .map(|(_, name, _)| *name)
}

/// The most compute units the program suite saw `name` take, as SBF.
pub fn measured_max(name: &str) -> Option<u32> {
    MCJS.iter()
        .find(|(_, n, _)| *n == name)
        .map(|(_, _, max)| *max)
}

/// Every MCJS instruction's name.
pub fn instruction_names() -> impl Iterator<Item = &'static str> {
    MCJS.iter().map(|(_, name, _)| *name)
}

/// The units one instruction is granted: an MCJS instruction's measured
/// maximum plus a quarter, rounded up to a thousand; another program's
/// fixed figure; [`UNKNOWN_PROGRAM`] for a program not listed.
pub fn instruction_limit(ix: &Instruction) -> u32 {
    if ix.program_id == mcjs::ID {
        return match MCJS.iter().find(|(disc, _, _)| ix.data.starts_with(disc)) {
            Some((_, _, max)) => (max + max / 4).div_ceil(1_000) * 1_000,
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

/// `SetComputeUnitLimit(units)`.
pub fn set_unit_limit(units: u32) -> Instruction {
    solana_compute_budget_interface::ComputeBudgetInstruction::set_compute_unit_limit(units)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ix;

    /// `bench/results/program-cu.txt`: name → max.
    fn bench_results() -> Vec<(String, u32)> {
        include_str!("../../../bench/results/program-cu.txt")
            .lines()
            .filter(|line| !line.starts_with('#') && !line.starts_with("instruction"))
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                Some((fields.first()?.to_string(), fields.get(3)?.parse().ok()?))
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
        for (disc, name, max) in MCJS {
            assert_eq!(instruction_name(disc), Some(*name));
            let limit = instruction_limit(&Instruction {
                program_id: mcjs::ID,
                accounts: Vec::new(),
                data: disc.to_vec(),
            });
            assert!(
                limit >= max + max / 4 && limit % 1_000 == 0,
                "{name}: {limit}"
            );
        }
        assert_eq!(instruction_name(&[0; 8]), None);
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
