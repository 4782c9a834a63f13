//! The MCJS program executing in LiteSVM beside the real SPL Token program
//! (p-token, as live on mainnet): natively by default, or as its SBF build
//! (the bytecode a cluster runs) when `MCJS_PROGRAM_SO` names the ELF that
//! `scripts/build-sbf.sh` prints.

mod cu_log;
mod harness;

mod accounts_and_config;
mod attacks;
mod economics;
mod forged_events;
mod hardware_challenge;
mod insurance_pool;
mod job_faults_and_dust;
mod job_life;
mod node_profiles;
mod operator_keys;
mod participants;
mod properties;
mod published_idl;
mod scheduler_lease;
mod verification;
