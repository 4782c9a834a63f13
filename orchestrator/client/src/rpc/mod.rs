//! The JSON-RPC side of the chain client: sending and confirming
//! transactions, reading and finding the program's accounts, reading an
//! account's history from transaction logs, and watching accounts.
//!
//! The CLI and the daemons reach a cluster only through [`ChainClient`].
//!
//! - [`error`]: what failed and why, named after the program that raised it;
//! - [`send`]: signing, sending, confirming;
//! - [`accounts`]: reading and finding the program's accounts;
//! - [`history`]: an account's MCJS events from transaction logs;
//! - [`watch`]: following an account;
//! - [`index`]: the program's accounts in memory, followed by a stream;
//! - `local` (feature `local-chain`): the local chain's cheat codes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anchor_lang::prelude::Pubkey;
use anchor_lang::solana_program::instruction::Instruction;
use anchor_spl::token::spl_token;
use futures_util::{Stream, StreamExt};
use mcjs::state::{Config, Job, JobState, Node, Provider, Segment, Verification};
use serde_json::json;
use solana_account::Account;
use solana_account_decoder_client_types::{UiAccount, UiAccountEncoding};
use solana_commitment_config::{CommitmentConfig, CommitmentLevel};
use solana_keypair::Keypair;
use solana_pubsub_client::nonblocking::pubsub_client::PubsubClient;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client::rpc_client::GetConfirmedSignaturesForAddress2Config;
use solana_rpc_client_api::client_error::{Error as ClientError, ErrorKind};
use solana_rpc_client_api::config::{
    RpcAccountInfoConfig, RpcProgramAccountsConfig, RpcTransactionConfig,
};
use solana_rpc_client_api::filter::{Memcmp, RpcFilterType};
use solana_rpc_client_api::request::{RpcError, RpcRequest, RpcResponseErrorData};
use solana_rpc_client_api::response::{OptionalContext, RpcKeyedAccount};
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::Transaction;
use solana_transaction_error::TransactionError;
use solana_transaction_status_client_types::{
    EncodedConfirmedTransactionWithStatusMeta, EncodedTransaction, UiMessage,
    UiTransactionEncoding, option_serializer::OptionSerializer,
};

use crate::decode::{self, AccountKind, DecodeError};
use crate::history::{HistoryEntry, McjsEvent};
use crate::{errors, ix, pda};

mod accounts;
mod blockhash;
mod deploy;
mod error;
mod history;
mod idl;
mod index;
mod index_websocket;
#[cfg(feature = "local-chain")]
mod local;
mod notices;
mod send;
mod sender;
mod statuses;
mod watch;
#[cfg(feature = "yellowstone")]
pub mod yellowstone;

pub use accounts::{DueCheck, JobFilter, LeaseView, MAX_NAMED_CHECKS, due_roles};
pub use blockhash::BLOCKHASH_REUSE;
pub use deploy::{Deployed, WRITE_ROUNDS, WriteProgress, chunk_len};
pub use error::{ChainError, classify};
pub use idl::{compress_idl, decompress_idl, idl_chunk_len};
pub use index::{
    Event, IndexSource, IndexState, Indexed, ProgramIndex,
    RECONCILE_EVERY as INDEX_RECONCILE_EVERY, SILENT_AFTER as INDEX_SILENT_AFTER, Update, settled,
};
pub use notices::{NOTICE_WAIT, PUSH_RETRY};
pub use send::FEE_READ_TIMEOUT;
pub use sender::{CONNECTION_RETRIES, RETRIES, RetryingSender, RpcRefusal, refusal};
pub use watch::{RESUBSCRIBE_FIRST, RESUBSCRIBE_MOST};

/// The JSON-RPC client of the MCJS program.
#[derive(Clone)]
pub struct ChainClient {
    rpc: Arc<RpcClient>,
    url: String,
    ws_url: String,
    commitment: CommitmentConfig,
    poll_interval: Duration,
    confirm_timeout: Duration,
    fees: crate::compute::FeePolicy,
    /// Shared by clones: they confirm by the same polls.
    statuses: Arc<statuses::StatusPolls>,
    /// Shared by clones: one websocket for their confirmations.
    push: Arc<tokio::sync::Mutex<notices::Push>>,
    /// Shared by clones: the blockhash their transactions are signed with.
    blockhash: Arc<std::sync::Mutex<blockhash::Recent>>,
    /// Held while a shared blockhash is fetched: transactions signed at
    /// once (a round's placements) wait for one fetch, not one each.
    fetching: Arc<tokio::sync::Mutex<()>>,
}

/// The websocket URL a Solana node serves beside `rpc_url`: same host,
/// port + 1, `ws`/`wss` scheme.
pub fn default_ws_url(rpc_url: &str) -> String {
    let (scheme, rest) = match rpc_url.split_once("://") {
        Some(("https", rest)) => ("wss", rest),
        Some((_, rest)) => ("ws", rest),
        None => ("ws", rpc_url),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host.contains('[') => {
            match port.parse::<u16>() {
                Ok(p) => format!("{host}:{}", p.saturating_add(1)),
                Err(_) => authority.to_string(),
            }
        }
        _ => authority.to_string(),
    };
    format!("{scheme}://{authority}{path}")
}

/// solana-client's RPC client over [`RetryingSender`] (30 s a request).
fn rpc_client(url: &str, commitment: CommitmentConfig) -> Arc<RpcClient> {
    Arc::new(RpcClient::new_sender(
        RetryingSender::new(url, Duration::from_secs(30)),
        solana_rpc_client::rpc_client::RpcClientConfig::with_commitment(commitment),
    ))
}

pub(super) fn is_local(url: &str) -> bool {
    url.contains("://127.0.0.1") || url.contains("://localhost") || url.contains("://[::1]")
}

impl ChainClient {
    /// A client of the node at `rpc_url`, its websocket at port + 1.
    /// Reads and confirmations use the `confirmed` commitment.
    pub fn new(rpc_url: &str) -> Self {
        Self::with_ws(rpc_url, &default_ws_url(rpc_url))
    }

    pub fn with_ws(rpc_url: &str, ws_url: &str) -> Self {
        let commitment = CommitmentConfig::confirmed();
        Self {
            rpc: rpc_client(rpc_url, commitment),
            url: rpc_url.to_string(),
            ws_url: ws_url.to_string(),
            commitment,
            // Local nodes answer in microseconds; public ones rate-limit.
            poll_interval: if is_local(rpc_url) {
                Duration::from_millis(5)
            } else {
                Duration::from_millis(250)
            },
            confirm_timeout: Duration::from_secs(90),
            // A local chain has no fee market to follow (and surfpool
            // answers `getRecentPrioritizationFees` by copying every
            // transaction it holds).
            fees: if is_local(rpc_url) {
                crate::compute::FeePolicy::NONE
            } else {
                crate::compute::FeePolicy::default()
            },
            statuses: Default::default(),
            push: Default::default(),
            blockhash: Default::default(),
            fetching: Default::default(),
        }
    }

    /// Confirms and reads at `level` instead of `confirmed`.
    pub fn with_commitment(mut self, level: CommitmentLevel) -> Self {
        self.commitment = CommitmentConfig { commitment: level };
        self.rpc = rpc_client(&self.url, self.commitment);
        self
    }

    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    pub fn with_confirm_timeout(mut self, timeout: Duration) -> Self {
        self.confirm_timeout = timeout;
        self
    }

    /// Offers priority fees by `fees` instead of the default policy (the
    /// default ceiling on a cluster, none on a local chain).
    pub fn with_fees(mut self, fees: crate::compute::FeePolicy) -> Self {
        self.fees = fees;
        self
    }

    pub fn fees(&self) -> crate::compute::FeePolicy {
        self.fees
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn ws_url(&self) -> &str {
        &self.ws_url
    }

    pub fn commitment(&self) -> CommitmentLevel {
        self.commitment.commitment
    }

    /// The underlying RPC client, for what this client does not wrap.
    pub fn rpc(&self) -> &RpcClient {
        &self.rpc
    }
}

/// A confirmed transaction's log lines (none when the node kept no meta).
pub(super) fn logs_of(tx: &EncodedConfirmedTransactionWithStatusMeta) -> Vec<String> {
    match tx.transaction.meta.as_ref().map(|m| &m.log_messages) {
        Some(OptionSerializer::Some(logs)) => logs.clone(),
        _ => Vec::new(),
    }
}

impl ChainClient {
    /// A confirmed transaction, JSON-encoded, at the client's commitment.
    pub(super) async fn transaction(
        &self,
        signature: &Signature,
    ) -> Result<EncodedConfirmedTransactionWithStatusMeta, ChainError> {
        self.rpc
            .get_transaction_with_config(
                signature,
                RpcTransactionConfig {
                    encoding: Some(UiTransactionEncoding::Json),
                    commitment: Some(self.commitment),
                    max_supported_transaction_version: Some(0),
                },
            )
            .await
            .map_err(|e| self.rpc_error(e))
    }
}

pub(super) fn ui_to_account(ui: &UiAccount) -> Option<Account> {
    ui.to_account().filter(|a| a.lamports > 0)
}

/// The Borsh tag of a job state variant (its index in `JobState`).
pub fn state_tag(state: &JobState) -> u8 {
    match state {
        JobState::Pending { .. } => 0,
        JobState::Assigned { .. } => 1,
        JobState::Running { .. } => 2,
        JobState::Paused { .. } => 3,
        JobState::Recovering { .. } => 4,
        JobState::Completed { .. } => 5,
        JobState::Failed { .. } => 6,
        JobState::Cancelled { .. } => 7,
        JobState::Expired { .. } => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_websocket_url_is_the_next_port_with_a_ws_scheme() {
        assert_eq!(
            default_ws_url("http://127.0.0.1:8899"),
            "ws://127.0.0.1:8900"
        );
        assert_eq!(
            default_ws_url("https://api.devnet.solana.com"),
            "wss://api.devnet.solana.com"
        );
        assert_eq!(
            default_ws_url("http://localhost:9000/rpc"),
            "ws://localhost:9001/rpc"
        );
    }

    #[test]
    fn state_tags_are_the_borsh_variant_indices() {
        for state in [
            JobState::Pending { since: 1 },
            JobState::Assigned { since: 1 },
            JobState::Running { since: 1 },
            JobState::Paused {
                since: 1,
                reason: mcjs::state::PauseReason::Owner,
            },
            JobState::Recovering { since: 1 },
            JobState::Completed { at: 1 },
            JobState::Failed { at: 1 },
            JobState::Cancelled { at: 1 },
            JobState::Expired { at: 1 },
        ] {
            assert_eq!(
                anchor_lang::prelude::borsh::to_vec(&state).unwrap()[0],
                state_tag(&state)
            );
        }
    }

    #[test]
    fn a_token_failure_is_named_after_the_token_program() {
        use solana_instruction_error::InstructionError;
        let logs = vec![
            format!("Program {} invoke [1]", crate::PROGRAM_ID),
            format!("Program {} invoke [2]", spl_token::ID),
            "Program log: Error: insufficient funds".to_string(),
            format!(
                "Program {} failed: custom program error: 0x1",
                spl_token::ID
            ),
            format!(
                "Program {} failed: custom program error: 0x1",
                crate::PROGRAM_ID
            ),
        ];
        let err = classify(
            TransactionError::InstructionError(0, InstructionError::Custom(1)),
            logs,
            Pubkey::default(),
        );
        assert_eq!(err.program_error_name(), Some("InsufficientFunds"));
        assert!(err.to_string().starts_with("spl-token refused"), "{err}");
    }

    #[test]
    fn an_mcjs_failure_is_named_after_its_error() {
        use solana_instruction_error::InstructionError;
        let code = errors::code_of(mcjs::errors::McjsError::JobNotRunning);
        let logs = vec![format!(
            "Program {} failed: custom program error: {code:#x}",
            crate::PROGRAM_ID
        )];
        let err = classify(
            TransactionError::InstructionError(0, InstructionError::Custom(code)),
            logs,
            Pubkey::default(),
        );
        assert_eq!(err.program_error_name(), Some("JobNotRunning"));
    }
}
