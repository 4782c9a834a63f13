//! Sending transactions and waiting for them: each asks for the compute-unit
//! limit of its instructions and offers the price that recent transactions
//! writing its accounts paid, within the client's [`crate::compute::FeePolicy`] (both in
//! [`crate::compute`]); it is sent with
//! `maxRetries: 0` and sent again by the client every [`REBROADCAST`] until
//! it lands or its blockhash expires (an RPC node's own rebroadcast queue is
//! what public endpoints drop first), then re-signed with a fresh blockhash.
//! It is signed with the client's recent blockhash, fetched at most every
//! [`super::BLOCKHASH_REUSE`] ([`super::blockhash`]).
//! Its confirmation is pushed over the websocket where one can be had
//! ([`super::notices`]), and polled otherwise.

use super::notices::NOTICE_WAIT;
use super::*;

/// The longest a transaction waits for the recent fees it is priced by.
pub const FEE_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a transaction not yet seen by the cluster is sent again.
pub const REBROADCAST: Duration = Duration::from_secs(2);

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
            let price = self.unit_price(ixs, &payer, attempt as u32).await;
            // A re-signing takes a blockhash fetched now, never the held one.
            let fresh = attempt > 1;
            match self
                .send_once(ixs, payer_and_signers, payer, price, fresh)
                .await?
            {
                Attempt::Done(signature) => return Ok(signature),
                Attempt::BlockhashExpired if attempt < ATTEMPTS => {
                    tracing::debug!(attempt, "blockhash expired before confirmation; re-signing");
                }
                Attempt::BlockhashExpired => break,
            }
        }
        Err(ChainError::Expired { attempts: ATTEMPTS })
    }

    /// The compute-unit price for the `attempt`-th signing of `ixs`
    /// ([`crate::compute::FeePolicy::price`] of the fees recent slots paid for their
    /// writable accounts). A node that will not say (refused, or without
    /// the method) is not a reason to hold the transaction back: it is
    /// priced as if recent slots paid nothing.
    pub async fn unit_price(&self, ixs: &[Instruction], payer: &Pubkey, attempt: u32) -> u64 {
        if self.fees.ceiling == 0 {
            return 0;
        }
        let accounts = crate::compute::writable_accounts(ixs, payer);
        // Bounded: a rate-limited endpoint would otherwise hold the
        // transaction for the transport's whole backoff.
        let read = self.rpc.get_recent_prioritization_fees(&accounts);
        let recent = match tokio::time::timeout(FEE_READ_TIMEOUT, read).await {
            Ok(Ok(fees)) => fees.iter().map(|f| f.prioritization_fee).collect(),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "no recent prioritization fees; offering the floor");
                Vec::new()
            }
            Err(_) => {
                tracing::debug!("recent prioritization fees not read in time; offering the floor");
                Vec::new()
            }
        };
        self.fees.price(&recent, attempt)
    }

    pub(super) async fn send_once(
        &self,
        ixs: &[Instruction],
        signers: &[&Keypair],
        payer: Pubkey,
        micro_lamports: u64,
        fresh: bool,
    ) -> Result<Attempt, ChainError> {
        let ixs = crate::compute::with_budget(ixs, micro_lamports);
        let (tx, blockhash) = self.signed(&ixs, signers, payer, fresh).await?;
        // Subscribed before it is sent: its confirmation is pushed, not polled.
        let mut notice = self.notice_of(&tx.signatures[0]).await;
        let config = solana_rpc_client_api::config::RpcSendTransactionConfig {
            preflight_commitment: Some(self.commitment.commitment),
            encoding: Some(UiTransactionEncoding::Base64),
            max_retries: Some(0),
            ..Default::default()
        };
        // Sent again as it is: the same signature, which lands at most once.
        let again = solana_rpc_client_api::config::RpcSendTransactionConfig {
            skip_preflight: true,
            ..config
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
                        Some(TransactionError::BlockhashNotFound) => {
                            self.recent().drop_held();
                            Ok(Attempt::BlockhashExpired)
                        }
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
        let mut last_sent = Instant::now();
        loop {
            if let Some(pushed) = notice.as_mut() {
                match tokio::time::timeout(NOTICE_WAIT, pushed).await {
                    Ok(Ok(None)) => return Ok(Attempt::Done(signature)),
                    Ok(Ok(Some(err))) => {
                        let logs = self.transaction_logs(&signature).await.unwrap_or_default();
                        return Err(classify(err, logs, payer));
                    }
                    // The subscription ended without a word: poll from here.
                    Ok(Err(_)) => notice = None,
                    // Nothing yet: ask once, send again if due.
                    Err(_) => {}
                }
            }
            let status = self
                .statuses
                .status(&self.rpc, &signature, self.poll_interval)
                .await
                .map_err(|e| self.rpc_error(e))?;
            if let Some(status) = &status {
                if let Some(err) = &status.err {
                    let logs = self.transaction_logs(&signature).await.unwrap_or_default();
                    return Err(classify(err.clone(), logs, payer));
                }
                if status.satisfies_commitment(self.commitment) {
                    return Ok(Attempt::Done(signature));
                }
            } else if last_sent.elapsed() >= REBROADCAST {
                last_sent = Instant::now();
                if let Err(e) = self.rpc.send_transaction_with_config(&tx, again).await {
                    tracing::debug!(%signature, error = %e, "sending the transaction again failed");
                }
            }
            if status.is_none() && last_blockhash_check.elapsed() > Duration::from_secs(2) {
                last_blockhash_check = Instant::now();
                if self.blockhash_expired(&blockhash).await? {
                    self.recent().drop_held();
                    return Ok(Attempt::BlockhashExpired);
                }
            }
            if started.elapsed() > self.confirm_timeout {
                return Err(ChainError::Timeout {
                    signature,
                    secs: self.confirm_timeout.as_secs(),
                });
            }
        }
    }

    /// `ixs` signed with the client's recent blockhash
    /// ([`super::blockhash`]): the one held if it is recent enough and
    /// `fresh` is not asked, else one fetched now. A transaction already
    /// signed with the held one (the same signature) is signed again with
    /// a newer one.
    async fn signed(
        &self,
        ixs: &[Instruction],
        signers: &[&Keypair],
        payer: Pubkey,
        mut fresh: bool,
    ) -> Result<(Transaction, solana_hash::Hash), ChainError> {
        const TRIES: usize = 5;
        for _ in 0..TRIES {
            let held = if fresh {
                None
            } else {
                self.recent().reusable(Instant::now())
            };
            let blockhash = match held {
                Some(hash) => hash,
                None => {
                    // One fetch for every transaction signed meanwhile: a
                    // sender that waited finds the blockhash just fetched.
                    let _one = if fresh {
                        None
                    } else {
                        Some(self.fetching.lock().await)
                    };
                    match (!fresh)
                        .then(|| self.recent().reusable(Instant::now()))
                        .flatten()
                    {
                        Some(hash) => hash,
                        None => {
                            let hash = self
                                .rpc
                                .get_latest_blockhash()
                                .await
                                .map_err(|e| self.rpc_error(e))?;
                            self.recent().hold(hash, Instant::now());
                            hash
                        }
                    }
                }
            };
            let mut tx = Transaction::new_with_payer(ixs, Some(&payer));
            tx.try_sign(&signers.to_vec(), blockhash)
                .map_err(|e| ChainError::Signing(e.to_string()))?;
            if self.recent().first_use(blockhash, tx.signatures[0]) {
                return Ok((tx, blockhash));
            }
            // Signed before with this blockhash: wait for a newer one (a
            // slot is 400 ms) when the chain gave this one just now.
            if held.is_none() {
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
            fresh = true;
        }
        Err(ChainError::Signing(format!(
            "the same transaction was signed {TRIES} times and the chain gave no newer blockhash to tell it apart"
        )))
    }

    /// A transaction is coming: fetches a blockhash in the background when
    /// the held one would not last [`super::blockhash::WARM_FOR`] more, so
    /// the send that follows (an agent's `start_job` once its container
    /// runs, the scheduler's report when a node's grace ends) signs at once
    /// instead of waiting a round trip for one. One fetch at a time, shared
    /// with the senders'.
    pub fn warm(&self) {
        if !self.recent().needs_warming(Instant::now()) {
            return;
        }
        let client = self.clone();
        tokio::spawn(async move {
            let Ok(_one) = client.fetching.try_lock() else {
                return; // a fetch is under way
            };
            match client.rpc.get_latest_blockhash().await {
                Ok(hash) => client.recent().hold(hash, Instant::now()),
                Err(e) => tracing::debug!(error = %e, "no blockhash fetched ahead of a send"),
            }
        });
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, super::blockhash::Recent> {
        self.blockhash.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `blockhash` has expired: nothing signed with it can land any more.
    pub(super) async fn blockhash_expired(
        &self,
        blockhash: &solana_hash::Hash,
    ) -> Result<bool, ChainError> {
        let valid = self
            .rpc
            .is_blockhash_valid(blockhash, CommitmentConfig::processed())
            .await
            .map_err(|e| self.rpc_error(e))?;
        Ok(!valid)
    }

    /// The log lines of a confirmed transaction.
    pub async fn transaction_logs(&self, signature: &Signature) -> Result<Vec<String>, ChainError> {
        Ok(logs_of(&self.transaction(signature).await?))
    }
}
