//! The runtime against the real Docker engine with the reference trainer's
//! image. These tests need a running engine and fail without one.

use bollard::query_parameters::{InspectContainerOptions, ListContainersOptionsBuilder};
use mcjs_runtime::contract::ExitMeaning;
use mcjs_runtime::deadline::CheckpointDeadline;
use mcjs_runtime::docker::{DockerEngine, JOB_LABEL};
use mcjs_runtime::engine::{ContainerEngine, ContainerId, ContainerSpec, JobMounts, JobSignal};
use mcjs_runtime::launch::{CheckpointMonitor, LaunchError, launch};
use mcjs_runtime::staging::{DataCache, InputToStage, StagingError, StagingPolicy};
use mcjs_runtime::store::{CheckpointPipeline, CheckpointStore};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the trainer image once per test binary, with the documented script.
fn trainer_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let out =
            std::process::Command::new(workspace_root().join("examples/trainer/build-image.sh"))
                .output()
                .expect("run examples/trainer/build-image.sh");
        assert!(
            out.status.success(),
            "building the trainer image failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(
            id.starts_with("sha256:") && id.len() == 71,
            "image id {id:?}"
        );
        id
    })
}

/// A training set the trainer reads from its staged data directory.
fn training_csv(rows: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let mut out = String::new();
    for _ in 0..rows {
        let x: Vec<f32> = (0..6).map(|_| next()).collect();
        let label = u8::from(x[0] * x[1] + 0.3 * x[2] > 0.0);
        for v in &x {
            out.push_str(&format!("{v},"));
        }
        out.push_str(&format!("{label}\n"));
    }
    out
}

struct Job {
    t: tempfile::TempDir,
    id: String,
    input: InputToStage,
    cache: DataCache,
}

impl Job {
    fn new(id: &str) -> Self {
        let t = tempfile::tempdir().unwrap();
        let csv = training_csv(512);
        let src = t.path().join("source.csv");
        std::fs::write(&src, &csv).unwrap();
        let input = InputToStage {
            name: "train.csv".into(),
            uri: url::Url::from_file_path(&src).unwrap().to_string(),
            sha256: hex::encode(Sha256::digest(csv.as_bytes())),
            max_bytes: None,
        };
        let cache = DataCache::with_policy(
            t.path().join("cache"),
            StagingPolicy {
                data_roots: vec![t.path().to_path_buf()],
                ..StagingPolicy::default()
            },
        );
        Self {
            id: format!("{id}-{}", std::process::id()),
            t,
            input,
            cache,
        }
    }

    /// The container of one run (`run` names its directories).
    fn spec(&self, run: &str, restore: Option<PathBuf>, extra: &[&str]) -> ContainerSpec {
        let dir = self.t.path().join(run);
        let mut spec = ContainerSpec::new(
            self.id.clone(),
            trainer_image(),
            JobMounts {
                data: dir.join("data"),
                checkpoints: dir.join("checkpoints"),
                output: dir.join("output"),
                restore,
                metrics: None,
            },
        );
        spec.args = [
            "train",
            "--data",
            "train.csv",
            "--epochs",
            "6",
            "--batch-size",
            "32",
        ]
        .iter()
        .chain(extra)
        .map(ToString::to_string)
        .collect();
        spec.resources.cpus = 1.0;
        spec.resources.memory_mib = 256;
        spec.checkpoint_interval = Duration::from_secs(3600);
        spec
    }

    fn store(&self) -> CheckpointStore {
        CheckpointStore::local(&self.t.path().join("store"), 3).unwrap()
    }

    fn pipeline(&self, run: &str) -> CheckpointPipeline {
        CheckpointPipeline {
            generation: 1,
            store: self.store(),
            job_id: self.id.clone(),
            local_root: self.t.path().join(run).join("checkpoints"),
            hash_threads: 2,
            limits: mcjs_runtime::confined::Limits::UNLIMITED,
            every_steps: None,
        }
    }

    fn model(&self, run: &str) -> Option<Vec<u8>> {
        std::fs::read(self.t.path().join(run).join("output/model.bin")).ok()
    }
}

async fn engine() -> DockerEngine {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    DockerEngine::connect()
        .await
        .expect("these tests need a running Docker engine")
}

async fn finish(engine: &DockerEngine, id: &ContainerId) -> mcjs_runtime::engine::ExitReport {
    let report = tokio::time::timeout(Duration::from_secs(120), engine.wait(id))
        .await
        .expect("container did not exit within 120 s")
        .unwrap();
    engine.remove(id).await.unwrap();
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_killed_mid_run_resumes_from_the_store_to_the_same_model_bytes() {
    let engine = engine().await;
    let job = Job::new("resume");

    // Reference: the same job, never interrupted.
    let (id, _) = launch(
        &engine,
        &job.cache,
        std::slice::from_ref(&job.input),
        &job.spec("ref", None, &[]),
    )
    .await
    .unwrap();
    let report = finish(&engine, &id).await;
    assert_eq!(report.code, 0, "{report}");
    let reference = job.model("ref").unwrap();

    // The run that gets interrupted: ~40 ms a step, 96 steps.
    let (id, staged) = launch(
        &engine,
        &job.cache,
        std::slice::from_ref(&job.input),
        &job.spec("first", None, &["--step-sleep-ms", "40"]),
    )
    .await
    .unwrap();
    assert!(
        staged[0].cached,
        "the reference run already staged the data"
    );

    let info = engine
        .docker()
        .inspect_container(&id.0, None::<InspectContainerOptions>)
        .await
        .unwrap();
    let host = info.host_config.unwrap();
    eprintln!(
        "security settings as the engine reports them: {}",
        serde_json::json!({
            "Config.User": info.config.as_ref().and_then(|c| c.user.clone()),
            "HostConfig.ReadonlyRootfs": host.readonly_rootfs,
            "HostConfig.CapDrop": host.cap_drop,
            "HostConfig.SecurityOpt": host.security_opt,
            "HostConfig.NetworkMode": host.network_mode,
            "HostConfig.NanoCpus": host.nano_cpus,
            "HostConfig.Memory": host.memory,
            "HostConfig.MemorySwap": host.memory_swap,
            "HostConfig.PidsLimit": host.pids_limit,
            "HostConfig.Tmpfs": host.tmpfs,
            "HostConfig.Mounts": host.mounts.as_ref().map(|ms| ms
                .iter()
                .map(|m| format!("{} ro={}", m.target.clone().unwrap_or_default(), m.read_only.unwrap_or(false)))
                .collect::<Vec<_>>()),
        })
    );
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(
        host.security_opt,
        Some(vec!["no-new-privileges".to_string()])
    );
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.nano_cpus, Some(1_000_000_000));
    assert_eq!(host.memory, Some(256 * 1024 * 1024));
    assert_eq!(info.config.unwrap().user.as_deref(), Some("65532:65532"));
    let mounts = host.mounts.unwrap();
    let data = mounts
        .iter()
        .find(|m| m.target.as_deref() == Some("/mcjs/data"))
        .unwrap();
    assert_eq!(data.read_only, Some(true));

    tokio::time::sleep(Duration::from_millis(800)).await;
    engine.signal(&id, JobSignal::Checkpoint).await.unwrap();
    let mut monitor = CheckpointMonitor::new(
        job.pipeline("first"),
        CheckpointDeadline::with_default_grace(Duration::from_secs(3600)),
        SystemTime::now(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let stored = loop {
        let report = monitor.poll(SystemTime::now()).await.unwrap();
        if let Some(c) = report.stored.last() {
            break c.clone();
        }
        assert!(Instant::now() < deadline, "no checkpoint after SIGUSR1");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        stored.step > 0 && stored.step < 96,
        "checkpoint at step {}",
        stored.step
    );
    eprintln!(
        "checkpoint: step {} epoch {} {} bytes in {} files, hash {}",
        stored.step,
        stored.epoch,
        stored.total_bytes(),
        stored.files.len(),
        stored.hash
    );

    // Let it run past the checkpoint, then kill it outright: work after the
    // checkpoint is lost and must be redone identically.
    tokio::time::sleep(Duration::from_millis(300)).await;
    engine.signal(&id, JobSignal::Kill).await.unwrap();
    let report = finish(&engine, &id).await;
    assert_eq!(report.code, 137, "{report}");
    assert_eq!(report.meaning, ExitMeaning::Crashed);
    assert!(
        job.model("first").is_none(),
        "the first run finished before it was killed"
    );

    // A new container on a "new node": restore from the store, verify, resume.
    let restored = job
        .store()
        .restore_latest(
            &job.id,
            mcjs_runtime::confined::Limits::UNLIMITED,
            &job.t.path().join("restore"),
        )
        .await
        .unwrap();
    assert_eq!(restored.checkpoint.hash, stored.hash);
    let (id, _) = launch(
        &engine,
        &job.cache,
        std::slice::from_ref(&job.input),
        &job.spec("second", Some(restored.dir.clone()), &[]),
    )
    .await
    .unwrap();
    let report = finish(&engine, &id).await;
    assert_eq!(report.code, 0, "{report}");
    assert!(
        report
            .last_log_lines
            .iter()
            .any(|l| l.contains(&format!("step {}", stored.step)) && l.contains("resumed from")),
        "{report}"
    );
    assert!(
        job.model("second").unwrap() == reference,
        "resumed model differs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_hash_mismatch_is_refused_before_any_container_starts() {
    let engine = engine().await;
    let job = Job::new("tampered");
    let mut input = job.input.clone();
    input.sha256 = hex::encode(Sha256::digest(b"what the spec promised"));
    let err = launch(&engine, &job.cache, &[input], &job.spec("run", None, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            LaunchError::Staging {
                source: StagingError::Refused { .. },
                ..
            }
        ),
        "{err}"
    );
    // A file:// input: the host file's real hash is not told.
    assert!(!err.to_string().contains(&job.input.sha256), "{err}");
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&std::collections::HashMap::from([(
            "label",
            vec![format!("{JOB_LABEL}={}", job.id)],
        )]))
        .build();
    let containers = engine
        .docker()
        .list_containers(Some(options))
        .await
        .unwrap();
    assert!(
        containers.is_empty(),
        "a container was created: {containers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_never_checkpoints_is_flagged_overdue() {
    let engine = engine().await;
    let job = Job::new("silent");
    // Its first step never ends within the test: a hung job.
    let mut spec = job.spec("run", None, &["--step-sleep-ms", "600000"]);
    spec.checkpoint_interval = Duration::from_secs(1);
    let (id, _) = launch(&engine, &job.cache, std::slice::from_ref(&job.input), &spec)
        .await
        .unwrap();
    let policy = CheckpointDeadline {
        interval: Duration::from_secs(1),
        grace: Duration::from_millis(500),
    };
    let started = SystemTime::now();
    let mut monitor = CheckpointMonitor::new(job.pipeline("run"), policy, started);
    engine.signal(&id, JobSignal::Checkpoint).await.unwrap();
    let first = monitor.poll(SystemTime::now()).await.unwrap();
    assert!(!first.status.is_overdue(), "{:?}", first.status);
    let flagged = loop {
        let r = monitor.poll(SystemTime::now()).await.unwrap();
        assert!(r.stored.is_empty());
        if r.status.is_overdue() {
            break SystemTime::now();
        }
        assert!(
            started.elapsed().unwrap() < Duration::from_secs(10),
            "never flagged"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(flagged.duration_since(started).unwrap() >= Duration::from_millis(1500));
    assert!(engine.is_running(&id).await.unwrap());
    engine.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_exits_non_zero_reports_its_code_and_last_log_lines() {
    let engine = engine().await;
    let job = Job::new("failing");
    let mut spec = job.spec("bad-input", None, &[]);
    spec.args = vec!["train".into(), "--data".into(), "missing.csv".into()];
    let (id, _) = launch(&engine, &job.cache, std::slice::from_ref(&job.input), &spec)
        .await
        .unwrap();
    let report = finish(&engine, &id).await;
    assert_eq!(report.code, 2);
    assert_eq!(report.meaning, ExitMeaning::BadInput);
    assert!(!report.meaning.can_resume());
    let last = report.last_log_lines.last().expect("log lines");
    assert!(
        last.contains("cannot read the training data /mcjs/data/missing.csv"),
        "{report}"
    );

    let (id, _) = launch(
        &engine,
        &job.cache,
        std::slice::from_ref(&job.input),
        &job.spec("crash", None, &["--halt-at-step", "20"]),
    )
    .await
    .unwrap();
    let report = finish(&engine, &id).await;
    assert_eq!(report.code, 86, "{report}");
    assert_eq!(report.meaning, ExitMeaning::Crashed);
    assert!(report.meaning.can_resume());
    assert!(
        report
            .last_log_lines
            .iter()
            .any(|l| l.contains("epoch 1/6 step 16")),
        "{report}"
    );
    assert!(report.to_string().contains("exit code 86"));
}

/// What a job prints leaves the node as it runs: every line, in the order
/// printed, in the store's chunks under the job's generation, as the
/// engine's own log of the container has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_a_job_prints_reaches_the_store_in_order() {
    use mcjs_runtime::logs::{self, DEFAULT_CAP_BYTES, LogChunker, LogStream};
    use object_store::ObjectStore;
    use std::sync::Arc;
    let engine = engine().await;
    let job = Job::new("printing");
    let spec = job.spec("run", None, &[]);
    let (id, _) = launch(&engine, &job.cache, std::slice::from_ref(&job.input), &spec)
        .await
        .unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let (sink, source) = logs::channel();
    let shipper = tokio::spawn(logs::ship(
        Arc::clone(&store),
        LogChunker::new(&job.id, 4, 1_765_000_000_000, DEFAULT_CAP_BYTES),
        source,
    ));
    // Returns once the container's output ends: it exited.
    tokio::time::timeout(Duration::from_secs(120), engine.follow_output(&id, 0, sink))
        .await
        .expect("the output ends when the container exits")
        .unwrap();
    let report = shipper.await.unwrap();
    let tail = engine.log_tail(&id).await.unwrap();
    let exit = finish(&engine, &id).await;
    assert_eq!(exit.code, 0, "{exit}");

    use futures_util::TryStreamExt;
    let prefix = object_store::path::Path::from(format!("jobs/{}/logs/g4", job.id));
    let mut paths: Vec<String> = store
        .list(Some(&prefix))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    paths.sort();
    assert!(!paths.is_empty());
    let mut lines = Vec::new();
    for p in &paths {
        let got = store.get(&p.as_str().into()).await.unwrap();
        lines.extend(logs::parse_chunk(&got.bytes().await.unwrap()));
    }
    assert_eq!(report.dropped_lines, 0);
    assert_eq!(lines.len() as u64, report.lines);
    assert!(lines.iter().all(|l| l.stream != LogStream::Mcjs));
    let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    assert!(texts.len() >= tail.len());
    assert_eq!(
        texts[texts.len() - tail.len()..].to_vec(),
        tail.iter().map(String::as_str).collect::<Vec<_>>(),
        "the same lines, in the same order, as the engine's own log"
    );
    assert!(texts.iter().any(|l| l.contains("epoch 6/6")), "{texts:?}");
}
