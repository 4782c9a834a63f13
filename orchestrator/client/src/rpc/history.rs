//! An account's MCJS events, read from the logs of the transactions that
//! touched it (only the MCJS program's own frames: `crate::events`).

use super::*;

impl ChainClient {
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
            let tx = self.transaction(&signature).await?;
            let logs = logs_of(&tx);
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
}

pub(super) fn signers_of(tx: &EncodedTransaction) -> Vec<Pubkey> {
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
