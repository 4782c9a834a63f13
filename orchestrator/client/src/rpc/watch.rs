//! Following an account: a websocket subscription, or polling.

use super::*;

impl ChainClient {
    /// The account's state now and after every change: an `accountSubscribe`
    /// over the websocket, or polling when the websocket cannot be reached.
    pub fn watch_account(
        &self,
        key: Pubkey,
    ) -> impl Stream<Item = Result<Option<Account>, ChainError>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let client = self.clone();
        tokio::spawn(async move {
            if let Ok(pubsub) = open_pubsub(&client.ws_url).await {
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
}

/// A websocket client of `ws_url`, or why none could be had within 5 s.
pub(super) async fn open_pubsub(ws_url: &str) -> Result<PubsubClient, ChainError> {
    match tokio::time::timeout(Duration::from_secs(5), PubsubClient::new(ws_url)).await {
        Ok(Ok(pubsub)) => Ok(pubsub),
        Ok(Err(e)) => Err(ChainError::Rpc(format!(
            "cannot open the websocket {ws_url}: {e}"
        ))),
        Err(_) => Err(ChainError::Rpc(format!(
            "the websocket {ws_url} did not answer within 5 s"
        ))),
    }
}

/// How long a refused or dropped subscription waits before it is tried
/// again: doubling from the first to the last.
pub const RESUBSCRIBE_FIRST: Duration = Duration::from_millis(500);
pub const RESUBSCRIBE_MOST: Duration = Duration::from_secs(10);

impl ChainClient {
    /// The account's state after every (re)subscription and every change,
    /// from an `accountSubscribe` alone: a subscription that cannot be made
    /// or that drops is made again (after [`RESUBSCRIBE_FIRST`], doubling to
    /// [`RESUBSCRIBE_MOST`]), and is never replaced by polling. After each
    /// subscription the account is read once by address, so that a change
    /// made while none was live is delivered too. What follows it therefore
    /// makes one `getAccountInfo` per subscription and none per change.
    pub fn follow_account(
        &self,
        key: Pubkey,
    ) -> impl Stream<Item = Result<Option<Account>, ChainError>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let client = self.clone();
        tokio::spawn(async move {
            let mut wait = RESUBSCRIBE_FIRST;
            loop {
                if let Ok(pubsub) = open_pubsub(&client.ws_url).await {
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
                        wait = RESUBSCRIBE_FIRST;
                        while let Some(update) = updates.next().await {
                            if tx.send(Ok(ui_to_account(&update.value))).await.is_err() {
                                return;
                            }
                        }
                        tracing::debug!(%key, "account subscription dropped; subscribing again");
                    }
                }
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RESUBSCRIBE_MOST);
            }
        });
        futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
    }
}
