//! The websocket source of the program index: `programSubscribe` and
//! `slotSubscribe` on the client's websocket, and `getProgramAccounts`
//! with its context slot ([`super::index`] merges the two by slot).

use super::index::{Event, IndexSource, Update};
use super::*;

/// The websocket source: `programSubscribe` on the client's websocket, and
/// `getProgramAccounts` with its context slot.
impl IndexSource for ChainClient {
    async fn subscribe(
        &self,
    ) -> Result<futures_util::stream::BoxStream<'static, Event>, ChainError> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let ws_url = self.ws_url.clone();
        let commitment = self.commitment;
        tokio::spawn(async move {
            let pubsub = match super::watch::open_pubsub(&ws_url).await {
                Ok(pubsub) => pubsub,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let config = RpcProgramAccountsConfig {
                account_config: RpcAccountInfoConfig {
                    encoding: Some(UiAccountEncoding::Base64),
                    commitment: Some(commitment),
                    ..Default::default()
                },
                ..Default::default()
            };
            let subscribed = async {
                let (updates, _) = pubsub
                    .program_subscribe(&crate::PROGRAM_ID, Some(config))
                    .await?;
                let (slots, _) = pubsub.slot_subscribe().await?;
                Ok::<_, solana_pubsub_client::pubsub_client::PubsubClientError>((updates, slots))
            };
            let (mut updates, mut slots) = match subscribed.await {
                Ok(streams) => {
                    let _ = ready_tx.send(Ok(()));
                    streams
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(ChainError::Rpc(format!(
                        "programSubscribe refused by {ws_url}: {e}"
                    ))));
                    return;
                }
            };
            loop {
                let event = tokio::select! {
                    _ = tx.closed() => return,
                    notice = updates.next() => {
                        let Some(notice) = notice else { return };
                        let Ok(key) = notice.value.pubkey.parse::<Pubkey>() else {
                            continue;
                        };
                        let data = ui_to_account(&notice.value.account)
                            .filter(|a| a.owner == crate::PROGRAM_ID)
                            .map(|a| a.data);
                        Event::Account(Update {
                            key,
                            slot: notice.context.slot,
                            data,
                        })
                    }
                    slot = slots.next() => match slot {
                        Some(info) => Event::Slot(info.slot),
                        None => return,
                    },
                };
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
        ready_rx
            .await
            .map_err(|_| ChainError::Rpc("the websocket task ended".into()))??;
        Ok(Box::pin(futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|u| (u, rx)) },
        )))
    }

    async fn backfill(
        &self,
        kind: AccountKind,
    ) -> Result<(u64, Vec<(Pubkey, Vec<u8>)>), ChainError> {
        self.program_accounts_at(kind).await
    }
}

impl ChainClient {
    /// Every account of `kind` the program owns, with the slot the node
    /// read them at.
    pub(super) async fn program_accounts_at(
        &self,
        kind: AccountKind,
    ) -> Result<(u64, Vec<(Pubkey, Vec<u8>)>), ChainError> {
        let (slot, accounts) = self.program_accounts_in_context(kind, vec![]).await?;
        match slot {
            Some(slot) => Ok((slot, accounts)),
            // A node that gives no context: the slot before the read is a
            // lower bound, which only lets queued updates win more often.
            None => Ok((
                self.rpc
                    .get_slot_with_commitment(self.commitment)
                    .await
                    .map_err(|e| self.rpc_error(e))?,
                accounts,
            )),
        }
    }
}
