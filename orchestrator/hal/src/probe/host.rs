//! CPU, memory and OS of the host, read from Linux's /proc and /etc (uname for the kernel).

use std::fs;

use super::HostObservation;

/// Reads the host. Fields that cannot be read are left empty or zero; the profile shows them so.
pub fn observe() -> HostObservation {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let os_release = fs::read_to_string("/etc/os-release").unwrap_or_default();
    let (os_name, os_version) = parse_os_release(&os_release);
    HostObservation {
        cpu_model_raw: parse_cpu_model(&cpuinfo).unwrap_or_default(),
        cpu_cores: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        ram_bytes: parse_mem_total(&meminfo).unwrap_or(0),
        os_name: if os_name.is_empty() {
            std::env::consts::OS.to_string()
        } else {
            os_name
        },
        os_version,
        kernel: kernel_release().unwrap_or_default(),
        arch: std::env::consts::ARCH.to_string(),
    }
}

/// The first `model name` (x86) or `Model`/`CPU part` fallback (arm) line of /proc/cpuinfo.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    let value = |key: &str| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    value("model name")
        .or_else(|| value("Model"))
        .or_else(|| value("Hardware"))
}

/// `MemTotal` of /proc/meminfo in bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// (`NAME`, `VERSION_ID`) of an os-release file, unquoted.
pub fn parse_os_release(text: &str) -> (String, String) {
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_string())
            .unwrap_or_default()
    };
    (value("NAME"), value("VERSION_ID"))
}

fn kernel_release() -> Option<String> {
    // SAFETY: uname writes into the zeroed struct we own; its fields are NUL-terminated.
    unsafe {
        let mut uts: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut uts) != 0 {
            return None;
        }
        let release = std::ffi::CStr::from_ptr(uts.release.as_ptr());
        Some(release.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_and_os_release() {
        assert_eq!(
            parse_cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\n")
                .as_deref(),
            Some("AMD EPYC 7763 64-Core Processor")
        );
        assert_eq!(
            parse_mem_total("MemTotal:       16384 kB\nMemFree: 1 kB\n"),
            Some(16384 * 1024)
        );
        assert_eq!(
            parse_os_release(
                "PRETTY_NAME=\"Debian GNU/Linux 12\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n"
            ),
            ("Debian GNU/Linux".to_string(), "12".to_string())
        );
    }

    #[test]
    fn this_host_reports_cores_memory_and_kernel() {
        let host = observe();
        assert!(host.cpu_cores > 0);
        assert!(host.ram_bytes > 0);
        assert!(!host.kernel.is_empty());
    }
}
