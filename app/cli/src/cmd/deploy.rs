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

/// The program's IDL as this build of `mcjs` knows it (idl/mcjs.json,
/// which `tests/idl` holds to the program's source).
pub const IDL_JSON: &[u8] = include_bytes!("../../../../idl/mcjs.json");

/// What `mcjs admin publish-idl` did.
#[derive(Debug, Serialize)]
pub struct IdlView {
    /// "published" or "already published".
    pub action: &'static str,
    /// Anchor's IDL account of the program.
    pub idl_account: String,
    pub authority: String,
    /// The IDL's JSON (compact) and its zlib-compressed form, as the chain keeps it.
    pub json_bytes: usize,
    pub compressed_bytes: usize,
    /// Write transactions sent.
    pub writes: usize,
}

/// Publishes the program's IDL (`idl`, or the one this build carries) into
/// Anchor's IDL account, signed by `wallet`, the program's upgrade authority.
pub async fn publish_idl(
    client: &ChainClient,
    wallet: &Keypair,
    idl: Option<&Path>,
) -> anyhow::Result<IdlView> {
    let json = match idl {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("cannot read the IDL at {}", path.display()))?,
        None => IDL_JSON.to_vec(),
    };
    let (json_bytes, compressed) =
        mcjs_client::rpc::compress_idl(&json).map_err(anyhow::Error::msg)?;
    client.check_program().await?;
    let config = client.config().await?.1;
    match client.upgrade_authority(&mcjs_client::PROGRAM_ID).await? {
        Some(Some(authority)) if authority != wallet.pubkey() => bail!(
            "the wallet {} is not the program's upgrade authority ({authority}): sign with its keypair (-k)",
            wallet.pubkey()
        ),
        Some(None) => bail!(
            "the program on {} is immutable (no upgrade authority): its IDL can no longer be published",
            client.url()
        ),
        None if config.admin != wallet.pubkey() => bail!(
            "the wallet {} is not the admin ({}): sign with the admin's keypair (-k)",
            wallet.pubkey(),
            config.admin
        ),
        _ => {}
    }
    eprintln!(
        "the IDL, {} bytes compressed, for its account {} on {}",
        compressed.len(),
        mcjs_client::ix::idl_address(),
        client.url()
    );
    let progress = |done: usize, all: usize| eprintln!("wrote {done} of {all} chunks of the IDL");
    let writes = client.publish_idl(wallet, &compressed, &progress).await?;
    Ok(IdlView {
        action: if writes == 0 {
            "already published"
        } else {
            "published"
        },
        idl_account: mcjs_client::ix::idl_address().to_string(),
        authority: wallet.pubkey().to_string(),
        json_bytes,
        compressed_bytes: compressed.len(),
        writes,
    })
}

impl fmt::Display for IdlView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "IDL {} ({} writes)", self.action, self.writes)?;
        writeln!(f, "  IDL account  {}", self.idl_account)?;
        writeln!(f, "  authority    {}", self.authority)?;
        write!(
            f,
            "  size         {} bytes of JSON, {} compressed",
            self.json_bytes, self.compressed_bytes
        )
    }
}
