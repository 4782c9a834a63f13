//! The reference trainer's promise: interrupted and resumed any number of
//! times, at any points, it ends with the same model bytes as a run that was
//! never interrupted.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const TRAINER: &str = env!("CARGO_BIN_EXE_mcjs-trainer");
const EPOCHS: u64 = 4;
const STEPS_PER_EPOCH: u64 = 300 / 16 + 1; // rows 300, batch 16
const TOTAL_STEPS: u64 = EPOCHS * STEPS_PER_EPOCH;

struct Job {
    _root: tempfile::TempDir,
    data: PathBuf,
    ckpt: PathBuf,
    out: PathBuf,
}

impl Job {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let [data, ckpt, out] = ["data", "ckpt", "out"].map(|d| root.path().join(d));
        for d in [&data, &ckpt, &out] {
            std::fs::create_dir(d).unwrap();
        }
        let status = Command::new(TRAINER)
            .args([
                "gen-data",
                "--seed",
                "5",
                "--rows",
                "300",
                "--features",
                "6",
            ])
            .arg("--out")
            .arg(data.join("train.csv"))
            .status()
            .unwrap();
        assert!(status.success());
        Self {
            _root: root,
            data,
            ckpt,
            out,
        }
    }

    fn command(&self, restore: Option<&Path>, extra: &[&str]) -> Command {
        let mut c = Command::new(TRAINER);
        c.args([
            "train",
            "--data",
            "train.csv",
            "--hidden",
            "8",
            "--batch-size",
            "16",
        ])
        .args(["--epochs", &EPOCHS.to_string(), "--seed", "11"])
        .args(extra)
        .env("MCJS_DATA_DIR", &self.data)
        .env("MCJS_CHECKPOINT_DIR", &self.ckpt)
        .env("MCJS_OUTPUT_DIR", &self.out)
        .env_remove("MCJS_CHECKPOINT_INTERVAL_SECS")
        .env_remove("MCJS_CHECKPOINT_EVERY_STEPS")
        .env_remove("MCJS_RESTORE_DIR");
        if let Some(dir) = restore {
            c.env("MCJS_RESTORE_DIR", dir);
        }
        c
    }

    fn run(&self, restore: Option<&Path>, extra: &[&str]) -> Output {
        self.command(restore, extra).output().unwrap()
    }

    /// The newest checkpoint whose manifest is in place, as the agent would
    /// pick it: half-written directories are ignored.
    fn latest_checkpoint(&self) -> Option<(u64, PathBuf)> {
        std::fs::read_dir(&self.ckpt)
            .unwrap()
            .filter_map(|e| {
                let dir = e.unwrap().path();
                let manifest = std::fs::read(dir.join("mcjs-manifest.json")).ok()?;
                let v: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
                Some((v["step"].as_u64().unwrap(), dir))
            })
            .max()
    }

    fn model(&self) -> Vec<u8> {
        std::fs::read(self.out.join("model.bin")).unwrap()
    }
}

fn uninterrupted_model() -> Vec<u8> {
    let job = Job::new();
    let out = job.run(None, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    job.model()
}

#[test]
fn training_learns_the_generated_task() {
    let job = Job::new();
    let out = job.run(None, &["--epochs", "30"]);
    assert!(out.status.success());
    let metrics: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.out.join("metrics.json")).unwrap()).unwrap();
    assert_eq!(metrics["steps"], 30 * STEPS_PER_EPOCH);
    let acc = metrics["train_accuracy"].as_f64().unwrap();
    assert!(acc > 0.85, "accuracy {acc} after 30 epochs");
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn resuming_after_crashes_at_any_steps_gives_the_same_model_bytes(
        every in 1u64..=12,
        mut halts in prop::collection::vec(1u64..TOTAL_STEPS, 1..5),
    ) {
        halts.sort();
        let reference = uninterrupted_model();
        let job = Job::new();
        let every = every.to_string();
        let mut crashes = 0;
        for halt in halts {
            let restore = job.latest_checkpoint();
            if restore.as_ref().is_some_and(|(step, _)| *step >= halt) {
                continue;
            }
            let out = job.run(
                restore.as_ref().map(|(_, d)| d.as_path()),
                &["--checkpoint-every-steps", &every, "--halt-at-step", &halt.to_string()],
            );
            prop_assert_eq!(out.status.code(), Some(86), "{}", String::from_utf8_lossy(&out.stderr));
            crashes += 1;
        }
        prop_assert!(crashes > 0);
        let restore = job.latest_checkpoint();
        let out = job.run(restore.as_ref().map(|(_, d)| d.as_path()), &["--checkpoint-every-steps", &every]);
        prop_assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        prop_assert!(job.model() == reference, "resumed model differs from the uninterrupted one");
    }
}

#[test]
fn sigusr1_checkpoint_then_sigkill_then_resume_gives_the_same_model_bytes() {
    let reference = uninterrupted_model();
    let job = Job::new();
    let mut child = job
        .command(None, &["--step-sleep-ms", "5"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-USR1", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while job.latest_checkpoint().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint after SIGUSR1"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !job.out.join("model.bin").exists(),
        "the run finished before it was killed"
    );
    let (step, dir) = job.latest_checkpoint().unwrap();
    assert!(step > 0 && step < TOTAL_STEPS);
    let out = job.run(Some(&dir), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(job.model() == reference);
}

#[test]
fn sigterm_checkpoints_and_exits_75() {
    let job = Job::new();
    let mut child = job
        .command(None, &["--step-sleep-ms", "5"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(child.wait().unwrap().code(), Some(75));
    assert!(job.latest_checkpoint().is_some());
}

#[test]
fn resuming_with_other_hyperparameters_is_refused_with_exit_2() {
    let job = Job::new();
    let out = job.run(
        None,
        &["--checkpoint-every-steps", "5", "--halt-at-step", "7"],
    );
    assert_eq!(out.status.code(), Some(86));
    let (_, dir) = job.latest_checkpoint().unwrap();
    let out = job.run(Some(&dir), &["--lr", "0.1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("other hyperparameters or other data"), "{err}");
}

#[test]
fn a_checkpoint_without_its_manifest_is_not_restorable() {
    let job = Job::new();
    let out = job.run(
        None,
        &["--checkpoint-every-steps", "5", "--halt-at-step", "5"],
    );
    assert_eq!(out.status.code(), Some(86));
    let (_, dir) = job.latest_checkpoint().unwrap();
    std::fs::remove_file(dir.join("mcjs-manifest.json")).unwrap();
    let out = job.run(Some(&dir), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a complete checkpoint"));
}

/// Every file of a checkpoint directory, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn checkpoint_at(job: &Job, step: u64) -> PathBuf {
    std::fs::read_dir(&job.ckpt)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|dir| {
            std::fs::read(dir.join("mcjs-manifest.json")).is_ok_and(|m| {
                serde_json::from_slice::<serde_json::Value>(&m).unwrap()["step"] == step
            })
        })
        .unwrap_or_else(|| panic!("no checkpoint at step {step}"))
}

#[test]
fn with_fixed_steps_a_run_restored_at_k_checkpoints_k_plus_1_with_the_same_bytes() {
    // The provider's run: the spec fixes the checkpoint steps (every 10),
    // and an interval of 0 s would otherwise checkpoint at every step.
    let fixed = |c: &mut Command| {
        c.env("MCJS_CHECKPOINT_EVERY_STEPS", "10")
            .env("MCJS_CHECKPOINT_INTERVAL_SECS", "0");
    };
    let original = Job::new();
    let mut c = original.command(None, &[]);
    fixed(&mut c);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = |job: &Job| -> Vec<u64> {
        let mut steps: Vec<u64> = std::fs::read_dir(&job.ckpt)
            .unwrap()
            .filter_map(|e| {
                let m = std::fs::read(e.unwrap().path().join("mcjs-manifest.json")).ok()?;
                serde_json::from_slice::<serde_json::Value>(&m).unwrap()["step"].as_u64()
            })
            .collect();
        steps.sort();
        steps
    };
    let paid = steps(&original);
    assert_eq!(
        paid,
        (1..=TOTAL_STEPS / 10).map(|k| k * 10).collect::<Vec<_>>(),
        "checkpoints at the spec's steps and nowhere else"
    );
    // A checker elsewhere, given exactly the paid run's environment:
    // restored at step 20, it checkpoints at 30 by itself (the agent, not
    // the job, stops the run there), bytes and all.
    let checker = Job::new();
    let mut c = checker.command(Some(&checkpoint_at(&original, 20)), &[]);
    fixed(&mut c);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        steps(&checker),
        paid[2..],
        "the same steps after the restore"
    );
    for step in [30, 40, TOTAL_STEPS / 10 * 10] {
        assert_eq!(
            files(&checkpoint_at(&checker, step)),
            files(&checkpoint_at(&original, step)),
            "the re-executed checkpoint at step {step} differs from the original's"
        );
    }
    assert_eq!(checker.model(), original.model());
    // A step count that is not one is a usage error.
    let mut c = checker.command(None, &[]);
    c.env("MCJS_CHECKPOINT_EVERY_STEPS", "0");
    assert_eq!(c.output().unwrap().status.code(), Some(2));
}

/// `flood` prints numbered lines of the width asked, as many as it says.
#[test]
fn flood_prints_numbered_lines_of_the_width_asked_and_counts_them() {
    let out = Command::new(TRAINER)
        .args(["flood", "--seconds", "1", "--line-bytes", "64"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() > 1_000, "{} lines in a second", lines.len());
    assert!(
        lines.iter().all(|l| l.len() == 64),
        "every line is 64 bytes"
    );
    for (i, l) in lines.iter().enumerate().take(5) {
        assert_eq!(l.split_whitespace().nth(1), Some(i.to_string().as_str()));
    }
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(&format!("flood: {} lines of 64 bytes printed", lines.len())),
        "{stderr}"
    );
}
