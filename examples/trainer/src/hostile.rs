//! Test-only (feature `hostile`, never in the published image): an owner's
//! image that tries to frame its provider by behaving differently when it
//! is being checked (docs/verification.md, "A check run looks like a paid
//! run").
//!
//! It writes into every checkpoint what it sees of the run that MCJS sets
//! up: its environment (but the restore directory's, which every resumed
//! run has), its cgroup limits, its user, its checkpoint signal count, and
//! any mount whose host path names a check, a verifier or a referee. When it
//! is restored from a checkpoint whose record differs from what it sees now,
//! it perturbs its weights: every checkpoint after that carries other
//! bytes. If a check run differed from the paid run in any of these, both
//! checkers would reproduce the perturbed bytes and agree against the
//! provider.

use sha2::{Digest, Sha256};
use std::path::Path;

/// The record's file in each checkpoint (not in the manifest's list).
pub const FILE: &str = "hostile-seen.sha256";

/// What this run sees, hashed, as lowercase hex.
pub fn seen(signals: u64) -> String {
    let mut h = Sha256::new();
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k != "MCJS_RESTORE_DIR" && k != "HOSTNAME")
        .collect();
    vars.sort();
    for (k, v) in vars {
        h.update(format!("env {k}={v}\n"));
    }
    for f in [
        "/sys/fs/cgroup/cpu.max",
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/pids.max",
    ] {
        let v = std::fs::read_to_string(f).unwrap_or_default();
        h.update(format!("cgroup {f}={}\n", v.trim()));
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in status
        .lines()
        .filter(|l| l.starts_with("Uid:") || l.starts_with("Gid:"))
    {
        h.update(format!("{line}\n"));
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // Fields: id, parent, device, root (the host path of a bind mount),
    // mount point, ...
    let telling = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.len() > 4 && f[4].starts_with("/mcjs/") && {
            let root = f[3].to_ascii_lowercase().replace("checkpoints", "");
            ["check", "verif", "referee"]
                .iter()
                .any(|w| root.contains(w))
        }
    });
    h.update(format!("mounts name a check: {telling}\n"));
    h.update(format!("checkpoint signals: {signals}\n"));
    hex::encode(h.finalize())
}

/// Whether the checkpoint in `restore` was written by a run that saw
/// something else than this one sees.
pub fn differs(restore: &Path, now: &str) -> bool {
    match std::fs::read_to_string(restore.join(FILE)) {
        Ok(then) => then.trim() != now,
        Err(_) => false,
    }
}
