//! End-to-end and in-process tests of MCJS.
//!
//! # Map
//!
//! This library is empty; the tests are two targets beside it.
//!
//! - `program/main.rs` (`cargo test -p mcjs-tests --test program`): the
//!   program in LiteSVM beside the real SPL Token program, natively or as
//!   its SBF build when `MCJS_PROGRAM_SO` names the ELF. `program/harness.rs`
//!   is the small world every test starts from; one file per subject:
//!   `job_life.rs`, `economics.rs`, `attacks.rs`, `operator_keys.rs`,
//!   `insurance_pool.rs`, `job_faults_and_dust.rs`, `node_profiles.rs`,
//!   `verification.rs`, `hardware_challenge.rs`, `scheduler_lease.rs`,
//!   `forged_events.rs`, `participants.rs`, `accounts_and_config.rs`, and
//!   `properties.rs` (the property test).
//! - `idl/main.rs` (`--test idl`): `idl/mcjs.json` against the IDL Anchor's
//!   builder makes from the source (`MCJS_UPDATE_IDL=1` regenerates it).
//!
//! Tests across processes live with the crates they drive
//! (`app/cli/tests/faults.rs`, `orchestrator/agent/tests`).
