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

fn log_path() -> Option<&'static str> {
    static PATH: OnceLock<Option<String>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var("MCJS_CU_LOG").ok().filter(|p| !p.is_empty()))
        .as_deref()
}

/// Whether this run measures (`MCJS_CU_LOG` is set).
pub fn measuring() -> bool {
    log_path().is_some()
}

/// The compute units of each top-level MCJS invocation, in order, from the
/// runtime's "Program <id> consumed <n> of <m> compute units" log lines.
pub fn units_from_logs(logs: &[String]) -> Vec<u64> {
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
    // The runtime logs each invocation's units; a transaction whose logs
    // were cut short is charged whole to its one MCJS instruction.
    let mut per_ix = units_from_logs(logs);
    if per_ix.is_empty() && ours.len() == 1 {
        per_ix.push(units);
    }
    let outcome = if ok { "ok" } else { "failed" };
    let mut lines = String::new();
    for (ix, units) in ours.iter().zip(per_ix) {
        lines.push_str(&format!(
            "{}\t{units}\t{outcome}\n",
            mcjs_client::compute::instruction_name(&ix.data).unwrap_or("(unknown)")
        ));
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
