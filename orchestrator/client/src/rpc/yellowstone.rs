//! The Yellowstone gRPC source of the program index (feature `yellowstone`).
//!
//! Production RPC providers (Triton, Helius, QuickNode) stream account and
//! slot updates over Yellowstone gRPC, the Geyser plugin's `Subscribe`
//! service: no websocket subscription limits, and each update carries the
//! slot it was written at. The index takes this source as it takes the
//! websocket one ([`super::IndexSource`]): the stream is one `Subscribe`
//! with an account filter on the program's owner and the slots at the
//! client's commitment; backfills stay JSON-RPC `getProgramAccounts` (the
//! gRPC service has no read of every account of a program), so a source is
//! a gRPC endpoint and a [`ChainClient`].
//!
//! A provider's load balancer closes a stream that does not answer its
//! pings: each `Ping` is answered with a `ping` request on the same stream.
//! The source also pings every [`PING_EVERY`] and passes each `Pong` on as
//! [`Event::Alive`], so that a server that passes no slot statuses on (the
//! plugin holds them until a block is assembled, which a local chain's
//! blocks may never be) still shows a live stream.

use std::collections::HashMap;
use std::time::Duration;

use anchor_lang::prelude::Pubkey;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use solana_commitment_config::CommitmentLevel as Commitment;
use yellowstone_grpc_client::GeyserGrpcClient;
use yellowstone_grpc_proto::geyser::{
    CommitmentLevel, SubscribeRequest, SubscribeRequestFilterAccounts, SubscribeRequestFilterSlots,
    SubscribeRequestPing, SubscribeUpdate, subscribe_update::UpdateOneof,
};

use super::index::{Event, IndexSource, Update};
use crate::decode::AccountKind;
use crate::rpc::{ChainClient, ChainError};

/// How long a connection to the gRPC endpoint may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the source asks the server for a `Pong`: well inside the
/// index's silence limit.
pub const PING_EVERY: Duration = Duration::from_secs(1);

/// The name the subscription's filters go by (updates carry it back).
const FILTER: &str = "mcjs";

/// A Yellowstone gRPC endpoint (`http://host:10000`, or `https://` with
/// the provider's token) for the stream, and `rpc` for the backfills.
#[derive(Clone)]
pub struct YellowstoneSource {
    endpoint: String,
    x_token: Option<String>,
    rpc: ChainClient,
    commitment: Commitment,
}

impl YellowstoneSource {
    /// Updates at `rpc`'s commitment.
    pub fn new(endpoint: &str, x_token: Option<String>, rpc: ChainClient) -> Self {
        Self {
            endpoint: endpoint.to_string(),
            x_token,
            commitment: rpc.commitment.commitment,
            rpc,
        }
    }

    /// Updates at `commitment` instead of the client's.
    pub fn with_commitment(mut self, commitment: Commitment) -> Self {
        self.commitment = commitment;
        self
    }

    fn refused(&self, what: &str, e: impl std::fmt::Display) -> ChainError {
        ChainError::Rpc(format!(
            "Yellowstone gRPC {what} at {}: {e}; is the endpoint (and its x-token) right?",
            self.endpoint
        ))
    }
}

/// The subscription: every account the program owns, and the slots the
/// chain reaches, both at `commitment`.
pub fn subscribe_request(commitment: Commitment) -> SubscribeRequest {
    let level = match commitment {
        Commitment::Processed => CommitmentLevel::Processed,
        Commitment::Confirmed => CommitmentLevel::Confirmed,
        Commitment::Finalized => CommitmentLevel::Finalized,
    };
    SubscribeRequest {
        accounts: HashMap::from([(
            FILTER.to_string(),
            SubscribeRequestFilterAccounts {
                owner: vec![crate::PROGRAM_ID.to_string()],
                ..Default::default()
            },
        )]),
        slots: HashMap::from([(
            FILTER.to_string(),
            SubscribeRequestFilterSlots {
                filter_by_commitment: Some(true),
                interslot_updates: Some(false),
            },
        )]),
        commitment: Some(level as i32),
        ..Default::default()
    }
}

/// What a stream's message tells the index: an account of the program (its
/// data; `None` once it no longer belongs to the program, or was emptied),
/// a slot, or nothing (pings, and anything malformed: a key that is not 32
/// bytes is dropped, never guessed at).
pub fn event_of(update: &SubscribeUpdate) -> Option<Event> {
    match update.update_oneof.as_ref()? {
        UpdateOneof::Account(account) => {
            let info = account.account.as_ref()?;
            let key = Pubkey::try_from(info.pubkey.as_slice()).ok()?;
            let owned = info.owner.as_slice() == crate::PROGRAM_ID.as_ref() && info.lamports > 0;
            Some(Event::Account(Update {
                key,
                slot: account.slot,
                data: owned.then(|| info.data.clone()),
            }))
        }
        UpdateOneof::Slot(slot) => Some(Event::Slot(slot.slot)),
        UpdateOneof::Pong(_) => Some(Event::Alive),
        _ => None,
    }
}

/// A `ping` request: the server answers with a `Pong`.
fn ping() -> SubscribeRequest {
    SubscribeRequest {
        ping: Some(SubscribeRequestPing { id: 1 }),
        ..Default::default()
    }
}

/// The answer a ping asks for, if `update` is one.
fn pong_for(update: &SubscribeUpdate) -> Option<SubscribeRequest> {
    matches!(update.update_oneof, Some(UpdateOneof::Ping(_))).then(ping)
}

impl IndexSource for YellowstoneSource {
    async fn subscribe(&self) -> Result<BoxStream<'static, Event>, ChainError> {
        let mut client = GeyserGrpcClient::build_from_shared(self.endpoint.clone())
            .and_then(|b| b.x_token(self.x_token.clone()))
            .map_err(|e| self.refused("endpoint refused", e))?
            .connect_timeout(CONNECT_TIMEOUT)
            .connect()
            .await
            .map_err(|e| self.refused("cannot connect", e))?;
        let request = subscribe_request(self.commitment);
        let (mut sink, mut stream) = client
            .subscribe_with_request(Some(request))
            .await
            .map_err(|e| self.refused("Subscribe refused", e))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let endpoint = self.endpoint.clone();
        tokio::spawn(async move {
            // The client is held for as long as the stream is read.
            let _client = client;
            let mut pings = tokio::time::interval(PING_EVERY);
            pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let update = tokio::select! {
                    _ = tx.closed() => return,
                    _ = pings.tick() => {
                        use futures_util::SinkExt;
                        if let Err(error) = sink.send(ping()).await {
                            tracing::warn!(%endpoint, %error, "cannot ping the Yellowstone server");
                            return;
                        }
                        continue;
                    }
                    update = stream.next() => update,
                };
                let update = match update {
                    Some(Ok(update)) => update,
                    Some(Err(status)) => {
                        tracing::warn!(%endpoint, %status, "the Yellowstone stream ended");
                        return;
                    }
                    None => return,
                };
                if let Some(pong) = pong_for(&update) {
                    use futures_util::SinkExt;
                    if let Err(error) = sink.send(pong).await {
                        tracing::warn!(%endpoint, %error, "cannot answer the Yellowstone ping");
                        return;
                    }
                }
                if let Some(event) = event_of(&update)
                    && tx.send(event).is_err()
                {
                    return;
                }
            }
        });
        Ok(Box::pin(futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|u| (u, rx)) },
        )))
    }

    async fn backfill(
        &self,
        kind: AccountKind,
    ) -> Result<(u64, Vec<(Pubkey, Vec<u8>)>), ChainError> {
        self.rpc.program_accounts_at(kind).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yellowstone_grpc_proto::geyser::{
        SubscribeUpdateAccount, SubscribeUpdateAccountInfo, SubscribeUpdatePing,
        SubscribeUpdatePong, SubscribeUpdateSlot,
    };

    fn account(key: &[u8], owner: Pubkey, lamports: u64, slot: u64) -> SubscribeUpdate {
        SubscribeUpdate {
            filters: vec![FILTER.into()],
            update_oneof: Some(UpdateOneof::Account(SubscribeUpdateAccount {
                account: Some(SubscribeUpdateAccountInfo {
                    pubkey: key.to_vec(),
                    lamports,
                    owner: owner.to_bytes().to_vec(),
                    data: vec![7, 8, 9],
                    ..Default::default()
                }),
                slot,
                is_startup: false,
            })),
            ..Default::default()
        }
    }

    #[test]
    fn the_request_follows_the_programs_accounts_and_the_slots_at_the_commitment() {
        let request = subscribe_request(Commitment::Confirmed);
        assert_eq!(
            request.accounts[FILTER].owner,
            vec![crate::PROGRAM_ID.to_string()]
        );
        assert!(request.accounts[FILTER].account.is_empty());
        assert_eq!(request.slots[FILTER].filter_by_commitment, Some(true));
        assert_eq!(request.commitment, Some(CommitmentLevel::Confirmed as i32));
        assert!(request.transactions.is_empty() && request.blocks.is_empty());
    }

    #[test]
    fn updates_become_index_events_and_nothing_malformed_is_guessed_at() {
        let key = Pubkey::new_unique();
        let Some(Event::Account(u)) = event_of(&account(key.as_ref(), crate::PROGRAM_ID, 1, 42))
        else {
            panic!("an account update")
        };
        assert_eq!((u.key, u.slot, u.data), (key, 42, Some(vec![7, 8, 9])));
        // Closed (emptied) or handed to another program: gone from the index.
        for gone in [
            account(key.as_ref(), crate::PROGRAM_ID, 0, 43),
            account(key.as_ref(), Pubkey::default(), 1, 43),
        ] {
            let Some(Event::Account(u)) = event_of(&gone) else {
                panic!("an account update")
            };
            assert_eq!((u.key, u.slot, u.data), (key, 43, None));
        }
        // A key that is not 32 bytes, or no account at all.
        assert!(event_of(&account(&[1, 2, 3], crate::PROGRAM_ID, 1, 44)).is_none());
        assert!(
            event_of(&SubscribeUpdate {
                update_oneof: Some(UpdateOneof::Account(SubscribeUpdateAccount::default())),
                ..Default::default()
            })
            .is_none()
        );
        let slot = SubscribeUpdate {
            update_oneof: Some(UpdateOneof::Slot(SubscribeUpdateSlot {
                slot: 50,
                ..Default::default()
            })),
            ..Default::default()
        };
        assert!(matches!(event_of(&slot), Some(Event::Slot(50))));
        assert!(pong_for(&slot).is_none());
        let ping = SubscribeUpdate {
            update_oneof: Some(UpdateOneof::Ping(SubscribeUpdatePing {})),
            ..Default::default()
        };
        assert!(event_of(&ping).is_none());
        assert_eq!(pong_for(&ping).and_then(|r| r.ping).map(|p| p.id), Some(1));
        let pong = SubscribeUpdate {
            update_oneof: Some(UpdateOneof::Pong(SubscribeUpdatePong { id: 1 })),
            ..Default::default()
        };
        assert!(matches!(event_of(&pong), Some(Event::Alive)));
        assert!(pong_for(&pong).is_none());
    }
}
