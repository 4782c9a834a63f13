//! The compute units of each MCJS instruction the tests execute, for
//! `bench/program_cu.sh`: with `MCJS_CU_LOG=<file>` set, [`record`] appends
//! one line per top-level MCJS instruction of a transaction sent through
//! `Env::send`: its name, the compute units it consumed (its CPIs included),
//! and `ok` or `failed` (the transaction's outcome), separated by tabs.
//!
//! Only the SBF build's figures mean anything: the native builtin charges
//! its CPIs but not its own execution.

use std::{fs::OpenOptions, io::Write, sync::OnceLock};

use anchor_lang::solana_program::instruction::Instruction;
use sha2::Digest;

/// Every instruction of the program, as `#[program]` names them.
const INSTRUCTIONS: &[&str] = &[
    "initialize",
    "update_config",
    "register_provider",
    "add_stake",
    "request_withdrawal",
    "withdraw_stake",
    "register_node",
    "update_node",
    "set_node_status",
    "submit_job",
    "assign_job",
    "start_job",
    "attest_checkpoint",
    "complete_job",
    "report_failure",
    "pause_job",
    "resume_job",
    "top_up",
    "cancel_job",
    "expire_job",
    "close_job",
    "open_verification",
    "attest_verification",
    "resolve_verification",
    "release_segment",
    "compensate_owner",
];

fn log_path() -> Option<&'static str> {
    static PATH: OnceLock<Option<String>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var("MCJS_CU_LOG").ok().filter(|p| !p.is_empty()))
        .as_deref()
}

/// The instruction's name, from Anchor's discriminator: the first 8 bytes of
/// sha256("global:<name>").
fn name_of(data: &[u8]) -> String {
    static TABLE: OnceLock<Vec<([u8; 8], &'static str)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        INSTRUCTIONS
            .iter()
            .map(|name| {
                let hash = sha2::Sha256::digest(format!("global:{name}"));
                (hash[..8].try_into().unwrap(), *name)
            })
            .collect()
    });
    data.get(..8)
        .and_then(|d| table.iter().find(|(disc, _)| disc == d))
        .map(|(_, name)| name.to_string())
        .unwrap_or_else(|| "(unknown)".into())
}

/// The compute units of each top-level MCJS invocation, in order, from the
/// runtime's "Program <id> consumed <n> of <m> compute units" log lines.
fn units_from_logs(logs: &[String]) -> Vec<u64> {
    let program = mcjs::ID.to_string();
    let mut depth = 0usize;
    let mut units = Vec::new();
    for line in logs {
        let Some(rest) = line.strip_prefix("Program ") else {
            continue;
        };
        if let Some(at) = rest.find(" invoke [") {
            depth = rest[at + 9..]
                .trim_end_matches(']')
                .parse()
                .unwrap_or(depth + 1);
        } else if let Some(consumed) = rest.strip_prefix(&format!("{program} consumed ")) {
            if depth == 1 {
                if let Some(n) = consumed.split(' ').next().and_then(|n| n.parse().ok()) {
                    units.push(n);
                }
            }
        } else if rest.ends_with(" success") || rest.contains(" failed: ") {
            depth = depth.saturating_sub(1);
        }
    }
    units
}

/// Appends the transaction's MCJS instructions to the log, if one is asked for.
pub fn record(ixs: &[Instruction], logs: &[String], units: u64, ok: bool) {
    let Some(path) = log_path() else {
        return;
    };
    let ours: Vec<&Instruction> = ixs.iter().filter(|ix| ix.program_id == mcjs::ID).collect();
    if ours.is_empty() {
        return;
    }
    let per_ix = if ixs.len() == 1 {
        vec![units]
    } else {
        units_from_logs(logs)
    };
    let outcome = if ok { "ok" } else { "failed" };
    let mut lines = String::new();
    for (ix, units) in ours.iter().zip(per_ix) {
        lines.push_str(&format!("{}\t{units}\t{outcome}\n", name_of(&ix.data)));
    }
    // One write of the whole batch: O_APPEND keeps concurrent tests' lines whole.
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|err| panic!("MCJS_CU_LOG={path}: {err}"));
    file.write_all(lines.as_bytes())
        .unwrap_or_else(|err| panic!("MCJS_CU_LOG={path}: {err}"));
}
