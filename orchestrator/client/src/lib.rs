//! The MCJS chain client: the one place that knows the program's wire format.
//!
//! * [`ix`] builds every instruction of the program with its accounts.
//! * [`decode`] reads the program's accounts.
//! * [`events`] parses the events a transaction logged.
//! * [`errors`] names a program error from its code.

pub mod decode;
pub mod errors;
pub mod events;
pub mod ix;

pub use anchor_lang::prelude::Pubkey;
pub use mcjs::state::seeds::pda;
pub use mcjs::{self as program, ID as PROGRAM_ID};
