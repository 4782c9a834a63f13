//! Reading a job spec's request: the hardware, the duration, the deadline
//! and the price.

use serde_json::Value;

use super::{Reader, child, describe};
use crate::spec::{DurationRequest, Hardware, Request};

impl Reader {
    pub(super) fn request(&mut self, v: &Value, path: &str) -> Option<Request> {
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
                "attested",
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
        let attested = match f.get("attested") {
            Some((v, p)) => self.boolean(v, &p),
            None => Some(false),
        };
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
            attested: attested?,
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
}
