//! The GPU backend on a real card: first that it answers exactly as the CPU backend, then
//! what the card's own challenge costs, as the figures for `bounds::MEASURED`.
//!
//! ```text
//! cargo build --release -p mcjs-challenge --features gpu --example gpu_check
//! gpu_check [--gpu N] [--check-mib 64] [--runs 3] [--claim-mib M]
//! ```
//!
//! `bench/gpu-challenge.sh` runs it on a lent GPU machine. Exits non-zero when the GPU's
//! answer differs from the CPU's or fails the check, so a run that prints figures is a run
//! whose answers were right.

use std::time::{Duration, Instant};

use mcjs_challenge::{
    Answer, Backend, BoundsTable, Claim, CpuBackend, CudaDevice, Draws, Entry, Figures,
    KernelBackend, Params, PhaseTimes, Prover, Sizing, Verdict, judge,
};

/// Figures no card misses: this binary measures and checks answers; it does not judge time.
fn untimed(model: &'static str) -> BoundsTable<'static> {
    BoundsTable {
        entries: Box::leak(Box::new([Entry {
            model,
            figures: Figures::Measured {
                commit_macs_per_s: 1,
                held_bytes_per_s: 1,
            },
            source: "gpu_check",
        }])),
        slack_percent: 100,
        chain_allowance: Duration::ZERO,
    }
}

const DRAWS: Draws = Draws {
    held_seed: [0x48; 32],
    open_seed: [0x0b; 32],
};

struct Args {
    gpu: usize,
    check_mib: u64,
    runs: usize,
    claim_mib: Option<u64>,
}

fn args() -> Args {
    let mut args = Args {
        gpu: 0,
        check_mib: 64,
        runs: 3,
        claim_mib: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| fail(&format!("{flag} takes a number")))
        };
        match flag.as_str() {
            "--gpu" => args.gpu = value() as usize,
            "--check-mib" => args.check_mib = value(),
            "--runs" => args.runs = value().max(1) as usize,
            "--claim-mib" => args.claim_mib = Some(value()),
            _ => fail(&format!(
                "unknown argument {flag}; use --gpu N --check-mib M --runs R --claim-mib M"
            )),
        }
    }
    args
}

fn fail(why: &str) -> ! {
    eprintln!("gpu_check: {why}");
    std::process::exit(1)
}

/// One challenge answered by `backend`, each phase timed to its end.
fn answer<B: Backend>(params: &Params, backend: B) -> (Answer, [Duration; 3]) {
    let started = Instant::now();
    let mut prover =
        Prover::commit(params.clone(), backend).unwrap_or_else(|e| fail(&format!("commit: {e}")));
    let commit = started.elapsed();
    let started = Instant::now();
    let held_digest = prover
        .hold(&DRAWS.held_seed)
        .unwrap_or_else(|e| fail(&format!("hold: {e}")));
    let held = started.elapsed();
    let started = Instant::now();
    let opening = prover
        .open(&DRAWS.open_seed)
        .unwrap_or_else(|e| fail(&format!("open: {e}")));
    let open = started.elapsed();
    let answer = Answer {
        commitment: prover.commitment(),
        held_digest,
        times: PhaseTimes { commit, held },
        opening,
    };
    (answer, [commit, held, open])
}

/// GPU `ordinal`, its kernels compiled first as the agent compiles them when it starts, so
/// that the two times printed are NVRTC's and what a challenge's opening of the card costs.
fn open_gpu(ordinal: usize) -> KernelBackend<CudaDevice> {
    let started = Instant::now();
    let capabilities = CudaDevice::prepare_kernels().unwrap_or_else(|e| fail(&e.to_string()));
    let compiled = started.elapsed();
    let started = Instant::now();
    let device = CudaDevice::open(ordinal).unwrap_or_else(|e| fail(&e.to_string()));
    println!(
        "gpu {ordinal}: {} (compute {}.{}): kernels compiled for {capabilities} capabilities in {:.2} s, then the card opened (context, module, cuBLAS) in {:.2} s",
        device.name(),
        device.capability().0,
        device.capability().1,
        compiled.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    KernelBackend::new(device)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = args();
    let missing = CudaDevice::missing_libraries();
    if !missing.is_empty() {
        fail(&format!("cannot load {}", missing.join(", ")));
    }
    // CUDA numbers the fastest card first; a challenge numbers GPUs by PCI address (the
    // HAL's nvml_check prints NVML's, which must name the same cards).
    match CudaDevice::pci_bus_ids() {
        Ok(ids) => println!("cuda's pci addresses, in cuda's order: {ids:?}"),
        Err(e) => fail(&e.to_string()),
    }
    let mut gpu = open_gpu(args.gpu);
    let name = gpu.device().name().to_string();
    let model: &'static str = Box::leak(mcjs_spec::gpu::normalize_model(&name).into_boxed_str());
    let table = untimed(model);

    // 1. The same answers as the CPU backend, at a size the CPU answers quickly.
    let small = Params::for_claim_in(
        &table,
        &Sizing::STANDARD,
        &Claim::new(model, args.check_mib << 20),
        [0x11; 32],
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    let (cpu, cpu_times) = answer(&small, CpuBackend::new());
    let (on_gpu, gpu_times) = answer(&small, &mut gpu);
    println!(
        "check at {} MiB ({} x {}): CPU {:.2?}, GPU {:.2?} (commit, held, open)",
        args.check_mib, small.rows, small.width, cpu_times, gpu_times
    );
    if on_gpu.commitment != cpu.commitment
        || on_gpu.held_digest != cpu.held_digest
        || on_gpu.opening != cpu.opening
    {
        fail("the GPU's answer differs from the CPU backend's");
    }
    if !matches!(judge(&small, &DRAWS, &on_gpu), Verdict::Passed(_)) {
        fail("the GPU's answer fails the check");
    }
    println!(
        "check: the GPU's commitment, held digest and opening equal the CPU's; verdict Passed"
    );

    // 2. The card's own challenge, at its memory (or --claim-mib).
    let claim_bytes = match args.claim_mib {
        Some(mib) => mib << 20,
        None => gpu
            .device()
            .total_bytes()
            .unwrap_or_else(|e| fail(&e.to_string())),
    };
    let params = Params::for_claim_in(
        &table,
        &Sizing::STANDARD,
        &Claim::new(model, claim_bytes),
        [0x22; 32],
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    let held_bytes = u128::from(params.passes) * u128::from(params.held_bytes());
    println!(
        "claim {claim_bytes} B: {} rows x {}, {} MACs, {} held B x {} passes",
        params.rows,
        params.width,
        params.macs(),
        params.held_bytes(),
        params.passes
    );
    let (mut macs_per_s, mut held_per_s) = (Vec::new(), Vec::new());
    for run in 0..args.runs {
        let (got, [commit, held, open]) = answer(&params, &mut gpu);
        let started = Instant::now();
        let verdict = judge(&params, &DRAWS, &got);
        let verify = started.elapsed();
        if !matches!(verdict, Verdict::Passed(_)) {
            fail(&format!(
                "run {run}: the GPU's answer fails the check: {verdict:?}"
            ));
        }
        let rate = |work: u128, d: Duration| work as f64 / d.as_secs_f64();
        macs_per_s.push(rate(params.macs(), commit));
        held_per_s.push(rate(held_bytes, held));
        println!(
            "run {run}: commit {:.3} s ({:.3e} MAC/s), held {:.3} s ({:.3e} B/s, {:.1} ms a pass), open {:.3} s, checker {:.3} s, panel {} rows, opening {} B packed; Passed",
            commit.as_secs_f64(),
            macs_per_s[run],
            held.as_secs_f64(),
            held_per_s[run],
            held.as_secs_f64() * 1000.0 / f64::from(params.passes),
            open.as_secs_f64(),
            verify.as_secs_f64(),
            gpu.panel_rows().unwrap_or(0),
            got.opening.wire_bytes(),
        );
    }
    let (macs, held) = (median(macs_per_s), median(held_per_s));
    println!();
    println!("for bounds::MEASURED (median of {} runs):", args.runs);
    println!(
        "Entry {{ model: \"{model}\", figures: Figures::Measured {{ commit_macs_per_s: {}, held_bytes_per_s: {} }}, source: \"bench/results/challenge-gpu.txt: GPU backend on one {name}, claim {claim_bytes} B, median of {} runs\" }}",
        macs as u64, held as u64, args.runs
    );
}
