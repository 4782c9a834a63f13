//! The MCJS program executing natively in LiteSVM beside the real SPL Token
//! program (p-token, as live on mainnet).

mod harness;

mod accounts_and_config;
mod attacks;
mod job_life;
mod properties;
