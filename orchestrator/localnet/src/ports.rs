//! Local ports for the components a test or tool starts a moment later
//! (chains, S3 servers, schedulers, agents), safe to hand out from processes
//! running side by side.

use std::net::TcpListener;

/// A free port whose successor is free too (the websocket listens on the
/// next port): for tests and tools that start local chains side by side.
pub fn free_port_pair() -> u16 {
    free_ports(2)
}

/// A free local port, for a listener started a moment later.
pub fn free_port() -> u16 {
    free_ports(1)
}

/// `n` consecutive free local ports, the first returned: a validator's
/// range of dynamic ports.
pub fn free_port_range(n: u16) -> u16 {
    free_ports(n)
}

/// The lowest port handed out.
const FIRST_PORT: u16 = 10_000;

/// `n` consecutive free ports, the first returned.
///
/// A port is chosen here and bound a moment later by another component,
/// so it is taken below the kernel's ephemeral range: an outgoing
/// connection takes its local port from that range and could otherwise
/// hold the chosen port in between (seen as "port already in use" when
/// tests start chains while others connect). Ports are handed out in turn
/// from an offset drawn per process, so calls in one process never
/// return the same port; across processes (tests run side by side, each
/// in its own process) a port handed out is also reserved by a lock on a
/// file named after it ([`reserve`]) that this process holds until it
/// exits, so no other process hands out the same port in between.
fn free_ports(n: u16) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);

    let end = ephemeral_range_start().saturating_sub(n);
    if end <= FIRST_PORT + 1_000 {
        return kernel_chosen_ports(n);
    }
    let span = u32::from(end - FIRST_PORT);
    if NEXT.load(Ordering::Relaxed) == u32::MAX {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let seed = nanos ^ std::process::id().wrapping_mul(2_654_435_761);
        let _ = NEXT.compare_exchange(u32::MAX, seed % span, Ordering::Relaxed, Ordering::Relaxed);
    }
    for _ in 0..span / u32::from(n) {
        let offset = NEXT.fetch_add(u32::from(n), Ordering::Relaxed) % span;
        let first = FIRST_PORT + offset as u16;
        if reserve(first, n)
            && (first..first + n).all(|port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        {
            return first;
        }
    }
    kernel_chosen_ports(n)
}

/// Reserves `first..first + n` for this process against every other
/// process on the machine that hands out ports here: an exclusive lock on
/// `$TMPDIR/mcjs-ports/<port>` per port, held (the file kept open) until
/// the process exits, when the kernel releases it. False where another
/// process holds one of them. Where the directory cannot be made, ports
/// are handed out unreserved, as before (the bind check alone).
fn reserve(first: u16, n: u16) -> bool {
    use std::sync::Mutex;
    static HELD: Mutex<Vec<std::fs::File>> = Mutex::new(Vec::new());

    let dir = std::env::temp_dir().join("mcjs-ports");
    if std::fs::create_dir_all(&dir).is_err() {
        return true;
    }
    let mut locks = Vec::with_capacity(usize::from(n));
    for port in first..first + n {
        let Ok(file) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
        else {
            return true;
        };
        if file.try_lock().is_err() {
            return false;
        }
        locks.push(file);
    }
    HELD.lock().unwrap_or_else(|e| e.into_inner()).extend(locks);
    true
}

/// The first port of the kernel's ephemeral range (Linux's default where
/// it cannot be read).
fn ephemeral_range_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// `n` consecutive free ports found by asking the kernel for one.
fn kernel_chosen_ports(n: u16) -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("a bound port").port();
        drop(listener);
        let rest_free = (1..n).all(|i| {
            port.checked_add(i)
                .is_some_and(|p| TcpListener::bind(("127.0.0.1", p)).is_ok())
        });
        if rest_free {
            return port;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_another_process_holds_is_not_handed_out_until_it_exits() {
        use std::io::{BufRead, BufReader};
        let port = kernel_chosen_ports(1);
        let file = std::env::temp_dir()
            .join("mcjs-ports")
            .join(port.to_string());
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        // Another process (util-linux's flock) holds the port's lock until
        // its standard input closes.
        let mut holder = std::process::Command::new("flock")
            .arg("-x")
            .arg(&file)
            .args(["-c", "echo held; cat >/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("flock(1) runs");
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "held");
        assert!(
            !reserve(port, 1),
            "a port another process holds was handed out"
        );
        drop(holder.stdin.take());
        assert!(holder.wait().unwrap().success());
        assert!(reserve(port, 1), "the port is free once its holder exited");
        // Now this process holds it: a second reservation of it fails too.
        assert!(!reserve(port, 1));
    }
}
