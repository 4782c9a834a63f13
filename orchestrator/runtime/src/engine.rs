//! What the agent asks of a container engine, and the container a job gets.
//! `ContainerEngine` lets the agent's decisions be tested with a fake; the
//! real implementation is [`crate::docker::DockerEngine`].

use crate::contract::{self, ExitMeaning};
use serde::Serialize;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("invalid container spec: {0}")]
    InvalidSpec(String),
    #[error(
        "cannot reach the container engine: {0}; is the Docker daemon running and its socket readable?"
    )]
    Unreachable(String),
    #[error("the container engine refused to {action} for job {job_id}: {reason}")]
    Engine {
        action: &'static str,
        job_id: String,
        reason: String,
    },
    #[error("no container {0} is known to this engine")]
    UnknownContainer(String),
    #[error("cannot prepare {path}: {source}")]
    Prepare {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Host directories mounted into the job's container (docs/job-contract.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobMounts {
    /// Staged, verified inputs; mounted read-only.
    pub data: PathBuf,
    pub checkpoints: PathBuf,
    pub output: PathBuf,
    /// A verified checkpoint to resume from; mounted read-only.
    pub restore: Option<PathBuf>,
    /// Where the job appends its metrics (`MCJS_METRICS_FILE`), when the
    /// node ships them; writable.
    pub metrics: Option<PathBuf>,
}

impl JobMounts {
    /// Creates the writable directories and hands them to the job's user, so
    /// a job that is not root can write its checkpoints and output.
    pub fn prepare(&self, user: &str) -> Result<(), EngineError> {
        let (uid, gid) = parse_user(user)?;
        for dir in [&self.checkpoints, &self.output]
            .into_iter()
            .chain(self.metrics.as_ref())
        {
            let err = |source| EngineError::Prepare {
                path: dir.clone(),
                source,
            };
            std::fs::create_dir_all(dir).map_err(err)?;
            if let Err(e) = std::os::unix::fs::chown(dir, Some(uid), Some(gid)) {
                // Not running as root: fall back to a world-writable directory
                // rather than a job that cannot write.
                tracing::warn!(dir = %dir.display(), error = %e, "cannot chown job directory, making it world-writable");
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
                    .map_err(err)?;
            }
        }
        Ok(())
    }
}

fn parse_user(user: &str) -> Result<(u32, u32), EngineError> {
    let bad = || {
        EngineError::InvalidSpec(format!(
            "user {user:?} must be numeric \"uid:gid\" with uid > 0 (jobs never run as root)"
        ))
    };
    let (u, g) = user.split_once(':').ok_or_else(bad)?;
    let uid: u32 = u.parse().map_err(|_| bad())?;
    let gid: u32 = g.parse().map_err(|_| bad())?;
    if uid == 0 {
        return Err(bad());
    }
    Ok((uid, gid))
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuRequest {
    #[default]
    None,
    /// Every GPU of the node.
    All,
    /// Any `n` GPUs.
    Count(u32),
    /// These GPUs (index or UUID, as NVML reports them).
    Devices(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resources {
    pub cpus: f64,
    pub memory_mib: u32,
    pub gpus: GpuRequest,
}

/// One job container, as the job spec and the node decide it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    pub job_id: String,
    /// A local image id (`sha256:<64 hex>`) or `<repo>@sha256:<64 hex>`: never
    /// a tag, which could point at other code tomorrow.
    pub image: String,
    /// Replaces the image's entrypoint when set (a job spec's `command`).
    pub entrypoint: Option<Vec<String>>,
    /// Arguments after the entrypoint.
    pub args: Vec<String>,
    /// Job-specific environment; the contract's `MCJS_*` variables are added.
    pub env: Vec<(String, String)>,
    pub mounts: JobMounts,
    pub resources: Resources,
    pub network: bool,
    /// Numeric `uid:gid`, never root.
    pub user: String,
    pub checkpoint_interval: Duration,
    /// Extra container labels (the agent records the assignment generation
    /// here, so it can adopt or remove containers after a restart).
    pub labels: Vec<(String, String)>,
    /// The spec fixes the checkpoint steps: every multiple of this
    /// (`MCJS_CHECKPOINT_EVERY_STEPS`). A check run is given exactly what
    /// the paid run was: nothing in a container says which of the two it is.
    pub checkpoint_every_steps: Option<u64>,
}

impl ContainerSpec {
    pub fn new(job_id: impl Into<String>, image: impl Into<String>, mounts: JobMounts) -> Self {
        Self {
            job_id: job_id.into(),
            image: image.into(),
            entrypoint: None,
            args: Vec::new(),
            env: Vec::new(),
            mounts,
            resources: Resources {
                cpus: 1.0,
                memory_mib: 1024,
                gpus: GpuRequest::None,
            },
            network: false,
            user: contract::DEFAULT_USER.to_string(),
            checkpoint_interval: Duration::from_secs(900),
            labels: Vec::new(),
            checkpoint_every_steps: None,
        }
    }

    pub fn validate(&self) -> Result<(), EngineError> {
        let bad = |m: String| Err(EngineError::InvalidSpec(m));
        if self.job_id.is_empty()
            || !self
                .job_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return bad(format!(
                "job id {:?} must be non-empty letters, digits, '-' or '_'",
                self.job_id
            ));
        }
        if !is_pinned(&self.image) {
            return bad(format!(
                "image {:?} is not pinned by digest: use sha256:<64 hex> or <repo>@sha256:<64 hex>",
                self.image
            ));
        }
        let m = &self.mounts;
        let paths = [
            ("data", Some(&m.data)),
            ("checkpoints", Some(&m.checkpoints)),
            ("output", Some(&m.output)),
            ("restore", m.restore.as_ref()),
            ("metrics", m.metrics.as_ref()),
        ];
        for (what, path) in paths {
            if let Some(p) = path
                && !p.is_absolute()
            {
                return bad(format!(
                    "the {what} directory {} must be an absolute path",
                    p.display()
                ));
            }
        }
        if !(self.resources.cpus > 0.0 && self.resources.cpus <= 1024.0) {
            return bad(format!("cpus {} must be in (0, 1024]", self.resources.cpus));
        }
        if self.resources.memory_mib < 6 {
            return bad(format!(
                "memory {} MiB is below Docker's minimum of 6 MiB",
                self.resources.memory_mib
            ));
        }
        if self.checkpoint_interval.as_secs() == 0 {
            return bad("the checkpoint interval must be at least one second".into());
        }
        if let Some((k, _)) = self.env.iter().find(|(k, _)| k.starts_with("MCJS_")) {
            return bad(format!(
                "environment variable {k} is reserved for the job contract"
            ));
        }
        parse_user(&self.user)?;
        Ok(())
    }

    /// The contract's environment followed by the job's own.
    pub fn environment(&self) -> Vec<String> {
        let mut env = vec![
            format!("{}={}", contract::ENV_JOB_ID, self.job_id),
            format!(
                "{}={}",
                contract::ENV_DATA_DIR,
                contract::CONTAINER_DATA_DIR
            ),
            format!(
                "{}={}",
                contract::ENV_CHECKPOINT_DIR,
                contract::CONTAINER_CHECKPOINT_DIR
            ),
            format!(
                "{}={}",
                contract::ENV_OUTPUT_DIR,
                contract::CONTAINER_OUTPUT_DIR
            ),
            format!(
                "{}={}",
                contract::ENV_CHECKPOINT_INTERVAL_SECS,
                self.checkpoint_interval.as_secs()
            ),
            format!(
                "{}={}",
                contract::ENV_CHECKPOINT_SIGNAL,
                contract::CHECKPOINT_SIGNAL
            ),
        ];
        if self.mounts.restore.is_some() {
            env.push(format!(
                "{}={}",
                contract::ENV_RESTORE_DIR,
                contract::CONTAINER_RESTORE_DIR
            ));
        }
        if self.mounts.metrics.is_some() {
            env.push(format!(
                "{}={}/{}",
                contract::ENV_METRICS_FILE,
                contract::CONTAINER_METRICS_DIR,
                contract::METRICS_FILE
            ));
        }
        if let Some(steps) = self.checkpoint_every_steps {
            env.push(format!("{}={steps}", contract::ENV_CHECKPOINT_EVERY_STEPS));
        }
        env.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
        env
    }
}

fn is_pinned(image: &str) -> bool {
    let digest = match image.split_once('@') {
        Some((repo, d)) if !repo.is_empty() => d,
        Some(_) => return false,
        None => image,
    };
    digest.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ContainerId(pub String);

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum JobSignal {
    /// Checkpoint now (SIGUSR1).
    Checkpoint,
    /// Checkpoint and exit 75 (SIGTERM).
    Stop,
    /// Gone, no questions asked (SIGKILL).
    Kill,
}

impl JobSignal {
    pub fn name(self) -> &'static str {
        match self {
            Self::Checkpoint => contract::CHECKPOINT_SIGNAL,
            Self::Stop => "SIGTERM",
            Self::Kill => "SIGKILL",
        }
    }
}

/// How a job's container ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExitReport {
    pub code: i64,
    pub meaning: ExitMeaning,
    pub oom_killed: bool,
    /// The last lines of its stdout and stderr, oldest first.
    pub last_log_lines: Vec<String>,
}

impl fmt::Display for ExitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exit code {} ({:?})", self.code, self.meaning)?;
        if self.oom_killed {
            write!(f, ", killed for exceeding its memory limit")?;
        }
        if !self.last_log_lines.is_empty() {
            write!(f, "; last log lines:")?;
            for l in &self.last_log_lines {
                write!(f, "\n  {l}")?;
            }
        }
        Ok(())
    }
}

/// A container the engine lists (running or not), with its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedContainer {
    pub id: ContainerId,
    pub labels: std::collections::HashMap<String, String>,
    pub running: bool,
}

/// The operations the agent needs from a container engine.
pub trait ContainerEngine: Send + Sync {
    /// Creates and starts the job's container; returns once it is running.
    fn start(
        &self,
        spec: &ContainerSpec,
    ) -> impl Future<Output = Result<ContainerId, EngineError>> + Send;

    fn signal(
        &self,
        id: &ContainerId,
        signal: JobSignal,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;

    /// Waits for the container to exit.
    fn wait(
        &self,
        id: &ContainerId,
    ) -> impl Future<Output = Result<ExitReport, EngineError>> + Send;

    fn is_running(
        &self,
        id: &ContainerId,
    ) -> impl Future<Output = Result<bool, EngineError>> + Send;

    /// Removes the container, killing it first if it still runs.
    fn remove(&self, id: &ContainerId) -> impl Future<Output = Result<(), EngineError>> + Send;

    /// Every container (running or not) carrying the label `label`.
    fn list_labelled(
        &self,
        label: &str,
    ) -> impl Future<Output = Result<Vec<ListedContainer>, EngineError>> + Send;

    /// Whether the engine holds the image `image` (an id or a reference).
    fn has_image(&self, image: &str) -> impl Future<Output = bool> + Send;

    /// Follows the container's stdout and stderr, from `since` (unix
    /// seconds; 0: its start), into `sink` line by line, until its output
    /// ends (the container exited). An engine that cannot follow output
    /// sends nothing.
    fn follow_output(
        &self,
        id: &ContainerId,
        since: i64,
        sink: crate::logs::LogSink,
    ) -> impl Future<Output = Result<(), EngineError>> + Send {
        let _ = (id, since, sink);
        async { Ok(()) }
    }
}

/// A shared engine is an engine: a test keeps a handle on the fake one it
/// hands to the agent.
impl<E: ContainerEngine> ContainerEngine for std::sync::Arc<E> {
    fn start(
        &self,
        spec: &ContainerSpec,
    ) -> impl Future<Output = Result<ContainerId, EngineError>> + Send {
        (**self).start(spec)
    }

    fn signal(
        &self,
        id: &ContainerId,
        signal: JobSignal,
    ) -> impl Future<Output = Result<(), EngineError>> + Send {
        (**self).signal(id, signal)
    }

    fn wait(
        &self,
        id: &ContainerId,
    ) -> impl Future<Output = Result<ExitReport, EngineError>> + Send {
        (**self).wait(id)
    }

    fn is_running(
        &self,
        id: &ContainerId,
    ) -> impl Future<Output = Result<bool, EngineError>> + Send {
        (**self).is_running(id)
    }

    fn remove(&self, id: &ContainerId) -> impl Future<Output = Result<(), EngineError>> + Send {
        (**self).remove(id)
    }

    fn list_labelled(
        &self,
        label: &str,
    ) -> impl Future<Output = Result<Vec<ListedContainer>, EngineError>> + Send {
        (**self).list_labelled(label)
    }

    fn has_image(&self, image: &str) -> impl Future<Output = bool> + Send {
        (**self).has_image(image)
    }

    fn follow_output(
        &self,
        id: &ContainerId,
        since: i64,
        sink: crate::logs::LogSink,
    ) -> impl Future<Output = Result<(), EngineError>> + Send {
        (**self).follow_output(id, since, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn spec() -> ContainerSpec {
        ContainerSpec::new(
            "job-1",
            format!("sha256:{}", "ab".repeat(32)),
            JobMounts {
                data: "/srv/mcjs/job-1/data".into(),
                checkpoints: "/srv/mcjs/job-1/ckpt".into(),
                output: "/srv/mcjs/job-1/out".into(),
                restore: None,
                metrics: None,
            },
        )
    }

    #[test]
    fn a_spec_with_a_pinned_image_is_valid() {
        spec().validate().unwrap();
        let mut s = spec();
        s.image = format!("registry.example/trainer@sha256:{}", "0f".repeat(32));
        s.validate().unwrap();
    }

    #[test]
    fn a_tagged_image_is_refused() {
        let mut s = spec();
        s.image = "mcjs-trainer:latest".into();
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("not pinned by digest"), "{err}");
    }

    #[test]
    fn root_is_refused() {
        let mut s = spec();
        s.user = "0:0".into();
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("never run as root")
        );
    }

    #[test]
    fn relative_mounts_and_reserved_env_are_refused() {
        let mut s = spec();
        s.mounts.output = "out".into();
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("absolute path")
        );
        let mut s = spec();
        s.env.push(("MCJS_DATA_DIR".into(), "/x".into()));
        assert!(s.validate().unwrap_err().to_string().contains("reserved"));
    }

    #[test]
    fn the_restore_dir_is_announced_only_when_resuming() {
        let mut s = spec();
        assert!(
            !s.environment()
                .iter()
                .any(|e| e.starts_with("MCJS_RESTORE_DIR="))
        );
        s.mounts.restore = Some("/srv/r".into());
        assert!(
            s.environment()
                .contains(&"MCJS_RESTORE_DIR=/mcjs/restore".to_string())
        );
        assert!(
            s.environment()
                .contains(&"MCJS_CHECKPOINT_INTERVAL_SECS=900".to_string())
        );
    }
}
