//! Reading what a job wrote without letting the job choose what is read.
//!
//! Everything under a job's writable mounts (checkpoints, output) is under
//! the job's control while the agent reads it, so a path checked a moment ago
//! can be a symlink to the provider's wallet now (the class of `docker cp`
//! CVE-2018-15664). Every open here is `openat2` relative to a directory
//! descriptor the agent opened itself, with `RESOLVE_IN_ROOT |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`: the kernel
//! refuses any symlink on the way, `..` cannot leave the root, and no other
//! mount (a host path bind-mounted in, /proc) is crossed. Files are opened
//! `O_NONBLOCK | O_NOFOLLOW` and checked with `fstat` on the open descriptor,
//! so a FIFO or a device can neither hang nor feed the agent; callers read
//! the descriptor once, so the bytes hashed are the bytes stored.
//!
//! Whatever breaks the contract or a limit is [`ConfinedError::Refused`]: the
//! job's own fault. Only conditions of the node itself (EIO, out of file
//! descriptors or memory) are [`ConfinedError::Io`].

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, fstat, openat2, statat};
use rustix::io::Errno;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Every resolution of a job-controlled path.
const RESOLVE: ResolveFlags = ResolveFlags::IN_ROOT
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS)
    .union(ResolveFlags::NO_XDEV);

/// `openat2` answers EAGAIN when a rename raced the lookup; a job that keeps
/// renaming gets a few tries, then its checkpoint is refused.
const EAGAIN_TRIES: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    /// The job's doing: a symlink, a special file, a mount crossing, a file
    /// it removed or made unreadable, or a limit exceeded.
    #[error("{path}: {reason}")]
    Refused { path: String, reason: String },
    /// Nothing there (ENOENT): absent, or removed by the job meanwhile.
    #[error("{path}: does not exist (removed while the agent was reading it?)")]
    Absent { path: String },
    /// The node's doing: the agent could not read for reasons of its own.
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl ConfinedError {
    /// Whether the job, not the node, caused this.
    pub fn is_job_fault(&self) -> bool {
        matches!(self, Self::Refused { .. } | Self::Absent { .. })
    }

    fn refused(path: &str, reason: impl Into<String>) -> Self {
        Self::Refused {
            path: path.to_string(),
            reason: reason.into(),
        }
    }

    /// Names the cause of a failed open or read of a job-controlled path.
    fn from_errno(path: &str, e: Errno) -> Self {
        let reason = match e {
            Errno::LOOP => {
                "is or passes through a symlink; only regular files and directories are allowed"
            }
            Errno::XDEV => "crosses into another mount",
            Errno::NOENT => {
                return Self::Absent {
                    path: path.to_string(),
                };
            }
            Errno::NOTDIR => "a path component is not a directory",
            Errno::ACCESS | Errno::PERM => {
                "is not readable by the agent (permissions set by the job)"
            }
            Errno::NAMETOOLONG => "has a name that is too long",
            Errno::AGAIN => "kept changing while the agent resolved it",
            Errno::IO | Errno::NOMEM | Errno::MFILE | Errno::NFILE | Errno::NOSPC => {
                return Self::Io {
                    path: path.to_string(),
                    source: e.into(),
                };
            }
            _ => return Self::refused(path, format!("cannot be opened: {e}")),
        };
        Self::refused(path, reason)
    }

    fn from_io(path: &str, e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(code) => Self::from_errno(path, Errno::from_raw_os_error(code)),
            None => Self::Io {
                path: path.to_string(),
                source: e,
            },
        }
    }
}

/// Caps on a walk: entries (files and directories) and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_entries: u64,
    pub max_bytes: u64,
}

impl Limits {
    pub const UNLIMITED: Self = Self {
        max_entries: u64::MAX,
        max_bytes: u64::MAX,
    };
}

/// A regular file found by [`ConfinedDir::walk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// Relative to the walked directory, '/'-separated, UTF-8, no newline.
    pub path: String,
    /// Its size when listed (the bytes read later are what count).
    pub size: u64,
}

/// A walk's result: the regular files, sorted by path, and the space used.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Walk {
    pub files: Vec<FoundFile>,
    pub entries: u64,
    /// Sum of the files' sizes.
    pub bytes: u64,
    /// Space allocated on disk (`st_blocks`), directories included: what a
    /// sparse file does not hide.
    pub allocated: u64,
}

/// A directory the agent opened itself; every path below it is resolved
/// confined to it.
#[derive(Debug)]
pub struct ConfinedDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl ConfinedDir {
    /// Opens a directory the agent made (a mount's host side). Its own path
    /// is trusted; its last component must still not be a symlink.
    pub fn open(path: &Path) -> Result<Self, ConfinedError> {
        let shown = path.display().to_string();
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| ConfinedError::from_errno(&shown, e))?;
        Ok(Self {
            fd,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self, rel: &str) -> String {
        if rel.is_empty() {
            self.path.display().to_string()
        } else {
            format!("{}/{rel}", self.path.display())
        }
    }

    fn openat(&self, rel: &str, flags: OFlags) -> Result<OwnedFd, ConfinedError> {
        let target = if rel.is_empty() { "." } else { rel };
        let mut tries = 0;
        loop {
            match openat2(
                &self.fd,
                target,
                flags | OFlags::CLOEXEC,
                Mode::empty(),
                RESOLVE,
            ) {
                Err(Errno::AGAIN) if tries < EAGAIN_TRIES => tries += 1,
                Err(Errno::INTR) => {}
                other => return other.map_err(|e| ConfinedError::from_errno(&self.shown(rel), e)),
            }
        }
    }

    /// A subdirectory, itself confined to this one's root.
    pub fn open_dir(&self, rel: &str) -> Result<ConfinedDir, ConfinedError> {
        let fd = self.openat(rel, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW)?;
        // Resolved inside this root: the child shares the root's confinement
        // (further opens are relative to a descriptor, never to the path).
        Ok(ConfinedDir {
            fd,
            path: self.path.join(rel),
        })
    }

    /// Opens a regular file for reading; returns it and its size. Anything
    /// else (FIFO, device, socket, directory) is refused without blocking.
    pub fn open_file(&self, rel: &str) -> Result<(File, u64), ConfinedError> {
        let fd = self.openat(
            rel,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY,
        )?;
        let st = fstat(&fd).map_err(|e| ConfinedError::from_errno(&self.shown(rel), e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(ConfinedError::refused(
                &self.shown(rel),
                "is not a regular file (a FIFO, device, socket or directory); only regular files are allowed",
            ));
        }
        Ok((File::from(fd), st.st_size.max(0) as u64))
    }

    /// Opens a regular file if it exists (`None` if it does not).
    pub fn open_file_if_present(&self, rel: &str) -> Result<Option<(File, u64)>, ConfinedError> {
        match self.open_file(rel) {
            Ok(f) => Ok(Some(f)),
            Err(ConfinedError::Absent { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads a whole regular file of at most `max` bytes.
    pub fn read_small(&self, rel: &str, max: u64) -> Result<Vec<u8>, ConfinedError> {
        use std::io::Read;
        let (file, _) = self.open_file(rel)?;
        let mut bytes = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ConfinedError::from_io(&self.shown(rel), e))?;
        if bytes.len() as u64 > max {
            return Err(ConfinedError::refused(
                &self.shown(rel),
                format!("is larger than the limit of {max} bytes"),
            ));
        }
        Ok(bytes)
    }

    /// The names directly in the directory `rel` that are directories, not
    /// hidden, at most `max_entries` entries looked at.
    pub fn subdirs(&self, rel: &str, max_entries: u64) -> Result<Vec<String>, ConfinedError> {
        let fd = self.openat(rel, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW)?;
        let mut names = Vec::new();
        let mut seen = 0u64;
        for entry in Dir::new(fd).map_err(|e| ConfinedError::from_errno(&self.shown(rel), e))? {
            let entry = entry.map_err(|e| ConfinedError::from_errno(&self.shown(rel), e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            seen += 1;
            if seen > max_entries {
                return Err(ConfinedError::refused(
                    &self.shown(rel),
                    format!("holds more than {max_entries} entries"),
                ));
            }
            let Ok(name) = std::str::from_utf8(name) else {
                continue;
            };
            if !name.starts_with('.') && entry.file_type() == FileType::Directory {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Every regular file under `rel`, depth first, each directory opened
    /// confined to the root. Symlinks and special files are refused, as are
    /// more than `limits.max_entries` entries or `limits.max_bytes` bytes.
    pub fn walk(&self, rel: &str, limits: Limits) -> Result<Walk, ConfinedError> {
        self.walk_inner(rel, limits, true)
    }

    /// The space used under `rel` (like `du`), for a footprint check while
    /// the job runs: symlinks and special files are counted, not refused;
    /// more than `max_entries` entries is refused (the walk stays bounded).
    pub fn usage(&self, rel: &str, max_entries: u64) -> Result<Walk, ConfinedError> {
        let limits = Limits {
            max_entries,
            max_bytes: u64::MAX,
        };
        let mut walk = self.walk_inner(rel, limits, false)?;
        walk.files.clear();
        Ok(walk)
    }

    fn walk_inner(&self, rel: &str, limits: Limits, strict: bool) -> Result<Walk, ConfinedError> {
        let mut walk = Walk::default();
        let mut pending = vec![String::new()];
        let base = rel.trim_end_matches('/');
        let join = |a: &str, b: &str| match (a.is_empty(), b.is_empty()) {
            (true, _) => b.to_string(),
            (_, true) => a.to_string(),
            _ => format!("{a}/{b}"),
        };
        while let Some(sub) = pending.pop() {
            let here = join(base, &sub);
            let fd = match self.openat(&here, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW)
            {
                Ok(fd) => fd,
                // A running job removes what it likes; gone is not counted.
                Err(ConfinedError::Absent { .. }) if !strict && !sub.is_empty() => continue,
                Err(e) => return Err(e),
            };
            let dir_fd = fd
                .try_clone()
                .map_err(|e| ConfinedError::from_io(&self.shown(&here), e))?;
            if let Ok(st) = fstat(&dir_fd) {
                walk.allocated = walk
                    .allocated
                    .saturating_add(st.st_blocks.max(0) as u64 * 512);
            }
            for entry in
                Dir::new(fd).map_err(|e| ConfinedError::from_errno(&self.shown(&here), e))?
            {
                let entry = entry.map_err(|e| ConfinedError::from_errno(&self.shown(&here), e))?;
                let raw = entry.file_name().to_bytes();
                if raw == b"." || raw == b".." {
                    continue;
                }
                walk.entries += 1;
                if walk.entries > limits.max_entries {
                    return Err(ConfinedError::refused(
                        &self.shown(base),
                        format!(
                            "holds more than {} files and directories",
                            limits.max_entries
                        ),
                    ));
                }
                let rel_child = match std::str::from_utf8(raw) {
                    Ok(name) if !name.contains('\n') => join(&sub, name),
                    Ok(name) if !strict => join(&sub, name),
                    Err(_) if !strict => join(&sub, &String::from_utf8_lossy(raw)),
                    _ => {
                        return Err(ConfinedError::refused(
                            &self.shown(&here),
                            format!(
                                "{:?}: file names must be UTF-8 without newlines",
                                String::from_utf8_lossy(raw)
                            ),
                        ));
                    }
                };
                let st = match statat(&dir_fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => st,
                    Err(Errno::NOENT) if !strict => continue,
                    Err(e) => {
                        return Err(ConfinedError::from_errno(
                            &self.shown(&join(base, &rel_child)),
                            e,
                        ));
                    }
                };
                match FileType::from_raw_mode(st.st_mode) {
                    FileType::Directory => pending.push(rel_child),
                    FileType::RegularFile => {
                        let size = st.st_size.max(0) as u64;
                        walk.bytes = walk.bytes.saturating_add(size);
                        walk.allocated = walk
                            .allocated
                            .saturating_add(st.st_blocks.max(0) as u64 * 512);
                        if walk.bytes > limits.max_bytes {
                            return Err(ConfinedError::refused(
                                &self.shown(base),
                                format!("holds more than {} bytes", limits.max_bytes),
                            ));
                        }
                        walk.files.push(FoundFile {
                            path: rel_child,
                            size,
                        });
                    }
                    _ if !strict => {
                        walk.allocated = walk
                            .allocated
                            .saturating_add(st.st_blocks.max(0) as u64 * 512);
                    }
                    _ => {
                        return Err(ConfinedError::refused(
                            &self.shown(&join(base, &rel_child)),
                            "is a symlink or special file; only regular files and directories are allowed",
                        ));
                    }
                }
            }
        }
        walk.files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(walk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("root/sub")).unwrap();
        std::fs::write(t.path().join("root/a"), b"aaa").unwrap();
        std::fs::write(t.path().join("root/sub/b"), b"bb").unwrap();
        std::fs::write(t.path().join("secret"), b"host secret").unwrap();
        t
    }

    #[test]
    fn a_walk_lists_regular_files_with_their_sizes() {
        let t = tree();
        let root = ConfinedDir::open(&t.path().join("root")).unwrap();
        let w = root.walk("", Limits::UNLIMITED).unwrap();
        let got: Vec<(&str, u64)> = w.files.iter().map(|f| (f.path.as_str(), f.size)).collect();
        assert_eq!(got, [("a", 3), ("sub/b", 2)]);
        assert_eq!((w.entries, w.bytes), (3, 5));
    }

    #[test]
    fn a_symlink_is_never_followed_even_as_a_parent() {
        let t = tree();
        let root_path = t.path().join("root");
        std::os::unix::fs::symlink(t.path().join("secret"), root_path.join("link")).unwrap();
        std::os::unix::fs::symlink(t.path(), root_path.join("up")).unwrap();
        let root = ConfinedDir::open(&root_path).unwrap();
        for rel in ["link", "up/secret"] {
            let err = root.open_file(rel).unwrap_err();
            assert!(err.is_job_fault(), "{err}");
            assert!(err.to_string().contains("symlink"), "{err}");
        }
        let err = root.walk("", Limits::UNLIMITED).unwrap_err();
        assert!(
            err.is_job_fault() && err.to_string().contains("symlink"),
            "{err}"
        );
    }

    #[test]
    fn dot_dot_stays_inside_the_root() {
        let t = tree();
        let root = ConfinedDir::open(&t.path().join("root")).unwrap();
        // RESOLVE_IN_ROOT: ".." at the root is the root itself.
        let (mut f, _) = root.open_file("../../a").unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "aaa");
        assert!(root.open_file("../secret").is_err());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let t = tree();
        let fifo = t.path().join("root/pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let root = ConfinedDir::open(&t.path().join("root")).unwrap();
        let err = root.open_file("pipe").unwrap_err();
        assert!(
            err.is_job_fault() && err.to_string().contains("not a regular file"),
            "{err}"
        );
        assert!(root.walk("", Limits::UNLIMITED).unwrap_err().is_job_fault());
    }

    #[test]
    fn limits_on_entries_bytes_and_small_reads_are_enforced() {
        let t = tree();
        let root = ConfinedDir::open(&t.path().join("root")).unwrap();
        let few = Limits {
            max_entries: 2,
            max_bytes: u64::MAX,
        };
        assert!(
            root.walk("", few)
                .unwrap_err()
                .to_string()
                .contains("more than 2")
        );
        let small = Limits {
            max_entries: 10,
            max_bytes: 4,
        };
        assert!(
            root.walk("", small)
                .unwrap_err()
                .to_string()
                .contains("more than 4 bytes")
        );
        assert_eq!(root.read_small("a", 3).unwrap(), b"aaa");
        assert!(root.read_small("a", 2).unwrap_err().is_job_fault());
    }

    #[test]
    fn absent_files_are_told_from_refused_ones() {
        let t = tree();
        let root_path = t.path().join("root");
        std::os::unix::fs::symlink("/dev/zero", root_path.join("zero")).unwrap();
        let root = ConfinedDir::open(&root_path).unwrap();
        assert!(root.open_file_if_present("nothing").unwrap().is_none());
        assert!(root.open_file_if_present("sub/nothing").unwrap().is_none());
        assert!(
            root.open_file_if_present("zero")
                .unwrap_err()
                .is_job_fault()
        );
    }
}
