//! Job Specifications off chain: the chain records only a spec's sha256, the
//! spec itself lives in the shared store at `specs/<sha256 hex>.json` as its
//! canonical JSON (`mcjs_spec::canonical_json`), so that its file hashes to
//! the name and to what the chain holds.

use mcjs_spec::{JobSpec, canonical_json, spec_hash};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum SpecStoreError {
    #[error(
        "the job spec {hash} is not in the spec store (specs/{hash}.json); the job's owner must publish it with `mcjs job submit`"
    )]
    Missing { hash: String },
    #[error(
        "the spec store holds specs/{expected}.json but its contents hash to {actual}; refusing a spec that is not the one the chain records"
    )]
    HashMismatch { expected: String, actual: String },
    #[error("specs/{hash}.json is not a valid job spec: {reason}")]
    Invalid { hash: String, reason: String },
    #[error("spec store: cannot {action} {path}: {source}")]
    Store {
        action: &'static str,
        path: String,
        #[source]
        source: object_store::Error,
    },
}

/// Where a spec with this hash lives in the store.
pub fn spec_path(hash: &[u8; 32]) -> ObjectPath {
    ObjectPath::from(mcjs_protocol::store::layout::spec(hash))
}

/// Publishes a spec's canonical JSON; returns its hash (what `submit_job` records).
pub async fn put_spec(store: &dyn ObjectStore, spec: &JobSpec) -> Result<[u8; 32], SpecStoreError> {
    let hash = spec_hash(spec);
    let path = spec_path(&hash);
    store
        .put(&path, PutPayload::from(canonical_json(spec).into_bytes()))
        .await
        .map_err(|source| SpecStoreError::Store {
            action: "write",
            path: path.to_string(),
            source,
        })?;
    Ok(hash)
}

/// Fetches the spec the chain names by `hash`, and refuses it unless its bytes
/// hash to `hash` and it parses as a valid spec.
pub async fn get_spec(store: &dyn ObjectStore, hash: &[u8; 32]) -> Result<JobSpec, SpecStoreError> {
    let hex_hash = hex::encode(hash);
    let path = spec_path(hash);
    let bytes = match store.get(&path).await {
        Ok(r) => r.bytes().await.map_err(|source| SpecStoreError::Store {
            action: "read",
            path: path.to_string(),
            source,
        })?,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(SpecStoreError::Missing { hash: hex_hash });
        }
        Err(source) => {
            return Err(SpecStoreError::Store {
                action: "read",
                path: path.to_string(),
                source,
            });
        }
    };
    let actual: [u8; 32] = Sha256::digest(&bytes).into();
    if &actual != hash {
        return Err(SpecStoreError::HashMismatch {
            expected: hex_hash,
            actual: hex::encode(actual),
        });
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| SpecStoreError::Invalid {
        hash: hex_hash.clone(),
        reason: e.to_string(),
    })?;
    JobSpec::from_json(text).map_err(|e| SpecStoreError::Invalid {
        hash: hex_hash,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    fn spec() -> JobSpec {
        JobSpec::from_json(include_str!("../../../examples/specs/training-a100.json")).unwrap()
    }

    #[tokio::test]
    async fn a_published_spec_comes_back_verified() {
        let store = InMemory::new();
        let hash = put_spec(&store, &spec()).await.unwrap();
        assert_eq!(hash, spec_hash(&spec()));
        assert_eq!(get_spec(&store, &hash).await.unwrap(), spec());
    }

    #[tokio::test]
    async fn a_spec_whose_bytes_changed_is_refused() {
        let store = InMemory::new();
        let hash = put_spec(&store, &spec()).await.unwrap();
        let tampered =
            canonical_json(&spec()).replace("\"restart_budget\":", "\"restart_budget\": ");
        store
            .put(&spec_path(&hash), PutPayload::from(tampered.into_bytes()))
            .await
            .unwrap();
        let err = get_spec(&store, &hash).await.unwrap_err();
        assert!(matches!(err, SpecStoreError::HashMismatch { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_missing_spec_says_how_to_publish_it() {
        let err = get_spec(&InMemory::new(), &[7; 32]).await.unwrap_err();
        assert!(err.to_string().contains("mcjs job submit"), "{err}");
    }
}
