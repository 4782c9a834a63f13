//! Why a chain operation failed, in terms a person can act on: a failed
//! transaction named after the program that raised it.

use super::*;

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
    #[error(
        "the transaction's blockhash expired {attempts} times before it landed; the cluster may be congested: send it again"
    )]
    Expired { attempts: usize },
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

    /// Whether the same transaction may still land if sent again: it was
    /// lost on the way (the node unreachable, the RPC call refused, the
    /// confirmation not seen in time, the blockhash expired), not refused.
    pub fn may_land_if_sent_again(&self) -> bool {
        matches!(
            self,
            ChainError::Unreachable { .. }
                | ChainError::Timeout { .. }
                | ChainError::Rpc(_)
                | ChainError::Expired { .. }
        )
    }

    /// The name of a program error, e.g. `JobNotRunning`.
    pub fn program_error_name(&self) -> Option<&str> {
        match self {
            ChainError::Program { name, .. } => Some(name),
            _ => None,
        }
    }
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

impl ChainClient {
    pub(super) fn rpc_error(&self, err: ClientError) -> ChainError {
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
}
