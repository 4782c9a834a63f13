//! Reads a job spec from JSON, collecting every structural error (unknown, missing and
//! wrongly typed fields, malformed values) with its JSON pointer instead of stopping at the
//! first one as serde would. A field that is present but wrong keeps its parent from being
//! built; an unknown field is reported but does not, so semantic checks can still run.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{SpecError, pointer_token};
use crate::spec::{
    Checkpoint, CheckpointSignal, DEFAULT_KEEP, DataInput, DataRole, Determinism, DurationRequest,
    Hardware, JobSpec, Output, OutputKind, Request, SPEC_VERSION, SampleRate, Verification, Work,
    WorkKind, default_output_dir,
};

/// Kinds that name interactive or latency-bound work, refused with a pointer to local
/// infrastructure rather than a bare "unknown kind".
const LATENCY_BOUND_KINDS: &[&str] = &[
    "interactive",
    "live",
    "live_tool",
    "realtime",
    "real_time",
    "control_loop",
    "serving",
    "online_inference",
    "streaming",
    "notebook",
    "service",
    "latency_bound",
];

pub(crate) const LOCAL_INFRASTRUCTURE: &str = "interactive or latency-bound work (a control loop, a live tool, anything that must answer in the moment) belongs on local infrastructure: MCJS runs queued, checkpointed batch work that can wait and be moved between nodes";

/// Reads JSON text: the spec when it could be built (only unknown fields may have been
/// wrong), beside every structural error found.
pub(crate) fn parse_json(text: &str) -> (Option<JobSpec>, Vec<SpecError>) {
    match serde_json::from_str::<StrictValue>(text) {
        Ok(StrictValue(value)) => parse_value(&value),
        Err(e) => (
            None,
            vec![SpecError::new(
                "",
                format!(
                    "not valid JSON: {e}; fix the syntax (keys quoted, no trailing commas, each key once)"
                ),
            )],
        ),
    }
}

/// Reads a JSON value, as [`parse_json`].
pub(crate) fn parse_value(value: &Value) -> (Option<JobSpec>, Vec<SpecError>) {
    let mut reader = Reader::default();
    let spec = reader.job_spec(value);
    (spec, reader.errors)
}

/// A JSON value read with duplicate object keys refused: with duplicates, two readers of the
/// same text can disagree on what it says, and a hashed spec must say one thing.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = StrictValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<StrictValue, E> {
        Ok(StrictValue(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }
    fn visit_none<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(StrictValue(Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            out.insert(key, value);
        }
        Ok(StrictValue(Value::Object(out)))
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", pointer_token(key))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The fields of one JSON object being read, with the names it may hold.
struct Fields<'v> {
    map: &'v Map<String, Value>,
    path: String,
}

impl<'v> Fields<'v> {
    /// A present, non-null field.
    fn get(&self, key: &str) -> Option<(&'v Value, String)> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some((v, child(&self.path, key))),
        }
    }
}

#[derive(Default)]
struct Reader {
    errors: Vec<SpecError>,
}

impl Reader {
    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(SpecError::new(path, message));
    }

    /// Opens an object, reporting every key outside `known`.
    fn object<'v>(
        &mut self,
        v: &'v Value,
        path: &str,
        what: &str,
        known: &[&str],
    ) -> Option<Fields<'v>> {
        let Value::Object(map) = v else {
            self.error(
                path,
                format!("expected {what} (a JSON object), found {}", describe(v)),
            );
            return None;
        };
        for key in map.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            let close = known
                .iter()
                .copied()
                .filter(|k| edit_distance(k, key) <= 2)
                .min_by_key(|k| edit_distance(k, key));
            let hint = match close {
                Some(k) => format!("did you mean \"{k}\"? "),
                None => String::new(),
            };
            self.error(
                &child(path, key),
                format!(
                    "unknown field \"{key}\" in {what}; {hint}the fields are: {}",
                    known.join(", ")
                ),
            );
        }
        Some(Fields {
            map,
            path: path.to_string(),
        })
    }

    fn required<'v>(
        &mut self,
        fields: &Fields<'v>,
        key: &str,
        hint: &str,
    ) -> Option<(&'v Value, String)> {
        let found = fields.get(key);
        if found.is_none() {
            self.error(
                &child(&fields.path, key),
                format!("missing required field \"{key}\": {hint}"),
            );
        }
        found
    }

    fn string(&mut self, v: &Value, path: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(
                    path,
                    format!("expected a string, found {}", describe(other)),
                );
                None
            }
        }
    }

    fn parsed<T>(&mut self, v: &Value, path: &str) -> Option<T>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        let s = self.string(v, path)?;
        match s.parse() {
            Ok(t) => Some(t),
            Err(e) => {
                self.error(path, e.to_string());
                None
            }
        }
    }

    fn uint<T: TryFrom<u64>>(&mut self, v: &Value, path: &str, max: u64) -> Option<T> {
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) if s.parse::<u64>().is_ok() => {
                self.error(
                    path,
                    format!(
                        "expected a whole number, found the string {s:?}; write it without quotes"
                    ),
                );
                return None;
            }
            _ => None,
        };
        match n.filter(|n| *n <= max).and_then(|n| T::try_from(n).ok()) {
            Some(t) => Some(t),
            None => {
                self.error(
                    path,
                    format!("expected a whole number from 0 to {max}, found {}", show(v)),
                );
                None
            }
        }
    }

    fn boolean(&mut self, v: &Value, path: &str) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            other => {
                self.error(
                    path,
                    format!("expected true or false, found {}", show(other)),
                );
                None
            }
        }
    }

    fn array<T>(
        &mut self,
        v: &Value,
        path: &str,
        mut item: impl FnMut(&mut Self, &Value, &str) -> Option<T>,
    ) -> Option<Vec<T>> {
        let Value::Array(items) = v else {
            self.error(path, format!("expected an array, found {}", describe(v)));
            return None;
        };
        let read: Vec<Option<T>> = items
            .iter()
            .enumerate()
            .map(|(i, v)| item(self, v, &format!("{path}/{i}")))
            .collect();
        read.into_iter().collect()
    }

    fn string_map(&mut self, v: &Value, path: &str) -> Option<BTreeMap<String, String>> {
        let Value::Object(map) = v else {
            self.error(
                path,
                format!("expected an object of strings, found {}", describe(v)),
            );
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, v) in map {
            match self.string(v, &child(path, k)) {
                Some(s) => {
                    out.insert(k.clone(), s);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Reads a string naming one of `choices`.
    fn choice<T: Copy>(
        &mut self,
        v: &Value,
        path: &str,
        what: &str,
        choices: &[(&str, T)],
    ) -> Option<T> {
        let s = self.string(v, path)?;
        match choices.iter().find(|(name, _)| *name == s) {
            Some((_, t)) => Some(*t),
            None => {
                let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                self.error(
                    path,
                    format!("unknown {what} \"{s}\"; use one of {}", names.join(", ")),
                );
                None
            }
        }
    }

    fn job_spec(&mut self, v: &Value) -> Option<JobSpec> {
        let f = self.object(
            v,
            "",
            "the job spec",
            &[
                "version",
                "work",
                "data",
                "request",
                "output",
                "checkpoint",
                "verification",
            ],
        )?;
        let version = self
            .required(&f, "version", "add \"version\": 1")
            .and_then(|(v, p)| self.uint::<u32>(v, &p, u64::from(u32::MAX)).map(|n| (n, p)))
            .and_then(|(n, p)| {
                // Another version's fields mean other things: nothing else can be trusted.
                if n != SPEC_VERSION {
                    self.error(&p, format!("unsupported version {n}; this build reads version {SPEC_VERSION}: set \"version\": 1"));
                    return None;
                }
                Some(n)
            });
        let work = self
            .required(
                &f,
                "work",
                "declare what runs (kind, model_id, image, command, queue_tolerant)",
            )
            .and_then(|(v, p)| self.work(v, &p));
        let data = self
            .required(
                &f,
                "data",
                "list every input the work reads, or [] when it reads none",
            )
            .and_then(|(v, p)| self.array(v, &p, Self::data_input));
        let request = self
            .required(
                &f,
                "request",
                "declare hardware, duration and max_price_per_gpu_hour",
            )
            .and_then(|(v, p)| self.request(v, &p));
        let output = self
            .required(
                &f,
                "output",
                "declare produces, destination and required_artifacts",
            )
            .and_then(|(v, p)| self.output(v, &p));
        let checkpoint = self
            .required(
                &f,
                "checkpoint",
                "declare interval, max_size and restart_budget",
            )
            .and_then(|(v, p)| self.checkpoint(v, &p));
        let verification = self.optional(&f, "verification", Self::verification);
        Some(JobSpec {
            version: version?,
            work: work?,
            data: data?,
            request: request?,
            output: output?,
            checkpoint: checkpoint?,
            verification: verification?,
        })
    }

    fn verification(&mut self, v: &Value, path: &str) -> Option<Verification> {
        let f = self.object(v, path, "verification", &["sample_rate"])?;
        let (v, p) = self.required(
            &f,
            "sample_rate",
            "the fraction of attested intervals re-executed, e.g. 0.1",
        )?;
        let rate = match v {
            Value::Number(n) => n.as_f64(),
            _ => None,
        };
        let Some(rate) = rate else {
            self.error(
                &p,
                format!("expected a number above 0 and at most 1, found {}", show(v)),
            );
            return None;
        };
        let ppm = (rate * f64::from(SampleRate::ONE)).round();
        if !(rate > 0.0 && rate <= 1.0) || ppm < 1.0 {
            self.error(
                &p,
                format!(
                    "sample_rate {rate} is out of range: it is above 0 and at most 1, e.g. 0.1"
                ),
            );
            return None;
        }
        if (ppm / f64::from(SampleRate::ONE) - rate).abs() > 1e-12 {
            self.error(
                &p,
                format!("sample_rate {rate} has more than 6 decimal places"),
            );
            return None;
        }
        Some(Verification {
            sample_rate: SampleRate(ppm as u32),
        })
    }

    fn work(&mut self, v: &Value, path: &str) -> Option<Work> {
        let f = self.object(
            v,
            path,
            "work",
            &[
                "kind",
                "model_id",
                "image",
                "command",
                "args",
                "env",
                "target_epochs",
                "target_steps",
                "queue_tolerant",
                "determinism",
            ],
        )?;
        let kind = self
            .required(
                &f,
                "kind",
                "one of training, batch_inference, processing, simulation_sweep",
            )
            .and_then(|(v, p)| self.work_kind(v, &p));
        let model_id = self
            .required(
                &f,
                "model_id",
                "name the model the work trains or runs, e.g. \"meta-llama/Llama-3.1-8B\"",
            )
            .and_then(|(v, p)| self.string(v, &p));
        let image = self
            .required(
                &f,
                "image",
                "the container image pinned by digest, name@sha256:<64 hex>",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        let command = self
            .required(
                &f,
                "command",
                "the entrypoint as an array, e.g. [\"python\", \"train.py\"]",
            )
            .and_then(|(v, p)| self.array(v, &p, Self::string));
        let args = match f.get("args") {
            Some((v, p)) => self.array(v, &p, Self::string),
            None => Some(Vec::new()),
        };
        let env = match f.get("env") {
            Some((v, p)) => self.string_map(v, &p),
            None => Some(BTreeMap::new()),
        };
        let target_epochs = self.optional(&f, "target_epochs", |r, v, p| {
            r.uint::<u32>(v, p, u64::from(u32::MAX))
        });
        let target_steps = self.optional(&f, "target_steps", |r, v, p| {
            r.uint::<u64>(v, p, crate::validate::MAX_SAFE_INTEGER)
        });
        let queue_tolerant = self
            .required(
                &f,
                "queue_tolerant",
                "true when the work can wait in a queue and be resumed from a checkpoint",
            )
            .and_then(|(v, p)| self.boolean(v, &p));
        let determinism = match f.get("determinism") {
            Some((v, p)) => {
                let choices: Vec<(&str, Determinism)> =
                    Determinism::ALL.iter().map(|d| (d.as_str(), *d)).collect();
                self.choice(v, &p, "determinism", &choices)
            }
            None => Some(Determinism::None),
        };
        Some(Work {
            determinism: determinism?,
            kind: kind?,
            model_id: model_id?,
            image: image?,
            command: command?,
            args: args?,
            env: env?,
            target_epochs: target_epochs?,
            target_steps: target_steps?,
            queue_tolerant: queue_tolerant?,
        })
    }

    /// Absent or null: Some(None); present and well-formed: Some(Some(t)); malformed: None.
    fn optional<T>(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        read: impl FnOnce(&mut Self, &Value, &str) -> Option<T>,
    ) -> Option<Option<T>> {
        match f.get(key) {
            None => Some(None),
            Some((v, p)) => read(self, v, &p).map(Some),
        }
    }

    fn work_kind(&mut self, v: &Value, path: &str) -> Option<WorkKind> {
        let s = self.string(v, path)?;
        if let Some(kind) = WorkKind::ALL.into_iter().find(|k| k.as_str() == s) {
            return Some(kind);
        }
        if LATENCY_BOUND_KINDS.contains(&s.to_ascii_lowercase().replace('-', "_").as_str()) {
            self.error(
                path,
                format!("kind \"{s}\" is refused: {LOCAL_INFRASTRUCTURE}"),
            );
        } else {
            let names: Vec<&str> = WorkKind::ALL.iter().map(|k| k.as_str()).collect();
            self.error(
                path,
                format!("unknown kind \"{s}\"; use one of {}", names.join(", ")),
            );
        }
        None
    }

    fn data_input(&mut self, v: &Value, path: &str) -> Option<DataInput> {
        let f = self.object(
            v,
            path,
            "a data input",
            &["name", "role", "uri", "sha256", "size"],
        )?;
        let name = self
            .required(
                &f,
                "name",
                "a short name; the input is mounted at /mcjs/data/<name>",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        let role = self
            .required(&f, "role", "one of dataset, base_model, input")
            .and_then(|(v, p)| {
                self.choice(
                    v,
                    &p,
                    "role",
                    &[
                        ("dataset", DataRole::Dataset),
                        ("base_model", DataRole::BaseModel),
                        ("input", DataRole::Input),
                    ],
                )
            });
        let uri = self
            .required(
                &f,
                "uri",
                "where the input lives: file:///…, s3://bucket/key or https://…",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        let sha256 = self
            .required(
                &f,
                "sha256",
                "the sha256 of the input's bytes, 64 lowercase hex digits",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        let size = self.optional(&f, "size", |r, v, p| r.parsed(v, p));
        Some(DataInput {
            name: name?,
            role: role?,
            uri: uri?,
            sha256: sha256?,
            size: size?,
        })
    }

    fn request(&mut self, v: &Value, path: &str) -> Option<Request> {
        let f = self.object(
            v,
            path,
            "request",
            &["hardware", "duration", "deadline", "max_price_per_gpu_hour"],
        )?;
        let hardware = self
            .required(&f, "hardware", "declare gpu_count, cpu_cores, ram and disk")
            .and_then(|(v, p)| self.hardware(v, &p));
        let duration = self
            .required(&f, "duration", "{\"mode\": \"fixed\", \"length\": \"48h\"} or {\"mode\": \"until_done\", \"limit\": \"72h\"}")
            .and_then(|(v, p)| self.duration(v, &p));
        let deadline = self.optional(&f, "deadline", |r, v, p| r.parsed(v, p));
        let price = self
            .required(
                &f,
                "max_price_per_gpu_hour",
                "the most you pay per GPU-hour in USDC, as a string, e.g. \"2.50\"",
            )
            .and_then(|(v, p)| self.usdc(v, &p));
        Some(Request {
            hardware: hardware?,
            duration: duration?,
            deadline: deadline?,
            max_price_per_gpu_hour: price?,
        })
    }

    fn usdc(&mut self, v: &Value, path: &str) -> Option<crate::units::Usdc> {
        if let Value::Number(n) = v {
            self.error(
                path,
                format!(
                    "money is never a JSON number: write the USDC amount as a string, e.g. \"{n}\""
                ),
            );
            return None;
        }
        self.parsed(v, path)
    }

    fn hardware(&mut self, v: &Value, path: &str) -> Option<Hardware> {
        let f = self.object(
            v,
            path,
            "hardware",
            &[
                "gpu_count",
                "gpu_models",
                "min_vram_per_gpu",
                "min_compute_capability",
                "min_driver_version",
                "min_cuda_version",
                "cpu_cores",
                "ram",
                "disk",
            ],
        )?;
        let gpu_count = self
            .required(&f, "gpu_count", "the number of GPUs on one node, 1 to 16")
            .and_then(|(v, p)| self.uint::<u8>(v, &p, u64::from(u8::MAX)));
        let gpu_models = match f.get("gpu_models") {
            Some((v, p)) => self.array(v, &p, Self::parsed),
            None => Some(Vec::new()),
        };
        let min_vram = self.optional(&f, "min_vram_per_gpu", |r, v, p| r.parsed(v, p));
        let min_cc = self.optional(&f, "min_compute_capability", |r, v, p| r.parsed(v, p));
        let min_driver = self.optional(&f, "min_driver_version", |r, v, p| r.parsed(v, p));
        let min_cuda = self.optional(&f, "min_cuda_version", |r, v, p| r.parsed(v, p));
        let cpu_cores = self
            .required(&f, "cpu_cores", "the CPU cores the job needs, e.g. 16")
            .and_then(|(v, p)| self.uint::<u16>(v, &p, u64::from(u16::MAX)));
        let ram = self
            .required(&f, "ram", "the memory the job needs, e.g. \"64GiB\"")
            .and_then(|(v, p)| self.parsed(v, &p));
        let disk = self
            .required(
                &f,
                "disk",
                "node-local disk for data, checkpoints and output, e.g. \"500GiB\"",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        Some(Hardware {
            gpu_count: gpu_count?,
            gpu_models: gpu_models?,
            min_vram_per_gpu: min_vram?,
            min_compute_capability: min_cc?,
            min_driver_version: min_driver?,
            min_cuda_version: min_cuda?,
            cpu_cores: cpu_cores?,
            ram: ram?,
            disk: disk?,
        })
    }

    fn duration(&mut self, v: &Value, path: &str) -> Option<DurationRequest> {
        let mode = match v {
            Value::Object(map) => map.get("mode"),
            _ => None,
        };
        match mode.and_then(Value::as_str) {
            Some("fixed") => {
                let f = self.object(v, path, "a fixed duration", &["mode", "length"])?;
                let length = self
                    .required(&f, "length", "how long the job runs, e.g. \"48h\"")
                    .and_then(|(v, p)| self.parsed(v, &p))?;
                Some(DurationRequest::Fixed { length })
            }
            Some("until_done") => {
                let f = self.object(v, path, "an until-done duration", &["mode", "limit"])?;
                let limit = self
                    .required(
                        &f,
                        "limit",
                        "the longest the job may run before it is stopped, e.g. \"72h\"",
                    )
                    .and_then(|(v, p)| self.parsed(v, &p))?;
                Some(DurationRequest::UntilDone { limit })
            }
            Some(other) => {
                self.error(
                    &child(path, "mode"),
                    format!("unknown duration mode \"{other}\"; use \"fixed\" or \"until_done\""),
                );
                None
            }
            None => {
                if let Value::Object(map) = v {
                    match map.get("mode") {
                        Some(m) => self.error(&child(path, "mode"), format!("expected \"fixed\" or \"until_done\", found {}", describe(m))),
                        None if map.contains_key("until_done") || map.contains_key("limit") => self.error(
                            &child(path, "mode"),
                            "missing required field \"mode\": write {\"mode\": \"until_done\", \"limit\": \"72h\"}",
                        ),
                        None => self.error(
                            &child(path, "mode"),
                            "missing required field \"mode\": write {\"mode\": \"fixed\", \"length\": \"48h\"} or {\"mode\": \"until_done\", \"limit\": \"72h\"}",
                        ),
                    }
                } else {
                    self.error(
                        path,
                        format!("expected a duration object, found {}", describe(v)),
                    );
                }
                None
            }
        }
    }

    fn output(&mut self, v: &Value, path: &str) -> Option<Output> {
        let f = self.object(
            v,
            path,
            "output",
            &[
                "produces",
                "dir",
                "destination",
                "required_artifacts",
                "return_partial",
            ],
        )?;
        let produces = self
            .required(
                &f,
                "produces",
                "what comes back: any of model, results, processed_files, report",
            )
            .and_then(|(v, p)| {
                self.array(v, &p, |r, v, p| {
                    r.choice(
                        v,
                        p,
                        "output kind",
                        &[
                            ("model", OutputKind::Model),
                            ("results", OutputKind::Results),
                            ("processed_files", OutputKind::ProcessedFiles),
                            ("report", OutputKind::Report),
                        ],
                    )
                })
            });
        let dir = match f.get("dir") {
            Some((v, p)) => self.parsed(v, &p),
            None => Some(default_output_dir()),
        };
        let destination = self
            .required(
                &f,
                "destination",
                "where the output is delivered: file:///… or s3://bucket/prefix",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        let required_artifacts = self
            .required(
                &f,
                "required_artifacts",
                "paths under output.dir that must exist for the work to count as finished",
            )
            .and_then(|(v, p)| self.array(v, &p, Self::parsed));
        let return_partial = match f.get("return_partial") {
            Some((v, p)) => self.boolean(v, &p),
            None => Some(false),
        };
        Some(Output {
            produces: produces?,
            dir: dir?,
            destination: destination?,
            required_artifacts: required_artifacts?,
            return_partial: return_partial?,
        })
    }

    fn checkpoint(&mut self, v: &Value, path: &str) -> Option<Checkpoint> {
        let f = self.object(
            v,
            path,
            "checkpoint",
            &[
                "interval",
                "max_size",
                "keep",
                "signal",
                "restart_budget",
                "every_steps",
            ],
        )?;
        let interval = self
            .required(
                &f,
                "interval",
                "how often the job checkpoints, e.g. \"15m\"",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        let max_size = self
            .required(
                &f,
                "max_size",
                "the largest checkpoint the job writes, e.g. \"10GiB\"",
            )
            .and_then(|(v, p)| self.parsed(v, &p));
        let keep = match f.get("keep") {
            Some((v, p)) => self.uint::<u8>(v, &p, u64::from(u8::MAX)),
            None => Some(DEFAULT_KEEP),
        };
        let signal = match f.get("signal") {
            Some((v, p)) => {
                let choices: Vec<(&str, CheckpointSignal)> = CheckpointSignal::ALL
                    .iter()
                    .map(|s| (s.as_str(), *s))
                    .collect();
                self.choice(v, &p, "checkpoint signal", &choices)
            }
            None => Some(CheckpointSignal::default()),
        };
        let restart_budget = self
            .required(
                &f,
                "restart_budget",
                "how many restarts from a checkpoint the job may use, 0 to 255, e.g. 5",
            )
            .and_then(|(v, p)| self.uint::<u8>(v, &p, u64::from(u8::MAX)));
        let every_steps = match f.get("every_steps") {
            Some((v, p)) => match self.uint::<u64>(v, &p, u64::MAX) {
                Some(0) => {
                    self.error(
                        &p,
                        "every_steps is 0; give the number of steps between checkpoints, e.g. 200",
                    );
                    None
                }
                n => n.map(Some),
            },
            None => Some(None),
        };
        Some(Checkpoint {
            interval: interval?,
            max_size: max_size?,
            keep: keep?,
            signal: signal?,
            restart_budget: restart_budget?,
            every_steps: every_steps?,
        })
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string {s:?}"),
        other => describe(other).to_string(),
    }
}
