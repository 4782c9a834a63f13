//! Where a container's directories live on the node (named so that a job
//! learns nothing from them), the volume that bounds them, and their removal.

use super::node::NodeEnv;
use crate::chain::AgentChain;
use mcjs_client::Pubkey;
use mcjs_runtime::volume::{self, DiskBound};
use mcjs_spec::JobSpec;
use std::path::{Path, PathBuf};

/// The root of a run's writable directories (`checkpoints`, `output`): the
/// run's volume under [`DiskBound::Loop`], a plain directory under
/// [`DiskBound::Watch`].
pub(super) fn writable(dir: &Path) -> PathBuf {
    volume::mount_point(dir)
}

impl<C: AgentChain, E> NodeEnv<C, E> {
    /// Where an assignment's directories are (`data`, `checkpoints`,
    /// `output`, `restore`).
    pub(super) fn job_dir(&self, job: Pubkey, generation: u32) -> PathBuf {
        self.run_dir(&format!("job/{job}/{generation}"))
    }

    /// A container's directories live under `work/runs/<32 hex>`, named by
    /// a hash keyed with a signature of the node's operator key: the same
    /// for the same `label` across restarts, and saying nothing a job could
    /// read (through its mounts) of the job, the generation, or whether the
    /// run is paid or a check.
    pub(super) fn run_dir(&self, label: &str) -> PathBuf {
        use sha2::{Digest, Sha256};
        let key = Sha256::digest(self.chain.sign(b"mcjs-run-dir/1"));
        let mut name = Sha256::new();
        name.update(key);
        name.update(label.as_bytes());
        let name = hex::encode(&name.finalize()[..16]);
        self.config.work_dir.join("runs").join(name)
    }

    /// Mounts the run's volume, of the spec's declared disk, under
    /// [`DiskBound::Loop`] (kept if already mounted); nothing under
    /// [`DiskBound::Watch`].
    pub(super) async fn mount_run(&self, dir: &Path, spec: &JobSpec) -> Result<(), String> {
        if self.config.disk != DiskBound::Loop {
            return Ok(());
        }
        let (dir, declared) = (dir.to_path_buf(), spec.request.hardware.disk.0);
        tokio::task::spawn_blocking(move || volume::ensure(&dir, declared))
            .await
            .map_err(|e| e.to_string())?
            .map(drop)
            .map_err(|e| format!("cannot make the job's disk: {e}"))
    }

    /// Unmounts the run's volume and deletes the run's directory: called
    /// once no container uses it (its checkpoints are in the store).
    pub(super) async fn clear_run(&self, dir: PathBuf) {
        let loop_mounted = self.config.disk == DiskBound::Loop;
        let _ = tokio::task::spawn_blocking(move || {
            if loop_mounted {
                if let Err(e) = volume::release(&dir) {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot unmount the run's disk; its directory is kept");
                    return;
                }
            }
            if volume::is_mounted(&volume::mount_point(&dir)) {
                return; // never delete through a mount
            }
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot delete the run's directory");
                }
            }
        })
        .await;
    }

    /// Whether the run's volume is full: a job that exits then ran into
    /// its declared disk (only a loop-mounted volume can say).
    pub(super) fn disk_full(&self, dir: &Path) -> bool {
        self.config.disk == DiskBound::Loop && volume::is_full(&writable(dir))
    }
}
