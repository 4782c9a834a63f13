//! Decoding the program's accounts from raw account data.

use anchor_lang::{AccountDeserialize, Discriminator};
use mcjs::state::{Config, Job, Node, Provider, SchedulerLease, Segment, Verification};

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("account data is not a {expected} account of the MCJS program")]
    WrongType { expected: &'static str },
    #[error("account data of a {kind} account is malformed: {source}")]
    Malformed {
        kind: &'static str,
        source: anchor_lang::error::Error,
    },
}

fn decode<T: AccountDeserialize + Discriminator>(
    kind: &'static str,
    data: &[u8],
) -> Result<T, DecodeError> {
    if !data.starts_with(T::DISCRIMINATOR) {
        return Err(DecodeError::WrongType { expected: kind });
    }
    let mut slice = data;
    T::try_deserialize(&mut slice).map_err(|source| DecodeError::Malformed { kind, source })
}

pub fn config(data: &[u8]) -> Result<Config, DecodeError> {
    decode("Config", data)
}

pub fn lease(data: &[u8]) -> Result<SchedulerLease, DecodeError> {
    decode("SchedulerLease", data)
}

pub fn provider(data: &[u8]) -> Result<Provider, DecodeError> {
    decode("Provider", data)
}

pub fn node(data: &[u8]) -> Result<Node, DecodeError> {
    decode("Node", data)
}

pub fn job(data: &[u8]) -> Result<Job, DecodeError> {
    decode("Job", data)
}

pub fn segment(data: &[u8]) -> Result<Segment, DecodeError> {
    decode("Segment", data)
}

pub fn verification(data: &[u8]) -> Result<Verification, DecodeError> {
    decode("Verification", data)
}

pub fn checker_pool(data: &[u8]) -> Result<mcjs::state::CheckerPool, DecodeError> {
    decode("CheckerPool", data)
}

pub fn job_counter(data: &[u8]) -> Result<mcjs::state::JobCounter, DecodeError> {
    decode("JobCounter", data)
}

/// The discriminators, for `getProgramAccounts` memcmp filters.
pub fn discriminator_of(kind: AccountKind) -> &'static [u8] {
    match kind {
        AccountKind::Config => Config::DISCRIMINATOR,
        AccountKind::Provider => Provider::DISCRIMINATOR,
        AccountKind::Node => Node::DISCRIMINATOR,
        AccountKind::Job => Job::DISCRIMINATOR,
        AccountKind::Segment => Segment::DISCRIMINATOR,
        AccountKind::Verification => Verification::DISCRIMINATOR,
    }
}

/// A kind of the program's accounts: what the index reads and what a
/// reader could not use (the scheduler's skipped accounts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountKind {
    Config,
    Provider,
    Node,
    Job,
    Segment,
    Verification,
}

impl AccountKind {
    pub const ALL: [AccountKind; 6] = [
        AccountKind::Config,
        AccountKind::Provider,
        AccountKind::Node,
        AccountKind::Job,
        AccountKind::Segment,
        AccountKind::Verification,
    ];

    /// The label in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::Provider => "provider",
            Self::Node => "node",
            Self::Job => "job",
            Self::Segment => "segment",
            Self::Verification => "verification",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_labelled_as_it_serialises_and_has_its_own_discriminator() {
        let mut discriminators = std::collections::HashSet::new();
        for kind in AccountKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
            assert!(discriminators.insert(discriminator_of(kind)), "{kind:?}");
        }
    }
}
