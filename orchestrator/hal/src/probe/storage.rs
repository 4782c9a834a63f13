//! The checkpoint directory: filesystem, free space, and measured bandwidth.
//!
//! Write bandwidth is what a checkpoint sees: each sample is a new file written in 4 MiB
//! chunks of incompressible data and then `fsync`'d, timed from open to the end of the fsync.
//! Read bandwidth is what a restore sees: after the writes, each file's pages are dropped from
//! the page cache with `posix_fadvise(DONTNEED)` (clean after the fsync, so Linux drops them),
//! `mincore` checks how much is still cached, and the file is read sequentially. Filesystems
//! that keep data in memory (tmpfs) or ignore the advice are reported in `read_method`.
//! The probe files are removed afterwards, also on error.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::profile::{BandwidthSamples, StorageMeasurement};

const CHUNK_BYTES: usize = 4 << 20;
/// Smallest sample: below this, fsync latency dominates and the figure is not a bandwidth.
pub const MIN_SAMPLE_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageProbeConfig {
    /// Total bytes written, split evenly over `samples` files.
    pub total_bytes: u64,
    pub samples: u32,
}

impl Default for StorageProbeConfig {
    fn default() -> Self {
        Self {
            total_bytes: 64 << 20,
            samples: 4,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageProbeError {
    #[error(
        "checkpoint directory {0} does not exist or is not a directory: create it or pass another"
    )]
    NotADirectory(PathBuf),
    #[error(
        "storage probe needs at least one sample of at least 1 MiB, got {samples} sample(s) of {bytes_per_sample} bytes: raise the sample size or lower the sample count"
    )]
    SamplesTooSmall { samples: u32, bytes_per_sample: u64 },
    #[error(
        "only {free_bytes} bytes free in {path}, the storage probe needs {needed} bytes: free space or lower the sample size"
    )]
    InsufficientSpace {
        path: PathBuf,
        free_bytes: u64,
        needed: u64,
    },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> StorageProbeError + use<> {
    let path = path.to_path_buf();
    move |source| StorageProbeError::Io {
        action,
        path,
        source,
    }
}

/// Removes the probe files however the measurement ends.
struct ProbeFiles(Vec<PathBuf>);

impl Drop for ProbeFiles {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = fs::remove_file(path);
        }
    }
}

/// Measures the checkpoint directory `dir`.
pub fn measure(
    dir: &Path,
    config: &StorageProbeConfig,
) -> Result<StorageMeasurement, StorageProbeError> {
    let dir = fs::canonicalize(dir)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| StorageProbeError::NotADirectory(dir.to_path_buf()))?;
    let bytes_per_sample = config.total_bytes / u64::from(config.samples.max(1));
    if config.samples == 0 || bytes_per_sample < MIN_SAMPLE_BYTES {
        return Err(StorageProbeError::SamplesTooSmall {
            samples: config.samples,
            bytes_per_sample,
        });
    }
    let (total_bytes, free_before) = space(&dir)?;
    let needed = bytes_per_sample * u64::from(config.samples);
    // Keep a margin so the probe never fills the disk it is judging.
    if free_before < needed.saturating_mul(2) {
        return Err(StorageProbeError::InsufficientSpace {
            path: dir,
            free_bytes: free_before,
            needed: needed.saturating_mul(2),
        });
    }

    let data = incompressible(CHUNK_BYTES);
    let mut files = ProbeFiles(Vec::new());
    let mut write_secs = Vec::new();
    for i in 0..config.samples {
        let path = dir.join(format!(".mcjs-hal-probe-{}-{i}", std::process::id()));
        files.0.push(path.clone());
        write_secs.push(write_sample(&path, bytes_per_sample, &data, i)?);
    }

    let mut read_secs = Vec::new();
    let mut cached_after_advice = 0.0;
    let mut buf = vec![0u8; CHUNK_BYTES];
    for path in &files.0 {
        let file = File::open(path).map_err(io("open", path))?;
        drop_from_cache(&file);
        cached_after_advice += resident_fraction(&file, bytes_per_sample).unwrap_or(0.0);
        read_secs.push(read_sample(file, path, &mut buf)?);
    }
    let cached = cached_after_advice / f64::from(config.samples);
    let read_method = if cached < 0.01 {
        "sequential read after posix_fadvise(DONTNEED) evicted the samples from the page cache"
            .to_string()
    } else {
        format!(
            "sequential read; {:.0}% of the samples stayed in the page cache after posix_fadvise(DONTNEED) (filesystem keeps data in memory), so this is partly memory bandwidth",
            cached * 100.0
        )
    };
    drop(files);
    let (_, free_bytes) = space(&dir)?;

    Ok(StorageMeasurement {
        path: dir.display().to_string(),
        filesystem: filesystem_type(&dir),
        total_bytes,
        free_bytes,
        write: BandwidthSamples::from_durations(bytes_per_sample, &write_secs),
        read: BandwidthSamples::from_durations(bytes_per_sample, &read_secs),
        read_method,
    })
}

fn write_sample(
    path: &Path,
    bytes: u64,
    data: &[u8],
    sample: u32,
) -> Result<f64, StorageProbeError> {
    let start = Instant::now();
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io("create", path))?;
    let mut chunk = data.to_vec();
    let mut left = bytes;
    let mut index = 0u64;
    while left > 0 {
        // A distinct header per chunk keeps deduplicating filesystems from storing one chunk.
        chunk[..8].copy_from_slice(&index.to_le_bytes());
        chunk[8..12].copy_from_slice(&sample.to_le_bytes());
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n]).map_err(io("write", path))?;
        left -= n as u64;
        index += 1;
    }
    file.sync_all().map_err(io("fsync", path))?;
    Ok(start.elapsed().as_secs_f64())
}

fn read_sample(mut file: File, path: &Path, buf: &mut [u8]) -> Result<f64, StorageProbeError> {
    let start = Instant::now();
    loop {
        let n = file.read(buf).map_err(io("read", path))?;
        if n == 0 {
            break;
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

fn drop_from_cache(file: &File) {
    // SAFETY: plain syscall on a descriptor we own.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// Fraction of the file's pages in the page cache, by `mincore` on a read-only mapping.
fn resident_fraction(file: &File, len: u64) -> Option<f64> {
    let len = usize::try_from(len).ok()?;
    // SAFETY: maps `len` bytes of a file of at least that size read-only, inspects the mapping
    // with mincore into a vector sized for it, and unmaps it before returning.
    unsafe {
        let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).ok()?;
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if addr == libc::MAP_FAILED {
            return None;
        }
        let pages = len.div_ceil(page);
        let mut vec = vec![0u8; pages];
        let rc = libc::mincore(addr, len, vec.as_mut_ptr());
        libc::munmap(addr, len);
        if rc != 0 {
            return None;
        }
        Some(vec.iter().filter(|b| **b & 1 == 1).count() as f64 / pages as f64)
    }
}

/// (total, available to unprivileged writers) bytes of the filesystem holding `dir`.
pub fn space(dir: &Path) -> Result<(u64, u64), StorageProbeError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path =
        std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|e| StorageProbeError::Io {
            action: "statvfs",
            path: dir.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
    // SAFETY: statvfs fills the zeroed struct we own from a NUL-terminated path.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c_path.as_ptr(), &mut st) != 0 {
            return Err(io("statvfs", dir)(std::io::Error::last_os_error()));
        }
        st
    };
    let frsize = st.f_frsize as u64;
    Ok((st.f_blocks as u64 * frsize, st.f_bavail as u64 * frsize))
}

/// Filesystem type of the mount holding `dir` (the longest matching mount point of
/// /proc/self/mountinfo), `unknown` when it cannot be read.
pub fn filesystem_type(dir: &Path) -> String {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    filesystem_from_mountinfo(&mountinfo, dir).unwrap_or_else(|| "unknown".to_string())
}

pub fn filesystem_from_mountinfo(mountinfo: &str, dir: &Path) -> Option<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_point = unescape_mount(fields.get(4)?);
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(sep + 1)?;
            dir.starts_with(&mount_point)
                .then(|| (mount_point.len(), fstype.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fstype)| fstype)
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Deterministic xorshift bytes: incompressible for the filesystem, reproducible for us.
fn incompressible(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_picks_the_longest_mount_point() {
        let info = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                    30 22 0:5 / /data\\040disk rw - xfs /dev/sdb1 rw\n\
                    31 22 0:6 / /data rw shared:1 - tmpfs tmpfs rw\n";
        assert_eq!(
            filesystem_from_mountinfo(info, Path::new("/data/ck")).as_deref(),
            Some("tmpfs")
        );
        assert_eq!(
            filesystem_from_mountinfo(info, Path::new("/data disk/x")).as_deref(),
            Some("xfs")
        );
        assert_eq!(
            filesystem_from_mountinfo(info, Path::new("/home")).as_deref(),
            Some("ext4")
        );
        assert_eq!(
            filesystem_from_mountinfo(info, Path::new("/database")).as_deref(),
            Some("ext4")
        );
    }

    #[test]
    fn probe_data_does_not_repeat() {
        let data = incompressible(1 << 16);
        assert_eq!(data.len(), 1 << 16);
        assert_ne!(data[..4096], data[4096..8192]);
    }
}
