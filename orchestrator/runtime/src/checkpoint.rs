//! Finding complete checkpoints in a job's checkpoint directory and hashing
//! them (the definition is in docs/job-contract.md, "The checkpoint hash").

use crate::confined::{ConfinedDir, ConfinedError, Limits};
use crate::contract::{CHECKPOINT_HASH_HEADER, MANIFEST_FILE, MANIFEST_FORMAT};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A manifest is a few lines of JSON; a bigger one is an attack on the
/// agent's memory, not a manifest.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Entries looked at directly under a checkpoint directory per collection.
pub const MAX_PENDING_ENTRIES: u64 = 4096;
/// Files and directories in one checkpoint, or in a job's output.
pub const MAX_FILES: u64 = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: the manifest is not valid: {reason}")]
    BadManifest { path: PathBuf, reason: String },
    #[error("{dir}: the manifest lists {file}, which is missing")]
    MissingFile { dir: PathBuf, file: String },
    #[error(
        "{path}: only regular files may be in a checkpoint (found a symlink or special file); write the data itself"
    )]
    NotARegularFile { path: PathBuf },
    #[error("{path}: file names in a checkpoint must be UTF-8 without newlines")]
    BadFileName { path: PathBuf },
    #[error(transparent)]
    Read(#[from] ConfinedError),
    #[error("cannot start the hashing threads: {0}")]
    ThreadPool(String),
}

impl CheckpointError {
    /// Whether what the job wrote (not the node) caused this.
    pub fn is_job_fault(&self) -> bool {
        match self {
            Self::BadManifest { .. }
            | Self::MissingFile { .. }
            | Self::NotARegularFile { .. }
            | Self::BadFileName { .. } => true,
            Self::Read(e) => e.is_job_fault(),
            Self::Io { .. } | Self::ThreadPool(_) => false,
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A sha256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest(pub [u8; 32]);

impl Sha256Digest {
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex digits (either case).
    pub fn from_hex(s: &str) -> Option<Self> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).ok()?;
        Some(Self(out))
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.to_hex())
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::from_hex(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not 64 hex digits")))
    }
}

/// The manifest a job writes last (docs/job-contract.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub epoch: u64,
    pub step: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
}

impl Manifest {
    /// Reads and checks the manifest of the checkpoint directory `dir`.
    pub fn read(dir: &Path) -> Result<Self, CheckpointError> {
        Ok(Self::read_in(&ConfinedDir::open(dir)?)?.0)
    }

    /// Reads the manifest confined to `dir`, at most [`MAX_MANIFEST_BYTES`];
    /// returns it with the sha256 of the bytes read.
    pub fn read_in(dir: &ConfinedDir) -> Result<(Self, Sha256Digest), CheckpointError> {
        let path = dir.path().join(MANIFEST_FILE);
        let bytes = dir.read_small(MANIFEST_FILE, MAX_MANIFEST_BYTES)?;
        let m: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| CheckpointError::BadManifest {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        if m.format != MANIFEST_FORMAT {
            return Err(CheckpointError::BadManifest {
                path,
                reason: format!("format is {:?}, expected {MANIFEST_FORMAT:?}", m.format),
            });
        }
        for f in m.files.iter().flatten() {
            if dir.open_file_if_present(f)?.is_none() {
                return Err(CheckpointError::MissingFile {
                    dir: dir.path().to_path_buf(),
                    file: f.clone(),
                });
            }
        }
        Ok((m, Sha256Digest(Sha256::digest(&bytes).into())))
    }
}

/// A checkpoint directory whose manifest is in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalCheckpoint {
    pub dir: PathBuf,
    /// Its name under the checkpoint root.
    pub name: String,
    pub manifest: Manifest,
    /// The sha256 of the manifest as read: the stored copy must match it.
    pub manifest_sha256: Sha256Digest,
}

/// The complete checkpoints directly under `root`, oldest step first.
/// Directories without a manifest are still being written (or were abandoned
/// by a killed job) and are skipped; a directory whose manifest is present
/// but invalid is an error, since the job said it was done.
pub fn complete_checkpoints(root: &Path) -> Result<Vec<LocalCheckpoint>, CheckpointError> {
    complete_checkpoints_in(&ConfinedDir::open(root)?)
}

/// [`complete_checkpoints`] on a directory the caller opened, every read
/// confined to it.
pub fn complete_checkpoints_in(
    root: &ConfinedDir,
) -> Result<Vec<LocalCheckpoint>, CheckpointError> {
    let mut found = Vec::new();
    for name in root.subdirs("", MAX_PENDING_ENTRIES)? {
        let dir = match root.open_dir(&name) {
            Ok(d) => d,
            // Renamed away since the listing: not a checkpoint any more.
            Err(ConfinedError::Absent { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        if dir.open_file_if_present(MANIFEST_FILE)?.is_none() {
            continue;
        }
        let (manifest, manifest_sha256) = Manifest::read_in(&dir)?;
        found.push(LocalCheckpoint {
            dir: root.path().join(&name),
            name,
            manifest,
            manifest_sha256,
        });
    }
    found.sort_by(|a, b| (a.manifest.step, &a.dir).cmp(&(b.manifest.step, &b.dir)));
    Ok(found)
}

/// One file of a checkpoint as it enters the hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// Relative to the checkpoint directory, '/'-separated.
    pub path: String,
    pub size: u64,
    pub sha256: Sha256Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointDigest {
    pub hash: Sha256Digest,
    /// Sorted by path.
    pub files: Vec<FileDigest>,
}

impl CheckpointDigest {
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Combines file digests as the contract defines; `files` must be sorted.
    pub fn combine(files: Vec<FileDigest>) -> Self {
        let mut h = Sha256::new();
        h.update(CHECKPOINT_HASH_HEADER.as_bytes());
        for f in &files {
            h.update(format!("{} {} {}\n", f.sha256, f.size, f.path).as_bytes());
        }
        Self {
            hash: Sha256Digest(h.finalize().into()),
            files,
        }
    }
}

/// Every regular file under `dir`, as (relative path, absolute path), sorted.
/// Symlinks and special files make the directory invalid.
pub fn list_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, CheckpointError> {
    let walk = ConfinedDir::open(dir)?.walk("", Limits::UNLIMITED)?;
    Ok(walk
        .files
        .into_iter()
        .map(|f| {
            let abs = dir.join(&f.path);
            (f.path, abs)
        })
        .collect())
}

/// sha256 and length of everything `reader` yields, streamed in 1 MiB reads.
pub fn hash_reader(reader: impl Read, path: &Path) -> Result<(u64, Sha256Digest), CheckpointError> {
    hash_reader_keyed(reader, path, None).map(|(size, sha256, _)| (size, sha256))
}

/// [`hash_reader`], plus `sha256(key ‖ bytes)` over the same reads when a
/// key is given.
fn hash_reader_keyed(
    mut reader: impl Read,
    path: &Path,
    key: Option<&[u8; 32]>,
) -> Result<(u64, Sha256Digest, Option<Sha256Digest>), CheckpointError> {
    let mut plain = Sha256::new();
    let mut keyed = key.map(|k| {
        let mut h = Sha256::new();
        h.update(k);
        h
    });
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(path)(e)),
        };
        if n == 0 {
            break;
        }
        plain.update(&buf[..n]);
        if let Some(k) = keyed.as_mut() {
            k.update(&buf[..n]);
        }
        size += n as u64;
    }
    Ok((
        size,
        Sha256Digest(plain.finalize().into()),
        keyed.map(|k| Sha256Digest(k.finalize().into())),
    ))
}

/// Every file under `dir` hashed, in parallel on `threads` threads (0: one
/// per core), with its keyed hash when `key` is given; within `limits`.
fn digest_files_in(
    dir: &ConfinedDir,
    limits: Limits,
    threads: usize,
    key: Option<&[u8; 32]>,
) -> Result<Vec<(FileDigest, Option<Sha256Digest>)>, CheckpointError> {
    let walk = dir.walk("", limits)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("mcjs-hash-{i}"))
        .build()
        .map_err(|e| CheckpointError::ThreadPool(e.to_string()))?;
    let digests = pool.install(|| {
        walk.files
            .par_iter()
            .map(|f| {
                let (file, _) = dir.open_file(&f.path)?;
                let (size, sha256, keyed) =
                    hash_reader_keyed(file, &dir.path().join(&f.path), key)?;
                Ok((
                    FileDigest {
                        path: f.path.clone(),
                        size,
                        sha256,
                    },
                    keyed,
                ))
            })
            .collect::<Result<Vec<_>, CheckpointError>>()
    })?;
    let total: u64 = digests.iter().map(|(d, _)| d.size).sum();
    if total > limits.max_bytes {
        return Err(ConfinedError::Refused {
            path: dir.path().display().to_string(),
            reason: format!("grew past {} bytes while being read", limits.max_bytes),
        }
        .into());
    }
    Ok(digests)
}

/// Hashes the checkpoint in `dir`, its files in parallel on `threads` threads
/// (0: one per core). Files are the unit of parallelism: a checkpoint made of
/// one huge file hashes at single-core speed. Every open is confined to `dir`.
pub fn hash_checkpoint(dir: &Path, threads: usize) -> Result<CheckpointDigest, CheckpointError> {
    hash_checkpoint_in(&ConfinedDir::open(dir)?, Limits::UNLIMITED, threads)
}

/// [`hash_checkpoint`] on a directory the caller opened, within `limits`.
pub fn hash_checkpoint_in(
    dir: &ConfinedDir,
    limits: Limits,
    threads: usize,
) -> Result<CheckpointDigest, CheckpointError> {
    let digests = digest_files_in(dir, limits, threads, None)?;
    Ok(CheckpointDigest::combine(
        digests.into_iter().map(|(d, _)| d).collect(),
    ))
}

/// What a checker of a verified interval gives besides the hash: a digest
/// of the checkpoint's bytes under the verification's key, which nothing on
/// chain or in the store carries, so only a node holding the bytes can give
/// it. `sha256("mcjs-possession/1\n" ‖ key ‖ for each file, sorted by path:
/// "<hex sha256(key ‖ bytes)> <size> <path>\n")`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PossessedCheckpoint {
    pub digest: CheckpointDigest,
    pub possession: Sha256Digest,
}

const POSSESSION_HEADER: &str = "mcjs-possession/1\n";

/// [`hash_checkpoint_in`] and the possession digest under `key`, in one
/// read of every file.
pub fn hash_possessed_checkpoint_in(
    dir: &ConfinedDir,
    limits: Limits,
    threads: usize,
    key: &[u8; 32],
) -> Result<PossessedCheckpoint, CheckpointError> {
    let digests = digest_files_in(dir, limits, threads, Some(key))?;
    let mut h = Sha256::new();
    h.update(POSSESSION_HEADER.as_bytes());
    h.update(key);
    for (f, keyed) in &digests {
        let keyed = keyed.as_ref().expect("a key was given");
        h.update(format!("{keyed} {} {}\n", f.size, f.path).as_bytes());
    }
    let possession = Sha256Digest(h.finalize().into());
    Ok(PossessedCheckpoint {
        digest: CheckpointDigest::combine(digests.into_iter().map(|(d, _)| d).collect()),
        possession,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_possession_digest_needs_the_bytes_and_the_key() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "b.bin", b"hello");
        write(d.path(), "sub/a.bin", b"world");
        let dir = ConfinedDir::open(d.path()).unwrap();
        let key = [7u8; 32];
        let got = hash_possessed_checkpoint_in(&dir, Limits::UNLIMITED, 2, &key).unwrap();
        // The plain hash is the attestation hash, unchanged.
        assert_eq!(got.digest, hash_checkpoint(d.path(), 1).unwrap());
        // The possession digest follows its documented definition.
        let keyed = |bytes: &[u8]| {
            let mut h = Sha256::new();
            h.update(key);
            h.update(bytes);
            hex::encode(h.finalize())
        };
        let mut expected = Sha256::new();
        expected.update(POSSESSION_HEADER.as_bytes());
        expected.update(key);
        let lines = format!(
            "{} 5 b.bin\n{} 5 sub/a.bin\n",
            keyed(b"hello"),
            keyed(b"world")
        );
        expected.update(lines.as_bytes());
        assert_eq!(got.possession.0, <[u8; 32]>::from(expected.finalize()));
        // Another key, another digest; and no function of the plain file
        // hashes gives it (they are what the store and the chain carry).
        let other = hash_possessed_checkpoint_in(&dir, Limits::UNLIMITED, 1, &[8u8; 32]).unwrap();
        assert_eq!(other.digest, got.digest);
        assert_ne!(other.possession, got.possession);
        // One flipped byte changes it.
        write(d.path(), "b.bin", b"hellp");
        let flipped = hash_possessed_checkpoint_in(&dir, Limits::UNLIMITED, 1, &key).unwrap();
        assert_ne!(flipped.possession, got.possession);
    }

    fn write(dir: &Path, rel: &str, bytes: &[u8]) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    fn manifest(step: u64) -> String {
        format!(r#"{{"format":"mcjs-checkpoint/1","epoch":1,"step":{step},"files":["a.bin"]}}"#)
    }

    #[test]
    fn the_hash_follows_the_documented_definition() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "b.bin", b"hello");
        write(d.path(), "sub/a.bin", b"");
        let got = hash_checkpoint(d.path(), 2).unwrap();
        let hello = hex::encode(Sha256::digest(b"hello"));
        let empty = hex::encode(Sha256::digest(b""));
        let text = format!("mcjs-checkpoint-hash/1\n{hello} 5 b.bin\n{empty} 0 sub/a.bin\n");
        assert_eq!(
            got.hash.to_hex(),
            hex::encode(Sha256::digest(text.as_bytes()))
        );
        assert_eq!(got.total_bytes(), 5);
    }

    #[test]
    fn the_hash_does_not_depend_on_the_thread_count_and_sees_every_byte() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..20 {
            write(d.path(), &format!("f{i}"), &vec![i as u8; 10_000 + i]);
        }
        let one = hash_checkpoint(d.path(), 1).unwrap();
        assert_eq!(one, hash_checkpoint(d.path(), 4).unwrap());
        write(d.path(), "f7", &{
            let mut v = vec![7u8; 10_007];
            v[5000] ^= 1;
            v
        });
        assert_ne!(one.hash, hash_checkpoint(d.path(), 4).unwrap().hash);
    }

    #[test]
    fn a_renamed_file_changes_the_hash() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "a", b"x");
        let before = hash_checkpoint(d.path(), 1).unwrap().hash;
        std::fs::rename(d.path().join("a"), d.path().join("b")).unwrap();
        assert_ne!(before, hash_checkpoint(d.path(), 1).unwrap().hash);
    }

    #[test]
    fn a_symlink_makes_the_checkpoint_invalid() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "a", b"x");
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link")).unwrap();
        let err = hash_checkpoint(d.path(), 1).unwrap_err();
        assert!(err.is_job_fault(), "{err}");
        assert!(err.to_string().contains("symlink"), "{err}");
    }

    #[test]
    fn only_directories_with_a_manifest_are_complete_and_come_in_step_order() {
        let root = tempfile::tempdir().unwrap();
        for (name, step) in [("late", 20), ("early", 10)] {
            write(&root.path().join(name), "a.bin", b"x");
            write(
                &root.path().join(name),
                MANIFEST_FILE,
                manifest(step).as_bytes(),
            );
        }
        write(&root.path().join("half-written"), "a.bin", b"x");
        let found = complete_checkpoints(root.path()).unwrap();
        let steps: Vec<u64> = found.iter().map(|c| c.manifest.step).collect();
        assert_eq!(steps, [10, 20]);
    }

    #[test]
    fn a_manifest_naming_a_missing_file_is_refused() {
        let root = tempfile::tempdir().unwrap();
        write(
            &root.path().join("c"),
            MANIFEST_FILE,
            manifest(1).as_bytes(),
        );
        let err = complete_checkpoints(root.path()).unwrap_err();
        assert!(
            err.to_string().contains("lists a.bin, which is missing"),
            "{err}"
        );
    }

    #[test]
    fn a_manifest_of_another_format_is_refused() {
        let root = tempfile::tempdir().unwrap();
        write(
            &root.path().join("c"),
            MANIFEST_FILE,
            br#"{"format":"x","epoch":0,"step":0}"#,
        );
        let err = complete_checkpoints(root.path()).unwrap_err();
        assert!(
            err.to_string().contains("expected \"mcjs-checkpoint/1\""),
            "{err}"
        );
    }
}
