//! The hostile job (`examples/hostile`) in real containers on the local
//! Docker engine, against the runtime pipeline the agent runs: for each
//! attack, nothing outside the job's mounts is read or stored, the pipeline
//! answers (no hang, no panic) with the job's own fault, and an honest job
//! beside it still finishes with the same model bytes. Needs a running engine.

use mcjs_runtime::confined::{ConfinedDir, Limits};
use mcjs_runtime::docker::{DockerEngine, LOG_LINE_MAX};
use mcjs_runtime::engine::{ContainerEngine, ContainerId, ContainerSpec, JobMounts, JobSignal};
use mcjs_runtime::launch::{LaunchError, launch};
use mcjs_runtime::staging::{DataCache, InputToStage, StagingError, StagingPolicy};
use mcjs_runtime::store::{CheckpointPipeline, CheckpointStore};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Bytes that exist only in a host file outside every mount.
const CANARY: &[u8] = b"mcjs-canary-7c3e55a1-provider-wallet";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn build_image(script: &str) -> String {
    let out = std::process::Command::new(workspace_root().join(script))
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn hostile_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| build_image("examples/hostile/build-image.sh"))
}

fn trainer_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| build_image("examples/trainer/build-image.sh"))
}

/// One provider host: a store, a canary outside every mount, the engine.
struct Node {
    t: tempfile::TempDir,
    engine: DockerEngine,
    canary: PathBuf,
    cache: DataCache,
}

impl Node {
    async fn new() -> Self {
        let t = tempfile::tempdir().unwrap();
        let canary = t.path().join("wallet.json");
        std::fs::write(&canary, CANARY).unwrap();
        let engine = DockerEngine::connect()
            .await
            .expect("these tests need a running Docker engine");
        let cache = DataCache::with_policy(
            t.path().join("cache"),
            StagingPolicy {
                data_roots: vec![t.path().join("datasets")],
                ..StagingPolicy::default()
            },
        );
        std::fs::create_dir_all(t.path().join("datasets")).unwrap();
        Self {
            t,
            engine,
            canary,
            cache,
        }
    }

    fn job_dir(&self, job: &str) -> PathBuf {
        self.t.path().join("jobs").join(job)
    }

    fn spec(&self, job: &str, image: &str, args: &[&str]) -> ContainerSpec {
        let dir = self.job_dir(job);
        let mut spec = ContainerSpec::new(
            format!("{job}-{}", std::process::id()),
            image,
            JobMounts {
                data: dir.join("data"),
                checkpoints: dir.join("checkpoints"),
                output: dir.join("output"),
                restore: None,
                metrics: None,
            },
        );
        spec.args = args.iter().map(ToString::to_string).collect();
        spec.resources.cpus = 1.0;
        spec.resources.memory_mib = 256;
        spec
    }

    fn pipeline(&self, job: &str, limits: Limits) -> CheckpointPipeline {
        CheckpointPipeline {
            generation: 1,
            store: CheckpointStore::local(&self.t.path().join("store"), 100).unwrap(),
            job_id: job.to_string(),
            local_root: self.job_dir(job).join("checkpoints"),
            hash_threads: 2,
            limits,
            every_steps: None,
        }
    }

    async fn start(&self, job: &str, args: &[&str]) -> ContainerId {
        let (id, _) = launch(
            &self.engine,
            &self.cache,
            &[],
            &self.spec(job, hostile_image(), args),
        )
        .await
        .unwrap();
        id
    }

    /// Whether any stored object holds the canary.
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
        walk(&self.t.path().join("store"))
    }

    /// The honest trainer on this node: its staged dataset and container.
    async fn start_honest(&self, job: &str) -> ContainerId {
        let csv: String = (0..256)
            .map(|i| {
                let x = (i as f32 * 0.37).sin();
                let y = (i as f32 * 0.11).cos();
                format!(
                    "{x},{y},{},{},{},{},{}\n",
                    x * y,
                    x - y,
                    y,
                    x,
                    u8::from(x * y > 0.0)
                )
            })
            .collect();
        let src = self.t.path().join("datasets/train.csv");
        std::fs::write(&src, &csv).unwrap();
        let input = InputToStage {
            name: "train.csv".into(),
            uri: url::Url::from_file_path(&src).unwrap().to_string(),
            sha256: hex::encode(Sha256::digest(csv.as_bytes())),
            max_bytes: Some(1 << 20),
        };
        let mut spec = self.spec(
            job,
            trainer_image(),
            &[
                "train",
                "--data",
                "train.csv",
                "--epochs",
                "4",
                "--batch-size",
                "32",
            ],
        );
        spec.checkpoint_interval = Duration::from_secs(1);
        let (id, _) = launch(&self.engine, &self.cache, &[input], &spec)
            .await
            .unwrap();
        id
    }

    /// Waits for the container, collecting its checkpoints meanwhile as
    /// the agent does; returns its exit code and model.
    async fn finish_honest(&self, job: &str, id: &ContainerId) -> (i64, Vec<u8>) {
        let pipeline = self.pipeline(job, Limits::UNLIMITED);
        let report = tokio::time::timeout(Duration::from_secs(180), async {
            loop {
                pipeline
                    .collect()
                    .await
                    .expect("an honest job's checkpoints are stored");
                if !self.engine.is_running(id).await.unwrap() {
                    return self.engine.wait(id).await.unwrap();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("the honest job finishes");
        pipeline.collect().await.unwrap();
        self.engine.remove(id).await.unwrap();
        let model = std::fs::read(self.job_dir(job).join("output/model.bin")).unwrap();
        (report.code, model)
    }

    async fn wait_for(&self, what: &str, mut ready: impl FnMut() -> bool) {
        let until = Instant::now() + Duration::from_secs(60);
        while !ready() {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_swapping_in_symlinks_to_a_host_file_never_gets_it_stored_and_an_honest_job_beside_it_finishes_identically()
 {
    let node = Node::new().await;
    // The honest job alone first, for its reference model.
    let id = node.start_honest("honest-ref").await;
    let (code, reference) = node.finish_honest("honest-ref", &id).await;
    assert_eq!(code, 0);

    let canary = node.canary.display().to_string();
    let hostile = node.start("race", &["symlink-race", &canary, "40"]).await;
    let honest = node.start_honest("honest").await;
    let pipeline = node.pipeline("race", Limits::UNLIMITED);
    let (mut stored, mut refused) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let running = node.engine.is_running(&hostile).await.unwrap();
        match tokio::time::timeout(Duration::from_secs(20), pipeline.collect())
            .await
            .expect("collection never hangs")
        {
            Ok(s) => stored += s.len(),
            Err(e) => {
                assert!(e.is_job_fault(), "not the job's fault: {e}");
                refused += 1;
            }
        }
        if !running || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    node.engine.remove(&hostile).await.unwrap();
    assert!(!node.store_holds_canary(), "a host file reached the store");
    assert!(
        refused > 0,
        "the race never showed a symlink (stored {stored})"
    );
    let (code, model) = node.finish_honest("honest", &honest).await;
    assert_eq!(code, 0);
    assert!(model == reference, "the honest job's model differs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_and_dev_zero_manifests_are_refused_without_hanging() {
    let node = Node::new().await;
    for attack in ["fifo-manifest", "zero-manifest"] {
        let id = node.start(attack, &[attack]).await;
        let manifest = node
            .job_dir(attack)
            .join("checkpoints/step-000000000001/mcjs-manifest.json");
        node.wait_for(attack, || manifest.symlink_metadata().is_ok())
            .await;
        let started = Instant::now();
        let err = tokio::time::timeout(
            Duration::from_secs(10),
            node.pipeline(attack, Limits::UNLIMITED).collect(),
        )
        .await
        .expect("collection never hangs")
        .expect_err("the checkpoint is refused");
        assert!(err.is_job_fault(), "{attack}: {err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        node.engine.remove(&id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_of_too_many_files_is_refused() {
    let node = Node::new().await;
    let id = node.start("many", &["many-files", "3000"]).await;
    let manifest = node
        .job_dir("many")
        .join("checkpoints/step-000000000001/mcjs-manifest.json");
    node.wait_for("the files", || manifest.exists()).await;
    let limits = Limits {
        max_entries: 1000,
        max_bytes: u64::MAX,
    };
    let err = node.pipeline("many", limits).collect().await.unwrap_err();
    assert!(
        err.is_job_fault() && err.to_string().contains("more than 1000"),
        "{err}"
    );
    node.engine.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_filling_the_disk_is_measured_over_its_declaration() {
    let node = Node::new().await;
    let id = node.start("fill", &["fill-disk", "48"]).await;
    let declared_disk = 16u64 << 20;
    let root = node.job_dir("fill");
    let used = || {
        ConfinedDir::open(&root.join("checkpoints"))
            .and_then(|d| d.usage("", 1000))
            .map_or(0, |w| w.allocated)
    };
    node.wait_for("the disk to fill", || used() > declared_disk)
        .await;
    node.engine.remove(&id).await.unwrap();
}

/// A job printing without end writes nothing to the node's disk (the
/// engine keeps no log), is read at most `OUTPUT_BYTES_PER_SEC` and waits on
/// its own writes past that (its CPU stays far below the core it may use),
/// loses no line of what is read (the flood numbers its lines), and leaves
/// a bounded exit report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_waits_on_its_own_output_and_writes_nothing_to_disk() {
    use futures_util::StreamExt;
    use mcjs_runtime::docker::OUTPUT_BYTES_PER_SEC;
    let node = Node::new().await;
    let id = node.start("flood", &["log-flood"]).await;
    let (sink, mut source) = mcjs_runtime::logs::channel();
    let follow = node.engine.follow_output(&id, 0, sink);
    let docker = node.engine.docker();
    let cpu = || async {
        let options = bollard::query_parameters::StatsOptionsBuilder::default()
            .stream(false)
            .one_shot(true)
            .build();
        let mut stats = docker.stats(&id.0, Some(options));
        let stats = stats.next().await.unwrap().unwrap();
        stats
            .cpu_stats
            .unwrap()
            .cpu_usage
            .unwrap()
            .total_usage
            .unwrap()
    };
    let measure = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (cpu0, t0) = (cpu().await, std::time::Instant::now());
        // Lines read, drained as they come (the shipper's side of the channel).
        let mut numbers = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, source.recv()).await {
            if let Some(n) = line
                .text
                .split(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
            {
                numbers.push(n);
            }
        }
        let (cpu1, secs) = (cpu().await, t0.elapsed().as_secs_f64());
        let share = (cpu1 - cpu0) as f64 / 1e9 / secs;
        assert!(
            share < 0.5,
            "the flood used {:.0}% of a core: it should wait on its writes",
            share * 100.0
        );
        let read_bytes = numbers.len() as u64 * 1210;
        assert!(
            read_bytes <= 7 * OUTPUT_BYTES_PER_SEC as u64,
            "{read_bytes} bytes read in about 5 s"
        );
        assert!(numbers.len() > 100, "{} lines read", numbers.len());
        assert!(
            numbers.windows(2).all(|w| w[1] == w[0] + 1),
            "no line lost between the job and the reader"
        );
        let info = docker
            .inspect_container(
                &id.0,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .unwrap();
        assert!(
            info.log_path.as_deref().unwrap_or("").is_empty(),
            "the engine keeps no log of the job: {:?}",
            info.log_path
        );
        node.engine.signal(&id, JobSignal::Kill).await.unwrap();
        // Whatever the reader still had in flight, until the output ends.
        while source.recv().await.is_some() {}
        node.engine.wait(&id).await.unwrap()
    };
    let (followed, report) = tokio::join!(follow, measure);
    followed.unwrap();
    assert_eq!(report.last_log_lines.len(), 40);
    assert!(
        report
            .last_log_lines
            .iter()
            .all(|l| l.len() <= LOG_LINE_MAX + 40)
    );
    node.engine.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_uris_to_the_hosts_files_and_network_are_refused_before_any_container() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let node = Node::new().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reached = std::sync::Arc::new(AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&reached);
    std::thread::spawn(move || {
        if listener.accept().is_ok() {
            flag.store(true, Ordering::SeqCst);
        }
    });
    let canary_uri = url::Url::from_file_path(&node.canary).unwrap().to_string();
    let canary_sha = hex::encode(Sha256::digest(CANARY));
    for (uri, sha) in [
        ("file:///dev/zero".to_string(), canary_sha.clone()),
        ("file:///etc/passwd".to_string(), canary_sha.clone()),
        (canary_uri, canary_sha.clone()),
        (format!("http://{addr}/agent-api"), canary_sha.clone()),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            canary_sha.clone(),
        ),
    ] {
        let input = InputToStage {
            name: "x".into(),
            uri: uri.clone(),
            sha256: sha,
            max_bytes: None,
        };
        let err = tokio::time::timeout(
            Duration::from_secs(20),
            launch(
                &node.engine,
                &node.cache,
                &[input],
                &node.spec("data", hostile_image(), &["log-flood"]),
            ),
        )
        .await
        .expect("staging never hangs")
        .unwrap_err();
        let LaunchError::Staging { source, .. } = &err else {
            panic!("{uri}: {err}");
        };
        assert!(
            matches!(source, StagingError::Refused { .. }),
            "{uri}: {err}"
        );
        assert!(source.is_job_fault());
        assert!(!err.to_string().contains(&canary_sha), "{uri}: {err}");
    }
    assert!(
        !reached.load(Ordering::SeqCst),
        "the loopback service was reached"
    );
    assert!(!node.job_dir("data").join("data/x").exists());
}
