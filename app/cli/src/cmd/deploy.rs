//! `mcjs admin deploy`: puts the program's SBF ELF on a cluster by the
//! upgradeable loader's transactions (buffer, writes, deploy, upgrade
//! authority), the same ones `mcjs localnet` deploys with.

use std::fmt;
use std::path::Path;

use anyhow::{Context, bail};
use mcjs_client::rpc::Deployed;
use mcjs_client::{ChainClient, Keypair, Pubkey, Signer};
use serde::Serialize;

use crate::chain::parse_pubkey;

/// Deploys (or, with `upgrade`, upgrades) the program at the address of
/// `program_keypair`, which must be the one the program declares.
pub async fn deploy(
    client: &ChainClient,
    wallet: &Keypair,
    so: &Path,
    program_keypair: &Path,
    upgrade_authority: Option<&str>,
    upgrade: bool,
) -> anyhow::Result<DeployView> {
    let elf = std::fs::read(so).with_context(|| {
        format!(
            "cannot read the program's ELF at {}: build it with scripts/build-sbf.sh",
            so.display()
        )
    })?;
    if !elf.starts_with(b"\x7fELF") {
        bail!(
            "{} is not an ELF file: pass the .so that scripts/build-sbf.sh prints",
            so.display()
        );
    }
    let program = mcjs_client::keyfile::read_keypair(program_keypair)?;
    if program.pubkey() != mcjs_client::PROGRAM_ID {
        bail!(
            "the program keypair {} is {} but the program declares {}: update declare_id! and rebuild",
            program_keypair.display(),
            program.pubkey(),
            mcjs_client::PROGRAM_ID
        );
    }
    let authority: Pubkey = match upgrade_authority {
        Some(key) => parse_pubkey(key, "--upgrade-authority")?,
        None => wallet.pubkey(),
    };
    let progress =
        |done: usize, total: usize| eprintln!("wrote {done} of {total} chunks of the ELF");
    let deployed = match client.upgrade_authority(&program.pubkey()).await? {
        None => {
            eprintln!(
                "deploying {} ({} bytes) as {} to {}",
                so.display(),
                elf.len(),
                program.pubkey(),
                client.url()
            );
            client
                .deploy_program(wallet, &program, &elf, &authority, &progress)
                .await?
        }
        Some(_) if !upgrade => bail!(
            "the program {} is already deployed on {}: pass --upgrade to replace its code",
            program.pubkey(),
            client.url()
        ),
        Some(None) => bail!(
            "the program {} is immutable: it can no longer be upgraded",
            program.pubkey()
        ),
        Some(Some(current)) if current != wallet.pubkey() => bail!(
            "the program's upgrade authority is {current}, not the wallet {}: sign with it (-k)",
            wallet.pubkey()
        ),
        Some(Some(_)) => {
            eprintln!(
                "upgrading {} on {} from {}",
                program.pubkey(),
                client.url(),
                so.display()
            );
            client
                .upgrade_program(wallet, &program.pubkey(), &elf, &progress)
                .await?
        }
    };
    Ok(DeployView(deployed))
}

#[derive(Serialize)]
#[serde(transparent)]
pub struct DeployView(Deployed);

impl fmt::Display for DeployView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.0;
        writeln!(
            f,
            "program {} {}",
            d.program,
            if d.upgraded { "upgraded" } else { "deployed" }
        )?;
        writeln!(f, "  programdata        {}", d.programdata)?;
        writeln!(f, "  upgrade authority  {}", d.upgrade_authority)?;
        writeln!(f, "  ELF                {} bytes", d.elf_bytes)?;
        write!(
            f,
            "  buffer writes      {} ({} written again)",
            d.writes, d.rewritten
        )
    }
}
