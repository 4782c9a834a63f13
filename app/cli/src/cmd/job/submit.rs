//! `mcjs job submit`: validating a job spec, publishing it where the agents
//! read it, and locking the bond on chain.

use std::fmt;
use std::path::PathBuf;

use anyhow::{Context, anyhow, bail};
use mcjs_client::{ChainClient, Signer, ix, pda};
use mcjs_spec::{JobSpec, spec_hash};
use serde::Serialize;

use super::StoreArgs;
use crate::GlobalArgs;
use crate::chain::{Ctx, now_unix, require_funds, usdc};

/// `mcjs job submit`: the job's address once submitted.
pub(super) async fn submit_job(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    spec_path: PathBuf,
    bond: u64,
    job_id: Option<u64>,
    publish: Option<StoreArgs>,
) -> anyhow::Result<mcjs_client::Pubkey> {
    let text = std::fs::read_to_string(&spec_path)
        .with_context(|| format!("cannot read the job spec {}", spec_path.display()))?;
    let spec = JobSpec::from_json_validated(&text, now_unix()).map_err(|errors| {
        let list: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
        anyhow!(
            "{} is not a valid job spec ({} errors); nothing was submitted:\n{}",
            spec_path.display(),
            errors.len(),
            list.join("\n")
        )
    })?;
    let wallet = ctx.wallet()?;
    let deployment = client.deployment().await?;
    let owner = wallet.pubkey();
    let owner_token = ix::usdc_account(&owner, &deployment.usdc_mint);
    require_funds(client, &wallet, &owner_token, bond).await?;

    // Job ids only grow per owner (the chain refuses one below its counter).
    let next = client.next_job_id(&owner).await?;
    let job_id = job_id.unwrap_or(next);
    let key = pda::job(&owner, job_id);
    if client.account(&key).await?.is_some() {
        bail!(
            "the wallet already has a job with id {job_id} ({key}); pick another --job-id or leave it out"
        );
    }
    if job_id < next {
        bail!(
            "job id {job_id} was taken before: the wallet's job ids only grow, use {next} or more, or leave --job-id out"
        );
    }
    let args = ix::submit_args(&spec, job_id, bond);
    let hash = args.spec_hash;
    let minimum = mcjs::state::minimum_bond(&args.requirements, &args.terms)
        .map_err(|e| anyhow!("cannot compute the minimum bond: {e}"))?;
    if bond < minimum {
        bail!(
            "a bond of {} USDC is too small: this job needs at least {} USDC (one checkpoint interval at its maximum price); nothing was submitted",
            usdc(bond),
            usdc(minimum)
        );
    }
    match &publish {
        Some(store) => publish_spec(ctx, &wallet, store, &spec).await?,
        None => eprintln!(
            "note: --chain-only: the spec was not published; agents cannot run the job until it is"
        ),
    }
    let signature = client
        .send(
            &[ix::submit_job(
                &owner,
                &owner_token,
                &deployment.usdc_mint,
                args,
            )],
            &[&wallet],
        )
        .await?;
    global.output.print(&Submitted {
        job: key.to_string(),
        job_id,
        owner: owner.to_string(),
        spec_hash: hex::encode(hash),
        bond: usdc(bond),
        signature: signature.to_string(),
    })?;
    Ok(key)
}

/// Publishes the spec where the agents will read it, before any bond is
/// locked: a spec that cannot be published is refused with what to do, and
/// nothing is submitted.
async fn publish_spec(
    ctx: &Ctx,
    wallet: &mcjs_client::Keypair,
    store: &StoreArgs,
    spec: &JobSpec,
) -> anyhow::Result<()> {
    use mcjs_protocol::store::{Role, StoreUrl};
    let url = match store.resolve(ctx).await {
        Ok(url) => url,
        Err(e) if !store.given(ctx) => bail!(
            "cannot publish the spec: no --store, no store_url in the config, and no scheduler answering at {} ({e:#}); nothing was submitted and no USDC moved. Start the scheduler or name it with --scheduler, give the store with --store, or pass --chain-only to lock the bond without publishing",
            store.scheduler(ctx)
        ),
        Err(e) => return Err(e.context("nothing was submitted and no USDC moved")),
    };
    match &url {
        StoreUrl::Dir(dir) => {
            let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)
                .with_context(|| format!("cannot open the store {}", dir.display()))?;
            mcjs_runtime::spec_store::put_spec(&fs, spec)
                .await
                .with_context(|| {
                    format!(
                        "cannot publish the spec to {}; nothing was submitted",
                        dir.display()
                    )
                })?;
        }
        StoreUrl::S3(_) => {
            let gateway = crate::store::gateway(
                &store.scheduler(ctx),
                crate::store::identity(Role::Owner, wallet),
            );
            let stored = gateway
                .publish_spec(mcjs_spec::canonical_json(spec))
                .await
                .with_context(|| {
                    format!(
                        "cannot publish the spec through {}; nothing was submitted",
                        store.scheduler(ctx)
                    )
                })?;
            let expected = mcjs_runtime::spec_store::spec_path(&spec_hash(spec)).to_string();
            if stored.path != expected {
                bail!(
                    "the scheduler stored the spec as {} but its hash names {expected}; nothing was submitted",
                    stored.path
                );
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct Submitted {
    job: String,
    job_id: u64,
    owner: String,
    spec_hash: String,
    bond: String,
    signature: String,
}

impl fmt::Display for Submitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.job)?;
        writeln!(f, "  submitted as job id {} by {}", self.job_id, self.owner)?;
        writeln!(f, "  spec sha256 {}", self.spec_hash)?;
        writeln!(f, "  bond {} USDC locked", self.bond)?;
        write!(f, "  transaction {}", self.signature)
    }
}
