//! Confirmations pushed over the websocket: a transaction's client
//! subscribes to its signature (`signatureSubscribe`, at the client's
//! commitment) before sending it, and learns that it landed without asking.
//! Status polls remain the fallback: one a [`NOTICE_WAIT`] while a notice is
//! awaited, at the poll interval where no websocket can be had. One
//! websocket connection serves every transaction of a client and its
//! clones; one that cannot be opened is tried again after [`PUSH_RETRY`].

use super::*;
use solana_rpc_client_api::config::RpcSignatureSubscribeConfig;
use solana_rpc_client_api::response::RpcSignatureResult;
use tokio::sync::oneshot;

/// How long a transaction waits for its notice before it asks for its
/// status once (and sends it again, when due): a notice lost on the way
/// costs at most this.
pub const NOTICE_WAIT: Duration = Duration::from_secs(1);

/// How long after a websocket could not be opened, or a subscription
/// failed, confirmations are polled before a websocket is tried again.
pub const PUSH_RETRY: Duration = Duration::from_secs(30);

/// How long opening the websocket or subscribing may take.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The websocket shared by a client's confirmations.
#[derive(Default)]
pub(super) struct Push {
    client: Option<Arc<PubsubClient>>,
    /// No websocket is tried before this.
    retry_at: Option<Instant>,
}

/// What a signature's notice said: landed at the client's commitment, with
/// the transaction's error if it failed.
pub(super) type Notice = oneshot::Receiver<Option<TransactionError>>;

impl ChainClient {
    /// The shared websocket, opened if none is; `None` while none can be.
    async fn push_client(&self) -> Option<Arc<PubsubClient>> {
        let mut push = self.push.lock().await;
        if let Some(client) = &push.client {
            return Some(Arc::clone(client));
        }
        if push.retry_at.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        match tokio::time::timeout(SUBSCRIBE_TIMEOUT, PubsubClient::new(self.ws_url.as_str())).await
        {
            Ok(Ok(client)) => {
                let client = Arc::new(client);
                push.client = Some(Arc::clone(&client));
                Some(client)
            }
            _ => {
                tracing::debug!(ws = %self.ws_url, "no websocket for confirmations; polling them");
                push.retry_at = Some(Instant::now() + PUSH_RETRY);
                None
            }
        }
    }

    /// Forgets the shared websocket after a subscription on it failed: the
    /// next is opened after [`PUSH_RETRY`].
    async fn push_failed(&self, failed: &Arc<PubsubClient>) {
        let mut push = self.push.lock().await;
        if push.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, failed)) {
            push.client = None;
            push.retry_at = Some(Instant::now() + PUSH_RETRY);
        }
    }

    /// Subscribes to `signature`'s confirmation; `None` when no websocket
    /// can be had (the caller polls). Returns once subscribed, so a
    /// transaction sent after it cannot land unnoticed.
    pub(super) async fn notice_of(&self, signature: &Signature) -> Option<Notice> {
        let pubsub = self.push_client().await?;
        let (ready_tx, ready_rx) = oneshot::channel::<bool>();
        let (mut done_tx, done_rx) = oneshot::channel();
        let (client, signature, commitment) = (self.clone(), *signature, self.commitment);
        tokio::spawn(async move {
            let config = RpcSignatureSubscribeConfig {
                commitment: Some(commitment),
                enable_received_notification: Some(false),
            };
            let subscribed = tokio::time::timeout(
                SUBSCRIBE_TIMEOUT,
                pubsub.signature_subscribe(&signature, Some(config)),
            )
            .await;
            let Ok(Ok((mut notices, unsubscribe))) = subscribed else {
                let _ = ready_tx.send(false);
                client.push_failed(&pubsub).await;
                return;
            };
            let _ = ready_tx.send(true);
            let notice = tokio::select! {
                _ = done_tx.closed() => None,
                notice = notices.next() => notice,
            };
            match notice.map(|n| n.value) {
                Some(RpcSignatureResult::ProcessedSignature(processed)) => {
                    let _ = done_tx.send(processed.err.map(TransactionError::from));
                }
                Some(RpcSignatureResult::ReceivedSignature(_)) => {}
                // The connection closed: the waiter polls from here, and
                // the next transaction opens another.
                None if !done_tx.is_closed() => client.push_failed(&pubsub).await,
                None => {}
            }
            drop(notices);
            unsubscribe().await;
        });
        match ready_rx.await {
            Ok(true) => Some(done_rx),
            _ => None,
        }
    }
}
