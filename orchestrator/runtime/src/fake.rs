//! An in-memory [`ContainerEngine`] for testing decisions made on top of the
//! runtime (the agent's). It behaves like Docker where the agent can tell:
//! specs are validated, SIGKILL ends a container with 137, removing a running
//! container kills it, unknown ids are errors. Everything else a test scripts.

use crate::contract::ExitMeaning;
use crate::engine::{
    ContainerEngine, ContainerId, ContainerSpec, EngineError, ExitReport, JobSignal,
    ListedContainer,
};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct FakeContainer {
    pub spec: ContainerSpec,
    pub signals: Vec<JobSignal>,
    pub exit: Option<ExitReport>,
    pub removed: bool,
}

#[derive(Default)]
struct State {
    next: u64,
    containers: HashMap<String, FakeContainer>,
    refuse_starts: Option<String>,
    images: Vec<String>,
}

#[derive(Default)]
pub struct FakeEngine {
    state: Mutex<State>,
}

impl FakeEngine {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("fake engine lock"))
    }

    /// Makes the container exit with `code` and these last log lines.
    pub fn exit(&self, id: &ContainerId, code: i64, last_log_lines: &[&str]) {
        self.with(|s| {
            if let Some(c) = s.containers.get_mut(&id.0)
                && c.exit.is_none()
            {
                c.exit = Some(ExitReport {
                    code,
                    meaning: ExitMeaning::of(code),
                    oom_killed: false,
                    last_log_lines: last_log_lines.iter().map(ToString::to_string).collect(),
                });
            }
        });
    }

    /// The engine holds `image` from now on.
    pub fn add_image(&self, image: &str) {
        self.with(|s| s.images.push(image.to_string()));
    }

    /// Every later `start` fails as if the engine refused it.
    pub fn refuse_starts(&self, reason: &str) {
        self.with(|s| s.refuse_starts = Some(reason.to_string()));
    }

    pub fn container(&self, id: &ContainerId) -> Option<FakeContainer> {
        self.with(|s| s.containers.get(&id.0).cloned())
    }

    /// Every container created so far, in creation order.
    pub fn containers(&self) -> Vec<FakeContainer> {
        self.with(|s| {
            let mut all: Vec<_> = s.containers.iter().collect();
            all.sort_by_key(|(id, _)| id.trim_start_matches("fake-").parse::<u64>().unwrap_or(0));
            all.into_iter().map(|(_, c)| c.clone()).collect()
        })
    }

    /// Specs of every container started, in order.
    pub fn started(&self) -> Vec<ContainerSpec> {
        self.containers().into_iter().map(|c| c.spec).collect()
    }

    fn get<T>(
        &self,
        id: &ContainerId,
        f: impl FnOnce(&mut FakeContainer) -> T,
    ) -> Result<T, EngineError> {
        self.with(|s| match s.containers.get_mut(&id.0) {
            Some(c) if !c.removed => Ok(f(c)),
            _ => Err(EngineError::UnknownContainer(id.0.clone())),
        })
    }
}

fn killed() -> ExitReport {
    ExitReport {
        code: 137,
        meaning: ExitMeaning::Crashed,
        oom_killed: false,
        last_log_lines: Vec::new(),
    }
}

impl ContainerEngine for FakeEngine {
    async fn start(&self, spec: &ContainerSpec) -> Result<ContainerId, EngineError> {
        spec.validate()?;
        self.with(|s| {
            if let Some(reason) = &s.refuse_starts {
                return Err(EngineError::Engine {
                    action: "start the container",
                    job_id: spec.job_id.clone(),
                    reason: reason.clone(),
                });
            }
            s.next += 1;
            let id = format!("fake-{}", s.next);
            s.containers.insert(
                id.clone(),
                FakeContainer {
                    spec: spec.clone(),
                    signals: Vec::new(),
                    exit: None,
                    removed: false,
                },
            );
            Ok(ContainerId(id))
        })
    }

    async fn signal(&self, id: &ContainerId, signal: JobSignal) -> Result<(), EngineError> {
        self.get(id, |c| {
            c.signals.push(signal);
            if signal == JobSignal::Kill && c.exit.is_none() {
                c.exit = Some(killed());
            }
        })
    }

    async fn wait(&self, id: &ContainerId) -> Result<ExitReport, EngineError> {
        loop {
            if let Some(exit) = self.get(id, |c| c.exit.clone())? {
                return Ok(exit);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn is_running(&self, id: &ContainerId) -> Result<bool, EngineError> {
        self.get(id, |c| c.exit.is_none())
    }

    async fn remove(&self, id: &ContainerId) -> Result<(), EngineError> {
        self.get(id, |c| {
            if c.exit.is_none() {
                c.exit = Some(killed());
            }
            c.removed = true;
        })
    }

    async fn list_labelled(&self, label: &str) -> Result<Vec<ListedContainer>, EngineError> {
        self.with(|s| {
            let mut all: Vec<ListedContainer> = s
                .containers
                .iter()
                .filter(|(_, c)| !c.removed)
                .map(|(id, c)| {
                    let mut labels: std::collections::HashMap<String, String> =
                        c.spec.labels.iter().cloned().collect();
                    labels.insert(crate::docker::JOB_LABEL.to_string(), c.spec.job_id.clone());
                    ListedContainer {
                        id: ContainerId(id.clone()),
                        labels,
                        running: c.exit.is_none(),
                    }
                })
                .filter(|c| c.labels.contains_key(label))
                .collect();
            all.sort_by(|a, b| a.id.0.cmp(&b.id.0));
            Ok(all)
        })
    }

    async fn has_image(&self, image: &str) -> bool {
        self.with(|s| s.images.iter().any(|i| i == image))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::JobMounts;
    use crate::launch::{LaunchError, launch};
    use crate::staging::{DataCache, InputToStage, StagingPolicy};
    use sha2::{Digest, Sha256};

    fn setup() -> (tempfile::TempDir, ContainerSpec, InputToStage) {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::write(&src, b"1,0\n").unwrap();
        let input = InputToStage {
            name: "train.csv".into(),
            uri: url::Url::from_file_path(&src).unwrap().to_string(),
            sha256: hex::encode(Sha256::digest(b"1,0\n")),
            max_bytes: None,
        };
        let spec = ContainerSpec::new(
            "job-9",
            format!("sha256:{}", "cd".repeat(32)),
            JobMounts {
                data: t.path().join("data"),
                checkpoints: t.path().join("ckpt"),
                output: t.path().join("out"),
                restore: None,
                metrics: None,
            },
        );
        (t, spec, input)
    }

    fn cache(t: &tempfile::TempDir) -> DataCache {
        DataCache::with_policy(
            t.path().join("cache"),
            StagingPolicy {
                data_roots: vec![t.path().to_path_buf()],
                ..StagingPolicy::default()
            },
        )
    }

    #[tokio::test]
    async fn launch_stages_and_prepares_before_starting() {
        let (t, spec, input) = setup();
        let engine = FakeEngine::new();
        let cache = cache(&t);
        let (id, staged) = launch(&engine, &cache, &[input], &spec).await.unwrap();
        assert_eq!(staged.len(), 1);
        assert!(t.path().join("data/train.csv").exists());
        assert!(t.path().join("ckpt").is_dir() && t.path().join("out").is_dir());
        assert_eq!(engine.started(), vec![spec]);
        assert!(engine.is_running(&id).await.unwrap());
        engine.signal(&id, JobSignal::Checkpoint).await.unwrap();
        engine.exit(&id, 0, &["done"]);
        let report = engine.wait(&id).await.unwrap();
        assert_eq!(report.meaning, ExitMeaning::Done);
        assert_eq!(
            engine.container(&id).unwrap().signals,
            [JobSignal::Checkpoint]
        );
    }

    #[tokio::test]
    async fn launch_never_starts_a_container_on_unverified_data() {
        let (t, spec, mut input) = setup();
        input.sha256 = hex::encode(Sha256::digest(b"other"));
        let engine = FakeEngine::new();
        let cache = cache(&t);
        let err = launch(&engine, &cache, &[input], &spec).await.unwrap_err();
        assert!(matches!(err, LaunchError::Staging { .. }), "{err}");
        assert!(engine.started().is_empty());
    }

    #[tokio::test]
    async fn containers_are_listed_by_label_and_images_known_once_added() {
        let (t, mut spec, input) = setup();
        spec.labels = vec![("mcjs.generation".into(), "4".into())];
        let engine = FakeEngine::new();
        let cache = cache(&t);
        let (id, _) = launch(&engine, &cache, &[input], &spec).await.unwrap();
        let listed = engine.list_labelled("mcjs.generation").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, id);
        assert_eq!(listed[0].labels["mcjs.job"], "job-9");
        assert!(listed[0].running);
        assert!(engine.list_labelled("other").await.unwrap().is_empty());
        assert!(!engine.has_image(&spec.image).await);
        engine.add_image(&spec.image);
        assert!(engine.has_image(&spec.image).await);
    }

    #[tokio::test]
    async fn sigkill_and_remove_end_a_container_like_docker_does() {
        let (t, spec, input) = setup();
        let engine = FakeEngine::new();
        let cache = cache(&t);
        let (id, _) = launch(&engine, &cache, &[input], &spec).await.unwrap();
        engine.signal(&id, JobSignal::Kill).await.unwrap();
        assert_eq!(engine.wait(&id).await.unwrap().code, 137);
        engine.remove(&id).await.unwrap();
        assert!(matches!(
            engine.is_running(&id).await,
            Err(EngineError::UnknownContainer(_))
        ));
    }
}
