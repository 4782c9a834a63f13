//! The PyTorch example in its image (`examples/pytorch/build-image.sh`:
//! Debian's PyTorch, the job contract's package, `train.py`), run by the
//! runtime's Docker engine with every setting a job gets (read-only root,
//! non-root user, no network, no capabilities, its CPU and memory): stopped
//! by SIGTERM part-way it checkpoints and exits 75, and resumed from that
//! checkpoint it ends with the model bytes of a run never stopped. Needs a
//! Docker engine and root (the image is built by mmdebstrap once, about two
//! minutes, then cached).

use mcjs_runtime::checkpoint::{complete_checkpoints, hash_checkpoint};
use mcjs_runtime::docker::DockerEngine;
use mcjs_runtime::engine::{ContainerEngine, ContainerSpec, JobMounts, JobSignal};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn image() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new(root.join("examples/pytorch/build-image.sh"))
        .output()
        .expect("build the PyTorch image");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn mounts(dir: &Path, restore: Option<PathBuf>) -> JobMounts {
    let m = JobMounts {
        data: dir.join("data"),
        checkpoints: dir.join("checkpoints"),
        output: dir.join("output"),
        restore,
        metrics: Some(dir.join("metrics")),
    };
    std::fs::create_dir_all(&m.data).unwrap();
    m.prepare("65532:65532").unwrap();
    m
}

fn spec(name: &str, image: &str, mounts: JobMounts) -> ContainerSpec {
    let mut spec = ContainerSpec::new(name, image, mounts);
    spec.args = ["--epochs", "150", "--rows", "512"]
        .map(String::from)
        .to_vec();
    spec.resources.cpus = 1.0;
    spec.resources.memory_mib = 2048;
    spec.checkpoint_interval = Duration::from_secs(3600);
    spec
}

fn metrics_lines(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("metrics/metrics.jsonl"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pytorch_example_stopped_and_resumed_in_its_image_ends_with_the_same_model() {
    let image = image();
    let engine = DockerEngine::connect().await.expect("a Docker engine");
    let root = tempfile::tempdir().unwrap();

    let whole = root.path().join("whole");
    let id = engine
        .start(&spec("whole", &image, mounts(&whole, None)))
        .await
        .unwrap();
    let exit = engine.wait(&id).await.unwrap();
    engine.remove(&id).await.unwrap();
    assert_eq!(exit.code, 0, "{exit}");

    let first = root.path().join("first");
    let id = engine
        .start(&spec("first", &image, mounts(&first, None)))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while metrics_lines(&first) < 5 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    engine.signal(&id, JobSignal::Stop).await.unwrap();
    let exit = engine.wait(&id).await.unwrap();
    engine.remove(&id).await.unwrap();
    assert_eq!(exit.code, 75, "{exit}");
    let checkpoints = complete_checkpoints(&first.join("checkpoints")).unwrap();
    assert_eq!(checkpoints.len(), 1, "one checkpoint, on SIGTERM");
    let stopped_at = checkpoints[0].manifest.step;
    assert!(
        stopped_at < 150 * 8,
        "stopped part-way, at step {stopped_at}"
    );
    hash_checkpoint(&checkpoints[0].dir, 2).expect("a checkpoint the agent hashes");

    let second = root.path().join("second");
    let id = engine
        .start(&spec(
            "second",
            &image,
            mounts(&second, Some(checkpoints[0].dir.clone())),
        ))
        .await
        .unwrap();
    let exit = engine.wait(&id).await.unwrap();
    engine.remove(&id).await.unwrap();
    assert_eq!(exit.code, 0, "{exit}");
    assert!(
        exit.last_log_lines.iter().any(|l| l.contains(&format!(
            "resumed at epoch {} step {stopped_at}",
            stopped_at / 8
        ))),
        "{:?}",
        exit.last_log_lines
    );
    assert_eq!(
        std::fs::read(second.join("output/model.pt")).unwrap(),
        std::fs::read(whole.join("output/model.pt")).unwrap(),
        "byte-identical to the run never stopped"
    );
}
