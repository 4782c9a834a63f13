//! A real Network UPS Tools server for tests and demos: `upsd` and its
//! `dummy-ups` driver in a temporary directory.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::ups::UpsTarget;

const UPSD: &str = "/lib/nut/upsd";
const DUMMY_UPS: &str = "/lib/nut/dummy-ups";

/// A real `upsd` serving one UPS, `test`, through NUT's `dummy-ups`
/// driver, whose variables are the lines of a `.dev` file it reads again
/// whenever the file changes: what tests and demos drive from on line to on
/// battery to low battery without hardware. Both processes stop on drop.
pub struct DummyUps {
    dir: tempfile::TempDir,
    port: u16,
    driver: Child,
    upsd: Option<Child>,
}

impl DummyUps {
    /// Starts the driver and `upsd` on a free port, the UPS on line.
    ///
    /// # Panics
    /// When nut-server is not installed (`scripts/setup.sh` installs it).
    pub fn start() -> Self {
        for bin in [UPSD, DUMMY_UPS] {
            assert!(
                Path::new(bin).exists(),
                "{bin} is missing: install nut-server (scripts/setup.sh does)"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let path = |name: &str| dir.path().join(name);
        std::fs::create_dir(path("state")).unwrap();
        std::fs::write(path("nut.conf"), "MODE=standalone\n").unwrap();
        std::fs::write(
            path("ups.conf"),
            format!(
                "[test]\n  driver = dummy-ups\n  port = {}\n  pollinterval = 1\n  desc = \"MCJS test UPS\"\n",
                path("test.dev").display()
            ),
        )
        .unwrap();
        std::fs::write(path("upsd.conf"), format!("LISTEN 127.0.0.1 {port}\n")).unwrap();
        std::fs::write(path("upsd.users"), "").unwrap();
        write_vars(dir.path(), "OL", "100", "1800");
        // NUT's daemons drop to this user (root would refuse otherwise).
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        let driver = spawn(DUMMY_UPS, &["-a", "test", "-u", &user, "-F"], dir.path());
        std::thread::sleep(Duration::from_millis(500));
        let upsd = spawn(UPSD, &["-u", &user, "-F"], dir.path());
        Self {
            port,
            driver,
            upsd: Some(upsd),
            dir,
        }
    }

    /// What the UPS reports from now on (the driver sees it within its
    /// poll interval, a second).
    pub fn set(&self, status: &str, charge: &str, runtime: &str) {
        write_vars(self.dir.path(), status, charge, runtime);
    }

    /// The UPS as `name@127.0.0.1:PORT` (`test` is the one it serves).
    pub fn target(&self, name: &str) -> UpsTarget {
        format!("{name}@127.0.0.1:{}", self.port).parse().unwrap()
    }

    /// Stops `upsd`: the UPS can no longer be read.
    pub fn stop_upsd(&mut self) {
        if let Some(mut upsd) = self.upsd.take() {
            let _ = upsd.kill();
            let _ = upsd.wait();
        }
    }
}

impl Drop for DummyUps {
    fn drop(&mut self) {
        self.stop_upsd();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The driver's data file, replaced whole so it never reads half of it.
///
/// `dummy-ups` reads the file again only when its modification time (in
/// whole seconds) changes, so two writes within one second would leave the
/// second unseen: each write is dated a second after the one before, or
/// now, whichever is later.
fn write_vars(dir: &Path, status: &str, charge: &str, runtime: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    static LAST: AtomicU64 = AtomicU64::new(0);

    let tmp = dir.join("test.dev.new");
    std::fs::write(
        &tmp,
        format!("ups.status: {status}\nbattery.charge: {charge}\nbattery.runtime: {runtime}\n"),
    )
    .unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let secs = LAST
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(now.max(last + 1))
        })
        .map_or(now, |last| now.max(last + 1));
    std::fs::File::options()
        .write(true)
        .open(&tmp)
        .and_then(|f| f.set_modified(UNIX_EPOCH + Duration::from_secs(secs)))
        .unwrap();
    std::fs::rename(&tmp, dir.join("test.dev")).unwrap();
}

fn spawn(bin: &str, args: &[&str], conf: &Path) -> Child {
    Command::new(bin)
        .args(args)
        .env("NUT_CONFPATH", conf)
        .env("NUT_STATEPATH", conf.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
