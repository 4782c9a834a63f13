//! Semantic checks of a well-formed spec: values that parse but cannot be scheduled, or that
//! contradict each other. Every check reports at the JSON pointer of the field to change.

use std::collections::BTreeSet;

use crate::error::{SpecError, pointer_token};
use crate::fields::UriScheme;
use crate::parse::LOCAL_INFRASTRUCTURE;
use crate::spec::{CHECKPOINT_DIR, DATA_ROOT, JobSpec, SPEC_VERSION, WorkKind};
use crate::units::{ByteSize, HumanDuration, MIB};

pub const MAX_GPU_COUNT: u8 = 16;
pub const MAX_GPU_MODELS: usize = 4;
pub const MAX_MODEL_ID_BYTES: usize = 128;
pub const MAX_CHECKPOINTS_KEPT: u8 = 16;
/// RFC 8785 writes numbers as IEEE doubles: integers above 2^53 - 1 would not survive
/// canonicalisation exactly.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
/// Below this a node would spend its life checkpointing and the chain attesting.
pub const MIN_CHECKPOINT_INTERVAL_SECS: u64 = 60;
/// The bounds of `output.logs_cap`: what one run keeps of what the job prints.
pub const MIN_LOGS_CAP: u64 = 1 << 20;
pub const MAX_LOGS_CAP: u64 = 1 << 30;
/// Above this sustained fsync'd write rate (about 20 GiB/s) no node storage keeps up.
pub const MAX_CHECKPOINT_WRITE_MIBPS: u64 = 20_480;

#[derive(Default)]
struct Errors(Vec<SpecError>);

impl Errors {
    fn at(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(SpecError::new(path, message));
    }
}

/// Every check that does not depend on the time.
pub(crate) fn check_static(spec: &JobSpec) -> Vec<SpecError> {
    let mut e = Errors::default();
    if spec.version != SPEC_VERSION {
        e.at(
            "/version",
            format!("unsupported version {}; this build reads version {SPEC_VERSION}: set \"version\": 1", spec.version),
        );
    }
    check_work(spec, &mut e);
    check_data(spec, &mut e);
    check_hardware(spec, &mut e);
    check_duration_and_price(spec, &mut e);
    check_checkpoint(spec, &mut e);
    check_output(spec, &mut e);
    check_verification(spec, &mut e);
    e.0
}

/// Verification re-executes attested intervals and compares hashes: only a
/// job that resumes bit for bit can be checked that way.
fn check_verification(spec: &JobSpec, e: &mut Errors) {
    if spec.verification.is_some() && spec.work.determinism != crate::spec::Determinism::Bitwise {
        e.at(
            "/verification",
            "verification re-executes attested intervals on another node and compares their checkpoint hashes, which only a bit-for-bit deterministic job can pass: declare \"work\": {\"determinism\": \"bitwise\"} (fixed seeds, deterministic kernels) or remove verification",
        );
    }
    if spec.verification.is_some() && spec.checkpoint.every_steps.is_none() {
        e.at(
            "/checkpoint/every_steps",
            "a verified job checkpoints at steps its spec fixes, so that a check run reaches the attested step exactly as the paid run did, without being told it is a check: add \"every_steps\": N to \"checkpoint\" (N steps between checkpoints, taking less than the interval) or remove verification",
        );
    }
}

/// The checks that need the time: a deadline must lie far enough ahead to run the job.
pub(crate) fn check_time(spec: &JobSpec, now_unix: i64) -> Vec<SpecError> {
    let mut e = Errors::default();
    if let Some(deadline) = spec.request.deadline {
        let max = spec.request.duration.max();
        let left = i128::from(deadline.unix()) - i128::from(now_unix);
        if left <= 0 {
            e.at(
                "/request/deadline",
                format!("deadline {deadline} is in the past; set a later deadline or remove it"),
            );
        } else if left < i128::from(max.secs()) {
            e.at(
                "/request/deadline",
                format!(
                    "deadline {deadline} leaves only {} but the request's duration needs up to {max}: the job could never finish in time; move the deadline later or shorten the duration",
                    HumanDuration(left as u64)
                ),
            );
        }
    }
    e.0
}

fn check_work(spec: &JobSpec, e: &mut Errors) {
    let w = &spec.work;
    if !w.queue_tolerant {
        e.at(
            "/work/queue_tolerant",
            format!("work that is not queue-tolerant is refused: {LOCAL_INFRASTRUCTURE}"),
        );
    }
    if w.model_id.is_empty()
        || w.model_id.len() > MAX_MODEL_ID_BYTES
        || w.model_id
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        e.at(
            "/work/model_id",
            format!("model_id must be 1 to {MAX_MODEL_ID_BYTES} bytes without spaces, e.g. \"meta-llama/Llama-3.1-8B\""),
        );
    }
    match w.command.first() {
        None => e.at(
            "/work/command",
            "command is empty; give the entrypoint, e.g. [\"python\", \"train.py\"]",
        ),
        Some(first) if first.is_empty() => e.at(
            "/work/command/0",
            "the entrypoint is an empty string; name the program to run",
        ),
        Some(_) => {}
    }
    for (i, arg) in w.command.iter().enumerate() {
        if arg.contains('\0') {
            e.at(
                format!("/work/command/{i}"),
                "contains a NUL character, which no process argument can hold",
            );
        }
    }
    for (i, arg) in w.args.iter().enumerate() {
        if arg.contains('\0') {
            e.at(
                format!("/work/args/{i}"),
                "contains a NUL character, which no process argument can hold",
            );
        }
    }
    for (key, value) in &w.env {
        let path = format!("/work/env/{}", pointer_token(key));
        let valid_name = key
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            e.at(&path, format!("environment name {key:?} is not valid: use letters, digits and '_', not starting with a digit"));
        } else if key.to_ascii_uppercase().starts_with("MCJS_") {
            e.at(&path, format!("environment name {key:?} is reserved: MCJS_ variables carry the agent's checkpoint contract; rename it"));
        }
        if value.contains('\0') {
            e.at(
                &path,
                "the value contains a NUL character, which no environment variable can hold",
            );
        }
    }
    if let Some(epochs) = w.target_epochs {
        if w.kind != WorkKind::Training {
            e.at(
                "/work/target_epochs",
                format!("target_epochs applies to training only, not {}; use target_steps as a progress hint", w.kind.as_str()),
            );
        } else if epochs == 0 {
            e.at(
                "/work/target_epochs",
                "target_epochs must be at least 1, or left out when unknown",
            );
        }
    }
    match w.target_steps {
        Some(0) => e.at("/work/target_steps", "target_steps must be at least 1, or left out when unknown"),
        Some(n) if n > MAX_SAFE_INTEGER => e.at(
            "/work/target_steps",
            format!("target_steps {n} is above {MAX_SAFE_INTEGER}, the largest integer JSON carries exactly"),
        ),
        _ => {}
    }
}

fn check_data(spec: &JobSpec, e: &mut Errors) {
    let mut names = BTreeSet::new();
    for (i, input) in spec.data.iter().enumerate() {
        if !names.insert(input.name.as_str()) {
            e.at(format!("/data/{i}/name"), format!("input name \"{}\" is used twice; each input needs its own name (its mount directory)", input.name));
        }
    }
}

/// The memory a normalised model name states, e.g. "a100-sxm4-80gb" -> 80 (GB as sold, which
/// is GiB on the card).
fn stated_vram_gib(model: &str) -> Option<u64> {
    let last = model.rsplit('-').next()?;
    let digits = last.strip_suffix("gb")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn check_hardware(spec: &JobSpec, e: &mut Errors) {
    let h = &spec.request.hardware;
    const P: &str = "/request/hardware";
    if h.gpu_count == 0 {
        e.at(
            format!("{P}/gpu_count"),
            format!("gpu_count is 0: MCJS schedules GPU work; request 1 to {MAX_GPU_COUNT} GPUs"),
        );
        if h.min_vram_per_gpu.is_some() {
            e.at(format!("{P}/min_vram_per_gpu"), "a minimum VRAM per GPU with 0 GPUs is impossible; request at least 1 GPU or remove it");
        }
        if !h.gpu_models.is_empty() {
            e.at(format!("{P}/gpu_models"), "acceptable GPU models with 0 GPUs are impossible; request at least 1 GPU or remove them");
        }
    } else if h.gpu_count > MAX_GPU_COUNT {
        e.at(
            format!("{P}/gpu_count"),
            format!(
                "gpu_count {} is more than one node holds; request 1 to {MAX_GPU_COUNT} GPUs",
                h.gpu_count
            ),
        );
    }
    if h.gpu_models.len() > MAX_GPU_MODELS {
        e.at(
            format!("{P}/gpu_models"),
            format!(
                "{} GPU models listed; at most {MAX_GPU_MODELS} fit on chain: use shorter prefixes (\"a100\" matches every A100)",
                h.gpu_models.len()
            ),
        );
    }
    let mut seen = BTreeSet::new();
    for (i, model) in h.gpu_models.iter().enumerate() {
        if !seen.insert(model.as_str()) {
            e.at(
                format!("{P}/gpu_models/{i}"),
                format!("gpu model \"{model}\" is listed twice (after normalisation); remove one"),
            );
        }
    }
    if let Some(vram) = h.min_vram_per_gpu {
        if vram.0 == 0 {
            e.at(
                format!("{P}/min_vram_per_gpu"),
                "min_vram_per_gpu is 0; leave it out when any amount will do",
            );
        } else if vram.mib_ceil() > u64::from(u32::MAX) {
            e.at(
                format!("{P}/min_vram_per_gpu"),
                format!("min_vram_per_gpu {vram} is beyond any GPU"),
            );
        } else {
            let stated: Option<Vec<(String, u64)>> = h
                .gpu_models
                .iter()
                .map(|m| stated_vram_gib(m.as_str()).map(|g| (m.to_string(), g)))
                .collect();
            if let Some(stated) = stated.filter(|s| !s.is_empty())
                && stated.iter().all(|(_, gib)| gib * 1024 < vram.mib_ceil())
            {
                let listed: Vec<String> = stated
                    .iter()
                    .map(|(m, g)| format!("{m} has {g}GB"))
                    .collect();
                e.at(
                    format!("{P}/min_vram_per_gpu"),
                    format!(
                        "no acceptable GPU model has {vram} per GPU ({}); lower min_vram_per_gpu or accept larger models",
                        listed.join(", ")
                    ),
                );
            }
        }
    }
    if h.cpu_cores == 0 {
        e.at(
            format!("{P}/cpu_cores"),
            "cpu_cores is 0; request at least 1 core",
        );
    }
    if h.ram.0 == 0 {
        e.at(
            format!("{P}/ram"),
            "ram is 0; request the memory the job needs, e.g. \"64GiB\"",
        );
    } else if h.ram.mib_ceil() > u64::from(u32::MAX) {
        e.at(
            format!("{P}/ram"),
            format!("ram {} is more than 4PiB; no node has it", h.ram),
        );
    }
    if h.disk.0 == 0 {
        e.at(
            format!("{P}/disk"),
            "disk is 0; request room for staged data, checkpoints and output, e.g. \"500GiB\"",
        );
    } else if h.disk.gib_ceil() > u64::from(u32::MAX) {
        e.at(
            format!("{P}/disk"),
            format!("disk {} is more than 4EiB; no node has it", h.disk),
        );
    }
}

fn check_duration_and_price(spec: &JobSpec, e: &mut Errors) {
    let max = spec.request.duration.max();
    let field = match spec.request.duration {
        crate::spec::DurationRequest::Fixed { .. } => "/request/duration/length",
        crate::spec::DurationRequest::UntilDone { .. } => "/request/duration/limit",
    };
    if max.secs() == 0 {
        e.at(
            field,
            "the duration is 0; give the time the job needs, e.g. \"48h\"",
        );
    } else if max.secs() > u64::from(u32::MAX) {
        e.at(
            field,
            format!(
                "the duration {max} is too long; at most {}",
                HumanDuration(u64::from(u32::MAX))
            ),
        );
    }
    if spec.request.max_price_per_gpu_hour.0 == 0 {
        e.at("/request/max_price_per_gpu_hour", "max_price_per_gpu_hour is 0; no provider runs work for free: offer a price, e.g. \"2.50\"");
    }
}

fn check_checkpoint(spec: &JobSpec, e: &mut Errors) {
    let c = &spec.checkpoint;
    let max = spec.request.duration.max();
    if c.interval.secs() < MIN_CHECKPOINT_INTERVAL_SECS {
        e.at(
            "/checkpoint/interval",
            format!(
                "checkpoint interval {} is shorter than {}; checkpoint less often",
                c.interval,
                HumanDuration(MIN_CHECKPOINT_INTERVAL_SECS)
            ),
        );
    } else if max.secs() > 0 && c.interval > max {
        e.at(
            "/checkpoint/interval",
            format!(
                "checkpoint interval {} is longer than the maximum duration {max}: the job would never checkpoint; shorten the interval",
                c.interval
            ),
        );
    }
    if c.max_size.0 == 0 {
        e.at(
            "/checkpoint/max_size",
            "max_size is 0; give the size of the largest checkpoint, e.g. \"10GiB\"",
        );
    } else if c.interval.secs() >= MIN_CHECKPOINT_INTERVAL_SECS {
        let mibps = min_write_mibps(c.max_size, c.interval);
        if mibps > MAX_CHECKPOINT_WRITE_MIBPS {
            e.at(
                "/checkpoint/max_size",
                format!(
                    "writing {} every {} within 20% of the interval needs {mibps} MiB/s, beyond any node's storage ({MAX_CHECKPOINT_WRITE_MIBPS} MiB/s); checkpoint less often or write smaller checkpoints",
                    c.max_size, c.interval
                ),
            );
        }
    }
    if c.keep == 0 {
        e.at(
            "/checkpoint/keep",
            "keep is 0: with no checkpoint kept the job cannot be resumed; keep at least 1",
        );
    } else if c.keep > MAX_CHECKPOINTS_KEPT {
        e.at(
            "/checkpoint/keep",
            format!("keep is {}; at most {MAX_CHECKPOINTS_KEPT} checkpoints are kept on a node (older ones stay attested on chain)", c.keep),
        );
    }
    let disk = u128::from(spec.request.hardware.disk.0);
    let on_disk = u128::from(c.max_size.0) * (u128::from(c.keep) + 1);
    if c.max_size.0 > 0 && disk > 0 {
        if on_disk > disk {
            e.at(
                "/request/hardware/disk",
                format!(
                    "disk {} cannot hold {} checkpoints of up to {} ({} kept + 1 being written = {}); request more disk, or lower checkpoint.max_size or checkpoint.keep",
                    spec.request.hardware.disk,
                    u128::from(c.keep) + 1,
                    c.max_size,
                    c.keep,
                    show_bytes(on_disk)
                ),
            );
        } else {
            let data: u128 = spec
                .data
                .iter()
                .filter_map(|d| d.size)
                .map(|s| u128::from(s.0))
                .sum();
            if data > 0 && on_disk + data > disk {
                e.at(
                    "/request/hardware/disk",
                    format!(
                        "disk {} cannot hold the staged data ({}) beside the checkpoints ({}); request at least {}",
                        spec.request.hardware.disk,
                        show_bytes(data),
                        show_bytes(on_disk),
                        show_bytes(on_disk + data)
                    ),
                );
            }
        }
    }
}

fn show_bytes(n: u128) -> String {
    match u64::try_from(n) {
        Ok(n) => ByteSize(n).to_string(),
        Err(_) => format!("{}MiB", n.div_ceil(u128::from(MIB))),
    }
}

/// The write bandwidth a node needs to write `size` within 20% of `interval`, by the one
/// shared rule ([`crate::checkpoint::required_write_mibps`]).
pub(crate) fn min_write_mibps(size: ByteSize, interval: HumanDuration) -> u64 {
    crate::checkpoint::required_write_mibps(size.0, interval.secs())
}

fn check_output(spec: &JobSpec, e: &mut Errors) {
    let o = &spec.output;
    if o.produces.is_empty() {
        e.at(
            "/output/produces",
            "produces is empty; name what comes back: model, results, processed_files or report",
        );
    }
    let mut seen = BTreeSet::new();
    for (i, kind) in o.produces.iter().enumerate() {
        if !seen.insert(*kind as u8) {
            e.at(
                format!("/output/produces/{i}"),
                "listed twice; remove the repeat",
            );
        }
    }
    for reserved in [DATA_ROOT, CHECKPOINT_DIR] {
        let reserved_path: crate::fields::ContainerPath =
            reserved.parse().expect("reserved paths are valid");
        if o.dir.is_within(reserved) || reserved_path.is_within(o.dir.as_str()) {
            e.at(
                "/output/dir",
                format!("output dir {} overlaps {reserved}, which the agent mounts for the job; write output elsewhere, e.g. /mcjs/output", o.dir),
            );
        }
    }
    if o.destination.scheme() == UriScheme::Https {
        e.at(
            "/output/destination",
            "output cannot be delivered to an https:// uri; use s3://bucket/prefix or file:///path",
        );
    }
    if o.required_artifacts.is_empty() {
        e.at(
            "/output/required_artifacts",
            "required_artifacts is empty; list at least one file whose presence shows the work finished, e.g. \"model/final.safetensors\"",
        );
    }
    if let Some(cap) = o.logs_cap
        && !(MIN_LOGS_CAP..=MAX_LOGS_CAP).contains(&cap.0)
    {
        e.at(
            "/output/logs_cap",
            "logs_cap must be from 1MiB to 1GiB (what one run keeps of what the job prints); leave it out for the default of 64MiB",
        );
    }
    let mut seen = BTreeSet::new();
    for (i, artifact) in o.required_artifacts.iter().enumerate() {
        if !seen.insert(artifact.as_str()) {
            e.at(
                format!("/output/required_artifacts/{i}"),
                format!("artifact \"{artifact}\" is listed twice; remove the repeat"),
            );
        }
    }
}
