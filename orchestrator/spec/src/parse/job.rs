//! Reading the job spec itself and its sections: work, data inputs, output,
//! checkpoint and verification.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{LATENCY_BOUND_KINDS, LOCAL_INFRASTRUCTURE, Reader, show};
use crate::spec::{
    Checkpoint, CheckpointSignal, DEFAULT_KEEP, DataInput, DataRole, Determinism, JobSpec, Output,
    OutputKind, SPEC_VERSION, SampleRate, Verification, Work, WorkKind, default_output_dir,
};

impl Reader {
    pub(super) fn job_spec(&mut self, v: &Value) -> Option<JobSpec> {
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
                "logs_cap",
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
        let logs_cap = match f.get("logs_cap") {
            Some((v, p)) => Some(Some(self.parsed(v, &p)?)),
            None => Some(None),
        };
        Some(Output {
            produces: produces?,
            dir: dir?,
            destination: destination?,
            required_artifacts: required_artifacts?,
            return_partial: return_partial?,
            logs_cap: logs_cap?,
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
                "standby",
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
        let standby = match f.get("standby") {
            Some((v, p)) => self.boolean(v, &p),
            None => Some(false),
        };
        Some(Checkpoint {
            interval: interval?,
            max_size: max_size?,
            keep: keep?,
            signal: signal?,
            restart_budget: restart_budget?,
            every_steps: every_steps?,
            standby: standby?,
        })
    }
}
