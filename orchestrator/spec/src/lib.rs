//! MCJS Job Specification v1.
//!
//! A job declares, before it can be scheduled, its work, its data, its hardware request, its
//! output and its checkpoint policy. This crate holds the types of that declaration, parses it
//! reporting every error at once (each with a JSON pointer), validates it against a caller-given
//! `now`, and computes its canonical form and hash (RFC 8785 JCS, sha256). It does no I/O and
//! reads no clock.

pub mod gpu;
pub mod units;
