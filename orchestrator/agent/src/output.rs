//! A finished job's output: checked against the spec's required artifacts,
//! hashed like a checkpoint (docs/job-contract.md, "The checkpoint hash") and
//! stored at `jobs/<job>/output/` in the shared store, `output.json` last.

use mcjs_runtime::checkpoint::{CheckpointDigest, Sha256Digest, hash_checkpoint};
use mcjs_spec::JobSpec;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("the job exited 0 but its declared output {0} is missing")]
    Missing(String),
    #[error("cannot hash the output: {0}")]
    Hash(String),
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("output store: cannot write {path}: {source}")]
    Store {
        path: String,
        #[source]
        source: object_store::Error,
    },
}

/// `output.json`: what `complete_job` attests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredOutput {
    pub job: String,
    pub generation: u32,
    pub hash: Sha256Digest,
    pub files: Vec<mcjs_runtime::checkpoint::FileDigest>,
}

pub fn output_prefix(job: &str) -> String {
    format!("jobs/{job}/output")
}

/// Checks, hashes and stores the output in `dir`; returns its hash.
pub async fn store_output(
    store: &dyn ObjectStore,
    job: &str,
    generation: u32,
    dir: &Path,
    spec: &JobSpec,
) -> Result<Sha256Digest, OutputError> {
    for artifact in &spec.output.required_artifacts {
        if !dir.join(artifact.as_str()).is_file() {
            return Err(OutputError::Missing(artifact.as_str().to_string()));
        }
    }
    let owned = dir.to_path_buf();
    let digest: CheckpointDigest = tokio::task::spawn_blocking(move || hash_checkpoint(&owned, 0))
        .await
        .map_err(|e| OutputError::Hash(e.to_string()))?
        .map_err(|e| OutputError::Hash(e.to_string()))?;
    let base = output_prefix(job);
    for f in &digest.files {
        let src = dir.join(&f.path);
        let bytes = tokio::fs::read(&src)
            .await
            .map_err(|source| OutputError::Io {
                path: src.display().to_string(),
                source,
            })?;
        let dst = ObjectPath::from(format!("{base}/files/{}", f.path));
        store
            .put(&dst, PutPayload::from(bytes))
            .await
            .map_err(|source| OutputError::Store {
                path: dst.to_string(),
                source,
            })?;
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
