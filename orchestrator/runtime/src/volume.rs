//! A job's writable directories on a filesystem of its declared size.
//!
//! Measuring what a job wrote (`confined::ConfinedDir::usage`) finds an
//! overrun only after it happened: a job that declares 1 GiB and writes
//! 8 GiB between two measurements has filled the node's disk by then, and a
//! full disk is the provider's fault. Under [`DiskBound::Loop`] the job's
//! `checkpoints` and `output` live on an ext4 image of the declared size,
//! loop-mounted by the agent: the kernel refuses the write itself (ENOSPC,
//! or no inode left), so no write passes the declaration, whatever the job
//! does and however fast.
//!
//! Why a loop-mounted image, and not the alternatives:
//! - an XFS project quota needs the node's work directory on XFS mounted
//!   with `prjquota`, which few hosts have;
//! - Docker's `--storage-opt size` bounds only the container's own layer
//!   (on overlay2 over XFS), not bind mounts;
//! - a tmpfs with `size=` is memory: a 10 GB checkpoint would sit in RAM.
//!
//! The image is sparse and its inode tables are never zeroed
//! (`lazy_itable_init`, `noinit_itable`): it takes on the host only the
//! blocks the job wrote, plus a few MiB of metadata. It needs `mkfs.ext4`
//! (e2fsprogs), `mount` and `umount` (util-linux), which set up and free the
//! loop device (autoclear), and the right to mount (root, or CAP_SYS_ADMIN).
//! Where the agent has none of these it falls back to [`DiskBound::Watch`]
//! and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Inodes on a job's volume: a full checkpoint and a full output
/// ([`crate::checkpoint::MAX_FILES`] each), and some for the job's own
/// bookkeeping. Running out of them is refused like running out of space.
pub const INODES: u64 = 2 * crate::checkpoint::MAX_FILES + 1024;
/// Bytes per inode on disk (ext4's default inode size).
const INODE_BYTES: u64 = 256;
/// The image's name inside a run directory.
const IMAGE: &str = "disk.img";

/// How a node bounds the disk its jobs write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiskBound {
    /// Loop-mounted if this host can, else measured (with a warning).
    #[default]
    Auto,
    /// Each run's writable directories are on an image of the declared size.
    Loop,
    /// What a run wrote is measured periodically; a job may pass its
    /// declaration between two measurements.
    Watch,
}

impl DiskBound {
    /// What this host supports: [`DiskBound::Auto`] becomes
    /// [`DiskBound::Loop`] if a probe volume under `dir` can be made and
    /// mounted, else [`DiskBound::Watch`]; [`DiskBound::Loop`] asked for on a
    /// host that cannot is an error that says why.
    pub fn resolve(self, dir: &Path) -> Result<DiskBound, VolumeError> {
        match self {
            DiskBound::Watch => Ok(DiskBound::Watch),
            DiskBound::Loop => probe(dir).map(|()| DiskBound::Loop),
            DiskBound::Auto => match probe(dir) {
                Ok(()) => Ok(DiskBound::Loop),
                Err(e) => {
                    tracing::warn!(error = %e, "jobs' disk use is measured, not bounded: a job may fill this node's disk between two measurements (run the agent as root with e2fsprogs installed to bound it)");
                    Ok(DiskBound::Watch)
                }
            },
        }
    }
}

impl std::str::FromStr for DiskBound {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DiskBound::Auto),
            "loop" => Ok(DiskBound::Loop),
            "watch" => Ok(DiskBound::Watch),
            other => Err(format!(
                "unknown disk bound {other:?}: use auto, loop or watch"
            )),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("cannot make {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {reason}")]
    Command { command: String, reason: String },
}

/// The bytes of the image for `declared` bytes of job data: the data, the
/// inode tables, the clusters ext4 holds back from every writer (2% or
/// 16 MiB, whichever is less), and a margin for the rest of its metadata
/// (group descriptors, bitmaps, extent blocks), so that the job has at
/// least what it declared.
pub fn image_bytes(declared: u64) -> u64 {
    let tables = INODES * INODE_BYTES;
    // ext4's `s_resv_clusters`: 2% of the blocks, at most 4096 of them.
    let held_back = (declared.saturating_add(tables) / 49).min(16 << 20);
    declared
        .saturating_add(tables)
        .saturating_add(held_back)
        .saturating_add(declared / 128)
        .saturating_add(4 << 20)
}

/// Where a run's volume is mounted, under its run directory.
pub fn mount_point(run_dir: &Path) -> PathBuf {
    run_dir.join("vol")
}

/// Whether `path` is the root of a filesystem other than its parent's.
pub fn is_mounted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(here), Some(Ok(parent))) = (
        std::fs::symlink_metadata(path),
        path.parent().map(std::fs::symlink_metadata),
    ) else {
        return false;
    };
    here.is_dir() && here.dev() != parent.dev()
}

/// Makes and mounts the run's volume of `declared` bytes at
/// [`mount_point`], or keeps the one already mounted there (an agent
/// restarted under a running job finds its volume as it left it).
pub fn ensure(run_dir: &Path, declared: u64) -> Result<PathBuf, VolumeError> {
    let mount = mount_point(run_dir);
    if is_mounted(&mount) {
        return Ok(mount);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VolumeError::Io { path, source }
    };
    std::fs::create_dir_all(&mount).map_err(io(&mount))?;
    let image = run_dir.join(IMAGE);
    // A fresh image each time: what an unmounted one holds is a run that
    // ended (its checkpoints are in the store).
    let file = std::fs::File::create(&image).map_err(io(&image))?;
    file.set_len(image_bytes(declared)).map_err(io(&image))?;
    drop(file);
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0", "-O", "^has_journal,^resize_inode"])
        .args(["-N", &INODES.to_string()])
        .args(["-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard"])
        .arg(&image))?;
    run(Command::new("mount")
        .args(["-o", "loop,noinit_itable,nosuid,nodev"])
        .arg(&image)
        .arg(&mount))?;
    direct_io(&mount);
    Ok(mount)
}

/// Switches the loop device under `mount` to direct I/O, so that the image's
/// blocks are not cached twice (once for the volume, once for the image
/// file on the host): a job's checkpoint written and fsync'd on its volume
/// took 4-5 times as long as on the host's disk without it (`benches/
/// volume_write.rs`). Best effort: where the host's filesystem cannot do
/// direct I/O the volume works as before.
fn direct_io(mount: &Path) {
    let device = Command::new("findmnt")
        .args(["-n", "-o", "SOURCE", "--mountpoint"])
        .arg(mount)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|d| d.starts_with("/dev/loop"));
    let Some(device) = device else {
        tracing::warn!(mount = %mount.display(), "cannot find the volume's loop device: it stays cached twice");
        return;
    };
    if let Err(e) = run(Command::new("losetup").args(["--direct-io=on", &device])) {
        tracing::warn!(%device, error = %e, "the volume's loop device cannot use direct I/O; it stays cached twice");
    }
}

/// Unmounts the run's volume, if mounted, and deletes its image. Call it
/// only once no container uses the volume.
pub fn release(run_dir: &Path) -> Result<(), VolumeError> {
    let mount = mount_point(run_dir);
    if is_mounted(&mount) {
        if let Err(e) = run(Command::new("umount").arg(&mount)) {
            // Busy (a process of the agent's own still in it): detach it now,
            // freed when the last user goes.
            tracing::warn!(mount = %mount.display(), error = %e, "volume busy: detaching it");
            run(Command::new("umount").arg("-l").arg(&mount))?;
        }
    }
    let image = run_dir.join(IMAGE);
    match std::fs::remove_file(&image) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(VolumeError::Io {
            path: image,
            source,
        }),
    }
}

/// Releases every run volume mounted under `root` (each `…/vol` whose run
/// directory holds its image), detaching busy ones; returns how many. For
/// clearing a work directory no agent uses any more.
pub fn release_all_under(root: &Path) -> usize {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return 0;
    };
    let mut released = 0;
    for line in mounts.lines() {
        let Some(target) = line.split(' ').nth(1).map(unescape_mount_path) else {
            continue;
        };
        let target = PathBuf::from(target);
        let run_dir = match target.parent() {
            Some(dir) if target.starts_with(root) && target == mount_point(dir) => dir,
            _ => continue,
        };
        if run_dir.join(IMAGE).exists() || is_mounted(&target) {
            match release(run_dir) {
                Ok(()) => released += 1,
                Err(e) => {
                    tracing::warn!(mount = %target.display(), error = %e, "cannot release a run volume")
                }
            }
        }
    }
    released
}

/// `/proc/self/mounts` writes space, tab, newline and backslash as octal
/// escapes (`\040`).
fn unescape_mount_path(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the volume at `mount` has no space or no inode left for an
/// unprivileged writer: the job ran into its declaration.
pub fn is_full(mount: &Path) -> bool {
    match rustix::fs::statvfs(mount) {
        Ok(s) => s.f_bavail.saturating_mul(s.f_frsize) < (1 << 20) || s.f_favail == 0,
        Err(_) => false,
    }
}

/// Bytes a writer may still put on the volume at `mount`.
pub fn available(mount: &Path) -> Option<u64> {
    rustix::fs::statvfs(mount)
        .ok()
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
}

fn probe(dir: &Path) -> Result<(), VolumeError> {
    let probe = dir.join(".disk-bound-probe");
    let made = ensure(&probe, 1 << 20).and_then(|mount| {
        if is_mounted(&mount) {
            Ok(())
        } else {
            Err(VolumeError::Command {
                command: "mount".into(),
                reason: format!("{} is not a mount point after mounting", mount.display()),
            })
        }
    });
    let released = release(&probe);
    let _ = std::fs::remove_dir_all(&probe);
    made.and(released)
}

fn run(command: &mut Command) -> Result<(), VolumeError> {
    let shown = format!("{command:?}");
    match command.output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(VolumeError::Command {
            command: shown,
            reason: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
        Err(e) => Err(VolumeError::Command {
            command: shown,
            reason: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Whether this host lets the test mount; the tests of the bound itself
    /// say so and pass vacuously where it cannot (CI runs as root).
    fn can_mount(dir: &Path) -> bool {
        match probe(dir) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("volume tests skipped: {e}");
                false
            }
        }
    }

    /// Unmounts the run's volume however the test ends (a failed assert
    /// must not leave a mount behind).
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = release(&self.0);
        }
    }

    fn allocated(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    #[test]
    fn a_volume_holds_what_was_declared_and_refuses_the_byte_after() {
        let t = tempfile::tempdir().unwrap();
        if !can_mount(t.path()) {
            return;
        }
        let declared = 8u64 << 20;
        let run_dir = t.path().join("run");
        let _unmount = Unmount(run_dir.clone());
        let mount = ensure(&run_dir, declared).unwrap();
        assert!(is_mounted(&mount));
        assert!(
            available(&mount).unwrap() >= declared,
            "{:?} available of {declared} declared",
            available(&mount)
        );
        // Write until refused, in 1 MiB pieces.
        let chunk = vec![7u8; 1 << 20];
        let mut f = std::fs::File::create(mount.join("fill.bin")).unwrap();
        let mut written = 0u64;
        let refused = loop {
            match f.write_all(&chunk).and_then(|()| f.sync_data()) {
                Ok(()) => written += chunk.len() as u64,
                Err(e) => break e,
            }
            assert!(written < 64 << 20, "64 MiB into an 8 MiB volume");
        };
        assert_eq!(refused.raw_os_error(), Some(28), "ENOSPC, got {refused}");
        assert!(
            written >= declared,
            "only {written} of {declared} bytes fit"
        );
        assert!(is_full(&mount));
        drop(f);
        // On the host: what was written and ext4's metadata, nothing more.
        let image = run_dir.join(IMAGE);
        assert!(
            allocated(&image) < declared + (12 << 20),
            "the image takes {} bytes on the host",
            allocated(&image)
        );
        // Kept as it is when asked again (an agent restarted under a job).
        assert_eq!(ensure(&run_dir, declared).unwrap(), mount);
        assert!(mount.join("fill.bin").exists());
        release(&run_dir).unwrap();
        assert!(!is_mounted(&mount));
        assert!(!image.exists());
        // Released twice: nothing to do, no error.
        release(&run_dir).unwrap();
    }

    #[test]
    fn a_large_volume_holds_its_declaration_and_has_inodes_for_two_full_checkpoints() {
        let t = tempfile::tempdir().unwrap();
        if !can_mount(t.path()) {
            return;
        }
        let run_dir = t.path().join("run");
        let _unmount = Unmount(run_dir.clone());
        let mount = ensure(&run_dir, 1 << 30).unwrap();
        let s = rustix::fs::statvfs(&mount).unwrap();
        assert!(
            available(&mount).unwrap() >= 1 << 30,
            "{:?} bytes of a declared 1 GiB",
            available(&mount)
        );
        assert!(s.f_files >= INODES - 64, "{} inodes", s.f_files);
        assert!(s.f_files < INODES * 2, "{} inodes", s.f_files);
        // A sparse 1 GiB image that nobody wrote takes a few MiB.
        assert!(
            allocated(&run_dir.join(IMAGE)) < 32 << 20,
            "{}",
            allocated(&run_dir.join(IMAGE))
        );
        release(&run_dir).unwrap();
    }

    #[test]
    fn every_run_volume_under_a_directory_is_released_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        if !can_mount(t.path()) {
            return;
        }
        let runs: Vec<PathBuf> = ["runs/a b", "runs/c"]
            .iter()
            .map(|r| t.path().join(r))
            .collect();
        let guards: Vec<Unmount> = runs.iter().cloned().map(Unmount).collect();
        let other = tempfile::tempdir().unwrap();
        let _other = Unmount(other.path().join("run"));
        for run in &runs {
            ensure(run, 4 << 20).unwrap();
        }
        ensure(&other.path().join("run"), 4 << 20).unwrap();
        assert_eq!(release_all_under(&t.path().join("runs")), 2);
        assert!(runs.iter().all(|r| !is_mounted(&mount_point(r))));
        assert!(is_mounted(&mount_point(&other.path().join("run"))));
        assert_eq!(release_all_under(&t.path().join("runs")), 0);
        drop(guards);
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(
            unescape_mount_path("/w/runs/a\\040b/vol"),
            "/w/runs/a b/vol"
        );
        assert_eq!(unescape_mount_path("/w/x\\134y"), "/w/x\\y");
        assert_eq!(unescape_mount_path("/w/odd\\9"), "/w/odd\\9");
    }

    #[test]
    fn disk_bounds_parse_and_watch_needs_nothing() {
        assert_eq!("loop".parse::<DiskBound>(), Ok(DiskBound::Loop));
        assert_eq!("watch".parse::<DiskBound>(), Ok(DiskBound::Watch));
        assert_eq!("auto".parse::<DiskBound>(), Ok(DiskBound::Auto));
        assert!(
            "quota"
                .parse::<DiskBound>()
                .unwrap_err()
                .contains("auto, loop or watch")
        );
        let t = tempfile::tempdir().unwrap();
        assert_eq!(
            DiskBound::Watch.resolve(t.path()).unwrap(),
            DiskBound::Watch
        );
        // Whatever this host allows, Auto resolves to one of the two.
        assert_ne!(DiskBound::Auto.resolve(t.path()).unwrap(), DiskBound::Auto);
    }
}
