//! The checkpoint pipeline against a real local object store, no containers:
//! pick up, hash, store, keep K, restore with verification and fallback.

use mcjs_runtime::checkpoint::{Sha256Digest, hash_checkpoint};
use mcjs_runtime::confined::Limits;
use mcjs_runtime::store::{CheckpointPipeline, CheckpointStore, ExpectedCheckpoint, StoreError};
use std::path::Path;

fn write_checkpoint(root: &Path, step: u64, payload: &[u8]) {
    let dir = root.join(format!("step-{step:06}"));
    std::fs::create_dir_all(dir.join("shards")).unwrap();
    std::fs::write(dir.join("shards/weights.bin"), payload).unwrap();
    std::fs::write(dir.join("optimizer.bin"), [payload, b"-opt"].concat()).unwrap();
    std::fs::write(
        dir.join("mcjs-manifest.json"),
        format!(
            r#"{{"format":"mcjs-checkpoint/1","epoch":{},"step":{step}}}"#,
            step / 10
        ),
    )
    .unwrap();
}

struct Fixture {
    _t: tempfile::TempDir,
    local: std::path::PathBuf,
    store_root: std::path::PathBuf,
    restore_root: std::path::PathBuf,
    pipeline: CheckpointPipeline,
}

fn fixture(keep: usize) -> Fixture {
    let t = tempfile::tempdir().unwrap();
    let local = t.path().join("ckpt");
    let store_root = t.path().join("store");
    let restore_root = t.path().join("restore");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::create_dir_all(&restore_root).unwrap();
    let pipeline = CheckpointPipeline {
        generation: 1,
        store: CheckpointStore::local(&store_root, keep).unwrap(),
        job_id: "job-7".into(),
        local_root: local.clone(),
        hash_threads: 2,
        limits: mcjs_runtime::confined::Limits::UNLIMITED,
        every_steps: None,
    };
    Fixture {
        _t: t,
        local,
        store_root,
        restore_root,
        pipeline,
    }
}

#[tokio::test]
async fn complete_checkpoints_are_stored_and_removed_locally_half_written_ones_are_left() {
    let f = fixture(3);
    write_checkpoint(&f.local, 10, b"ten");
    let expected = hash_checkpoint(&f.local.join("step-000010"), 1).unwrap();
    std::fs::create_dir_all(f.local.join("step-000020")).unwrap();
    std::fs::write(f.local.join("step-000020/weights.bin"), b"half").unwrap();

    let stored = f.pipeline.collect().await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].step, 10);
    assert_eq!(stored[0].epoch, 1);
    assert_eq!(stored[0].hash, expected.hash);
    assert!(!f.local.join("step-000010").exists());
    assert!(f.local.join("step-000020").exists());
    assert!(f.pipeline.collect().await.unwrap().is_empty());
}

#[tokio::test]
async fn with_fixed_steps_a_checkpoint_off_them_is_removed_and_never_stored() {
    let mut f = fixture(5);
    f.pipeline.every_steps = Some(20);
    // 20 and 40 are on the spec's steps; 30 is what a job writes on SIGTERM.
    for step in [20, 30, 40] {
        write_checkpoint(&f.local, step, format!("payload {step}").as_bytes());
    }
    let stored = f.pipeline.collect().await.unwrap();
    let steps: Vec<u64> = stored.iter().map(|c| c.step).collect();
    assert_eq!(steps, [20, 40]);
    assert!(
        std::fs::read_dir(&f.local).unwrap().next().is_none(),
        "the off-grid checkpoint is removed from the node too"
    );
    let listed = f.pipeline.store.list("job-7").await.unwrap();
    let listed: Vec<u64> = listed.checkpoints.iter().map(|c| c.step).collect();
    assert!(!listed.contains(&30), "{listed:?}");
    assert!(f.pipeline.on_grid(0) && f.pipeline.on_grid(60) && !f.pipeline.on_grid(61));
}

#[tokio::test]
async fn only_the_last_k_attested_checkpoints_are_kept() {
    let f = fixture(2);
    for step in [10, 20, 30, 40, 50] {
        write_checkpoint(&f.local, step, format!("payload {step}").as_bytes());
        f.pipeline.collect().await.unwrap();
    }
    // Storing deletes nothing: the chain has not attested any of them yet.
    assert_eq!(steps(&f).await, [10, 20, 30, 40, 50]);
    // Step 40 attested: of 10..=40 the newest two stay, and 50, not yet
    // attested, stays too.
    let removed = f.pipeline.store.prune("job-7", 40, None).await.unwrap();
    assert_eq!(removed.iter().map(|c| c.step).collect::<Vec<_>>(), [10, 20]);
    assert_eq!(steps(&f).await, [30, 40, 50]);
    // A node that cannot attest (partitioned) never loses the attested one.
    let removed = f.pipeline.store.prune("job-7", 30, None).await.unwrap();
    assert!(removed.is_empty());
    let remaining = steps(&f).await;
    assert_eq!(remaining, [30, 40, 50]);
    // Deleted ones leave no files behind.
    let files = walk(&f.store_root);
    assert!(
        files.iter().all(|p| !p.contains("00000000000000000010")),
        "{files:?}"
    );
}

/// A verified job's restore floor (where a lie found in its latest
/// interval sends it back) outlives any number of newer attested
/// checkpoints: an honest prune keeps it, and counts it in no keep.
#[tokio::test]
async fn a_prune_keeps_the_restore_floor_however_old() {
    let f = fixture(1);
    for step in [10, 20, 30, 40, 50] {
        write_checkpoint(&f.local, step, format!("payload {step}").as_bytes());
        f.pipeline.collect().await.unwrap();
    }
    let listed = f.pipeline.store.list("job-7").await.unwrap().checkpoints;
    let floor = listed.iter().find(|c| c.step == 10).unwrap().hash;
    let removed = f
        .pipeline
        .store
        .prune("job-7", 40, Some(&floor))
        .await
        .unwrap();
    assert_eq!(removed.iter().map(|c| c.step).collect::<Vec<_>>(), [20, 30]);
    let remaining = steps(&f).await;
    assert_eq!(remaining, [10, 40, 50]);
    // Once the floor moves up (a check confirmed 40), the old one goes.
    let floor = listed.iter().find(|c| c.step == 40).unwrap().hash;
    let removed = f
        .pipeline
        .store
        .prune("job-7", 50, Some(&floor))
        .await
        .unwrap();
    assert_eq!(removed.iter().map(|c| c.step).collect::<Vec<_>>(), [10]);
}

/// The steps of job-7's stored checkpoints, oldest first.
async fn steps(f: &Fixture) -> Vec<u64> {
    f.pipeline
        .store
        .list("job-7")
        .await
        .unwrap()
        .checkpoints
        .iter()
        .map(|c| c.step)
        .collect()
}

fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

#[tokio::test]
async fn restore_verifies_and_gives_back_the_exact_files() {
    let f = fixture(3);
    write_checkpoint(&f.local, 10, b"ten");
    let original = hash_checkpoint(&f.local.join("step-000010"), 1).unwrap();
    f.pipeline.collect().await.unwrap();
    let restored = f
        .pipeline
        .store
        .restore_latest("job-7", Limits::UNLIMITED, &f.restore_root)
        .await
        .unwrap();
    assert_eq!(restored.checkpoint.step, 10);
    assert!(restored.skipped.is_empty());
    assert_eq!(hash_checkpoint(&restored.dir, 1).unwrap(), original);
    assert_eq!(
        std::fs::read(restored.dir.join("shards/weights.bin")).unwrap(),
        b"ten"
    );
}

#[tokio::test]
async fn a_corrupt_checkpoint_falls_back_to_the_previous_one() {
    let f = fixture(3);
    for step in [10, 20] {
        write_checkpoint(&f.local, step, format!("payload {step}").as_bytes());
        f.pipeline.collect().await.unwrap();
    }
    let newest = f
        .pipeline
        .store
        .list("job-7")
        .await
        .unwrap()
        .checkpoints
        .pop()
        .unwrap();
    let object = walk(&f.store_root)
        .into_iter()
        .find(|p| p.contains(&newest.key) && p.ends_with("weights.bin"))
        .unwrap();
    let mut bytes = std::fs::read(&object).unwrap();
    bytes[0] ^= 0x01;
    std::fs::write(&object, bytes).unwrap();

    let restored = f
        .pipeline
        .store
        .restore_latest("job-7", Limits::UNLIMITED, &f.restore_root)
        .await
        .unwrap();
    assert_eq!(restored.checkpoint.step, 10);
    assert_eq!(restored.skipped.len(), 1);
    assert_eq!(restored.skipped[0].step, 20);
    assert!(
        restored.skipped[0].reason.starts_with("corrupt"),
        "{:?}",
        restored.skipped
    );
    assert_eq!(
        std::fs::read(restored.dir.join("shards/weights.bin")).unwrap(),
        b"payload 10"
    );
    // Nothing of the corrupt download is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&f.restore_root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}

#[tokio::test]
async fn a_missing_file_or_an_unknown_hash_falls_back_too_and_all_failing_is_an_error() {
    let f = fixture(3);
    for step in [10, 20] {
        write_checkpoint(&f.local, step, format!("payload {step}").as_bytes());
        f.pipeline.collect().await.unwrap();
    }
    let all = f.pipeline.store.list("job-7").await.unwrap().checkpoints;
    let object = walk(&f.store_root)
        .into_iter()
        .find(|p| p.contains(&all[1].key) && p.ends_with("optimizer.bin"))
        .unwrap();
    std::fs::remove_file(object).unwrap();
    let unknown = ExpectedCheckpoint {
        step: 30,
        hash: Sha256Digest([7; 32]),
    };
    let expected = [
        unknown,
        ExpectedCheckpoint {
            step: 20,
            hash: all[1].hash,
        },
        ExpectedCheckpoint {
            step: 10,
            hash: all[0].hash,
        },
    ];
    let restored = f
        .pipeline
        .store
        .restore("job-7", &expected, Limits::UNLIMITED, &f.restore_root)
        .await
        .unwrap();
    assert_eq!(restored.checkpoint.step, 10);
    assert_eq!(restored.skipped.len(), 2);
    assert!(
        restored.skipped[0]
            .reason
            .contains("not in the checkpoint store")
    );
    assert!(restored.skipped[1].reason.contains("download failed"));

    let err = f
        .pipeline
        .store
        .restore("job-7", &expected[..2], Limits::UNLIMITED, &f.restore_root)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NoUsableCheckpoint { .. }));
    assert!(err.to_string().contains("no usable checkpoint"), "{err}");
}

#[tokio::test]
async fn a_bad_job_id_is_refused() {
    let f = fixture(1);
    let err = f.pipeline.store.list("../other").await.unwrap_err();
    assert!(err.to_string().contains("invalid job id"), "{err}");
}
