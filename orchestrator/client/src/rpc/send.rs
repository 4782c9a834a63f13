//! Sending transactions and waiting for them: each asks for the compute-unit
//! limit of its instructions ([`crate::compute`]), and is re-signed with a
//! fresh blockhash when the first expires.

use super::*;

/// What `send` does after the first attempt fails.
pub(super) enum Attempt {
    Done(Signature),
    BlockhashExpired,
}

impl ChainClient {
    /// Signs `ixs` (fee payer: the first signer) behind a compute-unit limit
    /// for them, sends them and waits for the client's commitment. Re-signs with a fresh blockhash when the
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

    pub(super) async fn send_once(
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
        let ixs = crate::compute::with_unit_limit(ixs);
        let mut tx = Transaction::new_with_payer(&ixs, Some(&payer));
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

    /// The log lines of a confirmed transaction.
    pub async fn transaction_logs(&self, signature: &Signature) -> Result<Vec<String>, ChainError> {
        Ok(logs_of(&self.transaction(signature).await?))
    }
}
