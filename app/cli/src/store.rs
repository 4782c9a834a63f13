//! Finding and opening the deployment's store from the CLI: a flag, the
//! config file's `store_url`, or the scheduler's `/v1/store`; a directory is
//! opened directly, an `s3://` store through the scheduler's gateway, signed
//! with the caller's key (a wallet, or an agent's operator key).

use std::sync::Arc;

use anyhow::{Context, bail};
use mcjs_client::{Keypair, Signer};
use mcjs_protocol::store::{Role, StoreUrl};
use mcjs_runtime::brokered::{BrokeredStore, Identity};
use object_store::ObjectStore;

/// The scheduler a client talks to when none is given.
pub const DEFAULT_SCHEDULER_URL: &str = "http://127.0.0.1:7400";

/// Signs gateway requests with `keypair`.
pub fn identity(role: Role, keypair: &Keypair) -> Identity {
    let signer = keypair.insecure_clone();
    Identity {
        role,
        key: keypair.pubkey().to_bytes(),
        sign: Arc::new(move |message: &[u8]| <[u8; 64]>::from(signer.sign_message(message))),
    }
}

/// The store: the flag, else the config file's `store_url`, else what the
/// scheduler publishes.
pub async fn resolve(
    flag: Option<StoreUrl>,
    config: Option<&str>,
    scheduler: &str,
) -> anyhow::Result<StoreUrl> {
    if let Some(url) = flag {
        return Ok(url);
    }
    if let Some(text) = config {
        return text
            .parse()
            .context("the config file's store_url is not a store URL");
    }
    match mcjs_runtime::brokered::discover(scheduler).await {
        Ok(url) => Ok(url),
        Err(e) => bail!(
            "{e}\nno store given: pass --store (a directory, file:///dir or s3://bucket/prefix), set store_url in the config file, or --scheduler to a running scheduler"
        ),
    }
}

/// Opens `url`, an `s3://` store through the gateway of `scheduler`.
pub fn open(
    url: &StoreUrl,
    scheduler: &str,
    identity: Identity,
) -> anyhow::Result<Arc<dyn ObjectStore>> {
    mcjs_runtime::brokered::open(url, scheduler, identity).map_err(anyhow::Error::msg)
}

/// The gateway client itself, for what only it can do (publishing a spec).
pub fn gateway(scheduler: &str, identity: Identity) -> BrokeredStore {
    BrokeredStore::new(scheduler, identity)
}
