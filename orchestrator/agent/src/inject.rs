//! Test-only fault injection, compiled in only with the `fault-injection`
//! feature (the end-to-end suite's build of `mcjs`; never a release).
//!
//! `MCJS_FAULT_WRONG_HASH_AT_STEP=N` makes this agent attest a made-up hash
//! for its checkpoint at step N, once per process: a provider lying about
//! one interval, for verification to catch. With
//! `MCJS_FAULT_WRONG_HASH_ONCE_FILE=PATH` too, only the first agent to
//! create PATH lies: several agents can carry the fault and exactly one,
//! whichever runs the job first, uses it.

/// The hash to attest for the checkpoint at `step` whose real hash is `hash`.
#[cfg(feature = "fault-injection")]
pub fn attested_hash(step: u64, hash: [u8; 32]) -> [u8; 32] {
    use std::sync::atomic::{AtomicBool, Ordering};
    static LIED: AtomicBool = AtomicBool::new(false);
    let at = std::env::var("MCJS_FAULT_WRONG_HASH_AT_STEP")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let first = || match std::env::var_os("MCJS_FAULT_WRONG_HASH_ONCE_FILE") {
        Some(path) => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .is_ok(),
        None => true,
    };
    if at == Some(step) && !LIED.swap(true, Ordering::SeqCst) && first() {
        tracing::warn!(step, "fault injection: attesting a made-up checkpoint hash");
        return hash.map(|b| !b);
    }
    hash
}

/// The hash to attest for the checkpoint at `step`: always the real one.
#[cfg(not(feature = "fault-injection"))]
pub fn attested_hash(_step: u64, hash: [u8; 32]) -> [u8; 32] {
    hash
}
