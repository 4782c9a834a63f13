//! Checkpoint hashing throughput against `openssl dgst -sha256` and
//! `sha256sum` on the same files in the same run, then the cost of confined
//! reads on the whole pipeline (hash and store into a local object store):
//! the former path-based pass (list, open each path, hash on all threads,
//! then open each path again and copy it to the store) against
//! `store::upload_tree` (openat2-confined opens, each file hashed while it
//! is copied, `threads` files at a time). Prints medians.
//!
//! ```text
//! cargo bench -p mcjs-runtime --bench hash_throughput
//! MCJS_BENCH_FILES=16 MCJS_BENCH_FILE_MIB=64 MCJS_BENCH_REPS=5 cargo bench -p mcjs-runtime --bench hash_throughput
//! ```
//!
//! Files are written once and read from the page cache by every contender,
//! so this measures hashing, not the disk.

use mcjs_runtime::checkpoint::{CheckpointDigest, FileDigest, hash_checkpoint, hash_reader};
use mcjs_runtime::confined::{ConfinedDir, Limits};
use object_store::ObjectStore;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
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
    pipeline_cost(dir.path(), total, reps, cores);
}

/// Hash and store: before (path-based, two passes) and after (confined,
/// one pass), into a fresh local object store each time.
fn pipeline_cost(dir: &Path, total_gib: f64, reps: usize, cores: usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(store_dir.path()).unwrap());
    let mut n = 0;
    let mut fresh = || {
        n += 1;
        format!("bench/{n}")
    };
    println!();
    println!("hash + store into a local object store ({total_gib:.2} GiB), median of {reps}");
    println!("| pipeline | threads | median s | GiB/s |");
    println!("| --- | --- | --- | --- |");
    let mut medians = Vec::new();
    for threads in [1, cores] {
        // The reads alone: plain opens by path against confined opens.
        let plain = time(reps, || {
            path_hash(dir, threads);
        });
        let confined = time(reps, || {
            hash_checkpoint(dir, threads).unwrap();
        });
        for (name, d) in [
            ("hash only: open by path", plain),
            ("hash only: confined openat2", confined),
        ] {
            println!(
                "| {name} | {threads} | {:.3} | {:.2} |",
                d.as_secs_f64(),
                total_gib / d.as_secs_f64()
            );
        }
        let before = time(reps, || {
            let prefix = fresh();
            rt.block_on(path_based(&store, &prefix, dir, threads));
        });
        let after = time(reps, || {
            let prefix = fresh();
            let root = ConfinedDir::open(dir).unwrap();
            rt.block_on(mcjs_runtime::store::upload_tree(
                &store,
                &prefix,
                root,
                Limits::UNLIMITED,
                threads,
                None,
            ))
            .unwrap();
        });
        for (name, d) in [
            ("before: path-based hash, then upload", before),
            ("after: confined, hash while uploading", after),
        ] {
            println!(
                "| {name} | {threads} | {:.3} | {:.2} |",
                d.as_secs_f64(),
                total_gib / d.as_secs_f64()
            );
        }
        medians.push((threads, before, after));
        let _ = std::fs::remove_dir_all(store_dir.path().join("bench"));
    }
    for (threads, before, after) in medians {
        println!(
            "threads {threads}: after/before time = {:.3} (throughput x{:.2})",
            after.as_secs_f64() / before.as_secs_f64(),
            before.as_secs_f64() / after.as_secs_f64()
        );
    }
}

/// What the pipeline did before confined reads: `hash_checkpoint`'s parallel
/// hash over paths, then each path opened again and copied to the store.
async fn path_based(store: &Arc<dyn ObjectStore>, prefix: &str, dir: &Path, threads: usize) {
    use tokio::io::AsyncWriteExt;
    let owned = dir.to_path_buf();
    let digest: CheckpointDigest = tokio::task::spawn_blocking(move || path_hash(&owned, threads))
        .await
        .unwrap();
    for f in &digest.files {
        let mut file = tokio::fs::File::open(dir.join(&f.path)).await.unwrap();
        let dst = object_store::path::Path::from(format!("{prefix}/{}", f.path));
        let mut writer = object_store::buffered::BufWriter::new(Arc::clone(store), dst);
        tokio::io::copy(&mut file, &mut writer).await.unwrap();
        writer.shutdown().await.unwrap();
    }
}

/// The former `hash_checkpoint`: files listed and opened by path.
fn path_hash(owned: &Path, threads: usize) -> CheckpointDigest {
    {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(owned)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        let files = pool.install(|| {
            use rayon::prelude::*;
            paths
                .par_iter()
                .map(|p| {
                    let (size, sha256) = hash_reader(std::fs::File::open(p).unwrap(), p).unwrap();
                    FileDigest {
                        path: p.file_name().unwrap().to_string_lossy().into_owned(),
                        size,
                        sha256,
                    }
                })
                .collect::<Vec<_>>()
        });
        CheckpointDigest::combine(files)
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
