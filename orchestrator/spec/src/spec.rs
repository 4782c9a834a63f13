//! The types of a v1 job spec. They serialise to the JSON a user writes (that is also the form
//! that is canonicalised and hashed) and describe its JSON Schema. They are read from JSON by
//! [`crate::parse`], which reports every error at once rather than serde's first one.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::fields::{
    ContainerPath, DataUri, DottedVersion, GpuModel, ImageRef, InputName, RelativePath,
    Sha256Digest, Timestamp,
};
use crate::gpu::ComputeCapability;
use crate::units::{ByteSize, HumanDuration, Usdc};

/// The only format version this crate reads and writes.
pub const SPEC_VERSION: u32 = 1;

/// Where the job finds its inputs, writes checkpoints and (by default) output: the agent's
/// mount contract, also handed to the job in environment variables.
pub const DATA_ROOT: &str = "/mcjs/data";
pub const CHECKPOINT_DIR: &str = "/mcjs/checkpoints";
pub const DEFAULT_OUTPUT_DIR: &str = "/mcjs/output";

/// A job specification, version 1: the work, the data it reads, the hardware and time it
/// requests, the output it returns, and the checkpoint policy that lets MCJS move it between
/// unreliable nodes without losing more than one interval of progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields, title = "MCJS job specification v1")]
pub struct JobSpec {
    /// Format version; always 1.
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub work: Work,
    /// Every input the work reads, staged to the node and verified against its sha256 before
    /// the job starts (the meter never runs while data moves).
    pub data: Vec<DataInput>,
    pub request: Request,
    pub output: Output,
    pub checkpoint: Checkpoint,
    /// Sampled re-execution of attested intervals on another provider's node
    /// (allowed only for `work.determinism: "bitwise"`). Default: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
}

/// How a job's progress is checked: a random sample of its attested
/// checkpoint intervals is re-executed elsewhere and the hashes compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Verification {
    /// The fraction of attested intervals re-executed, above 0 and at most 1,
    /// at most 6 decimal places, e.g. 0.1.
    pub sample_rate: SampleRate,
}

/// A fraction in (0, 1], held exactly in parts per million.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleRate(pub u32);

impl SampleRate {
    pub const ONE: u32 = 1_000_000;

    pub fn ppm(self) -> u32 {
        self.0
    }
}

impl Serialize for SampleRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(f64::from(self.0) / f64::from(Self::ONE))
    }
}

impl JsonSchema for SampleRate {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SampleRate".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "multipleOf": 0.000001
        })
    }
}

/// Whether re-running the work from a checkpoint reproduces its later
/// checkpoints bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Determinism {
    /// No promise (the default).
    #[default]
    None,
    /// Resumed from a checkpoint, the job writes the same bytes at every
    /// later step (fixed seeds, deterministic kernels, no wall-clock input).
    Bitwise,
}

impl Determinism {
    pub const ALL: [Determinism; 2] = [Determinism::None, Determinism::Bitwise];

    pub fn as_str(self) -> &'static str {
        match self {
            Determinism::None => "none",
            Determinism::Bitwise => "bitwise",
        }
    }

    fn is_none(&self) -> bool {
        *self == Determinism::None
    }
}

/// What runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Work {
    pub kind: WorkKind,
    /// The model the work trains or runs (a name or hub id, e.g. "meta-llama/Llama-3.1-8B").
    pub model_id: String,
    /// The container image, pinned by digest.
    pub image: ImageRef,
    /// The entrypoint and its fixed leading arguments, e.g. ["python", "train.py"].
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// Arguments appended to `command`. Default: none.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment for the job. Names starting with MCJS_ are reserved for the agent's
    /// contract. Default: empty.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Training only: the number of epochs the run aims for. A progress hint and the epoch
    /// counter of checkpoint attestations; it does not stop the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub target_epochs: Option<u32>,
    /// Any kind: the number of steps (batches, files, simulations) the run aims for; a
    /// progress hint for work whose duration is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 9_007_199_254_740_991u64))]
    pub target_steps: Option<u64>,
    /// Must be true: the work can wait in a queue and be stopped and resumed from a
    /// checkpoint. Interactive or latency-bound work belongs on local infrastructure.
    pub queue_tolerant: bool,
    /// "bitwise" when the work, resumed from a checkpoint, writes the same bytes at every
    /// later step; required for `verification`. Default: "none".
    #[serde(default, skip_serializing_if = "Determinism::is_none")]
    pub determinism: Determinism,
}

/// The four kinds of work MCJS runs. Interactive, serving or control-loop work is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkKind {
    Training,
    BatchInference,
    Processing,
    SimulationSweep,
}

impl WorkKind {
    pub const ALL: [WorkKind; 4] = [
        WorkKind::Training,
        WorkKind::BatchInference,
        WorkKind::Processing,
        WorkKind::SimulationSweep,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkKind::Training => "training",
            WorkKind::BatchInference => "batch_inference",
            WorkKind::Processing => "processing",
            WorkKind::SimulationSweep => "simulation_sweep",
        }
    }
}

/// One input the work reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DataInput {
    /// Mounted read-only at /mcjs/data/<name>.
    pub name: InputName,
    pub role: DataRole,
    pub uri: DataUri,
    /// sha256 of the object's bytes; staging fails if the staged copy differs.
    pub sha256: Sha256Digest,
    /// Size, where known: lets the scheduler check the node's disk and plan staging time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<ByteSize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataRole {
    Dataset,
    BaseModel,
    Input,
}

/// What the job asks of a node, for how long, by when and at what price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Request {
    pub hardware: Hardware,
    pub duration: DurationRequest,
    /// Latest completion time (RFC 3339). The job is placed (and re-placed after a failure)
    /// only while its remaining duration fits before it, and stopped when it passes. Absent:
    /// the job takes whatever slot opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// The most the job pays per GPU per hour, in USDC ("2.50").
    pub max_price_per_gpu_hour: Usdc,
}

/// The hardware a node must have. Everything here is a hard requirement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Hardware {
    /// GPUs on one node, 1 to 16.
    #[schemars(range(min = 1, max = 16))]
    pub gpu_count: u8,
    /// Acceptable GPU models (at most 4); empty: any model that meets the other minimums.
    #[serde(default)]
    #[schemars(length(max = 4))]
    pub gpu_models: Vec<GpuModel>,
    /// Minimum memory of each GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_vram_per_gpu: Option<ByteSize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_compute_capability: Option<ComputeCapability>,
    /// Minimum NVIDIA driver version the image needs, e.g. "535.104.05".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_driver_version: Option<DottedVersion>,
    /// Minimum CUDA version the image needs, e.g. "12.2".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cuda_version: Option<DottedVersion>,
    /// Only nodes whose every GPU NVIDIA's attestation proved genuine, at the node's last
    /// hardware challenge (Hopper and later in confidential-computing mode). Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attested: bool,
    #[schemars(range(min = 1))]
    pub cpu_cores: u16,
    pub ram: ByteSize,
    /// Node-local disk for staged data, checkpoints and output.
    pub disk: ByteSize,
}

/// How long the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[schemars(deny_unknown_fields)]
pub enum DurationRequest {
    /// The job runs for `length` of compute and is then stopped (a time-boxed run).
    Fixed { length: HumanDuration },
    /// The job runs until its command exits successfully, and never longer than `limit`.
    /// For work whose size is unknown.
    UntilDone { limit: HumanDuration },
}

impl DurationRequest {
    /// The most compute time the job can use: the fixed length or the limit.
    pub fn max(self) -> HumanDuration {
        match self {
            DurationRequest::Fixed { length } => length,
            DurationRequest::UntilDone { limit } => limit,
        }
    }
}

/// What comes back and how the end is recognised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Output {
    /// What the output contains.
    #[schemars(length(min = 1))]
    pub produces: Vec<OutputKind>,
    /// Where the job writes its output inside the container. Default: /mcjs/output.
    #[serde(default = "default_output_dir")]
    pub dir: ContainerPath,
    /// Where the output is delivered: file:///… or s3://….
    pub destination: DataUri,
    /// Paths, relative to `dir`, that must exist for the work to count as finished.
    #[schemars(length(min = 1))]
    pub required_artifacts: Vec<RelativePath>,
    /// Whether the output as of the last attested checkpoint comes back when the run stops
    /// early (limit, deadline, restart budget spent, cancellation). Default: false.
    #[serde(default)]
    pub return_partial: bool,
    /// The most of what the job prints (and its metrics) one run keeps in the store, its
    /// oldest lines going first: 1MiB to 1GiB. Default: 64MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_cap: Option<ByteSize>,
}

pub(crate) fn default_output_dir() -> ContainerPath {
    DEFAULT_OUTPUT_DIR
        .parse()
        .expect("the default output dir is a valid container path")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    Model,
    Results,
    ProcessedFiles,
    Report,
}

/// The checkpoint policy and restart budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Checkpoint {
    /// How often the job is told to checkpoint; at least 1m, at most the duration.
    pub interval: HumanDuration,
    /// The largest checkpoint the job writes. With the interval it sets the write bandwidth
    /// a node needs: the write must take at most 20% of the interval.
    pub max_size: ByteSize,
    /// How many complete checkpoints are kept on the node. Default: 2.
    #[serde(default = "default_keep")]
    #[schemars(range(min = 1, max = 16))]
    pub keep: u8,
    /// The signal the agent sends when a checkpoint is due. Default: SIGUSR1.
    #[serde(default)]
    pub signal: CheckpointSignal,
    /// How many times the job may be restarted from a checkpoint after a node failure.
    pub restart_budget: u8,
    /// The job checkpoints at every step that is a multiple of this and at no other step,
    /// whatever the clock says (`MCJS_CHECKPOINT_EVERY_STEPS`); the agent then sends no
    /// checkpoint signal. Required with `verification`: a check run must reach the same
    /// steps as the paid run without being told where to stop. Default: unset (the job
    /// checkpoints on the interval and on the signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub every_steps: Option<u64>,
    /// A warm standby: a second node, chosen by the scheduler, keeps the latest attested
    /// checkpoint on its disk as it is attested, and the job moves there first when its node
    /// is lost, without downloading it. The standby is not paid; it reads each checkpoint once
    /// more from the store, and its provider holds the checkpoint's bytes as the job's node
    /// does. Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standby: bool,
}

pub(crate) const DEFAULT_KEEP: u8 = 2;

fn default_keep() -> u8 {
    DEFAULT_KEEP
}

/// Signals a job may ask to be told to checkpoint with. SIGTERM and SIGKILL are the agent's
/// for stopping, so they are not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, JsonSchema)]
pub enum CheckpointSignal {
    #[default]
    #[serde(rename = "SIGUSR1")]
    Usr1,
    #[serde(rename = "SIGUSR2")]
    Usr2,
    #[serde(rename = "SIGHUP")]
    Hup,
}

impl CheckpointSignal {
    pub const ALL: [CheckpointSignal; 3] = [
        CheckpointSignal::Usr1,
        CheckpointSignal::Usr2,
        CheckpointSignal::Hup,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointSignal::Usr1 => "SIGUSR1",
            CheckpointSignal::Usr2 => "SIGUSR2",
            CheckpointSignal::Hup => "SIGHUP",
        }
    }

    /// The Linux signal number.
    pub fn number(self) -> i32 {
        match self {
            CheckpointSignal::Usr1 => 10,
            CheckpointSignal::Usr2 => 12,
            CheckpointSignal::Hup => 1,
        }
    }
}
