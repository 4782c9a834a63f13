//! Files this process stored, or restored and verified, for each job: where
//! the store holds those bytes. A checkpoint file whose size and sha256 are
//! known (frozen base weights in a fine-tune, an unchanged tokenizer or
//! dataset shard) is copied inside the store (S3's CopyObject) instead of
//! being uploaded again. Only bytes this process hashed itself are known:
//! a copy never trusts a descriptor another node wrote.

use crate::checkpoint::Sha256Digest;
use object_store::path::Path as ObjectPath;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// At most this many files are remembered (the oldest forgotten first): a
/// job's checkpoint has a few files, and only its last matters.
const REMEMBERED: usize = 4096;

#[derive(Clone, Default)]
pub struct KnownFiles {
    inner: Arc<Mutex<Known>>,
}

#[derive(Default)]
struct Known {
    by_content: HashMap<(String, u64, Sha256Digest), ObjectPath>,
    order: std::collections::VecDeque<(String, u64, Sha256Digest)>,
}

impl KnownFiles {
    /// Whether any file of `size` bytes of `job` is known: only then is a
    /// local file worth hashing before it is stored.
    pub fn has_size(&self, job: &str, size: u64) -> bool {
        let known = self.inner.lock().expect("known files");
        known
            .by_content
            .keys()
            .any(|(j, s, _)| j == job && *s == size)
    }

    /// Where the store holds `size` bytes hashing to `sha256` for `job`.
    pub fn get(&self, job: &str, size: u64, sha256: &Sha256Digest) -> Option<ObjectPath> {
        let known = self.inner.lock().expect("known files");
        known
            .by_content
            .get(&(job.to_string(), size, *sha256))
            .cloned()
    }

    /// The store holds `size` bytes hashing to `sha256` at `path`.
    pub fn remember(&self, job: &str, size: u64, sha256: Sha256Digest, path: ObjectPath) {
        let mut known = self.inner.lock().expect("known files");
        let key = (job.to_string(), size, sha256);
        if known.by_content.insert(key.clone(), path).is_none() {
            known.order.push_back(key);
        }
        while known.order.len() > REMEMBERED {
            if let Some(old) = known.order.pop_front() {
                known.by_content.remove(&old);
            }
        }
    }

    /// The objects under `prefix` are gone (a pruned checkpoint).
    pub fn forget_under(&self, prefix: &str) {
        let mut known = self.inner.lock().expect("known files");
        let Known { by_content, order } = &mut *known;
        by_content.retain(|_, path| !path.as_ref().starts_with(prefix));
        order.retain(|k| by_content.contains_key(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_known_by_job_size_and_hash_until_its_checkpoint_is_pruned() {
        let known = KnownFiles::default();
        let sha = Sha256Digest([1; 32]);
        let path = ObjectPath::from("jobs/a/checkpoints/k1/files/w.bin");
        known.remember("a", 10, sha, path.clone());
        assert!(known.has_size("a", 10));
        assert!(!known.has_size("a", 11) && !known.has_size("b", 10));
        assert_eq!(known.get("a", 10, &sha), Some(path));
        assert_eq!(known.get("a", 10, &Sha256Digest([2; 32])), None);
        assert_eq!(
            known.get("b", 10, &sha),
            None,
            "another job's bytes are not copied"
        );
        known.forget_under("jobs/a/checkpoints/k1/");
        assert_eq!(known.get("a", 10, &sha), None);
        assert!(!known.has_size("a", 10));
    }

    #[test]
    fn it_remembers_a_bounded_number_of_files() {
        let known = KnownFiles::default();
        for i in 0..(REMEMBERED as u64 + 10) {
            known.remember(
                "a",
                i,
                Sha256Digest([0; 32]),
                ObjectPath::from(format!("p/{i}")),
            );
        }
        assert!(!known.has_size("a", 0), "the oldest are forgotten");
        assert!(known.has_size("a", REMEMBERED as u64 + 9));
        assert_eq!(known.inner.lock().unwrap().by_content.len(), REMEMBERED);
    }
}
