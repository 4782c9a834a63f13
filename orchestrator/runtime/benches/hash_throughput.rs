//! Checkpoint hashing throughput against `openssl dgst -sha256` and
//! `sha256sum` on the same files in the same run. Prints medians.
//!
//! ```text
//! cargo bench -p mcjs-runtime --bench hash_throughput
//! MCJS_BENCH_FILES=16 MCJS_BENCH_FILE_MIB=64 MCJS_BENCH_REPS=5 cargo bench -p mcjs-runtime --bench hash_throughput
//! ```
//!
//! Files are written once and read from the page cache by every contender,
//! so this measures hashing, not the disk.

use mcjs_runtime::checkpoint::hash_checkpoint;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(reps: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm the page cache and the code
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn external(program: &str, args: &[&str], files: &[PathBuf]) -> Option<impl FnMut()> {
    let ok = Command::new(program)
        .args(args)
        .arg("/dev/null")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| {
        let program = program.to_string();
        let args: Vec<String> = args.iter().map(ToString::to_string).collect();
        let files = files.to_vec();
        move || {
            let out = Command::new(&program)
                .args(&args)
                .args(&files)
                .output()
                .unwrap();
            assert!(out.status.success());
        }
    })
}

fn main() {
    let n_files = env("MCJS_BENCH_FILES", 8);
    let mib = env("MCJS_BENCH_FILE_MIB", 64);
    let reps = env("MCJS_BENCH_REPS", 5);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), n_files, mib);
    let total = (n_files * mib) as f64 / 1024.0;

    println!(
        "checkpoint of {n_files} files x {mib} MiB = {total:.2} GiB, {cores} cores, median of {reps}"
    );
    println!("| contender | threads | median s | GiB/s | vs openssl (1 core) |");
    println!("| --- | --- | --- | --- | --- |");
    let openssl = external("openssl", &["dgst", "-sha256"], &files).map(|f| time(reps, f));
    let row = |name: &str, threads: &str, d: Duration| {
        let rate = total / d.as_secs_f64();
        let rel = openssl.map_or("n/a".to_string(), |o| {
            format!("{:.2}x", o.as_secs_f64() / d.as_secs_f64())
        });
        println!(
            "| {name} | {threads} | {:.3} | {rate:.2} | {rel} |",
            d.as_secs_f64()
        );
    };
    if let Some(o) = openssl {
        row("`openssl dgst -sha256 <files>`", "1", o);
    }
    if let Some(f) = external("sha256sum", &[], &files) {
        row("`sha256sum <files>`", "1", time(reps, f));
    }
    let mut threads = 1;
    loop {
        let d = time(reps, || {
            hash_checkpoint(dir.path(), threads).unwrap();
        });
        row(
            "mcjs_runtime::checkpoint::hash_checkpoint",
            &threads.to_string(),
            d,
        );
        if threads >= cores {
            break;
        }
        threads = (threads * 2).min(cores);
    }
}

fn write_files(dir: &Path, n: usize, mib: usize) -> Vec<PathBuf> {
    // Incompressible, cheap to generate, different per file.
    (0..n)
        .map(|i| {
            let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
            let mut bytes = Vec::with_capacity(mib << 20);
            while bytes.len() < mib << 20 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                bytes.extend_from_slice(&state.to_le_bytes());
            }
            let p = dir.join(format!("shard-{i:03}.bin"));
            std::fs::write(&p, &bytes).unwrap();
            p
        })
        .collect()
}
