//! What a provider's node may leave under its job's prefix in the store
//! (it may write any object there) cannot poison a restore or a prune:
//! garbage descriptors are skipped and reported, a descriptor is trusted
//! only where it lives and only if its files hash to its hash, every copy
//! of the attested checkpoint is tried, and nothing is fetched beyond what
//! the attested list declares and the spec allows.

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use mcjs_runtime::checkpoint::{CheckpointDigest, FileDigest, Sha256Digest, hash_checkpoint};
use mcjs_runtime::confined::Limits;
use mcjs_runtime::store::{
    CheckpointPipeline, CheckpointStore, ExpectedCheckpoint, MAX_DESCRIPTOR_BYTES, StoredCheckpoint,
};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const JOB: &str = "job-7";
/// The spec's `checkpoint.max_size` in these tests.
const MAX_SIZE: u64 = 1 << 30;
const LIMITS: Limits = Limits {
    max_entries: 100_000,
    max_bytes: MAX_SIZE,
};

/// An in-memory store that counts the bytes read of each object; with
/// `hide_sizes`, it says every object is empty and streams it in 64 KiB
/// chunks, as a lying server would.
#[derive(Debug, Default)]
struct Counting {
    inner: InMemory,
    read: Arc<Mutex<HashMap<String, u64>>>,
    hide_sizes: std::sync::atomic::AtomicBool,
}

const CHUNK: usize = 64 << 10;

impl Counting {
    fn bytes_read(&self, path: &str) -> u64 {
        self.read.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    fn bytes_read_under(&self, prefix: &str) -> u64 {
        let read = self.read.lock().unwrap();
        read.iter()
            .filter(|(p, _)| p.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }

    async fn put(&self, path: &str, bytes: Vec<u8>) {
        self.inner
            .put(&ObjectPath::from(path), PutPayload::from(bytes))
            .await
            .unwrap();
    }

    async fn get_bytes(&self, path: &str) -> Vec<u8> {
        let got = self.inner.get(&ObjectPath::from(path)).await.unwrap();
        got.bytes().await.unwrap().to_vec()
    }

    async fn exists(&self, path: &str) -> bool {
        self.inner.head(&ObjectPath::from(path)).await.is_ok()
    }
}

impl fmt::Display for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let mut got = self.inner.get_opts(location, options).await?;
        let hide = self.hide_sizes.load(std::sync::atomic::Ordering::Relaxed);
        if hide {
            got.meta.size = 0;
        }
        let (meta, range, attributes) =
            (got.meta.clone(), got.range.clone(), got.attributes.clone());
        let (read, path) = (Arc::clone(&self.read), location.to_string());
        let stream = got
            .into_stream()
            .flat_map(move |chunk| {
                let pieces: Vec<object_store::Result<bytes::Bytes>> = match chunk {
                    Ok(c) if hide => (0..c.len())
                        .step_by(CHUNK)
                        .map(|at| Ok(c.slice(at..(at + CHUNK).min(c.len()))))
                        .collect(),
                    other => vec![other],
                };
                futures_util::stream::iter(pieces)
            })
            .inspect(move |chunk| {
                if let Ok(chunk) = chunk {
                    *read.lock().unwrap().entry(path.clone()).or_default() += chunk.len() as u64;
                }
            })
            .boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream),
            meta,
            range,
            attributes,
        })
    }

    async fn delete(&self, location: &ObjectPath) -> object_store::Result<()> {
        self.inner.delete(location).await
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &ObjectPath, to: &ObjectPath) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
    ) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}

struct Fixture {
    _t: tempfile::TempDir,
    local: PathBuf,
    restore_root: PathBuf,
    objects: Arc<Counting>,
    pipeline: CheckpointPipeline,
}

impl Fixture {
    fn new(keep: usize) -> Self {
        let t = tempfile::tempdir().unwrap();
        let local = t.path().join("ckpt");
        let restore_root = t.path().join("restore");
        std::fs::create_dir_all(&local).unwrap();
        std::fs::create_dir_all(&restore_root).unwrap();
        let objects = Arc::new(Counting::default());
        let store: Arc<dyn ObjectStore> = Arc::clone(&objects) as Arc<dyn ObjectStore>;
        let pipeline = CheckpointPipeline {
            generation: 1,
            store: CheckpointStore::new(store, keep),
            job_id: JOB.into(),
            local_root: local.clone(),
            hash_threads: 1,
            limits: LIMITS,
            every_steps: None,
        };
        Self {
            _t: t,
            local,
            restore_root,
            objects,
            pipeline,
        }
    }

    /// Stores a genuine checkpoint of `step`, as the agent does.
    async fn genuine(&self, step: u64) -> StoredCheckpoint {
        let dir = self.local.join(format!("step-{step:06}"));
        std::fs::create_dir_all(dir.join("shards")).unwrap();
        std::fs::write(dir.join("shards/weights.bin"), format!("weights {step}")).unwrap();
        std::fs::write(dir.join("optimizer.bin"), format!("optimizer {step}")).unwrap();
        std::fs::write(
            dir.join("mcjs-manifest.json"),
            format!(r#"{{"format":"mcjs-checkpoint/1","epoch":0,"step":{step}}}"#),
        )
        .unwrap();
        self.pipeline.collect().await.unwrap().pop().unwrap()
    }

    /// Writes `descriptor` as the node could: `jobs/<job>/checkpoints/<key>/checkpoint.json`.
    async fn plant(&self, key: &str, descriptor: &Value) {
        self.objects
            .put(
                &format!("{}/checkpoint.json", base(key)),
                serde_json::to_vec(descriptor).unwrap(),
            )
            .await;
    }

    async fn descriptor_of(&self, c: &StoredCheckpoint) -> Value {
        let bytes = self
            .objects
            .get_bytes(&format!("{}/checkpoint.json", base(&c.key)))
            .await;
        serde_json::from_slice(&bytes).unwrap()
    }
}

fn base(key: &str) -> String {
    format!("jobs/{JOB}/checkpoints/{key}")
}

fn key(step: u64, nonce: &str) -> String {
    format!("{step:020}-g1-{nonce}")
}

/// A descriptor for `files` under `key` whose own hash is consistent.
fn consistent(key: &str, step: u64, files: Vec<FileDigest>) -> (Value, Sha256Digest) {
    let digest = CheckpointDigest::combine(files);
    let descriptor = json!({
        "job_id": JOB, "key": key, "epoch": 0, "step": step,
        "hash": digest.hash, "files": digest.files,
    });
    (descriptor, digest.hash)
}

#[tokio::test]
async fn a_restore_survives_garbage_decoys_and_a_five_terabyte_declaration_and_reads_no_more_than_declared()
 {
    let f = Fixture::new(3);
    let genuine = f.genuine(10).await;
    let descriptor = f.descriptor_of(&genuine).await;

    // An empty descriptor, sorting before the genuine one.
    f.plant(&key(10, "0000000000000001"), &json!({})).await;
    // The genuine descriptor copied elsewhere, its key field still naming
    // the genuine checkpoint.
    f.plant(&key(10, "0000000000000002"), &descriptor).await;
    // The attested (step, hash), other files.
    let mut other_files = descriptor.clone();
    other_files["key"] = json!(key(10, "0000000000000003"));
    other_files["files"] =
        json!([{"path": "evil.bin", "size": 4, "sha256": Sha256Digest([1; 32])}]);
    f.plant(&key(10, "0000000000000003"), &other_files).await;
    // A consistent copy of the attested list, tried first, whose weights
    // are a megabyte bigger in the store than declared.
    let copy = key(10, "0000000000000000");
    let mut copied = descriptor.clone();
    copied["key"] = json!(copy);
    f.plant(&copy, &copied).await;
    for file in &genuine.files {
        let bytes = f
            .objects
            .get_bytes(&format!("{}/files/{}", base(&genuine.key), file.path))
            .await;
        let bytes = if file.path == "shards/weights.bin" {
            [bytes, vec![0u8; 1 << 20]].concat()
        } else {
            bytes
        };
        f.objects
            .put(&format!("{}/files/{}", base(&copy), file.path), bytes)
            .await;
    }
    // Attested by the node at step 20: one file of 5 TB (a megabyte stored).
    let huge_key = key(20, "00000000000000ff");
    let (huge, huge_hash) = consistent(
        &huge_key,
        20,
        vec![FileDigest {
            path: "weights.bin".into(),
            size: 5_000_000_000_000,
            sha256: Sha256Digest([2; 32]),
        }],
    );
    f.plant(&huge_key, &huge).await;
    f.objects
        .put(
            &format!("{}/files/weights.bin", base(&huge_key)),
            vec![0u8; 1 << 20],
        )
        .await;

    let attested = [
        ExpectedCheckpoint {
            step: 20,
            hash: huge_hash,
        },
        ExpectedCheckpoint {
            step: 10,
            hash: genuine.hash,
        },
    ];
    let restored = f
        .pipeline
        .store
        .restore(JOB, &attested, LIMITS, &f.restore_root)
        .await
        .unwrap();

    assert_eq!(restored.checkpoint, genuine);
    assert_eq!(
        hash_checkpoint(&restored.dir, 1).unwrap().hash,
        genuine.hash
    );
    let reasons: Vec<(u64, &str)> = restored
        .skipped
        .iter()
        .map(|s| (s.step, s.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].0 == 20 && reasons[0].1.contains("over the limit"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].0 == 10 && reasons[1].1.starts_with("corrupt"),
        "{reasons:?}"
    );
    // Nothing of the 5 TB file, nothing of the oversized copy's weights,
    // nothing of the other decoys' files.
    assert_eq!(
        f.objects
            .bytes_read_under(&format!("{}/files", base(&huge_key))),
        0
    );
    assert_eq!(
        f.objects
            .bytes_read(&format!("{}/files/shards/weights.bin", base(&copy))),
        0
    );
    for decoy in ["0000000000000001", "0000000000000002", "0000000000000003"] {
        assert_eq!(
            f.objects
                .bytes_read_under(&format!("{}/files", base(&key(10, decoy)))),
            0,
            "{decoy}"
        );
    }
    // Of the genuine one, exactly its bytes.
    assert_eq!(
        f.objects
            .bytes_read_under(&format!("{}/files", base(&genuine.key))),
        genuine.total_bytes()
    );
    // The copy failed on its first bad file: never more than declared.
    assert!(
        f.objects
            .bytes_read_under(&format!("{}/files", base(&copy)))
            <= genuine.total_bytes()
    );
}

#[tokio::test]
async fn a_restore_never_reads_past_a_files_declared_size_even_when_the_store_hides_its_size() {
    for hide_sizes in [false, true] {
        let f = Fixture::new(3);
        f.objects
            .hide_sizes
            .store(hide_sizes, std::sync::atomic::Ordering::Relaxed);
        let genuine = f.genuine(10).await;
        let weights = format!("{}/files/shards/weights.bin", base(&genuine.key));
        let mut tampered = f.objects.get_bytes(&weights).await;
        tampered.extend(std::iter::repeat_n(b'x', 64 << 20));
        f.objects.put(&weights, tampered).await;
        let err = f
            .pipeline
            .store
            .restore(
                JOB,
                &[ExpectedCheckpoint {
                    step: 10,
                    hash: genuine.hash,
                }],
                LIMITS,
                &f.restore_root,
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("corrupt"), "{err}");
        let declared = genuine
            .files
            .iter()
            .find(|f| f.path == "shards/weights.bin")
            .unwrap()
            .size;
        if hide_sizes {
            // Cut off at the declared size, a chunk at most past it.
            assert!(f.objects.bytes_read(&weights) <= declared + CHUNK as u64);
        } else {
            assert_eq!(f.objects.bytes_read(&weights), 0);
        }
    }
}

#[tokio::test]
async fn a_restore_refuses_a_checkpoint_over_the_specs_max_size_before_fetching_it() {
    let f = Fixture::new(3);
    let genuine = f.genuine(10).await;
    let small = Limits {
        max_entries: 100_000,
        max_bytes: genuine.total_bytes() - 1,
    };
    let err = f
        .pipeline
        .store
        .restore_latest(JOB, small, &f.restore_root)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("over the limit"), "{err}");
    assert_eq!(
        f.objects
            .bytes_read_under(&format!("{}/files", base(&genuine.key))),
        0
    );
}

#[tokio::test]
async fn listing_skips_and_reports_garbage_descriptors_and_prune_still_works() {
    let f = Fixture::new(1);
    let ten = f.genuine(10).await;
    let twenty = f.genuine(20).await;
    let huge = key(15, "0000000000000009");
    f.objects
        .put(
            &format!("{}/checkpoint.json", base(&huge)),
            vec![b' '; MAX_DESCRIPTOR_BYTES as usize + 1],
        )
        .await;
    let garbage = [
        (key(10, "0000000000000001"), json!({})),
        (key(11, "0000000000000001"), json!("not a descriptor")),
        // Its key field points at another checkpoint.
        (key(12, "0000000000000001"), f.descriptor_of(&ten).await),
        // A key without a step, and a step its key does not carry.
        ("not-a-key".to_string(), {
            let mut d = f.descriptor_of(&ten).await;
            d["key"] = json!("not-a-key");
            d
        }),
        (key(13, "0000000000000001"), {
            let mut d = f.descriptor_of(&ten).await;
            d["key"] = json!(key(13, "0000000000000001"));
            d
        }),
        // Another job's descriptor.
        (key(14, "0000000000000001"), {
            let mut d = f.descriptor_of(&ten).await;
            d["key"] = json!(key(14, "0000000000000001"));
            d["job_id"] = json!("job-8");
            d["step"] = json!(14);
            d
        }),
    ];
    for (k, d) in &garbage {
        f.plant(k, d).await;
    }
    let (escaping, _) = consistent(
        &key(16, "0000000000000001"),
        16,
        vec![FileDigest {
            path: "../../../etc/passwd".into(),
            size: 1,
            sha256: Sha256Digest([3; 32]),
        }],
    );
    f.plant(&key(16, "0000000000000001"), &escaping).await;

    let listing = f.pipeline.store.list(JOB).await.unwrap();
    assert_eq!(listing.checkpoints, [ten.clone(), twenty.clone()]);
    assert_eq!(
        listing.skipped.len(),
        garbage.len() + 2,
        "{:#?}",
        listing.skipped
    );
    // The oversized descriptor was refused without reading it.
    assert_eq!(
        f.objects
            .bytes_read(&format!("{}/checkpoint.json", base(&huge))),
        0
    );

    // Step 20 attested, keep 1: step 10 goes, the garbage is not touched.
    let removed = f.pipeline.store.prune(JOB, 20, None).await.unwrap();
    assert_eq!(removed, std::slice::from_ref(&ten));
    assert!(
        !f.objects
            .exists(&format!("{}/checkpoint.json", base(&ten.key)))
            .await
    );
    let after = f.pipeline.store.list(JOB).await.unwrap();
    assert_eq!(after.checkpoints, std::slice::from_ref(&twenty));
    assert_eq!(after.skipped.len(), listing.skipped.len());
    let restored = f
        .pipeline
        .store
        .restore_latest(JOB, LIMITS, &f.restore_root)
        .await
        .unwrap();
    assert_eq!(restored.checkpoint, twenty);
}
