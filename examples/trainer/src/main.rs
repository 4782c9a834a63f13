//! `mcjs-trainer`: the MCJS reference training job.
//!
//! ```text
//! mcjs-trainer gen-data --out FILE [--seed N] [--rows N] [--features N]
//! mcjs-trainer train [--data FILE] [--epochs N] [--batch-size N] [--hidden N]
//!                    [--lr X] [--momentum X] [--seed N] [--step-sleep-ms N]
//!                    [--checkpoint-every-steps N] [--halt-at-step N [--halt-code N]]
//!                    [--ballast-mib N [--ballast-fixed 1]]
//! mcjs-trainer flood [--seconds N] [--line-bytes N]
//! ```
//!
//! `train` follows docs/job-contract.md: it reads `MCJS_DATA_DIR`, resumes
//! from `MCJS_RESTORE_DIR` when set, checkpoints into `MCJS_CHECKPOINT_DIR`
//! every `MCJS_CHECKPOINT_INTERVAL_SECS` and on SIGUSR1, checkpoints and
//! exits 75 on SIGTERM, and writes `model.bin` and `metrics.json` into
//! `MCJS_OUTPUT_DIR`; at the end of each epoch it appends its progress to
//! `MCJS_METRICS_FILE` when set (`{"step":…,"epoch":…,"accuracy":…,"brier":…}`).
//! With `MCJS_CHECKPOINT_EVERY_STEPS` (a spec that fixes
//! its checkpoint steps, as every verified job does) it checkpoints at every
//! multiple of that step count and nowhere else: not on the interval, not on
//! SIGUSR1, not on SIGTERM. Without a data file it generates its data from
//! `--data-seed`, `--rows` and `--features`. `--ballast-mib N` adds N MiB of
//! incompressible bytes (`ballast.bin`) to every checkpoint, new at each
//! step, or the same in each with `--ballast-fixed 1` (as frozen base
//! weights would be): checkpoints of a real job's size for the benchmarks.
//!
//! `flood` is a job that abuses its output: it prints numbered lines of
//! `--line-bytes` to stdout as fast as it can for `--seconds`, then the
//! count to stderr (`orchestrator/agent/benches/log_flood.rs` measures what
//! that costs a node's other jobs).
//!
//! # Map
//!
//! - `checkpoint.rs`: the contract's checkpoint protocol (`write`: a fresh
//!   directory, its files fsync'd, the manifest last and renamed into
//!   place; `read` on resume).
//! - `model.rs`: the network and its SGD; `math.rs`: arithmetic that gives
//!   the same bits on every platform; `data.rs`: the training set.
//! - `hostile.rs` (feature `hostile`, test-only): an image that behaves
//!   differently when it is being checked.

mod checkpoint;
mod data;
#[cfg(feature = "hostile")]
mod hostile;
mod math;
mod model;

use anyhow::{Context, bail};
use data::Dataset;
use model::{Hyper, TrainState};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const EXIT_USAGE: u8 = 2;
const EXIT_PREEMPTED: u8 = 75;
/// Test hook: the process ends as abruptly as a crash would, mid-run.
const EXIT_HALTED: u8 = 86;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("gen-data") => gen_data(&args[1..]),
        Some("train") => train(&args[1..]),
        Some("flood") => flood(&args[1..]),
        _ => Err(anyhow::anyhow!(
            "usage: mcjs-trainer gen-data --out FILE [...] | mcjs-trainer train [...] | mcjs-trainer flood [...] (see docs/job-contract.md)"
        )),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("mcjs-trainer: error: {e:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

struct Flags(HashMap<String, String>);

impl Flags {
    fn parse(args: &[String], known: &[&str]) -> anyhow::Result<Self> {
        let mut map = HashMap::new();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let Some(name) = flag.strip_prefix("--") else {
                bail!("unexpected argument {flag:?}: options look like --name value");
            };
            if !known.contains(&name) {
                bail!("unknown option --{name}; known: --{}", known.join(", --"));
            }
            let value = it
                .next()
                .with_context(|| format!("--{name} needs a value"))?;
            map.insert(name.to_string(), value.clone());
        }
        Ok(Self(map))
    }

    fn get<T: std::str::FromStr>(&self, name: &str, default: T) -> anyhow::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|e| anyhow::anyhow!("--{name} {v:?}: {e}")),
        }
    }

    fn opt<T: std::str::FromStr>(&self, name: &str) -> anyhow::Result<Option<T>>
    where
        T::Err: std::fmt::Display,
    {
        match self.0.get(name) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|e| anyhow::anyhow!("--{name} {v:?}: {e}")),
        }
    }
}

fn gen_data(args: &[String]) -> anyhow::Result<u8> {
    let f = Flags::parse(args, &["out", "seed", "rows", "features"])?;
    let out: PathBuf = f.opt("out")?.context("--out FILE is required")?;
    let d = Dataset::generate(
        f.get("seed", 1)?,
        f.get("rows", 2048)?,
        f.get("features", 8)?,
    )?;
    std::fs::write(&out, d.to_csv()).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(0)
}

fn flood(args: &[String]) -> anyhow::Result<u8> {
    use std::io::Write;
    let f = Flags::parse(args, &["seconds", "line-bytes"])?;
    let seconds: u64 = f.get("seconds", 10)?;
    let width: usize = f.get("line-bytes", 200)?;
    let pad = "x".repeat(width.saturating_sub(21));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut lines = 0u64;
    while Instant::now() < until {
        for _ in 0..1024 {
            writeln!(out, "flood {lines:>14} {pad}")?;
            lines += 1;
        }
    }
    out.flush()?;
    eprintln!("mcjs-trainer: flood: {lines} lines of {width} bytes printed");
    Ok(0)
}

fn env_dir(name: &str) -> anyhow::Result<Option<PathBuf>> {
    match std::env::var_os(name) {
        Some(v) if !v.is_empty() => Ok(Some(PathBuf::from(v))),
        _ => Ok(None),
    }
}

fn fingerprint(h: &Hyper, seed: u64, data: &Dataset) -> [u8; 32] {
    let mut s = Sha256::new();
    for v in [h.features, h.hidden, h.batch_size] {
        s.update((v as u64).to_le_bytes());
    }
    s.update(h.lr.to_bits().to_le_bytes());
    s.update(h.momentum.to_bits().to_le_bytes());
    s.update(seed.to_le_bytes());
    for v in data.x.iter().chain(&data.y) {
        s.update(v.to_bits().to_le_bytes());
    }
    s.finalize().into()
}

fn train(args: &[String]) -> anyhow::Result<u8> {
    let f = Flags::parse(
        args,
        &[
            "data",
            "data-seed",
            "rows",
            "features",
            "epochs",
            "batch-size",
            "hidden",
            "lr",
            "momentum",
            "seed",
            "step-sleep-ms",
            "checkpoint-every-steps",
            "halt-at-step",
            "halt-code",
            "ballast-mib",
            "ballast-fixed",
        ],
    )?;
    let ballast = f
        .opt::<u64>("ballast-mib")?
        .filter(|&mib| mib > 0)
        .map(|mib| -> anyhow::Result<checkpoint::Ballast> {
            Ok(checkpoint::Ballast {
                mib,
                fixed: f.get::<u8>("ballast-fixed", 0)? != 0,
            })
        })
        .transpose()?;
    let data_dir = env_dir("MCJS_DATA_DIR")?;
    let data = match (f.opt::<PathBuf>("data")?, &data_dir) {
        (Some(file), Some(dir)) => Dataset::read_csv(&dir.join(file))?,
        (Some(file), None) => Dataset::read_csv(&file)?,
        (None, _) => Dataset::generate(
            f.get("data-seed", 1)?,
            f.get("rows", 2048)?,
            f.get("features", 8)?,
        )?,
    };
    let h = Hyper {
        features: data.features,
        hidden: f.get("hidden", 16)?,
        batch_size: f.get("batch-size", 32)?,
        lr: f.get("lr", 0.05)?,
        momentum: f.get("momentum", 0.9)?,
    };
    if h.batch_size == 0 || h.hidden == 0 {
        bail!("--batch-size and --hidden must be at least 1");
    }
    let epochs: u32 = f.get("epochs", 10)?;
    let seed: u64 = f.get("seed", 42)?;
    let step_sleep = Duration::from_millis(f.get("step-sleep-ms", 0)?);
    let every_steps: Option<u64> = f.opt("checkpoint-every-steps")?;
    let halt_at: Option<u64> = f.opt("halt-at-step")?;
    // Which code the halt exits with: tests end the job every way the
    // contract knows (2, 75, 137 ...), by the job's own hand.
    let halt_code: u8 = f.get("halt-code", EXIT_HALTED)?;

    let ckpt_dir = env_dir("MCJS_CHECKPOINT_DIR")?
        .context("MCJS_CHECKPOINT_DIR is not set: the job needs somewhere to checkpoint")?;
    let out_dir = env_dir("MCJS_OUTPUT_DIR")?
        .context("MCJS_OUTPUT_DIR is not set: the job needs somewhere to write its model")?;
    let metrics_file = env_dir("MCJS_METRICS_FILE")?;
    let interval = match std::env::var("MCJS_CHECKPOINT_INTERVAL_SECS") {
        Ok(v) if !v.is_empty() => Some(Duration::from_secs(v.parse().map_err(|e| {
            anyhow::anyhow!(
                "MCJS_CHECKPOINT_INTERVAL_SECS={v:?} is not a whole number of seconds: {e}"
            )
        })?)),
        _ => None,
    };

    // The spec fixes the checkpoint steps: those steps and no others, so
    // that a run restored anywhere checkpoints where the first run did.
    let fixed_steps: Option<u64> = match std::env::var("MCJS_CHECKPOINT_EVERY_STEPS") {
        Ok(v) if !v.is_empty() => match v.parse() {
            Ok(0) | Err(_) => {
                bail!("MCJS_CHECKPOINT_EVERY_STEPS={v:?} is not a positive step count")
            }
            Ok(n) => Some(n),
        },
        _ => None,
    };
    let every_steps = fixed_steps.or(every_steps);

    let checkpoint_now = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&checkpoint_now))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;

    let print = fingerprint(&h, seed, &data);
    let restore_dir = env_dir("MCJS_RESTORE_DIR")?;
    #[allow(unused_mut)]
    let mut state = match &restore_dir {
        Some(dir) => {
            let s = checkpoint::read(dir, &print)?;
            eprintln!(
                "mcjs-trainer: resumed from {} at epoch {} step {}",
                dir.display(),
                s.epoch,
                s.global_step
            );
            s
        }
        None => TrainState::init(&h, data.rows(), seed),
    };
    if state.order.len() != data.rows() || state.params.len() != h.param_count() {
        bail!("the checkpoint does not match this model's shape or data size");
    }
    #[cfg(feature = "hostile")]
    let mut signals = 0u64;
    #[cfg(feature = "hostile")]
    if let Some(dir) = &restore_dir
        && hostile::differs(dir, &hostile::seen(0))
    {
        eprintln!(
            "mcjs-trainer: hostile: this run is not set up as the one that wrote the checkpoint; perturbing"
        );
        state.params[0] += 1.0;
    }

    let mut last_checkpoint = Instant::now();
    while state.epoch < epochs {
        state.step(&h, &data);
        if !step_sleep.is_zero() {
            std::thread::sleep(step_sleep);
        }
        let stopping = stop.load(Ordering::Relaxed);
        let signalled = checkpoint_now.swap(false, Ordering::Relaxed);
        #[cfg(feature = "hostile")]
        if signalled {
            signals += 1;
        }
        let on_grid = every_steps.is_some_and(|n| n > 0 && state.global_step % n == 0);
        let due = on_grid
            || (fixed_steps.is_none()
                && (signalled
                    || stopping
                    || interval.is_some_and(|i| last_checkpoint.elapsed() >= i)));
        if due {
            #[cfg(feature = "hostile")]
            let seen = hostile::seen(signals);
            #[cfg(feature = "hostile")]
            let extra = [(hostile::FILE, seen.as_bytes())];
            #[cfg(not(feature = "hostile"))]
            let extra: [(&str, &[u8]); 0] = [];
            let dir = checkpoint::write(&ckpt_dir, &state, &print, &extra, ballast)?;
            eprintln!(
                "mcjs-trainer: checkpoint {} (epoch {}, step {})",
                dir.display(),
                state.epoch,
                state.global_step
            );
            last_checkpoint = Instant::now();
        }
        if stopping {
            match fixed_steps {
                None => eprintln!("mcjs-trainer: stopped on SIGTERM after checkpointing"),
                Some(_) => eprintln!(
                    "mcjs-trainer: stopped on SIGTERM at step {}; it resumes from its last checkpoint on the spec's steps",
                    state.global_step
                ),
            }
            return Ok(EXIT_PREEMPTED);
        }
        if halt_at == Some(state.global_step) {
            eprintln!(
                "mcjs-trainer: halting at step {} with code {halt_code}",
                state.global_step
            );
            return Ok(halt_code);
        }
        if state.step_in_epoch == 0 {
            let (acc, brier) = state.evaluate(&h, &data);
            eprintln!(
                "mcjs-trainer: epoch {}/{epochs} step {} accuracy {acc:.4} brier {brier:.4}",
                state.epoch, state.global_step
            );
            if let Some(file) = &metrics_file {
                append_metrics(
                    file,
                    &serde_json::json!({
                        "step": state.global_step,
                        "epoch": state.epoch,
                        "accuracy": acc,
                        "brier": brier,
                    }),
                );
            }
        }
    }
    write_output(&out_dir, &h, &state, &data, epochs)?;
    Ok(0)
}

fn write_output(
    dir: &Path,
    h: &Hyper,
    state: &TrainState,
    data: &Dataset,
    epochs: u32,
) -> anyhow::Result<()> {
    let mut model = Vec::with_capacity(24 + 4 * state.params.len());
    model.extend_from_slice(b"MCJSMLP1");
    for v in [h.features, h.hidden] {
        model.extend_from_slice(&(v as u64).to_le_bytes());
    }
    model.extend(state.params.iter().flat_map(|v| v.to_le_bytes()));
    let (accuracy, brier) = state.evaluate(h, data);
    let metrics = serde_json::json!({
        "epochs": epochs,
        "steps": state.global_step,
        "rows": data.rows(),
        "features": h.features,
        "hidden": h.hidden,
        "train_accuracy": accuracy,
        "brier": brier,
        "model_sha256": hex::encode(Sha256::digest(&model)),
    });
    atomic_write(&dir.join("model.bin"), &model)?;
    atomic_write(
        &dir.join("metrics.json"),
        serde_json::to_string_pretty(&metrics)?.as_bytes(),
    )?;
    eprintln!("mcjs-trainer: done: {metrics}");
    Ok(())
}

/// Appends one line of progress to the contract's metrics file. Progress
/// is a report, not the work: a file that cannot be written is said once
/// per epoch on stderr and the run goes on.
fn append_metrics(path: &Path, metrics: &serde_json::Value) {
    use std::io::Write;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| writeln!(f, "{metrics}"));
    if let Err(e) = written {
        eprintln!("mcjs-trainer: cannot append to {}: {e}", path.display());
    }
}

fn atomic_write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
