//! The job's own stall at a checkpoint: writing SIZE MiB and fsyncing it, as
//! a job writes its checkpoint before its manifest, on a run's volume (the
//! loop-mounted ext4 image of the declared disk the agent gives every job,
//! `mcjs_runtime::volume`) against the same write into a directory on the
//! host's own disk, alternating, in one run. Needs root (mount).
//!
//! ```text
//! MCJS_BENCH_SIZES=256,1024,4096 MCJS_BENCH_REPS=5 MCJS_BENCH_DIR=/var/tmp \
//!   cargo bench -p mcjs-runtime --bench volume_write
//! ```
//!
//! Prints the medians (seconds and MiB/s) and the volume's ratio to the host.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A checkpoint's write as a job does it: the file in 8 MiB writes, fsync'd,
/// then the manifest written, fsync'd and renamed into place.
fn write_checkpoint(dir: &Path, mib: usize, seed: u64) -> f64 {
    let ckpt = dir.join(format!("step-{seed}"));
    std::fs::create_dir_all(&ckpt).unwrap();
    let mut block = vec![0u8; 8 << 20];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let start = Instant::now();
    let mut f = std::fs::File::create(ckpt.join("weights.bin")).unwrap();
    for _ in 0..mib / 8 {
        for word in block.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            word.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    let tmp = ckpt.join("mcjs-manifest.json.tmp");
    let mut m = std::fs::File::create(&tmp).unwrap();
    m.write_all(br#"{"format":"mcjs-checkpoint/1","epoch":0,"step":1}"#)
        .unwrap();
    m.sync_all().unwrap();
    std::fs::rename(&tmp, ckpt.join("mcjs-manifest.json")).unwrap();
    let secs = start.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&ckpt).unwrap();
    secs
}

fn main() {
    let sizes: Vec<usize> = env("MCJS_BENCH_SIZES", "256,1024")
        .split(',')
        .map(|s| s.trim().parse().expect("MCJS_BENCH_SIZES: MiB"))
        .collect();
    let reps: usize = env("MCJS_BENCH_REPS", "5").parse().unwrap();
    let base = std::env::var_os("MCJS_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let work = tempfile::Builder::new()
        .prefix("volume-write-")
        .tempdir_in(&base)
        .unwrap();
    let host = work.path().join("host");
    std::fs::create_dir_all(&host).unwrap();
    let run_dir = work.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let largest = *sizes.iter().max().unwrap() as u64;
    let volume = mcjs_runtime::volume::ensure(&run_dir, (largest + 64) << 20)
        .expect("a run volume (needs root: mount)");
    println!(
        "# volume_write: a checkpoint's write and fsync, the run's loop-mounted volume against the host's disk ({}), {reps} repetitions alternating, medians",
        base.display()
    );
    println!("| checkpoint | host s | host MiB/s | volume s | volume MiB/s | volume / host time |");
    println!("|---|---|---|---|---|---|");
    for &mib in &sizes {
        let (mut on_host, mut on_volume) = (Vec::new(), Vec::new());
        write_checkpoint(&host, mib.min(64), 0); // warm both
        write_checkpoint(&volume, mib.min(64), 0);
        for rep in 0..reps {
            on_host.push(write_checkpoint(&host, mib, rep as u64 + 1));
            on_volume.push(write_checkpoint(&volume, mib, rep as u64 + 1));
        }
        let (h, v) = (median(on_host), median(on_volume));
        println!(
            "| {mib} MiB | {h:.2} | {:.0} | {v:.2} | {:.0} | {:.2} |",
            mib as f64 / h,
            mib as f64 / v,
            v / h
        );
    }
    mcjs_runtime::volume::release(&run_dir).expect("the volume is released");
}
