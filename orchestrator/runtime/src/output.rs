//! A finished job's output: checked against the spec's required artifacts,
//! hashed like a checkpoint (docs/job-contract.md, "The checkpoint hash") and
//! stored at `jobs/<job>/output/g<generation>/` in the shared store,
//! `output.json` last. Fenced by generation as checkpoints are: a node
//! fenced off the job cannot overwrite the output of the one that completed.

use crate::checkpoint::Sha256Digest;
use crate::confined::{ConfinedDir, Limits};
use crate::store::{StoreError, upload_tree};
use mcjs_spec::JobSpec;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("the job exited 0 but its declared output {0} is missing")]
    Missing(String),
    #[error("output refused: {0}")]
    Upload(#[from] StoreError),
    #[error("output store: cannot write {path}: {source}")]
    Store {
        path: String,
        #[source]
        source: object_store::Error,
    },
}

impl OutputError {
    /// Whether the store failed (unreachable, or it refused or failed a
    /// request), as opposed to what the job left: storing the output again
    /// once the store answers is safe (nothing is visible before
    /// `output.json`, written last) and may succeed.
    pub fn is_store_failure(&self) -> bool {
        match self {
            Self::Missing(_) => false,
            Self::Store { .. } => true,
            Self::Upload(StoreError::Upload(_)) => true,
            Self::Upload(e) => e.is_unavailable(),
        }
    }
}

/// `output.json`: what `complete_job` attests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredOutput {
    pub job: String,
    pub generation: u32,
    pub hash: Sha256Digest,
    pub files: Vec<crate::checkpoint::FileDigest>,
}

pub fn output_prefix(job: &str, generation: u32) -> String {
    mcjs_protocol::store::layout::output(job, generation)
}

/// The largest `output.json` a reader takes: a descriptor lists at most
/// [`crate::checkpoint::MAX_FILES`] files of one line each.
pub const MAX_DESCRIPTOR_BYTES: u64 = 64 << 20;

/// Stores the output in `dir` (every read confined to it, each file hashed
/// as it is uploaded, within `limits`), checks the spec's required
/// artifacts against what was stored, and returns its hash.
pub async fn store_output(
    store: &Arc<dyn ObjectStore>,
    job: &str,
    generation: u32,
    dir: &Path,
    spec: &JobSpec,
    limits: Limits,
) -> Result<Sha256Digest, OutputError> {
    let base = output_prefix(job, generation);
    let root = ConfinedDir::open(dir).map_err(|e| StoreError::Checkpoint(e.into()))?;
    let digest = upload_tree(store, &format!("{base}/files"), root, limits, 0).await?;
    for artifact in &spec.output.required_artifacts {
        if !digest.files.iter().any(|f| f.path == artifact.as_str()) {
            return Err(OutputError::Missing(artifact.as_str().to_string()));
        }
    }
    let descriptor = StoredOutput {
        job: job.to_string(),
        generation,
        hash: digest.hash,
        files: digest.files.clone(),
    };
    let path = ObjectPath::from(format!("{base}/output.json"));
    store
        .put(
            &path,
            PutPayload::from(serde_json::to_vec_pretty(&descriptor).expect("serialisable")),
        )
        .await
        .map_err(|source| OutputError::Store {
            path: path.to_string(),
            source,
        })?;
    Ok(digest.hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{UploadError, UploadStage};

    fn refused() -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: "connection refused".into(),
        }
    }

    #[test]
    fn a_failing_store_is_told_apart_from_what_the_job_left() {
        // The store's failures: worth storing the output again.
        let upload = OutputError::Upload(StoreError::Upload(UploadError {
            path: "jobs/j/output/g1/files/model.bin".into(),
            stage: UploadStage::Put,
            source: refused(),
        }));
        assert!(upload.is_store_failure());
        let descriptor = OutputError::Store {
            path: "jobs/j/output/g1/output.json".into(),
            source: refused(),
        };
        assert!(descriptor.is_store_failure());
        // What the job left, or an answer about what the store holds: no.
        assert!(!OutputError::Missing("model.bin".into()).is_store_failure());
        assert!(!OutputError::Upload(StoreError::BadJobId("../x".into())).is_store_failure());
        let not_found = OutputError::Upload(StoreError::Object {
            action: "read",
            path: "jobs/j/output/g1/output.json".into(),
            source: object_store::Error::NotFound {
                path: "jobs/j/output/g1/output.json".into(),
                source: "absent".into(),
            },
        });
        assert!(!not_found.is_store_failure());
    }
}
