//! A finished job's output: checked against the spec's required artifacts,
//! hashed like a checkpoint (docs/job-contract.md, "The checkpoint hash") and
//! stored at `jobs/<job>/output/g<generation>/` in the shared store,
//! `output.json` last. Fenced by generation as checkpoints are: a node
//! fenced off the job cannot overwrite the output of the one that completed.
//! Written once: through the gateway every output object is created, never
//! replaced or deleted (docs/store.md), so each try of storing the output
//! writes its files under its own `<attempt>/files`, and the descriptor
//! names the one that counts.

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
    #[error(
        "the output stored already at {path} has hash {hash}, not this one's; an output is never replaced"
    )]
    Stored { path: String, hash: Sha256Digest },
}

impl OutputError {
    /// Whether the store failed (unreachable, or it refused or failed a
    /// request), as opposed to what the job left: storing the output again
    /// once the store answers is safe (nothing is visible before
    /// `output.json`, written last) and may succeed.
    pub fn is_store_failure(&self) -> bool {
        match self {
            Self::Missing(_) | Self::Stored { .. } => false,
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
    /// The try whose files these are (`<attempt>/files` under the
    /// generation's output); empty: directly under `files`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub attempt: String,
    pub files: Vec<crate::checkpoint::FileDigest>,
}

impl StoredOutput {
    /// Where the descriptor's files are, under the generation's output
    /// `base` ([`output_prefix`]). `None` when the descriptor (the
    /// provider's word) names an attempt that is not one the agent makes
    /// (16 lowercase hex digits): it may not point anywhere else.
    pub fn files_prefix(&self, base: &str) -> Option<String> {
        if self.attempt.is_empty() {
            return Some(format!("{base}/files"));
        }
        let ours = self.attempt.len() == 16
            && self
                .attempt
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ours.then(|| format!("{base}/{}/files", self.attempt))
    }
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
    let attempt = format!("{:016x}", crate::store::upload_nonce(job));
    let digest = upload_tree(
        store,
        &format!("{base}/{attempt}/files"),
        root,
        limits,
        0,
        None,
    )
    .await?;
    for artifact in &spec.output.required_artifacts {
        if !digest.files.iter().any(|f| f.path == artifact.as_str()) {
            return Err(OutputError::Missing(artifact.as_str().to_string()));
        }
    }
    let descriptor = StoredOutput {
        job: job.to_string(),
        generation,
        hash: digest.hash,
        attempt,
        files: digest.files.clone(),
    };
    let path = ObjectPath::from(format!("{base}/output.json"));
    let stored = store
        .put(
            &path,
            PutPayload::from(serde_json::to_vec_pretty(&descriptor).expect("serialisable")),
        )
        .await;
    match stored {
        Ok(_) => Ok(digest.hash),
        // An earlier try stored its descriptor (its answer was lost): the
        // output is stored if that one names the same files.
        Err(object_store::Error::AlreadyExists { .. }) => {
            let earlier = earlier_descriptor(store, &path).await?;
            if earlier.hash == digest.hash {
                Ok(digest.hash)
            } else {
                Err(OutputError::Stored {
                    path: path.to_string(),
                    hash: earlier.hash,
                })
            }
        }
        Err(source) => Err(OutputError::Store {
            path: path.to_string(),
            source,
        }),
    }
}

/// The descriptor an earlier try stored at `path`.
async fn earlier_descriptor(
    store: &Arc<dyn ObjectStore>,
    path: &ObjectPath,
) -> Result<StoredOutput, OutputError> {
    let failed = |source| OutputError::Store {
        path: path.to_string(),
        source,
    };
    let got = store.get(path).await.map_err(failed)?;
    if got.meta.size > MAX_DESCRIPTOR_BYTES {
        return Err(failed(object_store::Error::Generic {
            store: "output",
            source: "an oversized descriptor".into(),
        }));
    }
    let bytes = got.bytes().await.map_err(failed)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        failed(object_store::Error::Generic {
            store: "output",
            source: Box::new(e),
        })
    })
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
    fn a_descriptor_names_only_an_attempt_the_agent_makes() {
        let mut d = StoredOutput {
            job: "j".into(),
            generation: 1,
            hash: Sha256Digest([0; 32]),
            attempt: String::new(),
            files: Vec::new(),
        };
        assert_eq!(d.files_prefix("b").as_deref(), Some("b/files"));
        d.attempt = "0123456789abcdef".into();
        assert_eq!(
            d.files_prefix("b").as_deref(),
            Some("b/0123456789abcdef/files")
        );
        for bad in [
            "..",
            "../../x",
            "0123456789ABCDEF",
            "0123456789abcde",
            "a/b",
        ] {
            d.attempt = bad.into();
            assert_eq!(d.files_prefix("b"), None, "{bad}");
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
