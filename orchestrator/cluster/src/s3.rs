//! The cluster's S3-compatible store: an `s3s-fs` server started here, its
//! operator keys (held by the scheduler only) and buckets.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::free_port;

/// The access key of the cluster's S3 server (held by the scheduler only).
pub const S3_ACCESS_KEY: &str = "mcjs-operator";
pub const S3_SECRET_KEY: &str = "mcjs-operator-secret";
/// The bucket and prefix of the cluster's S3 store.
pub const S3_BUCKET: &str = "mcjs";
/// A bucket of the user's own on the same server, for output delivery.
pub const S3_USER_BUCKET: &str = "user-results";
pub const S3_PREFIX: &str = "deploy";

/// The `s3s-fs` binary: `$MCJS_S3S_FS`, else on the PATH, else cargo's bin dir.
pub fn s3s_fs_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MCJS_S3S_FS") {
        return PathBuf::from(p);
    }
    for dir in std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
    {
        let candidate = dir.join("s3s-fs");
        if candidate.is_file() {
            return candidate;
        }
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default();
    cargo_home.join("bin/s3s-fs")
}

/// A running S3-compatible server.
pub struct S3Server {
    pub endpoint: String,
    /// Where it keeps its buckets (`<root>/<bucket>/<key>`).
    pub root: PathBuf,
    port: u16,
    logs: PathBuf,
    /// None while stopped ([`S3Server::stop`]).
    child: Option<Child>,
}

impl S3Server {
    /// Starts `s3s-fs` on a free port with the operator's keys and one
    /// bucket per name in `buckets`.
    pub async fn start(root: &Path, logs: &Path, buckets: &[&str]) -> anyhow::Result<Self> {
        for b in buckets {
            std::fs::create_dir_all(root.join(b))?;
        }
        let port = free_port(false).await?;
        let mut server = Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            root: root.to_path_buf(),
            port,
            logs: logs.to_path_buf(),
            child: None,
        };
        server.start_again().await?;
        Ok(server)
    }

    /// Stops the server (a store outage: connections refused); what it
    /// holds stays on disk.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on its port, over what it held; waits until
    /// it listens. Nothing to do while it runs.
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let (port, bin) = (self.port, s3s_fs_bin());
        let child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", S3_ACCESS_KEY, "--secret-key", S3_SECRET_KEY])
            .arg(&self.root)
            .stdin(Stdio::null())
            .stdout(append_log(&self.logs, "s3")?)
            .stderr(append_log(&self.logs, "s3.err")?)
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start the S3 server {} (scripts/setup.sh installs it: cargo install s3s-fs --features binary)",
                    bin.display()
                )
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if Instant::now() > deadline {
                bail!("the S3 server did not listen on {port} within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

/// The log `name` in `dir`, appended to (a restart keeps what came before).
fn append_log(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))
        .with_context(|| format!("cannot open the log of {name}"))
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
