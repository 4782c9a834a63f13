//! What the agent's actors share, read-only: the node's identity, its
//! chain, container engine, store and data cache, the agent's
//! configuration and metrics; and what both the job runner and the checker
//! do with them alike (a run's container, named and laid out the same for a
//! paid run and a check, so that a job cannot tell which it is).

use super::AgentConfig;
use super::run_dirs::writable;
use crate::chain::NodeIdentity;
use crate::metrics::AgentMetrics;
use mcjs_client::Pubkey;
use mcjs_runtime::engine::{ContainerEngine, ContainerSpec, GpuRequest, JobMounts};
use mcjs_runtime::staging::{DataCache, InputToStage};
use mcjs_spec::JobSpec;
use object_store::ObjectStore;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The node an agent runs, as every actor of the agent sees it. Nothing
/// here changes while the agent runs: each actor keeps its own state.
pub(super) struct NodeEnv<C, E> {
    pub(super) chain: Arc<C>,
    pub(super) engine: E,
    pub(super) config: AgentConfig,
    /// This node's accounts, as every instruction of its assignments names them.
    pub(super) me: NodeIdentity,
    /// The deployment's store (specs, checkpoints, outputs, logs).
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) cache: DataCache,
    pub(super) metrics: AgentMetrics,
    /// Whether this host can give containers GPUs.
    pub(super) host_gpus: bool,
}

impl<C, E: ContainerEngine> NodeEnv<C, E> {
    /// The container a job's spec asks for, with the contract's mounts under
    /// `dir`, and the inputs to stage into it.
    pub(super) async fn container(
        &self,
        job: Pubkey,
        spec: &JobSpec,
        dir: &std::path::Path,
        restore: Option<PathBuf>,
        checkpoint_interval: Duration,
    ) -> (ContainerSpec, Vec<InputToStage>) {
        let image = self.resolve_image(&spec.work.image).await;
        let mut cspec = ContainerSpec::new(
            job.to_string(),
            image,
            JobMounts {
                data: dir.join("data"),
                checkpoints: writable(dir).join("checkpoints"),
                output: writable(dir).join("output"),
                restore,
                metrics: Some(writable(dir).join("metrics")),
            },
        );
        cspec.entrypoint = Some(spec.work.command.clone());
        cspec.args = spec.work.args.clone();
        cspec.env = spec
            .work
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        cspec.resources.cpus = f64::from(spec.request.hardware.cpu_cores);
        cspec.resources.memory_mib =
            u32::try_from(spec.request.hardware.ram.mib_ceil()).unwrap_or(u32::MAX);
        cspec.checkpoint_interval = match spec.checkpoint.every_steps {
            // The job does not time its checkpoints: it is told the spec's
            // interval, the same on every node (a node's own cap would tell
            // it which node, and so which runs, it is on).
            Some(_) => Duration::from_secs(spec.checkpoint.interval.secs().max(1)),
            None => checkpoint_interval,
        };
        cspec.checkpoint_every_steps = spec.checkpoint.every_steps;
        let inputs: Vec<InputToStage> = spec
            .data
            .iter()
            .map(|d| {
                let limit = crate::fault::input_limit(spec, d.size.map(|b| b.0));
                InputToStage::declared(d, limit)
            })
            .collect();
        (cspec, inputs)
    }

    /// The devices a container gets: by index, never a count (Docker's
    /// `--gpus N` takes the first N, which a check and the paid job would
    /// share). None on a host without NVIDIA devices.
    pub(super) fn gpu_request(&self, job: Pubkey, devices: Vec<u32>) -> GpuRequest {
        if !self.host_gpus {
            tracing::warn!(%job, "this host has no NVIDIA device: the container runs without GPUs");
            return GpuRequest::None;
        }
        GpuRequest::Devices(devices.iter().map(u32::to_string).collect())
    }

    /// The spec pins `name@sha256:D`. A registry image carries D as a repo
    /// digest; an image loaded or built locally has no repo digest, and D is
    /// then its image id. Either way the digest, not the name, picks the code.
    pub(super) async fn resolve_image(&self, image: &mcjs_spec::fields::ImageRef) -> String {
        let id = format!("sha256:{}", image.digest());
        match self.engine.has_image(&id).await {
            true => id,
            false => image.to_string(),
        }
    }
}
