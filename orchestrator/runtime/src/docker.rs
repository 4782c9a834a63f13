//! [`ContainerEngine`] on Docker (or podman's Docker-compatible API) through
//! bollard.

use crate::contract::{self, ExitMeaning};
use crate::engine::{
    ContainerEngine, ContainerId, ContainerSpec, EngineError, ExitReport, GpuRequest, JobSignal,
    ListedContainer,
};
use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerCreateBody, DeviceRequest, HostConfig, HostConfigLogConfig, Mount, MountType,
};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions,
    KillContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod output;
use output::{Budget, LineSplitter, Tap};
pub use output::{
    LOG_LINE_MAX, LOG_LINES_PER_SEC, LOG_TAIL, OUTPUT_BYTES_PER_SEC, PENDING_LINES, bounded_line,
};

/// Label carrying the job id on every job container.
pub const JOB_LABEL: &str = "mcjs.job";

/// The container's configuration: the contract's mounts and environment, the
/// request's limits, and the security settings every job gets.
pub fn create_body(spec: &ContainerSpec) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        entrypoint: spec.entrypoint.clone(),
        cmd: Some(spec.args.clone()),
        env: Some(spec.environment()),
        user: Some(spec.user.clone()),
        labels: Some(
            spec.labels
                .iter()
                .cloned()
                .chain([(JOB_LABEL.to_string(), spec.job_id.clone())])
                .collect(),
        ),
        network_disabled: Some(!spec.network),
        host_config: Some(host_config(spec)),
        ..Default::default()
    }
}

pub fn host_config(spec: &ContainerSpec) -> HostConfig {
    let bind = |source: &std::path::Path, target: &str, read_only: bool| Mount {
        source: Some(source.display().to_string()),
        target: Some(target.to_string()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        ..Default::default()
    };
    let m = &spec.mounts;
    let mut mounts = vec![
        bind(&m.data, contract::CONTAINER_DATA_DIR, true),
        bind(&m.checkpoints, contract::CONTAINER_CHECKPOINT_DIR, false),
        bind(&m.output, contract::CONTAINER_OUTPUT_DIR, false),
    ];
    if let Some(restore) = &m.restore {
        mounts.push(bind(restore, contract::CONTAINER_RESTORE_DIR, true));
    }
    if let Some(metrics) = &m.metrics {
        mounts.push(bind(metrics, contract::CONTAINER_METRICS_DIR, false));
    }
    let memory = i64::from(spec.resources.memory_mib) * 1024 * 1024;
    HostConfig {
        mounts: Some(mounts),
        nano_cpus: Some((spec.resources.cpus * 1e9).round() as i64),
        memory: Some(memory),
        // Equal to memory: no swap, so a job over its limit is OOM-killed
        // (and reported) rather than slowed to a crawl.
        memory_swap: Some(memory),
        pids_limit: Some(4096),
        cap_drop: Some(vec!["ALL".to_string()]),
        security_opt: Some(vec!["no-new-privileges".to_string()]),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_string(),
            "rw,noexec,nosuid,size=256m".to_string(),
        )])),
        network_mode: Some(if spec.network { "bridge" } else { "none" }.to_string()),
        device_requests: gpu_device_requests(&spec.resources.gpus),
        auto_remove: Some(false),
        // The engine keeps no log: the agent reads the output itself, at a
        // bounded rate (`output`), and nothing of it is written to the
        // node's disk.
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".to_string()),
            config: None,
        }),
        ..Default::default()
    }
}

/// NVIDIA container toolkit device request: what `docker run --gpus` sends.
pub fn gpu_device_requests(gpus: &GpuRequest) -> Option<Vec<DeviceRequest>> {
    let request = |count: Option<i64>, ids: Option<Vec<String>>| DeviceRequest {
        driver: Some("nvidia".to_string()),
        count,
        device_ids: ids,
        capabilities: Some(vec![vec!["gpu".to_string()]]),
        options: None,
    };
    match gpus {
        GpuRequest::None => None,
        GpuRequest::All => Some(vec![request(Some(-1), None)]),
        GpuRequest::Count(n) => Some(vec![request(Some(i64::from(*n)), None)]),
        GpuRequest::Devices(ids) => Some(vec![request(None, Some(ids.clone()))]),
    }
}

struct Tracked {
    job_id: String,
    /// The one reader of the container's output.
    follower: tokio::task::JoinHandle<()>,
    tap: Arc<Tap>,
}

pub struct DockerEngine {
    docker: Docker,
    tracked: Mutex<HashMap<String, Tracked>>,
}

impl DockerEngine {
    /// Connects to the local engine (DOCKER_HOST or the default socket),
    /// agrees on an API version and checks that it answers.
    pub async fn connect() -> Result<Self, EngineError> {
        let unreachable = |e: BollardError| EngineError::Unreachable(e.to_string());
        let docker = Docker::connect_with_local_defaults()
            .map_err(unreachable)?
            .negotiate_version()
            .await
            .map_err(unreachable)?;
        docker.ping().await.map_err(unreachable)?;
        Ok(Self {
            docker,
            tracked: Mutex::new(HashMap::new()),
        })
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    fn job_of(&self, id: &ContainerId) -> String {
        self.tracked
            .lock()
            .expect("tracked containers lock")
            .get(&id.0)
            .map(|t| t.job_id.clone())
            .unwrap_or_else(|| "unknown".to_string())
    }

    fn refused(&self, action: &'static str, id: &ContainerId, e: BollardError) -> EngineError {
        if let BollardError::DockerResponseServerError {
            status_code: 404, ..
        } = e
        {
            return EngineError::UnknownContainer(id.0.clone());
        }
        EngineError::Engine {
            action,
            job_id: self.job_of(id),
            reason: e.to_string(),
        }
    }

    /// Attaches to the container's stdout and stderr (before it starts,
    /// nothing is missed; after, what it prints from now on) and reads them
    /// into a [`Tap`] at most [`OUTPUT_BYTES_PER_SEC`]: past that the
    /// engine stops reading the job's pipe, and the job waits on its writes.
    async fn attach(&self, id: &ContainerId, job_id: &str) -> Result<Arc<Tap>, BollardError> {
        let options = AttachContainerOptionsBuilder::default()
            .stream(true)
            .stdout(true)
            .stderr(true)
            .logs(false)
            .build();
        let mut output = self
            .docker
            .attach_container(&id.0, Some(options))
            .await?
            .output;
        let tap = Arc::new(Tap::new(job_id));
        let reader = Arc::clone(&tap);
        let follower = tokio::spawn(async move {
            use crate::logs::LogStream;
            let mut split = [LineSplitter::default(), LineSplitter::default()];
            let mut budget = Budget::new(OUTPUT_BYTES_PER_SEC);
            while let Some(Ok(out)) = output.next().await {
                let (stream, i) = match out {
                    bollard::container::LogOutput::StdErr { .. } => (LogStream::Stderr, 1),
                    _ => (LogStream::Stdout, 0),
                };
                let bytes: &[u8] = out.as_ref();
                budget.spend(bytes.len()).await;
                let at = now_ms();
                for line in split[i].push(bytes) {
                    reader.line(stream, &line, at);
                }
            }
            for (i, stream) in [(0, LogStream::Stdout), (1, LogStream::Stderr)] {
                if let Some(line) = split[i].finish() {
                    reader.line(stream, &line, now_ms());
                }
            }
            reader.end();
        });
        self.tracked
            .lock()
            .expect("tracked containers lock")
            .insert(
                id.0.clone(),
                Tracked {
                    job_id: job_id.to_string(),
                    follower,
                    tap: Arc::clone(&tap),
                },
            );
        Ok(tap)
    }

    fn tap_of(&self, id: &ContainerId) -> Option<Arc<Tap>> {
        self.tracked
            .lock()
            .expect("tracked containers lock")
            .get(&id.0)
            .map(|t| Arc::clone(&t.tap))
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

impl DockerEngine {
    /// The container's last [`LOG_TAIL`] lines of stdout and stderr, as
    /// this engine read them (none for a container it never followed).
    pub async fn log_tail(&self, id: &ContainerId) -> Result<Vec<String>, EngineError> {
        Ok(self.tap_of(id).map(|t| t.tail()).unwrap_or_default())
    }
}

impl ContainerEngine for DockerEngine {
    #[tracing::instrument(skip_all, fields(job_id = %spec.job_id, image = %spec.image))]
    async fn start(&self, spec: &ContainerSpec) -> Result<ContainerId, EngineError> {
        spec.validate()?;
        let refused = |action, e: BollardError| EngineError::Engine {
            action,
            job_id: spec.job_id.clone(),
            reason: e.to_string(),
        };
        let name = format!(
            "mcjs-{}-{}",
            spec.job_id,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = self
            .docker
            .create_container(Some(options), create_body(spec))
            .await
            .map_err(|e| refused("create a container", e))?;
        let id = ContainerId(created.id);
        // Attached before it starts: nothing it prints is missed.
        if let Err(e) = self.attach(&id, &spec.job_id).await {
            let _ = self.remove(&id).await;
            return Err(refused("attach to the container", e));
        }
        if let Err(e) = self.docker.start_container(&id.0, None).await {
            let _ = self.remove(&id).await;
            return Err(refused("start the container", e));
        }
        tracing::info!(container = %id, "job container started");
        Ok(id)
    }

    #[tracing::instrument(skip(self), fields(job_id = %self.job_of(id)))]
    async fn signal(&self, id: &ContainerId, signal: JobSignal) -> Result<(), EngineError> {
        let options = KillContainerOptionsBuilder::default()
            .signal(signal.name())
            .build();
        self.docker
            .kill_container(&id.0, Some(options))
            .await
            .map_err(|e| self.refused("signal the container", id, e))
    }

    #[tracing::instrument(skip(self), fields(job_id = %self.job_of(id)))]
    async fn wait(&self, id: &ContainerId) -> Result<ExitReport, EngineError> {
        let mut waiting = self.docker.wait_container(&id.0, None);
        let waited = match waiting.next().await {
            Some(Ok(r)) => Some(r.status_code),
            // bollard turns every non-zero exit into this error.
            Some(Err(BollardError::DockerContainerWaitError { code, .. })) => Some(code),
            Some(Err(e)) => return Err(self.refused("wait for the container", id, e)),
            None => None,
        };
        let state = self
            .docker
            .inspect_container(&id.0, None::<InspectContainerOptions>)
            .await
            .map_err(|e| self.refused("inspect the container", id, e))?
            .state
            .unwrap_or_default();
        let code = state.exit_code.or(waited).unwrap_or(-1);
        let follower = self
            .tracked
            .lock()
            .expect("tracked containers lock")
            .get(&id.0)
            .map(|t| t.follower.abort_handle());
        // Let the follower drain the stream (it ends with the container) so
        // the tracing log is complete too.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while follower.as_ref().is_some_and(|f| !f.is_finished())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let last_log_lines = self.log_tail(id).await?;
        let report = ExitReport {
            code,
            meaning: ExitMeaning::of(code),
            oom_killed: state.oom_killed.unwrap_or(false),
            last_log_lines,
        };
        tracing::info!(code, meaning = ?report.meaning, "job container exited");
        Ok(report)
    }

    async fn is_running(&self, id: &ContainerId) -> Result<bool, EngineError> {
        let info = self
            .docker
            .inspect_container(&id.0, None::<InspectContainerOptions>)
            .await
            .map_err(|e| self.refused("inspect the container", id, e))?;
        Ok(info.state.and_then(|s| s.running).unwrap_or(false))
    }

    #[tracing::instrument(skip(self), fields(job_id = %self.job_of(id)))]
    async fn remove(&self, id: &ContainerId) -> Result<(), EngineError> {
        let options = RemoveContainerOptionsBuilder::default().force(true).build();
        let result = self
            .docker
            .remove_container(&id.0, Some(options))
            .await
            .map_err(|e| self.refused("remove the container", id, e));
        if let Some(t) = self
            .tracked
            .lock()
            .expect("tracked containers lock")
            .remove(&id.0)
        {
            t.follower.abort();
            t.tap.end();
        }
        result
    }

    async fn list_labelled(&self, label: &str) -> Result<Vec<ListedContainer>, EngineError> {
        let filters = HashMap::from([("label".to_string(), vec![label.to_string()])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let list = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| EngineError::Unreachable(e.to_string()))?;
        Ok(list
            .into_iter()
            .filter_map(|c| {
                Some(ListedContainer {
                    id: ContainerId(c.id?),
                    labels: c.labels.unwrap_or_default(),
                    running: c.state.is_some_and(|s| s.to_string() == "running"),
                })
            })
            .collect())
    }

    async fn has_image(&self, image: &str) -> bool {
        self.docker.inspect_image(image).await.is_ok()
    }

    /// The container's output as this engine reads it (see [`output`]):
    /// from its start for a container this engine started (what it printed
    /// before the call was kept), from now on for one it did not (an agent
    /// that restarted adopts its containers: what they printed while it was
    /// away is not kept anywhere). `since` is not needed and ignored.
    async fn follow_output(
        &self,
        id: &ContainerId,
        since: i64,
        sink: crate::logs::LogSink,
    ) -> Result<(), EngineError> {
        let _ = since;
        let tap = match self.tap_of(id) {
            Some(tap) => tap,
            None => {
                let job_id = self
                    .docker
                    .inspect_container(&id.0, None::<InspectContainerOptions>)
                    .await
                    .ok()
                    .and_then(|c| c.config?.labels?.remove(JOB_LABEL))
                    .unwrap_or_else(|| "unknown".to_string());
                self.attach(id, &job_id)
                    .await
                    .map_err(|e| self.refused("attach to the container", id, e))?
            }
        };
        let mut ended = tap.follow(sink);
        let _ = ended.wait_for(|ended| *ended).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::JobMounts;

    fn spec() -> ContainerSpec {
        ContainerSpec::new(
            "job-1",
            format!("sha256:{}", "ab".repeat(32)),
            JobMounts {
                data: "/srv/d".into(),
                checkpoints: "/srv/c".into(),
                output: "/srv/o".into(),
                restore: Some("/srv/r".into()),
                metrics: None,
            },
        )
    }

    #[test]
    fn every_job_gets_the_security_settings() {
        let h = host_config(&spec());
        assert_eq!(h.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(h.security_opt, Some(vec!["no-new-privileges".to_string()]));
        assert_eq!(h.readonly_rootfs, Some(true));
        assert_eq!(h.network_mode.as_deref(), Some("none"));
        assert_eq!(h.device_requests, None);
        assert_eq!(create_body(&spec()).user.as_deref(), Some("65532:65532"));
    }

    #[test]
    fn data_and_restore_are_read_only_and_the_rest_writable() {
        let h = host_config(&spec());
        let ro: HashMap<String, bool> = h
            .mounts
            .unwrap()
            .into_iter()
            .map(|m| (m.target.unwrap(), m.read_only.unwrap()))
            .collect();
        assert_eq!(
            ro,
            HashMap::from([
                ("/mcjs/data".to_string(), true),
                ("/mcjs/restore".to_string(), true),
                ("/mcjs/checkpoints".to_string(), false),
                ("/mcjs/output".to_string(), false),
            ])
        );
    }

    #[test]
    fn limits_come_from_the_request() {
        let mut s = spec();
        s.resources.cpus = 2.5;
        s.resources.memory_mib = 3072;
        let h = host_config(&s);
        assert_eq!(h.nano_cpus, Some(2_500_000_000));
        assert_eq!(h.memory, Some(3072 * 1024 * 1024));
        assert_eq!(h.memory_swap, h.memory);
    }

    #[test]
    fn gpus_are_requested_the_way_docker_run_gpus_does() {
        let all = gpu_device_requests(&GpuRequest::All).unwrap();
        assert_eq!(all[0].driver.as_deref(), Some("nvidia"));
        assert_eq!(all[0].count, Some(-1));
        assert_eq!(all[0].capabilities, Some(vec![vec!["gpu".to_string()]]));
        let two = gpu_device_requests(&GpuRequest::Count(2)).unwrap();
        assert_eq!(two[0].count, Some(2));
        let ids = gpu_device_requests(&GpuRequest::Devices(vec!["GPU-1234".into()])).unwrap();
        assert_eq!(ids[0].device_ids, Some(vec!["GPU-1234".to_string()]));
        assert_eq!(ids[0].count, None);
        // What the engine receives, as JSON.
        let json = serde_json::to_value(&two[0]).unwrap();
        assert_eq!(json["Driver"], "nvidia");
        assert_eq!(json["Count"], 2);
        assert_eq!(json["Capabilities"], serde_json::json!([["gpu"]]));
    }

    #[test]
    fn no_log_on_disk_and_each_kept_line_is_bounded() {
        let log = host_config(&spec()).log_config.unwrap();
        assert_eq!(log.typ.as_deref(), Some("none"));
        let long = "é".repeat(4 * LOG_LINE_MAX);
        let kept = bounded_line(&long);
        assert!(kept.len() < LOG_LINE_MAX + 40, "{}", kept.len());
        assert_eq!(bounded_line("short"), "short");
    }

    #[test]
    fn network_is_granted_only_when_asked() {
        let mut s = spec();
        s.network = true;
        assert_eq!(host_config(&s).network_mode.as_deref(), Some("bridge"));
        assert_eq!(create_body(&s).network_disabled, Some(false));
    }
}
