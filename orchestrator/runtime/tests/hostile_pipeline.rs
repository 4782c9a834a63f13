//! The checkpoint pipeline against what a hostile job can write into its
//! checkpoint directory, no containers: symlinks (also swapped in while the
//! agent reads), special files, oversized manifests and checkpoints. In every
//! case nothing outside the directory reaches the store, the pipeline returns
//! (no hang, no panic) and the error is the job's fault.

use mcjs_runtime::confined::Limits;
use mcjs_runtime::store::{CheckpointPipeline, CheckpointStore, StoreError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Bytes that exist only in a host file outside every mount.
const CANARY: &[u8] = b"mcjs-canary-4f1d2c9e-host-secret";

struct Node {
    t: tempfile::TempDir,
    ckpt: PathBuf,
    store_root: PathBuf,
    canary: PathBuf,
}

impl Node {
    fn new() -> Self {
        let t = tempfile::tempdir().unwrap();
        let ckpt = t.path().join("job/checkpoints");
        let store_root = t.path().join("store");
        std::fs::create_dir_all(&ckpt).unwrap();
        let canary = t.path().join("wallet.json");
        std::fs::write(&canary, CANARY).unwrap();
        Self {
            ckpt,
            store_root,
            canary,
            t,
        }
    }

    fn pipeline(&self, limits: Limits) -> CheckpointPipeline {
        CheckpointPipeline {
            generation: 1,
            store: CheckpointStore::local(&self.store_root, 3).unwrap(),
            job_id: "hostile".into(),
            local_root: self.ckpt.clone(),
            hash_threads: 2,
            limits,
            every_steps: None,
        }
    }

    fn checkpoint(&self, name: &str, step: u64) -> PathBuf {
        let dir = self.ckpt.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("state.bin"), vec![1u8; 4096]).unwrap();
        std::fs::write(
            dir.join("mcjs-manifest.json"),
            format!(r#"{{"format":"mcjs-checkpoint/1","epoch":0,"step":{step}}}"#),
        )
        .unwrap();
        dir
    }

    /// Whether any stored object contains the canary.
    fn store_holds_canary(&self) -> bool {
        fn walk(dir: &Path) -> bool {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return false;
            };
            entries.flatten().any(|e| {
                let p = e.path();
                if p.is_dir() {
                    walk(&p)
                } else {
                    std::fs::read(&p).is_ok_and(|b| b.windows(CANARY.len()).any(|w| w == CANARY))
                }
            })
        }
        walk(&self.store_root)
    }
}

async fn collect_refused(node: &Node, limits: Limits) -> StoreError {
    let err = tokio::time::timeout(Duration::from_secs(20), node.pipeline(limits).collect())
        .await
        .expect("collection never hangs")
        .expect_err("the checkpoint is refused");
    assert!(err.is_job_fault(), "not the job's fault: {err}");
    err
}

#[tokio::test]
async fn a_symlink_to_a_host_file_in_a_checkpoint_is_refused() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 1);
    std::os::unix::fs::symlink(&node.canary, dir.join("stolen.bin")).unwrap();
    let err = collect_refused(&node, Limits::UNLIMITED).await;
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(!node.store_holds_canary());
}

#[tokio::test]
async fn a_symlinked_directory_inside_a_checkpoint_is_refused() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 1);
    std::os::unix::fs::symlink(node.t.path(), dir.join("host")).unwrap();
    collect_refused(&node, Limits::UNLIMITED).await;
    assert!(!node.store_holds_canary());
}

#[tokio::test]
async fn a_manifest_that_is_a_fifo_does_not_hang_the_pipeline() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 1);
    std::fs::remove_file(dir.join("mcjs-manifest.json")).unwrap();
    rustix_mkfifo(&dir.join("mcjs-manifest.json"));
    let err = collect_refused(&node, Limits::UNLIMITED).await;
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[tokio::test]
async fn a_manifest_that_is_a_symlink_to_dev_zero_is_refused() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 1);
    std::fs::remove_file(dir.join("mcjs-manifest.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("mcjs-manifest.json")).unwrap();
    let err = collect_refused(&node, Limits::UNLIMITED).await;
    assert!(err.to_string().contains("symlink"), "{err}");
}

#[tokio::test]
async fn a_huge_manifest_is_refused_without_reading_it_all() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 1);
    let f = std::fs::File::create(dir.join("mcjs-manifest.json")).unwrap();
    f.set_len(8 << 30).unwrap(); // sparse: 8 GiB of zeros
    let err = collect_refused(&node, Limits::UNLIMITED).await;
    assert!(err.to_string().contains("larger than the limit"), "{err}");
}

#[tokio::test]
async fn a_checkpoint_over_its_declared_size_or_file_count_is_refused() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 1);
    let too_small = Limits {
        max_entries: 1000,
        max_bytes: 4000,
    };
    let err = collect_refused(&node, too_small).await;
    assert!(err.to_string().contains("more than 4000 bytes"), "{err}");
    for i in 0..50 {
        std::fs::write(dir.join(format!("f{i}")), b"x").unwrap();
    }
    let few = Limits {
        max_entries: 20,
        max_bytes: u64::MAX,
    };
    let err = collect_refused(&node, few).await;
    assert!(err.to_string().contains("more than 20 files"), "{err}");
    // Nothing half-uploaded stays visible.
    assert!(
        node.pipeline(Limits::UNLIMITED)
            .store
            .list("hostile")
            .await
            .unwrap()
            .checkpoints
            .is_empty()
    );
}

#[tokio::test]
async fn a_sparse_file_is_charged_for_the_bytes_uploaded() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 1);
    std::fs::File::create(dir.join("hole.bin"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let limits = Limits {
        max_entries: 100,
        max_bytes: 1 << 20,
    };
    let err = collect_refused(&node, limits).await;
    assert!(err.to_string().contains("bytes"), "{err}");
}

#[tokio::test]
async fn an_honest_checkpoint_is_stored_byte_for_byte_and_attested_as_stored() {
    let node = Node::new();
    let dir = node.checkpoint("c1", 7);
    let expected = mcjs_runtime::checkpoint::hash_checkpoint(&dir, 1).unwrap();
    let stored = node.pipeline(Limits::UNLIMITED).collect().await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].hash, expected.hash);
    let restored = tempfile::tempdir().unwrap();
    let r = node
        .pipeline(Limits::UNLIMITED)
        .store
        .restore_latest("hostile", Limits::UNLIMITED, restored.path())
        .await
        .unwrap();
    assert_eq!(
        mcjs_runtime::checkpoint::hash_checkpoint(&r.dir, 1)
            .unwrap()
            .hash,
        expected.hash
    );
}

/// The attack of the issue: a job keeps swapping a checkpoint file for a
/// symlink to a host file while the agent collects. Before confined reads,
/// the host file reached the store in about a quarter of the collections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_a_file_for_a_symlink_while_collecting_never_stores_the_host_file() {
    let node = Node::new();
    let stop = Arc::new(AtomicBool::new(false));
    let mut stored = 0;
    let mut refused = 0;
    for round in 0..200u64 {
        let dir = node.checkpoint(&format!("c{round}"), round);
        let target = dir.join("state.bin");
        let (canary, stop2) = (node.canary.clone(), Arc::clone(&stop));
        stop.store(false, Ordering::Relaxed);
        let swapper = std::thread::spawn(move || {
            let (real, link) = (target.with_extension("real"), target.with_extension("link"));
            let _ = std::fs::copy(&target, &real);
            let _ = std::os::unix::fs::symlink(&canary, &link);
            while !stop2.load(Ordering::Relaxed) {
                // rename(2) swaps atomically: the path is always one or the other.
                let _ = std::fs::hard_link(&link, target.with_extension("tmp"))
                    .or_else(|_| std::os::unix::fs::symlink(&canary, target.with_extension("tmp")));
                let _ = std::fs::rename(target.with_extension("tmp"), &target);
                let _ = std::fs::hard_link(&real, target.with_extension("tmp2"));
                let _ = std::fs::rename(target.with_extension("tmp2"), &target);
            }
        });
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            node.pipeline(Limits::UNLIMITED).collect(),
        )
        .await
        .expect("collection never hangs");
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        match result {
            Ok(s) => stored += s.len(),
            Err(e) => {
                assert!(e.is_job_fault(), "{e}");
                refused += 1;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(!node.store_holds_canary(), "a host file reached the store");
    // Both outcomes happen; neither lets the host file through.
    assert!(stored + refused > 0, "stored {stored}, refused {refused}");
}

fn rustix_mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}
