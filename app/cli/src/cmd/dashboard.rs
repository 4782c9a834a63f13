//! `mcjs dashboard`: the auditor's read-only web dashboard over the chain.

use std::net::SocketAddr;

use anyhow::Context;

use crate::chain::Ctx;
use crate::{EXIT_OK, GlobalArgs};

#[derive(clap::Args, Debug)]
pub struct DashboardArgs {
    /// Address to serve on. It shows only public chain data, but keep it on
    /// loopback unless it sits behind a proxy you trust.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
}

pub fn run(args: DashboardArgs, global: &GlobalArgs) -> anyhow::Result<u8> {
    let ctx = Ctx::resolve(global)?;
    crate::chain::runtime()?.block_on(async {
        let client = ctx.client();
        client
            .config()
            .await
            .with_context(|| format!("cannot read the MCJS program's Config on {}", ctx.url))?;
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let local = listener.local_addr().context("the listening address")?;
        eprintln!(
            "dashboard of {} at http://{local}/ (Ctrl-C to stop)",
            ctx.url
        );
        mcjs_dashboard::serve(listener, client, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the dashboard stopped")?;
        Ok(EXIT_OK)
    })
}
