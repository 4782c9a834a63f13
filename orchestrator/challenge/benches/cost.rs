//! The challenge's cost on the CPU backend, and the sizes of real claims.
//!
//! `cargo bench -p mcjs-challenge --features adversaries --bench cost`
//! (bench/results/challenge-cpu.txt). Measured: the node's commit phase, its held passes,
//! one held pass of a node with half the memory that recomputes what it lacks, its opening,
//! and the checker's verdict. Computed, not measured: the same quantities for GPU claims.

use std::time::{Duration, Instant};

use mcjs_challenge::adversary::{Missing, ShortMemory};
use mcjs_challenge::hash::first_held_key;
use mcjs_challenge::{
    Answer, Backend, BoundsTable, Claim, CpuBackend, Draws, Entry, Figures, Params, PhaseTimes,
    Prover, Sizing, TimeBound, Verdict, judge,
};

const MODEL: &str = "cpu-reference";

/// Generous figures: the bench measures, it does not judge time.
const UNTIMED: BoundsTable<'static> = BoundsTable {
    entries: &[Entry {
        model: MODEL,
        figures: Figures::Measured {
            commit_macs_per_s: 1,
            held_bytes_per_s: 1,
        },
        source: "bench",
    }],
    slack_percent: 100,
    chain_allowance: Duration::ZERO,
};

fn main() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sizing = Sizing::STANDARD;
    println!(
        "sizing: fill {}%, passes {}, rows opened {}, widest product {}; CPU backend on {threads} threads",
        sizing.fill_percent, sizing.passes, sizing.rows_opened, sizing.max_width
    );
    println!();
    println!(
        "{:>6} {:>6} {:>10} {:>9} {:>11} {:>9} {:>11} {:>12} {:>10} {:>8} {:>11} {:>10} {:>10}",
        "width",
        "rows",
        "claim_B",
        "commit_s",
        "MAC/s",
        "held_s",
        "held_B/s",
        "pass_ms",
        "short_ms",
        "ratio",
        "open_B",
        "open_s",
        "verify_s"
    );
    for width in [512u64, 1024, 2048] {
        // A square product: B (width² bytes) and width rows of 2·width held bytes, at the
        // fill share, with room to spare for rounding.
        let claim = Claim::new(MODEL, (3 * width * width * 100).div_ceil(85) + 4096);
        let params = Params::for_claim_in(&UNTIMED, &sizing, &claim, [width as u8; 32]).unwrap();
        let draws = Draws {
            held_seed: [1; 32],
            open_seed: [2; 32],
        };

        let started = Instant::now();
        let mut prover = Prover::commit(params.clone(), CpuBackend::new()).unwrap();
        let commit = started.elapsed();
        let started = Instant::now();
        let held_digest = prover.hold(&draws.held_seed).unwrap();
        let held = started.elapsed();
        let started = Instant::now();
        let opening = prover.open(&draws.open_seed).unwrap();
        let open = started.elapsed();
        let open_bytes = opening.wire_bytes();
        let answer = Answer {
            commitment: prover.commitment(),
            held_digest,
            times: PhaseTimes {
                commit: Duration::ZERO,
                held: Duration::ZERO,
            },
            opening,
        };
        let started = Instant::now();
        let verdict = judge(&params, &draws, &answer);
        let verify = started.elapsed();
        assert!(matches!(verdict, Verdict::Passed(_)), "{verdict:?}");

        // One pass, honest and with half the memory recomputing the rest.
        let key = first_held_key(&params.digest(), &draws.held_seed, &prover.commitment());
        let mut honest = CpuBackend::new();
        honest.compute(&params).unwrap();
        let pass = fastest(3, || {
            honest.held_root(&key).unwrap();
        });
        let mut short = ShortMemory::new(claim.memory_bytes / 2, Missing::Recompute);
        short.compute(&params).unwrap();
        let short_pass = fastest(1, || {
            short.held_root(&key).unwrap();
        });

        let macs = params.macs() as f64;
        let held_read = f64::from(params.passes) * params.held_bytes() as f64;
        println!(
            "{:>6} {:>6} {:>10} {:>9.3} {:>11.3e} {:>9.3} {:>11.3e} {:>12.3} {:>10.1} {:>8.0} {:>11} {:>10.4} {:>10.4}",
            params.width,
            params.rows,
            claim.memory_bytes,
            commit.as_secs_f64(),
            macs / commit.as_secs_f64(),
            held.as_secs_f64(),
            held_read / held.as_secs_f64(),
            pass.as_secs_f64() * 1e3,
            short_pass.as_secs_f64() * 1e3,
            short_pass.as_secs_f64() / pass.as_secs_f64(),
            open_bytes,
            open.as_secs_f64(),
            verify.as_secs_f64(),
        );
    }
    println!();
    println!(
        "commit_s: the commit phase (generate A and B, multiply, hash every row, build the tree)"
    );
    println!("held_s: all held passes; pass_ms: one honest pass (fastest of 3);");
    println!(
        "short_ms: one pass of a node with half the claimed memory recomputing the rows it lacks;"
    );
    println!(
        "open_B: the opening on the wire (rows, proofs, roots); open_s: the node building it;"
    );
    println!("verify_s: the checker's verdict (regenerate B, B·r for 2 vectors, proofs, rows).");

    // The checker's cost follows the width alone (it regenerates B, width² bytes, and
    // computes B·r twice), so it is measured at the widest product every claim of 3.8 GB
    // or more gets, with only the rows it opens.
    let widest = Params {
        seed: [9; 32],
        model: MODEL.into(),
        memory_bytes: 2 * 32 * 32_768,
        width: 32_768,
        rows: 32,
        passes: 2,
        rows_opened: 32,
        bound: TimeBound::Unmeasured,
    };
    let draws = Draws {
        held_seed: [1; 32],
        open_seed: [2; 32],
    };
    let started = Instant::now();
    let mut prover = Prover::commit(widest.clone(), CpuBackend::new()).unwrap();
    let commit = started.elapsed();
    let held_digest = prover.hold(&draws.held_seed).unwrap();
    let opening = prover.open(&draws.open_seed).unwrap();
    let open_bytes = opening.wire_bytes();
    let answer = Answer {
        commitment: prover.commitment(),
        held_digest,
        times: PhaseTimes {
            commit: Duration::ZERO,
            held: Duration::ZERO,
        },
        opening,
    };
    let started = Instant::now();
    let verdict = judge(&widest, &draws, &answer);
    let verify = started.elapsed();
    assert_eq!(verdict, Verdict::Unbounded);
    println!();
    println!(
        "checker at width 32768 (32 rows opened): verify_s {:.2} (B: 1.07 GB regenerated, 2.15e9 MACs); \
         open_B {open_bytes} with 32 rows and 2 passes; node commit of those 32 rows {:.1} s",
        verify.as_secs_f64(),
        commit.as_secs_f64()
    );

    println!();
    println!("Real claims, computed from the sizing (not measured):");
    println!(
        "{:>16} {:>7} {:>9} {:>11} {:>11} {:>12} {:>10} {:>12} {:>14}",
        "claim",
        "width",
        "rows",
        "held_GB",
        "MACs",
        "held_read_GB",
        "open_MB",
        "checker_B_GB",
        "checker_MACs"
    );
    for (name, bytes) in [
        ("12 GiB", 12u64 << 30),
        ("24 GiB", 24 << 30),
        ("40 GiB", 40 << 30),
        ("80 GiB", 80 << 30),
        ("141 GiB", 141 << 30),
    ] {
        let params = Params::for_claim(&Claim::new("any", bytes), [0; 32]).unwrap();
        let depth = 64 - (params.rows - 1).leading_zeros() as u64;
        let open = u64::from(params.passes) * 32
            + u64::from(params.rows_opened) * (12 + 4 * u64::from(params.width) + 2 * 32 * depth);
        let w = u64::from(params.width);
        println!(
            "{:>16} {:>7} {:>9} {:>11.2} {:>11.3e} {:>12.0} {:>10.2} {:>12.2} {:>14.3e}",
            name,
            params.width,
            params.rows,
            params.held_bytes() as f64 / 1e9,
            params.macs() as f64,
            f64::from(params.passes) * params.held_bytes() as f64 / 1e9,
            open as f64 / 1e6,
            (w * w) as f64 / 1e9,
            (2 * w * w + 4 * u64::from(params.rows_opened) * w) as f64,
        );
    }
    println!();
    println!("GPU seconds at a model's measured rates (bounds::MEASURED): commit = MACs/rate,");
    println!(
        "held = held bytes read/rate; 80 GiB on the H100 80GB HBM3 (bench/results/challenge-gpu.txt):"
    );
    let p = Params::for_claim(&Claim::new("h100-80gb-hbm3", 80 << 30), [0; 32]).unwrap();
    if let Some(mcjs_challenge::Figures::Measured {
        commit_macs_per_s,
        held_bytes_per_s,
    }) = mcjs_challenge::bounds::MEASURED
        .entry("h100-80gb-hbm3")
        .map(|e| e.figures)
    {
        println!(
            "  commit {:.1} s, held {:.1} s",
            p.macs() as f64 / commit_macs_per_s as f64,
            f64::from(p.passes) * p.held_bytes() as f64 / held_bytes_per_s as f64
        );
    }
}

fn fastest(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .unwrap()
}
