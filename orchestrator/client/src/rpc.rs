//! The JSON-RPC side of the chain client: sending and confirming
//! transactions, reading and finding the program's accounts, reading an
//! account's history from transaction logs, and watching accounts.
//!
//! The CLI and the daemons reach a cluster only through [`ChainClient`].

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
    EncodedTransaction, UiMessage, UiTransactionEncoding, option_serializer::OptionSerializer,
};

use crate::decode::{self, AccountKind, DecodeError};
use crate::history::{HistoryEntry, McjsEvent};
use crate::{errors, ix, pda};

/// Why a chain operation failed, in terms a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A program refused the transaction with one of its own errors.
    #[error("{program} refused the transaction: {name}: {message} (error {code})")]
    Program {
        /// `mcjs`, `spl-token` or `system`, or the program id.
        program: String,
        name: String,
        message: String,
        code: u32,
        logs: Vec<String>,
    },
    /// The fee payer cannot pay the fee (or has no SOL at all).
    #[error(
        "the fee payer {payer} has too little SOL to pay for the transaction; fund it (on a local chain: `solana airdrop 1 {payer}`)"
    )]
    InsufficientSol { payer: Pubkey },
    #[error("the transaction failed: {message}")]
    Transaction { message: String, logs: Vec<String> },
    #[error(
        "cannot reach the RPC node at {url}: {message}; is the URL right and the node running?"
    )]
    Unreachable { url: String, message: String },
    #[error(
        "the MCJS program {program} is not deployed on {url}; is this the right network (--url)?"
    )]
    ProgramMissing { program: Pubkey, url: String },
    #[error(
        "the MCJS program on {url} is not initialised (no Config account); run `mcjs admin init` first"
    )]
    NotInitialised { url: String },
    #[error("{what} {key} does not exist on {url}")]
    NotFound {
        what: &'static str,
        key: Pubkey,
        url: String,
    },
    #[error("account {key}: {source}")]
    Decode { key: Pubkey, source: DecodeError },
    #[error("cannot sign the transaction: {0}")]
    Signing(String),
    #[error("transaction {signature} was not confirmed within {secs} s")]
    Timeout { signature: Signature, secs: u64 },
    #[error("the RPC node answered with an error: {0}")]
    Rpc(String),
}

impl ChainError {
    /// The program logs of a refused transaction, when there are any.
    pub fn logs(&self) -> &[String] {
        match self {
            ChainError::Program { logs, .. } | ChainError::Transaction { logs, .. } => logs,
            _ => &[],
        }
    }

    /// The name of a program error, e.g. `JobNotRunning`.
    pub fn program_error_name(&self) -> Option<&str> {
        match self {
            ChainError::Program { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// Which jobs [`ChainClient::jobs`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobFilter {
    All,
    Owner(Pubkey),
    /// By state; the variant's fields are ignored (`JobState::Running { since: 0 }`).
    State(JobState),
    /// Jobs assigned to or running on this node.
    Node(Pubkey),
}

/// The JSON-RPC client of the MCJS program.
#[derive(Clone)]
pub struct ChainClient {
    rpc: Arc<RpcClient>,
    url: String,
    ws_url: String,
    commitment: CommitmentConfig,
    poll_interval: Duration,
    confirm_timeout: Duration,
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

fn is_local(url: &str) -> bool {
    url.contains("://127.0.0.1") || url.contains("://localhost") || url.contains("://[::1]")
}

const MCJS_PROGRAM: &str = "mcjs";

/// Which program failed, from the innermost `Program X failed` log line.
fn failing_program(logs: &[String]) -> Option<Pubkey> {
    logs.iter().find_map(|line| {
        let rest = line.strip_prefix("Program ")?;
        let (id, tail) = rest.split_once(' ')?;
        tail.starts_with("failed").then(|| id.parse().ok())?
    })
}

fn token_error(code: u32) -> Option<(&'static str, &'static str)> {
    Some(match code {
        0 => ("NotRentExempt", "the token account is not rent exempt"),
        1 => (
            "InsufficientFunds",
            "the token account holds less USDC than the amount",
        ),
        2 => ("InvalidMint", "the mint is invalid"),
        3 => (
            "MintMismatch",
            "the token account is not of the expected mint",
        ),
        4 => (
            "OwnerMismatch",
            "the token account is not owned by the signer",
        ),
        17 => ("AccountFrozen", "the token account is frozen"),
        _ => return None,
    })
}

fn system_error(code: u32) -> Option<(&'static str, &'static str)> {
    Some(match code {
        0 => (
            "AccountAlreadyInUse",
            "the account already exists (is the id already taken?)",
        ),
        1 => (
            "ResultWithNegativeLamports",
            "the payer has too little SOL to pay the account's rent",
        ),
        _ => return None,
    })
}

/// Names a failed transaction's error after the program that raised it.
pub fn classify(err: TransactionError, logs: Vec<String>, payer: Pubkey) -> ChainError {
    use solana_instruction_error::InstructionError;
    match err {
        TransactionError::InstructionError(index, InstructionError::Custom(code)) => {
            let failing = failing_program(&logs);
            let (program, named) = match failing {
                Some(id) if id == spl_token::ID => ("spl-token".to_string(), token_error(code)),
                Some(id) if id == anchor_lang::solana_program::system_program::ID => {
                    ("system".to_string(), system_error(code))
                }
                Some(id) if id != crate::PROGRAM_ID => (id.to_string(), None),
                _ => {
                    let described = errors::describe(code);
                    return match described {
                        Some((name, message)) => ChainError::Program {
                            program: MCJS_PROGRAM.into(),
                            name,
                            message,
                            code,
                            logs,
                        },
                        None => ChainError::Transaction {
                            message: format!(
                                "instruction {index}: custom program error {code} (not an MCJS error)"
                            ),
                            logs,
                        },
                    };
                }
            };
            match named {
                Some((name, message)) => ChainError::Program {
                    program,
                    name: name.into(),
                    message: message.into(),
                    code,
                    logs,
                },
                None => ChainError::Transaction {
                    message: format!("instruction {index}: {program} custom error {code}"),
                    logs,
                },
            }
        }
        TransactionError::InsufficientFundsForFee | TransactionError::AccountNotFound => {
            ChainError::InsufficientSol { payer }
        }
        other => ChainError::Transaction {
            message: other.to_string(),
            logs,
        },
    }
}

/// What `send` does after the first attempt fails.
enum Attempt {
    Done(Signature),
    BlockhashExpired,
}

/// A verification a node must act on now, with its job.
#[derive(Debug, Clone)]
pub struct DueCheck {
    pub key: Pubkey,
    pub verification: Verification,
    /// Which checker the node is.
    pub role: mcjs::state::Party,
    pub job: Job,
}

impl ChainClient {
    /// A client of the node at `rpc_url`, its websocket at port + 1.
    /// Reads and confirmations use the `confirmed` commitment.
    pub fn new(rpc_url: &str) -> Self {
        Self::with_ws(rpc_url, &default_ws_url(rpc_url))
    }

    pub fn with_ws(rpc_url: &str, ws_url: &str) -> Self {
        let commitment = CommitmentConfig::confirmed();
        let rpc = RpcClient::new_with_timeout_and_commitment(
            rpc_url.to_string(),
            Duration::from_secs(30),
            commitment,
        );
        Self {
            rpc: Arc::new(rpc),
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
        }
    }

    /// Confirms and reads at `level` instead of `confirmed`.
    pub fn with_commitment(mut self, level: CommitmentLevel) -> Self {
        self.commitment = CommitmentConfig { commitment: level };
        self.rpc = Arc::new(RpcClient::new_with_timeout_and_commitment(
            self.url.clone(),
            Duration::from_secs(30),
            self.commitment,
        ));
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

    fn rpc_error(&self, err: ClientError) -> ChainError {
        match err.kind() {
            ErrorKind::Reqwest(e) if e.is_connect() || e.is_timeout() => ChainError::Unreachable {
                url: self.url.clone(),
                message: e.to_string(),
            },
            ErrorKind::Io(e) => ChainError::Unreachable {
                url: self.url.clone(),
                message: e.to_string(),
            },
            // Some calls (getAccountInfo) fold the transport error into a message.
            ErrorKind::RpcError(RpcError::ForUser(message))
                if message.contains("error sending request") =>
            {
                ChainError::Unreachable {
                    url: self.url.clone(),
                    message: "the connection failed".into(),
                }
            }
            _ => ChainError::Rpc(err.to_string()),
        }
    }

    // ----- transactions -----

    /// Signs `ixs` (fee payer: the first signer), sends them and waits for
    /// the client's commitment. Re-signs with a fresh blockhash when the
    /// first one expires before the transaction lands.
    pub async fn send(
        &self,
        ixs: &[Instruction],
        payer_and_signers: &[&Keypair],
    ) -> Result<Signature, ChainError> {
        let payer = payer_and_signers
            .first()
            .ok_or_else(|| ChainError::Signing("no fee payer given".into()))?
            .pubkey();
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            match self.send_once(ixs, payer_and_signers, payer).await? {
                Attempt::Done(signature) => return Ok(signature),
                Attempt::BlockhashExpired if attempt < ATTEMPTS => {
                    tracing::debug!(attempt, "blockhash expired before confirmation; re-signing");
                }
                Attempt::BlockhashExpired => break,
            }
        }
        Err(ChainError::Transaction {
            message: format!(
                "the blockhash expired {ATTEMPTS} times before the transaction landed; the cluster may be congested"
            ),
            logs: Vec::new(),
        })
    }

    async fn send_once(
        &self,
        ixs: &[Instruction],
        signers: &[&Keypair],
        payer: Pubkey,
    ) -> Result<Attempt, ChainError> {
        let blockhash = self
            .rpc
            .get_latest_blockhash()
            .await
            .map_err(|e| self.rpc_error(e))?;
        let mut tx = Transaction::new_with_payer(ixs, Some(&payer));
        tx.try_sign(&signers.to_vec(), blockhash)
            .map_err(|e| ChainError::Signing(e.to_string()))?;
        let config = solana_rpc_client_api::config::RpcSendTransactionConfig {
            preflight_commitment: Some(self.commitment.commitment),
            encoding: Some(UiTransactionEncoding::Base64),
            ..Default::default()
        };
        let signature = match self.rpc.send_transaction_with_config(&tx, config).await {
            Ok(signature) => signature,
            Err(err) => {
                if let ErrorKind::RpcError(RpcError::RpcResponseError {
                    data: RpcResponseErrorData::SendTransactionPreflightFailure(sim),
                    message,
                    ..
                }) = err.kind()
                {
                    let logs = sim.logs.clone().unwrap_or_default();
                    return match sim.err.clone().map(TransactionError::from) {
                        Some(TransactionError::BlockhashNotFound) => Ok(Attempt::BlockhashExpired),
                        Some(tx_err) => Err(classify(tx_err, logs, payer)),
                        None => Err(ChainError::Transaction {
                            message: message.clone(),
                            logs,
                        }),
                    };
                }
                return Err(self.rpc_error(err));
            }
        };

        let started = Instant::now();
        let mut last_blockhash_check = Instant::now();
        loop {
            let statuses = self
                .rpc
                .get_signature_statuses(&[signature])
                .await
                .map_err(|e| self.rpc_error(e))?;
            if let Some(Some(status)) = statuses.value.first() {
                if let Some(err) = &status.err {
                    let logs = self.transaction_logs(&signature).await.unwrap_or_default();
                    return Err(classify(err.clone(), logs, payer));
                }
                if status.satisfies_commitment(self.commitment) {
                    return Ok(Attempt::Done(signature));
                }
            } else if last_blockhash_check.elapsed() > Duration::from_secs(2) {
                last_blockhash_check = Instant::now();
                let valid = self
                    .rpc
                    .is_blockhash_valid(&blockhash, CommitmentConfig::processed())
                    .await
                    .map_err(|e| self.rpc_error(e))?;
                if !valid {
                    return Ok(Attempt::BlockhashExpired);
                }
            }
            if started.elapsed() > self.confirm_timeout {
                return Err(ChainError::Timeout {
                    signature,
                    secs: self.confirm_timeout.as_secs(),
                });
            }
            tokio::time::sleep(self.poll_interval).await;
        }
    }

    async fn transaction_logs(&self, signature: &Signature) -> Result<Vec<String>, ChainError> {
        let tx = self
            .rpc
            .get_transaction_with_config(
                signature,
                RpcTransactionConfig {
                    encoding: Some(UiTransactionEncoding::Json),
                    commitment: Some(self.commitment),
                    max_supported_transaction_version: Some(0),
                },
            )
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(match tx.transaction.meta.map(|m| m.log_messages) {
            Some(OptionSerializer::Some(logs)) => logs,
            _ => Vec::new(),
        })
    }

    // ----- accounts -----

    /// An account, or `None` when it does not exist.
    /// The lowest job id `owner` may still use: ids only grow, so a closed
    /// job's address is never taken again (0 before its first job).
    pub async fn next_job_id(&self, owner: &Pubkey) -> Result<u64, ChainError> {
        Ok(self
            .account(&pda::job_counter(owner))
            .await?
            .and_then(|a| decode::job_counter(&a.data).ok())
            .map_or(0, |c| c.next_job_id))
    }

    pub async fn account(&self, key: &Pubkey) -> Result<Option<Account>, ChainError> {
        let response = self
            .rpc
            .get_account_with_commitment(key, self.commitment)
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(response.value.filter(|a| a.lamports > 0))
    }

    /// Fails unless the MCJS program is deployed on this node.
    pub async fn check_program(&self) -> Result<(), ChainError> {
        match self.account(&crate::PROGRAM_ID).await? {
            Some(account) if account.executable => Ok(()),
            _ => Err(ChainError::ProgramMissing {
                program: crate::PROGRAM_ID,
                url: self.url.clone(),
            }),
        }
    }

    async fn program_account<T>(
        &self,
        key: &Pubkey,
        decode: fn(&[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, ChainError> {
        match self.account(key).await? {
            None => Ok(None),
            Some(account) if account.owner != crate::PROGRAM_ID => Err(ChainError::Decode {
                key: *key,
                source: DecodeError::WrongType {
                    expected: "program-owned",
                },
            }),
            Some(account) => decode(&account.data)
                .map(Some)
                .map_err(|source| ChainError::Decode { key: *key, source }),
        }
    }

    /// The Config account and its address.
    pub async fn config(&self) -> Result<(Pubkey, Config), ChainError> {
        let key = pda::config();
        match self.program_account(&key, decode::config).await? {
            Some(config) => Ok((key, config)),
            None => {
                self.check_program().await?;
                Err(ChainError::NotInitialised {
                    url: self.url.clone(),
                })
            }
        }
    }

    /// The mint and treasury every token-moving instruction needs.
    pub async fn deployment(&self) -> Result<ix::Deployment, ChainError> {
        let (_, config) = self.config().await?;
        Ok(ix::Deployment {
            usdc_mint: config.usdc_mint,
            treasury: config.treasury,
        })
    }

    pub async fn job(&self, key: &Pubkey) -> Result<Option<Job>, ChainError> {
        self.program_account(key, decode::job).await
    }

    pub async fn provider(&self, key: &Pubkey) -> Result<Option<Provider>, ChainError> {
        self.program_account(key, decode::provider).await
    }

    pub async fn node(&self, key: &Pubkey) -> Result<Option<Node>, ChainError> {
        self.program_account(key, decode::node).await
    }

    async fn program_accounts(
        &self,
        kind: AccountKind,
        mut filters: Vec<RpcFilterType>,
    ) -> Result<Vec<(Pubkey, Vec<u8>)>, ChainError> {
        filters.insert(
            0,
            RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                0,
                decode::discriminator_of(kind).to_vec(),
            )),
        );
        let config = RpcProgramAccountsConfig {
            filters: Some(filters),
            account_config: RpcAccountInfoConfig {
                encoding: Some(UiAccountEncoding::Base64),
                commitment: Some(self.commitment),
                ..Default::default()
            },
            ..Default::default()
        };
        let response: OptionalContext<Vec<RpcKeyedAccount>> = self
            .rpc
            .send(
                RpcRequest::GetProgramAccounts,
                json!([crate::PROGRAM_ID.to_string(), config]),
            )
            .await
            .map_err(|e| self.rpc_error(e))?;
        let keyed = match response {
            OptionalContext::Context(c) => c.value,
            OptionalContext::NoContext(v) => v,
        };
        keyed
            .into_iter()
            .map(|k| {
                let key: Pubkey = k
                    .pubkey
                    .parse()
                    .map_err(|_| ChainError::Rpc(format!("malformed pubkey {}", k.pubkey)))?;
                let data = k
                    .account
                    .data
                    .decode()
                    .ok_or_else(|| ChainError::Rpc(format!("undecodable data of {key}")))?;
                Ok((key, data))
            })
            .collect()
    }

    /// Jobs matching `filter`, found with memcmp filters and checked again after decoding.
    pub async fn jobs(&self, filter: JobFilter) -> Result<Vec<(Pubkey, Job)>, ChainError> {
        let filters = match filter {
            JobFilter::All => vec![],
            JobFilter::Owner(owner) => vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                Job::OWNER_OFFSET,
                owner.to_bytes().to_vec(),
            ))],
            JobFilter::State(state) => vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                Job::STATE_OFFSET,
                vec![state_tag(&state)],
            ))],
            JobFilter::Node(node) => {
                let mut bytes = vec![1u8];
                bytes.extend_from_slice(node.as_ref());
                vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                    Job::NODE_OFFSET,
                    bytes,
                ))]
            }
        };
        let mut jobs: Vec<(Pubkey, Job)> = self
            .program_accounts(AccountKind::Job, filters)
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::job(&data).ok().map(|job| (key, job)))
            .filter(|(_, job)| match filter {
                JobFilter::All => true,
                JobFilter::Owner(owner) => job.owner == owner,
                JobFilter::State(state) => state_tag(&job.state) == state_tag(&state),
                JobFilter::Node(node) => job.node == Some(node),
            })
            .collect();
        jobs.sort_by_key(|(_, job)| (job.submitted_at, job.job_id));
        Ok(jobs)
    }

    /// Every registered node.
    pub async fn nodes(&self) -> Result<Vec<(Pubkey, Node)>, ChainError> {
        let mut nodes: Vec<(Pubkey, Node)> = self
            .program_accounts(AccountKind::Node, vec![])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::node(&data).ok().map(|node| (key, node)))
            .collect();
        nodes.sort_by_key(|(_, n)| (n.provider, n.index));
        Ok(nodes)
    }

    /// The nodes of one Provider account.
    pub async fn nodes_of(&self, provider: &Pubkey) -> Result<Vec<(Pubkey, Node)>, ChainError> {
        // `provider` is the first field after the discriminator.
        let filter = RpcFilterType::Memcmp(Memcmp::new_raw_bytes(8, provider.to_bytes().to_vec()));
        let mut nodes: Vec<(Pubkey, Node)> = self
            .program_accounts(AccountKind::Node, vec![filter])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::node(&data).ok().map(|node| (key, node)))
            .filter(|(_, node)| node.provider == *provider)
            .collect();
        nodes.sort_by_key(|(_, n)| n.index);
        Ok(nodes)
    }

    /// Every verification open, optionally only those naming `node` in
    /// `role`.
    pub async fn verifications(
        &self,
        node: Option<(&Pubkey, mcjs::state::Party)>,
    ) -> Result<Vec<(Pubkey, Verification)>, ChainError> {
        use mcjs::state::Party;
        let filters = match node {
            Some((node, role)) => {
                let offset = match role {
                    Party::Verifier => Verification::VERIFIER_NODE_OFFSET,
                    Party::Referee => Verification::REFEREE_NODE_OFFSET,
                };
                vec![RpcFilterType::Memcmp(Memcmp::new_raw_bytes(
                    offset,
                    node.to_bytes().to_vec(),
                ))]
            }
            None => vec![],
        };
        let mut out: Vec<(Pubkey, Verification)> = self
            .program_accounts(AccountKind::Verification, filters)
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::verification(&data).ok().map(|v| (key, v)))
            .collect();
        out.sort_by_key(|(_, v)| (v.job, v.interval));
        Ok(out)
    }

    /// The verifications `node` must act on now, with their jobs: as a
    /// checker, seal an answer while one is open and it has not, reveal it
    /// once both checkers have sealed.
    pub async fn due_checks(&self, node: &Pubkey) -> Result<Vec<DueCheck>, ChainError> {
        use mcjs::state::{Party, VerificationState};
        let mut out = Vec::new();
        for role in [Party::Verifier, Party::Referee] {
            for (key, verification) in self.verifications(Some((node, role))).await? {
                let (sealed, revealed) = match role {
                    Party::Verifier => (
                        verification.verifier_commitment.is_some(),
                        verification.verifier_answer.is_some(),
                    ),
                    Party::Referee => (
                        verification.referee_commitment.is_some(),
                        verification.referee_answer.is_some(),
                    ),
                };
                let due = match verification.state {
                    VerificationState::Open => !sealed,
                    VerificationState::Revealing => sealed && !revealed,
                    _ => false,
                };
                if due && let Some(job) = self.job(&verification.job).await? {
                    out.push(DueCheck {
                        key,
                        verification,
                        role,
                        job,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Every segment payment still held (or refunded and not yet closed).
    pub async fn segments(&self) -> Result<Vec<(Pubkey, Segment)>, ChainError> {
        Ok(self
            .program_accounts(AccountKind::Segment, vec![])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::segment(&data).ok().map(|s| (key, s)))
            .collect())
    }

    /// The SlotHashes sysvar's raw data (what `open_verification` draws from).
    pub async fn slot_hashes(&self) -> Result<Vec<u8>, ChainError> {
        Ok(self
            .account(&anchor_lang::compat::solana_sysvar::slot_hashes::ID)
            .await?
            .map(|a| a.data)
            .unwrap_or_default())
    }

    /// Every registered provider.
    pub async fn providers(&self) -> Result<Vec<(Pubkey, Provider)>, ChainError> {
        Ok(self
            .program_accounts(AccountKind::Provider, vec![])
            .await?
            .into_iter()
            .filter_map(|(key, data)| decode::provider(&data).ok().map(|p| (key, p)))
            .collect())
    }

    /// The amount held by an SPL token account, in base units.
    pub async fn token_balance(&self, account: &Pubkey) -> Result<u64, ChainError> {
        use anchor_lang::AccountDeserialize;
        let Some(data) = self.account(account).await? else {
            return Err(ChainError::NotFound {
                what: "token account",
                key: *account,
                url: self.url.clone(),
            });
        };
        anchor_spl::token::TokenAccount::try_deserialize_unchecked(&mut &data.data[..])
            .map(|t| t.amount)
            .map_err(|_| ChainError::Rpc(format!("{account} is not a token account")))
    }

    /// Lamports held by an account (0 when it does not exist).
    pub async fn sol_balance(&self, key: &Pubkey) -> Result<u64, ChainError> {
        Ok(self.account(key).await?.map_or(0, |a| a.lamports))
    }

    /// The cluster's clock (`Clock::unix_timestamp`), which the program judges time by.
    pub async fn chain_time(&self) -> Result<i64, ChainError> {
        const CLOCK: Pubkey = Pubkey::from_str_const("SysvarC1ock11111111111111111111111111111111");
        // slot u64, epoch_start_timestamp i64, epoch u64, leader_schedule_epoch u64, unix_timestamp i64
        let account = self.account(&CLOCK).await?.ok_or(ChainError::NotFound {
            what: "the Clock sysvar",
            key: CLOCK,
            url: self.url.clone(),
        })?;
        account
            .data
            .get(32..40)
            .and_then(|b| b.try_into().ok())
            .map(i64::from_le_bytes)
            .ok_or_else(|| ChainError::Rpc("the Clock sysvar is malformed".into()))
    }

    // ----- history -----

    /// Every MCJS event of every transaction that touched `key`, oldest first.
    pub async fn account_history(&self, key: &Pubkey) -> Result<Vec<HistoryEntry>, ChainError> {
        self.account_history_capped(key, usize::MAX).await
    }

    /// [`Self::account_history`] over at most the newest `max_signatures`
    /// transactions: what a caller anyone can point at any address (the
    /// token program's history has millions) reads, so that its cost is
    /// bounded by the caller, not by the address.
    pub async fn account_history_capped(
        &self,
        key: &Pubkey,
        max_signatures: usize,
    ) -> Result<Vec<HistoryEntry>, ChainError> {
        const PAGE: usize = 1_000;
        let mut statuses = Vec::new();
        let mut before = None;
        while statuses.len() < max_signatures {
            let want = PAGE.min(max_signatures - statuses.len());
            let page = self
                .rpc
                .get_signatures_for_address_with_config(
                    key,
                    GetConfirmedSignaturesForAddress2Config {
                        before,
                        until: None,
                        limit: Some(want),
                        commitment: Some(self.commitment),
                    },
                )
                .await
                .map_err(|e| self.rpc_error(e))?;
            let full = page.len() == want;
            before = page.last().and_then(|s| s.signature.parse().ok());
            statuses.extend(page);
            if !full || before.is_none() {
                break;
            }
        }
        // Newest first from the node; the history reads oldest first.
        statuses.reverse();
        let mut entries = Vec::new();
        for status in statuses.into_iter().filter(|s| s.err.is_none()) {
            let signature: Signature = status.signature.parse().map_err(|_| {
                ChainError::Rpc(format!("malformed signature {}", status.signature))
            })?;
            let tx = self
                .rpc
                .get_transaction_with_config(
                    &signature,
                    RpcTransactionConfig {
                        encoding: Some(UiTransactionEncoding::Json),
                        commitment: Some(self.commitment),
                        max_supported_transaction_version: Some(0),
                    },
                )
                .await
                .map_err(|e| self.rpc_error(e))?;
            let logs = match tx.transaction.meta.as_ref().map(|m| &m.log_messages) {
                Some(OptionSerializer::Some(logs)) => logs.clone(),
                _ => Vec::new(),
            };
            let signers = signers_of(&tx.transaction.transaction);
            let block_time = tx.block_time.or(status.block_time);
            for event in McjsEvent::all_in_logs(&logs) {
                entries.push(HistoryEntry {
                    signature: status.signature.clone(),
                    slot: tx.slot,
                    block_time,
                    signers: signers.clone(),
                    event,
                });
            }
        }
        Ok(entries)
    }

    /// A job's history: every event about it, oldest first, with signers and slots.
    pub async fn job_history(&self, job: &Pubkey) -> Result<Vec<HistoryEntry>, ChainError> {
        self.job_history_capped(job, usize::MAX).await
    }

    /// [`Self::job_history`] over at most the newest `max_signatures`
    /// transactions of the address.
    pub async fn job_history_capped(
        &self,
        job: &Pubkey,
        max_signatures: usize,
    ) -> Result<Vec<HistoryEntry>, ChainError> {
        let mut entries = self.account_history_capped(job, max_signatures).await?;
        entries.retain(|e| e.event.job().as_ref() == Some(job));
        Ok(entries)
    }

    // ----- watching -----

    /// The account's state now and after every change: an `accountSubscribe`
    /// over the websocket, or polling when the websocket cannot be reached.
    pub fn watch_account(
        &self,
        key: Pubkey,
    ) -> impl Stream<Item = Result<Option<Account>, ChainError>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let client = self.clone();
        tokio::spawn(async move {
            let subscribed = tokio::time::timeout(
                Duration::from_secs(5),
                PubsubClient::new(client.ws_url.as_str()),
            )
            .await;
            if let Ok(Ok(pubsub)) = subscribed {
                let config = RpcAccountInfoConfig {
                    encoding: Some(UiAccountEncoding::Base64),
                    commitment: Some(client.commitment),
                    ..Default::default()
                };
                if let Ok((mut updates, _unsubscribe)) =
                    pubsub.account_subscribe(&key, Some(config)).await
                {
                    // Read only once subscribed, so that no change falls
                    // between the read and the first notification.
                    if tx.send(client.account(&key).await).await.is_err() {
                        return;
                    }
                    while let Some(update) = updates.next().await {
                        let account = ui_to_account(&update.value);
                        if tx.send(Ok(account)).await.is_err() {
                            return;
                        }
                    }
                }
            }
            tracing::debug!(%key, "websocket unavailable; polling the account instead");
            let mut last: Option<Option<Account>> = None;
            loop {
                let now = client.account(&key).await;
                let changed = match (&now, &last) {
                    (Ok(a), Some(b)) => a != b,
                    _ => true,
                };
                if let Ok(a) = &now {
                    last = Some(a.clone());
                }
                if changed && tx.send(now).await.is_err() {
                    return;
                }
                tokio::time::sleep(client.poll_interval.max(Duration::from_millis(200))).await;
            }
        });
        futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
    }

    // ----- local chain only -----

    /// Overwrites an account's data through surfpool's `surfnet_setAccount`
    /// cheatcode. Only a local chain answers it.
    pub async fn surfnet_set_account_data(
        &self,
        key: &Pubkey,
        data: &[u8],
    ) -> Result<(), ChainError> {
        let _: serde_json::Value = self
            .rpc
            .send(
                RpcRequest::Custom {
                    method: "surfnet_setAccount",
                },
                json!([key.to_string(), { "data": hex::encode(data) }]),
            )
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(())
    }

    /// Moves a local chain's clock forward through surfpool's
    /// `surfnet_timeTravel` cheatcode.
    pub async fn surfnet_time_travel_to(&self, unix_timestamp_ms: u64) -> Result<(), ChainError> {
        let _: serde_json::Value = self
            .rpc
            .send(
                RpcRequest::Custom {
                    method: "surfnet_timeTravel",
                },
                json!([{ "absoluteTimestamp": unix_timestamp_ms }]),
            )
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(())
    }
}

fn ui_to_account(ui: &UiAccount) -> Option<Account> {
    ui.to_account().filter(|a| a.lamports > 0)
}

fn signers_of(tx: &EncodedTransaction) -> Vec<Pubkey> {
    let EncodedTransaction::Json(ui) = tx else {
        return tx
            .decode()
            .map(|v| {
                let n = usize::from(v.message.header().num_required_signatures);
                v.message.static_account_keys()[..n].to_vec()
            })
            .unwrap_or_default();
    };
    let n = ui.signatures.len();
    match &ui.message {
        UiMessage::Raw(raw) => raw
            .account_keys
            .iter()
            .take(n)
            .filter_map(|k| k.parse().ok())
            .collect(),
        UiMessage::Parsed(parsed) => parsed
            .account_keys
            .iter()
            .filter(|k| k.signer)
            .filter_map(|k| k.pubkey.parse().ok())
            .collect(),
    }
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
