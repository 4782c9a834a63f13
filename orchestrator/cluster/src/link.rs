//! A TCP link that can be cut: every byte an agent exchanges with the chain
//! or the scheduler goes through one, so a test can partition the agent and
//! heal it again, at the transport level, as a network would.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Forwards `listen` → `target` until cut; while cut, open connections are
/// dropped and new ones are closed at once.
pub struct Link {
    pub listen: SocketAddr,
    pub target: SocketAddr,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Link {
    pub async fn open(listener: TcpListener, target: SocketAddr) -> std::io::Result<Self> {
        let listen = listener.local_addr()?;
        let (cut, watch_cut) = watch::channel(false);
        let watch_cut = Arc::new(watch_cut);
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    continue;
                };
                if *watch_cut.borrow() {
                    drop(inbound);
                    continue;
                }
                let mut cut_rx = (*watch_cut).clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let mut inbound = inbound;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_rx.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Ok(Self {
            listen,
            target,
            cut,
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
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}
