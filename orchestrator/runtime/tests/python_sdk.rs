//! The Python package for the job contract (`sdk/python`, `mcjs_job`)
//! against the agent's own reading of a checkpoint: what the package writes
//! is a complete checkpoint to `complete_checkpoints` (manifest, labels,
//! files), and its `checkpoint_hash` is the hash the agent attests. Needs
//! `python3` (any 3.9 or later; the package uses the standard library only).

use mcjs_runtime::checkpoint::{complete_checkpoints, hash_checkpoint};
use std::path::Path;
use std::process::Command;

fn sdk() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python/src")
}

/// Runs `script` with the package importable; its stdout.
fn python(script: &str, args: &[&Path]) -> String {
    let out = Command::new("python3")
        .env("PYTHONPATH", sdk())
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs (scripts/setup.sh checks for it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const WRITE: &str = r#"
import os, sys, mcjs_job
root = sys.argv[1]
job = mcjs_job.Job(checkpoint_dir=root, output_dir=root)

def save(d):
    with open(os.path.join(d, "model.bin"), "wb") as f:
        f.write(bytes(range(256)) * 1000)
    os.makedirs(os.path.join(d, "optim", "state"))
    with open(os.path.join(d, "optim", "state", "adam.bin"), "wb") as f:
        f.write(b"moments")
    with open(os.path.join(d, "empty"), "wb"):
        pass

for step in (16, 32):
    path = job.checkpoint(step // 16, step, save, extra={"loss": 0.5})
    print(path, mcjs_job.checkpoint_hash(path))
"#;

#[test]
fn the_agent_takes_the_python_packages_checkpoints_and_attests_the_hash_it_computes() {
    let root = tempfile::tempdir().unwrap();
    let printed = python(WRITE, &[root.path()]);
    let written: Vec<(String, String)> = printed
        .lines()
        .map(|l| {
            let (path, hash) = l.rsplit_once(' ').unwrap();
            (path.to_string(), hash.to_string())
        })
        .collect();
    assert_eq!(written.len(), 2, "{printed}");

    let found = complete_checkpoints(root.path()).expect("the agent reads them");
    assert_eq!(found.len(), 2);
    for (checkpoint, (path, hash)) in found.iter().zip(&written) {
        assert_eq!(checkpoint.dir, Path::new(path));
        let step = checkpoint.manifest.step;
        assert_eq!((checkpoint.manifest.epoch, step % 16), (step / 16, 0));
        assert_eq!(
            checkpoint.manifest.files.as_deref(),
            Some(
                &[
                    "empty".to_string(),
                    "model.bin".to_string(),
                    "optim/state/adam.bin".to_string()
                ][..]
            )
        );
        let digest = hash_checkpoint(&checkpoint.dir, 2).unwrap();
        assert_eq!(
            &digest.hash.to_hex(),
            hash,
            "the agent's hash and the package's"
        );
        assert_eq!(digest.files.len(), 4, "three files and the manifest");
    }
}

/// A directory the package was killed while writing (no manifest) is not a
/// checkpoint to the agent.
#[test]
fn a_checkpoint_the_package_did_not_finish_is_not_taken() {
    let root = tempfile::tempdir().unwrap();
    python(
        r#"
import os, sys, mcjs_job
job = mcjs_job.Job(checkpoint_dir=sys.argv[1], output_dir=sys.argv[1])
def save(d):
    with open(os.path.join(d, "model.bin"), "wb") as f:
        f.write(b"half")
    os._exit(0)  # killed before the manifest
job.checkpoint(0, 8, save)
"#,
        &[root.path()],
    );
    assert!(root.path().join("step-000000000008/model.bin").exists());
    assert!(complete_checkpoints(root.path()).unwrap().is_empty());
}
