//! MCJS Job Specification v1.
//!
//! A job declares, before it can be scheduled, its work, its data, its hardware request, its
//! output and its checkpoint policy. This crate holds the types of that declaration, parses it
//! reporting every error at once (each with a JSON pointer), validates it against a caller-given
//! `now`, and computes its canonical form and hash (RFC 8785 JCS, sha256). It does no I/O and
//! reads no clock.
//!
//! ```text
//! let text = include_str!("../../../examples/specs/bulk-inference.json");
//! let spec = mcjs_spec::JobSpec::from_json(text).unwrap();
//! spec.validate(1_700_000_000).unwrap();
//! assert_eq!(mcjs_spec::spec_hash(&spec).len(), 32);
//! ```
//!
//! (Run as `tests/examples.rs`' `the_crate_documentations_example_runs`: the
//! test suite runs under cargo-nextest, which runs no doctests.)
//!
//! # Map
//!
//! The spec itself:
//!
//! - `spec.rs`: the types of a v1 spec, which serialise to the JSON a user
//!   writes and describe the JSON Schema (committed as
//!   `schema/job-spec.v1.schema.json`; `tests/schema.rs` regenerates it with
//!   `MCJS_UPDATE_SCHEMA=1`).
//! - `parse.rs`, `parse/job.rs`, `parse/request.rs`: reading a spec from
//!   JSON, every structural error at its JSON pointer; `fields.rs`: the
//!   string-shaped fields checked as they are built; `error.rs`: the errors.
//! - `validate.rs`: the semantic checks, against a caller-given `now`.
//! - `lib.rs` (this file): `JobSpec::from_json`, `validate`, and the
//!   canonical form and hash (`canonical_json`, `spec_hash`).
//! - `summary.rs`: what other components read from a valid spec: the
//!   requirement summary the chain stores, the terms the escrow enforces,
//!   the hardware request the scheduler matches.
//!
//! The rules other crates share, one copy each:
//!
//! - `gpu.rs`: GPU model names and their matching.
//! - `checkpoint.rs`: the checkpoint bandwidth and space rule (HAL, spec and
//!   scheduler alike).
//! - `node_limits.rs`: the bounds of a node's profile.
//! - `units.rs`: byte sizes, durations and USDC amounts (`units::Usdc`),
//!   parsed exactly.
//! - `gauge.rs`: the completion rate, completed / (completed + failed),
//!   cancelled and expired counted apart, no rate when no job ended, and its
//!   80% line.

pub mod checkpoint;
pub mod error;
pub mod fields;
pub mod gauge;
pub mod gpu;
pub mod node_limits;
mod parse;
pub mod spec;
pub mod summary;
pub mod units;
mod validate;

use serde::Deserialize;
use sha2::{Digest, Sha256};

pub use crate::error::{SpecError, SpecErrors};
pub use crate::spec::*;
pub use crate::summary::{HardwareRequest, JobTerms, RequirementSummary};
pub use crate::validate::{
    MAX_CHECKPOINT_WRITE_MIBPS, MAX_CHECKPOINTS_KEPT, MAX_GPU_COUNT, MAX_GPU_MODELS,
    MIN_CHECKPOINT_INTERVAL_SECS,
};

impl JobSpec {
    /// Reads a spec from JSON text. Returns every error at once: structural ones (syntax,
    /// unknown, missing and wrongly typed fields, malformed values) and every semantic one that
    /// does not depend on the time. `validate` adds the time-dependent checks (the deadline).
    pub fn from_json(text: &str) -> Result<JobSpec, SpecErrors> {
        let (spec, errors) = parse::parse_json(text);
        finish(spec, errors)
    }

    /// As [`JobSpec::from_json`], from an already parsed JSON value.
    pub fn from_value(value: &serde_json::Value) -> Result<JobSpec, SpecErrors> {
        let (spec, errors) = parse::parse_value(value);
        finish(spec, errors)
    }

    /// Every semantic check, including those against `now_unix` (seconds since the epoch): a
    /// deadline must lie ahead by at least the request's duration.
    pub fn validate(&self, now_unix: i64) -> Result<(), SpecErrors> {
        let mut errors = validate::check_static(self);
        errors.extend(validate::check_time(self, now_unix));
        SpecErrors(errors).into_result()
    }

    /// Reads and validates in one step: every error, structural and semantic, at once.
    pub fn from_json_validated(text: &str, now_unix: i64) -> Result<JobSpec, SpecErrors> {
        let (spec, mut errors) = parse::parse_json(text);
        if let Some(spec) = &spec {
            errors.extend(validate::check_static(spec));
            errors.extend(validate::check_time(spec, now_unix));
        }
        match spec {
            Some(spec) if errors.is_empty() => Ok(spec),
            _ => Err(SpecErrors(errors)),
        }
    }
}

fn finish(spec: Option<JobSpec>, mut errors: Vec<SpecError>) -> Result<JobSpec, SpecErrors> {
    if let Some(spec) = &spec {
        errors.extend(validate::check_static(spec));
    }
    match spec {
        Some(spec) if errors.is_empty() => Ok(spec),
        _ => Err(SpecErrors(errors)),
    }
}

/// Deserialising goes through [`JobSpec::from_value`], so it accepts exactly what `from_json`
/// accepts; the error lists every problem.
impl<'de> Deserialize<'de> for JobSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        JobSpec::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// The canonical form of a spec: RFC 8785 (JCS) of its typed serialisation. Defaults are
/// materialised and values normalised first (units in their `Display` form, GPU models
/// normalised, deadlines in UTC), so two specs that mean the same thing have one form.
pub fn canonical_json(spec: &JobSpec) -> String {
    serde_json_canonicalizer::to_string(spec).expect("a job spec has string keys and no floats")
}

/// sha256 of [`canonical_json`]: the hash the chain records for the job.
pub fn spec_hash(spec: &JobSpec) -> [u8; 32] {
    Sha256::digest(canonical_json(spec).as_bytes()).into()
}

/// The JSON Schema of v1 specs, generated from the types.
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<JobSpec>();
    let mut value = serde_json::to_value(schema).expect("a schema serialises");
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "$id".into(),
            serde_json::Value::String("https://mcjs.dev/schema/job-spec.v1.schema.json".into()),
        );
    }
    value
}

/// The schema as committed at `orchestrator/spec/schema/job-spec.v1.schema.json`.
pub fn json_schema_string() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).expect("a schema serialises");
    text.push('\n');
    text
}
