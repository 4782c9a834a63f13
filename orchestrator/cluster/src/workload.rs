//! The reference workload: the trainer image, a dataset from a fixed seed,
//! a job spec for them, and an uninterrupted reference run to compare the
//! final model against.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

pub fn trainer_args(epochs: u32) -> Vec<String> {
    [
        "--data",
        "train.csv",
        "--batch-size",
        "32",
        "--epochs",
        &epochs.to_string(),
        "--step-sleep-ms",
        "40",
        "--checkpoint-every-steps",
        "16",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `file://` URI of a local file.
pub fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

pub fn spec_json(
    image: &str,
    data_uri: &str,
    sha: &str,
    args: &[String],
    restart_budget: u8,
) -> String {
    let digest = image.trim_start_matches("sha256:");
    serde_json::to_string_pretty(&serde_json::json!({
        "version": 1,
        "work": {
            "kind": "training",
            "model_id": "mcjs/reference-mlp",
            "image": format!("mcjs-trainer@sha256:{digest}"),
            "command": ["/mcjs-trainer", "train"],
            "args": args,
            "queue_tolerant": true
        },
        "data": [{
            "name": "train.csv",
            "role": "dataset",
            "uri": data_uri,
            "sha256": sha
        }],
        "request": {
            "hardware": {"gpu_count": 1, "min_vram_per_gpu": "16GiB", "cpu_cores": 1, "ram": "256MiB", "disk": "1GiB"},
            "duration": {"mode": "until_done", "limit": "1h"},
            "max_price_per_gpu_hour": "2.00"
        },
        "output": {
            "produces": ["model"],
            "destination": "file:///tmp/mcjs-out",
            "return_partial": true,
            "required_artifacts": ["model.bin", "metrics.json"]
        },
        "checkpoint": {"interval": "1m", "max_size": "1MiB", "keep": 3, "restart_budget": restart_budget}
    }))
    .expect("a JSON value serialises")
}

pub fn build_trainer_image() -> anyhow::Result<String> {
    build_trainer_image_with(None, "mcjs-trainer:latest")
}

/// The trainer's image built with `features` (the test suite's `hostile`
/// image), tagged `tag`; its id.
pub fn build_trainer_image_with(features: Option<&str>, tag: &str) -> anyhow::Result<String> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/trainer/build-image.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(tag)
        .env("MCJS_TRAINER_FEATURES", features.unwrap_or(""))
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "building the trainer image failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The same job, in the same image, run once without interruption.
pub fn uninterrupted_run(
    image: &str,
    data: &Path,
    out: &Path,
    args: &[String],
) -> anyhow::Result<PathBuf> {
    let run = ReferenceRun {
        entrypoint: &["/mcjs-trainer", "train"],
        env: &[],
        model: "model.bin",
    };
    run.of(image, data, out, args)
}

/// How an image runs once, uninterrupted, for a reference model: its
/// entrypoint, extra environment (`NAME=value`) and the model file it writes
/// to its output directory.
pub struct ReferenceRun<'a> {
    pub entrypoint: &'a [&'a str],
    pub env: &'a [&'a str],
    pub model: &'a str,
}

impl ReferenceRun<'_> {
    /// Runs `image` with `args` over `data` into `out`; the model's path.
    pub fn of(
        &self,
        image: &str,
        data: &Path,
        out: &Path,
        args: &[String],
    ) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(out.join("checkpoints"))?;
        std::fs::create_dir_all(out.join("output"))?;
        let (program, rest) = self
            .entrypoint
            .split_first()
            .context("a reference run needs an entrypoint")?;
        let mut docker = std::process::Command::new("docker");
        docker
            .args(["run", "--rm", "--network", "none", "--user", "0:0"])
            // The one core every test spec asks for.
            .args(["--cpus", "1"])
            .args(["-v", &format!("{}:/mcjs/data:ro", data.display())])
            .args([
                "-v",
                &format!("{}:/mcjs/checkpoints", out.join("checkpoints").display()),
            ])
            .args([
                "-v",
                &format!("{}:/mcjs/output", out.join("output").display()),
            ])
            .args([
                "-e",
                "MCJS_DATA_DIR=/mcjs/data",
                "-e",
                "MCJS_CHECKPOINT_DIR=/mcjs/checkpoints",
                "-e",
                "MCJS_OUTPUT_DIR=/mcjs/output",
            ])
            .args(["-e", "MCJS_CHECKPOINT_INTERVAL_SECS=3600"]);
        for var in self.env {
            docker.args(["-e", var]);
        }
        let status = docker
            .args(["--entrypoint", program, image])
            .args(rest)
            .args(args)
            .output()
            .context("cannot run docker")?;
        if !status.status.success() {
            bail!(
                "the uninterrupted reference run failed: {}",
                String::from_utf8_lossy(&status.stderr)
            );
        }
        Ok(out.join("output").join(self.model))
    }
}

/// The PyTorch example's image (`examples/pytorch/build-image.sh`: Debian's
/// PyTorch, the job contract's package, `train.py`), built once and cached
/// by content; its id.
pub fn build_pytorch_image() -> anyhow::Result<String> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pytorch/build-image.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "building the PyTorch image failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The PyTorch example's arguments: `epochs` over 512 rows it generates
/// from its seed (8 steps an epoch), each step slowed by 40 ms so that a
/// node can be killed part-way.
pub fn pytorch_args(epochs: u32) -> Vec<String> {
    ["--rows", "512", "--epochs", &epochs.to_string()]
        .iter()
        .chain(&["--step-sleep-ms", "40"])
        .map(|s| s.to_string())
        .collect()
}

/// The PyTorch example's steps between checkpoints in the tests' specs.
pub const PYTORCH_EVERY_STEPS: u64 = 16;

/// How the PyTorch example runs once for its reference model.
pub const PYTORCH_REFERENCE: ReferenceRun<'static> = ReferenceRun {
    entrypoint: &["python3", "/opt/mcjs/train.py"],
    env: &["MCJS_CHECKPOINT_EVERY_STEPS=16"],
    model: "model.pt",
};

/// Turns a [`spec_json`] into the PyTorch example's job: its image and
/// command, the artifacts it writes, the memory PyTorch needs, and a
/// checkpoint every [`PYTORCH_EVERY_STEPS`] steps.
pub fn pytorch_spec(json: &mut serde_json::Value, image: &str) {
    let digest = image.trim_start_matches("sha256:");
    json["work"]["model_id"] = "mcjs/pytorch-example".into();
    json["work"]["image"] = format!("mcjs-pytorch@sha256:{digest}").into();
    json["work"]["command"] = serde_json::json!(PYTORCH_REFERENCE.entrypoint);
    json["request"]["hardware"]["ram"] = "2GiB".into();
    json["output"]["required_artifacts"] = serde_json::json!(["model.pt", "metrics.json"]);
    json["checkpoint"]["every_steps"] = PYTORCH_EVERY_STEPS.into();
    json["checkpoint"]["max_size"] = "16MiB".into();
}

pub fn find_file(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in
            std::fs::read_dir(&d).with_context(|| format!("cannot read {}", d.display()))?
        {
            let p = entry?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == name) {
                return Ok(p);
            }
        }
    }
    bail!("no {name} under {}", dir.display())
}

/// A small binary classification set from a fixed seed (xorshift).
pub fn dataset(rows: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut out = String::new();
    for _ in 0..rows {
        let mut x = Vec::new();
        for _ in 0..6 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            x.push(((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0);
        }
        for v in &x {
            out.push_str(&format!("{v},"));
        }
        out.push_str(&format!("{}\n", u8::from(x[0] * x[1] + 0.3 * x[2] > 0.0)));
    }
    out
}
