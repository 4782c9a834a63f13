//! A TCP link that can be cut: every byte an agent exchanges with the chain
//! or the scheduler goes through one, so a test can partition the agent and
//! heal it again, at the transport level, as a network would.
//!
//! A cut is a partition, not a reset: nothing crosses the link either way,
//! new connections wait, and no connection is closed (a network that drops
//! packets closes nothing; only the endpoints' kernels do, when a process
//! dies). What was in flight is delivered once the link heals.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Forwards `listen` → `target`; while cut, holds everything.
pub struct Link {
    pub listen: SocketAddr,
    pub target: SocketAddr,
    cut: watch::Sender<bool>,
    /// Bytes carried, both ways.
    carried: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

/// Copies `from` → `to`, holding the bytes (and the end of the stream)
/// while the link is cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: watch::Receiver<bool>,
    carried: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        let n = from.read(&mut buf).await.unwrap_or(0);
        if cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        if n == 0 {
            let _ = to.shutdown().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        carried.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl Link {
    pub async fn open(listener: TcpListener, target: SocketAddr) -> std::io::Result<Self> {
        let listen = listener.local_addr()?;
        let (cut, watch_cut) = watch::channel(false);
        let watch_cut = Arc::new(watch_cut);
        let carried = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&carried);
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    continue;
                };
                let mut cut_rx = (*watch_cut).clone();
                let counter = Arc::clone(&counter);
                tokio::spawn(async move {
                    // A connection opened during a partition waits for it to end.
                    if cut_rx.wait_for(|cut| !*cut).await.is_err() {
                        return;
                    }
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (in_read, in_write) = inbound.into_split();
                    let (out_read, out_write) = outbound.into_split();
                    tokio::join!(
                        pump(in_read, out_write, cut_rx.clone(), Arc::clone(&counter)),
                        pump(out_read, in_write, cut_rx, counter),
                    );
                });
            }
        });
        Ok(Self {
            listen,
            target,
            cut,
            carried,
            task,
        })
    }

    pub fn cut(&self) {
        let _ = self.cut.send(true);
    }

    pub fn heal(&self) {
        let _ = self.cut.send(false);
    }

    pub fn is_cut(&self) -> bool {
        *self.cut.borrow()
    }

    /// Bytes the link has carried, both ways together, since it opened.
    pub fn bytes(&self) -> u64 {
        self.carried.load(Ordering::Relaxed)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}
