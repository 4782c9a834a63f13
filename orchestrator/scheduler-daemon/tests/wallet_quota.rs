//! A wallet's space in the store is bounded in total, not only in rate:
//! bytes, objects, open uploads and published specs, each past its quota
//! refused with nothing stored; and a signed transfer carries no more than
//! the size it declared (the S3 server refuses the rest). A real local chain,
//! the real `s3s-fs` S3 server, the gateway, and the owner's client as
//! `mcjs job upload` uses it.

use std::sync::{Arc, RwLock};

use mcjs_client::{Keypair, Signer};
use mcjs_cluster::{S3_ACCESS_KEY, S3_BUCKET, S3_SECRET_KEY, S3Server};
use mcjs_localnet::{Localnet, LocalnetConfig, free_port_pair};
use mcjs_protocol::SignedRequest;
use mcjs_protocol::store::{
    Grant, Role, STORE_SIGN_PATH, StoreOp, StoreRequest, StoreResponse, StoreUrl,
};
use mcjs_runtime::brokered::{BrokeredStore, Identity};
use mcjs_scheduler_daemon::auth::Directory;
use mcjs_scheduler_daemon::gateway::{self, GatewayLimits, GatewayState, S3Store};
use mcjs_scheduler_daemon::metrics::Metrics;
use mcjs_scheduler_daemon::quota::WalletQuota;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn owner_store(base: &str, owner: &Arc<Keypair>) -> BrokeredStore {
    let signer = Arc::clone(owner);
    BrokeredStore::new(
        base,
        Identity {
            role: Role::Owner,
            key: owner.pubkey().to_bytes(),
            sign: Arc::new(move |m| signer.sign_message(m).into()),
        },
    )
}

fn spec(restart_budget: u8) -> String {
    let sha = "cd".repeat(32);
    let json = mcjs_cluster::workload::spec_json(
        &format!("sha256:{}", "ab".repeat(32)),
        "file:///x",
        &sha,
        &[],
        restart_budget,
    );
    let spec = mcjs_spec::JobSpec::from_json(&json).expect("a valid spec");
    mcjs_spec::canonical_json(&spec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wallet_stores_at_most_its_quota_and_a_transfer_no_more_than_it_declared() {
    let dir = tempfile::tempdir().unwrap();
    let localnet = Localnet::start(LocalnetConfig {
        rpc_port: free_port_pair(),
        dir: dir.path().join("chain"),
        slot_time_ms: 50,
        ..LocalnetConfig::default()
    })
    .await
    .expect("the local chain starts");
    let s3 = S3Server::start(&dir.path().join("s3"), dir.path(), &[S3_BUCKET])
        .await
        .expect("s3s-fs starts");
    let url: StoreUrl = format!("s3://{S3_BUCKET}/deploy?endpoint={}", s3.endpoint)
        .parse()
        .unwrap();
    let StoreUrl::S3(location) = url.clone() else {
        panic!("an s3 url")
    };
    let store = S3Store::new(location, |k| match k {
        "AWS_ACCESS_KEY_ID" => Some(S3_ACCESS_KEY.into()),
        "AWS_SECRET_ACCESS_KEY" => Some(S3_SECRET_KEY.into()),
        _ => None,
    })
    .unwrap();
    let quota = WalletQuota {
        bytes: 64 * 1024,
        objects: 4,
        open_uploads: 1,
        specs: 2,
    };
    let state = GatewayState {
        url,
        s3: Some(Arc::new(store)),
        client: localnet.client(),
        metrics: Arc::new(Metrics::new()),
        clock: Arc::new(now_ms),
        directory: Arc::new(RwLock::new(Directory::default())),
        limits: Arc::new(GatewayLimits::standard().with_quota(quota)),
        views: Default::default(),
        index: None,
        standbys: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, gateway::routes(state)).await.unwrap() });

    let owner = Arc::new(Keypair::new());
    let store = owner_store(&base, &owner);
    let data = |name: &str| ObjectPath::from(format!("users/{}/data/{name}", owner.pubkey()));
    let kib = |n: usize| object_store::PutPayload::from(vec![7u8; n * 1024]);
    let refused = |e: object_store::Error, what: &str| {
        let text = e.to_string();
        assert!(text.contains("refused") && text.contains(what), "{text}");
    };

    // Bytes: 40 KiB, then 40 more is over 64 KiB and nothing is stored.
    store.put(&data("a"), kib(40)).await.expect("40 of 64 KiB");
    let e = store.put(&data("b"), kib(40)).await.unwrap_err();
    refused(e, "over its quota of 65536");
    assert!(store.head(&data("b")).await.is_err(), "nothing stored");
    store.put(&data("b"), kib(10)).await.expect("50 of 64 KiB");

    // Objects: two more make four; a fifth is refused, and fits once one
    // is deleted.
    store.put(&data("c"), kib(1)).await.unwrap();
    store.put(&data("d"), kib(1)).await.unwrap();
    refused(store.put(&data("e"), kib(1)).await.unwrap_err(), "objects");
    store.delete(&data("d")).await.unwrap();
    // The deleted object's grant may still be counted until its URL
    // expires; an overwrite of a listed object is not a new one either way.
    store
        .put(&data("c"), kib(1))
        .await
        .expect("overwriting is no new object");

    // Another wallet has its own quota.
    let other = Arc::new(Keypair::new());
    owner_store(&base, &other)
        .put(
            &ObjectPath::from(format!("users/{}/data/a", other.pubkey())),
            kib(60),
        )
        .await
        .expect("another wallet's own 64 KiB");

    // A multipart upload's parts count before it completes: one upload
    // open at a time, and a part past the quota refused.
    let big = data("big");
    let mut upload = store.put_multipart(&big).await.expect("one upload open");
    assert!(
        store.put_multipart(&data("big2")).await.is_err(),
        "a second upload at once"
    );
    upload.put_part(kib(8)).await.expect("a part within quota");
    refused(upload.put_part(kib(8)).await.unwrap_err(), "quota");
    upload.abort().await.unwrap();
    assert!(store.head(&big).await.is_err());

    // A URL signed for 10 bytes takes 10 bytes, not 20 KiB.
    let path = format!("users/{}/data/small", other.pubkey());
    let request = StoreRequest {
        role: Role::Owner,
        sent_at_unix_ms: now_ms(),
        ops: vec![StoreOp::Put {
            path: path.clone(),
            size: Some(10),
        }],
    };
    let sealed = SignedRequest::seal(STORE_SIGN_PATH, &request, &other.pubkey().to_bytes(), |m| {
        other.sign_message(m).into()
    });
    let http = reqwest::Client::new();
    let answer: StoreResponse = http
        .post(format!("{base}{STORE_SIGN_PATH}"))
        .json(&sealed)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let Grant::Url { url, .. } = &answer.grants[0] else {
        panic!("a URL")
    };
    let over = http
        .put(url)
        .body(vec![1u8; 20 * 1024])
        .send()
        .await
        .unwrap();
    assert!(
        over.status().is_client_error(),
        "20 KiB on a URL signed for 10 bytes: {}",
        over.status()
    );
    let other_store = owner_store(&base, &other);
    assert!(
        other_store
            .head(&ObjectPath::from(path.clone()))
            .await
            .is_err(),
        "nothing stored by the oversized transfer"
    );
    let exact = http.put(url).body(vec![1u8; 10]).send().await.unwrap();
    assert!(exact.status().is_success(), "{}", exact.status());

    // Specs: two per wallet here; the same spec again is no new one.
    store.publish_spec(spec(3)).await.expect("a first spec");
    store.publish_spec(spec(4)).await.expect("a second spec");
    store
        .publish_spec(spec(3))
        .await
        .expect("published already");
    refused(store.publish_spec(spec(5)).await.unwrap_err(), "specs");
    other_store
        .publish_spec(spec(5))
        .await
        .expect("another wallet's first spec");

    // A deployment with standbys: the first gateway named is down (its
    // scheduler died), the store is reached through the next, which is
    // asked first from then on.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let signer = Arc::clone(&other);
    let failover = BrokeredStore::with_gateways(
        &[dead.clone(), base.clone()],
        Identity {
            role: Role::Owner,
            key: other.pubkey().to_bytes(),
            sign: Arc::new(move |m| signer.sign_message(m).into()),
        },
    );
    let path = ObjectPath::from(format!("users/{}/data/a", other.pubkey()));
    let read = failover
        .get(&path)
        .await
        .expect("read through the live gateway");
    assert_eq!(read.bytes().await.unwrap().len(), 60 * 1024);
    assert_eq!(failover.to_string(), format!("the store behind {base}"));
    let only_dead = BrokeredStore::with_gateways(
        &[dead],
        Identity {
            role: Role::Owner,
            key: other.pubkey().to_bytes(),
            sign: Arc::new(|_| [0; 64]),
        },
    );
    let e = only_dead.head(&path).await.unwrap_err().to_string();
    assert!(e.contains("cannot reach the store gateway"), "{e}");
}
