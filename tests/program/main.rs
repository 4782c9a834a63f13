//! The MCJS program executing natively in LiteSVM beside the real SPL Token
//! program (p-token, as live on mainnet).

mod harness;

mod accounts_and_config;
mod attacks;
mod forged_events;
mod insurance_pool;
mod job_faults_and_dust;
mod job_life;
mod node_profiles;
mod operator_keys;
mod properties;
mod verification;
