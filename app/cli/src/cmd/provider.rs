//! `mcjs provider`: a provider's stake.

use std::fmt;

use anyhow::{anyhow, bail};
use mcjs::state::Provider;
use mcjs_client::{ChainClient, ChainError, Pubkey, Signer, ix, pda};
use serde::Serialize;

use crate::chain::{Ctx, parse_pubkey, parse_usdc, require_funds, usdc};
use crate::{EXIT_OK, GlobalArgs};

#[derive(clap::Subcommand, Debug)]
pub enum ProviderCommand {
    /// Register the wallet as a provider, locking its first stake.
    Register {
        /// USDC staked, e.g. 200.
        #[arg(long, value_parser = parse_usdc)]
        stake: u64,
        /// Token account that receives payments; default: the wallet's USDC account.
        #[arg(long)]
        payout: Option<String>,
    },
    /// Add USDC to the stake.
    AddStake {
        #[arg(value_parser = parse_usdc)]
        amount: u64,
    },
    /// Withdraw stake: the first call requests it (starting the cooldown),
    /// a call after the cooldown withdraws it.
    Withdraw {
        /// USDC to request; default: the whole stake. Ignored once requested.
        #[arg(long, value_parser = parse_usdc)]
        amount: Option<u64>,
    },
    /// Show a provider (default: the wallet's).
    Show {
        /// A Provider account or its owner's wallet.
        provider: Option<String>,
    },
}

pub fn run(cmd: ProviderCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    let ctx = Ctx::resolve(global)?;
    crate::chain::runtime()?.block_on(run_async(cmd, global, ctx))
}

async fn run_async(cmd: ProviderCommand, global: &GlobalArgs, ctx: Ctx) -> anyhow::Result<u8> {
    let client = ctx.client();
    match cmd {
        ProviderCommand::Register { stake, payout } => {
            let wallet = ctx.wallet()?;
            let owner = wallet.pubkey();
            let deployment = client.deployment().await?;
            let token = ix::usdc_account(&owner, &deployment.usdc_mint);
            let payout = match payout {
                Some(p) => parse_pubkey(&p, "--payout")?,
                None => token,
            };
            if client.provider(&pda::provider(&owner)).await?.is_some() {
                bail!(
                    "the wallet {owner} is already a provider ({}); use `mcjs provider add-stake`",
                    pda::provider(&owner)
                );
            }
            require_funds(&client, &wallet, &token, stake).await?;
            let sig = client
                .send(
                    &[ix::register_provider(
                        &owner,
                        &token,
                        &payout,
                        &deployment.usdc_mint,
                        stake,
                    )],
                    &[&wallet],
                )
                .await?;
            show(
                &client,
                global,
                &pda::provider(&owner),
                "registered",
                Some(sig),
            )
            .await
        }
        ProviderCommand::AddStake { amount } => {
            let wallet = ctx.wallet()?;
            let owner = wallet.pubkey();
            own_provider(&client, &owner).await?;
            let deployment = client.deployment().await?;
            let token = ix::usdc_account(&owner, &deployment.usdc_mint);
            require_funds(&client, &wallet, &token, amount).await?;
            let sig = client
                .send(
                    &[ix::add_stake(&owner, &token, &deployment.usdc_mint, amount)],
                    &[&wallet],
                )
                .await?;
            show(
                &client,
                global,
                &pda::provider(&owner),
                "stake added",
                Some(sig),
            )
            .await
        }
        ProviderCommand::Withdraw { amount } => {
            let wallet = ctx.wallet()?;
            let owner = wallet.pubkey();
            let provider = own_provider(&client, &owner).await?;
            require_funds(&client, &wallet, &owner, 0).await?;
            let key = pda::provider(&owner);
            match provider.pending_withdrawal {
                None => {
                    let amount = amount.unwrap_or(provider.stake);
                    let sig = client
                        .send(&[ix::request_withdrawal(&owner, amount)], &[&wallet])
                        .await?;
                    show(&client, global, &key, "withdrawal requested", Some(sig)).await
                }
                Some(pending) => {
                    let (_, config) = client.config().await?;
                    let deployment = client.deployment().await?;
                    let destination = ix::usdc_account(&owner, &deployment.usdc_mint);
                    let result = client
                        .send(
                            &[ix::withdraw_stake(
                                &owner,
                                &destination,
                                &deployment.usdc_mint,
                            )],
                            &[&wallet],
                        )
                        .await;
                    match result {
                        Ok(sig) => show(&client, global, &key, "stake withdrawn", Some(sig)).await,
                        Err(ChainError::Program { name, .. }) if name == "CooldownNotElapsed" => {
                            let available = pending.requested_at
                                + i64::from(config.params.withdrawal_cooldown_secs);
                            bail!(
                                "the withdrawal of {} USDC requested at {} is available from {available} \
                                 (cooldown {} s); run this again then",
                                usdc(pending.amount),
                                pending.requested_at,
                                config.params.withdrawal_cooldown_secs
                            )
                        }
                        Err(ChainError::Program { name, .. }) if name == "SegmentsHeld" => {
                            let held = client.provider(&key).await?.map_or(0, |p| p.held_segments);
                            bail!(
                                "{held} verified job payments to this provider are still held for their \
                                 challenge windows ({} s after each assignment ended), and a check \
                                 may still slash the stake: run this again once they are released \
                                 (the scheduler releases each when it is due; `mcjs provider show` \
                                 counts them)",
                                config.params.challenge_window_secs
                            )
                        }
                        Err(e) => Err(e.into()),
                    }
                }
            }
        }
        ProviderCommand::Show { provider } => {
            let key = match provider {
                Some(text) => provider_key(&client, &parse_pubkey(&text, "provider")?).await?,
                None => pda::provider(&ctx.wallet()?.pubkey()),
            };
            show(&client, global, &key, "provider", None).await
        }
    }
}

/// A Provider account given either itself or its owner's wallet.
pub async fn provider_key(client: &ChainClient, key: &Pubkey) -> anyhow::Result<Pubkey> {
    if client.provider(key).await.ok().flatten().is_some() {
        return Ok(*key);
    }
    Ok(pda::provider(key))
}

async fn own_provider(client: &ChainClient, owner: &Pubkey) -> anyhow::Result<Provider> {
    client.provider(&pda::provider(owner)).await?.ok_or_else(|| {
        anyhow!("the wallet {owner} is not a registered provider: run `mcjs provider register --stake N` first")
    })
}

async fn show(
    client: &ChainClient,
    global: &GlobalArgs,
    key: &Pubkey,
    action: &'static str,
    signature: Option<mcjs_client::Signature>,
) -> anyhow::Result<u8> {
    let provider = client
        .provider(key)
        .await?
        .ok_or_else(|| anyhow!("no provider at {key} on {}", client.url()))?;
    global.output.print(&ProviderView {
        action,
        signature: signature.map(|s| s.to_string()),
        provider: key.to_string(),
        owner: provider.owner.to_string(),
        payout: provider.payout.to_string(),
        stake: usdc(provider.stake),
        pending_withdrawal: provider
            .pending_withdrawal
            .map(|w| format!("{} USDC requested at {}", usdc(w.amount), w.requested_at)),
        nodes: provider.node_count,
        active_assignments: provider.active_assignments,
        held_segments: provider.held_segments,
        jobs_completed: provider.jobs_completed,
        failures: provider.failures,
        slashed_total: usdc(provider.slashed_total),
    })?;
    Ok(EXIT_OK)
}

#[derive(Serialize)]
struct ProviderView {
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    provider: String,
    owner: String,
    payout: String,
    stake: String,
    pending_withdrawal: Option<String>,
    nodes: u32,
    active_assignments: u32,
    /// Verified jobs' payments to this provider still held for their
    /// challenge window: a check may still slash the stake, so none of it
    /// can be withdrawn before they are released.
    held_segments: u32,
    jobs_completed: u64,
    failures: u64,
    slashed_total: String,
}

impl fmt::Display for ProviderView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.action, self.provider)?;
        if let Some(sig) = &self.signature {
            write!(f, " (transaction {sig})")?;
        }
        writeln!(f)?;
        writeln!(f, "  owner        {}", self.owner)?;
        writeln!(f, "  payout       {}", self.payout)?;
        writeln!(f, "  stake        {} USDC", self.stake)?;
        if let Some(w) = &self.pending_withdrawal {
            writeln!(f, "  withdrawal   {w}")?;
        }
        writeln!(
            f,
            "  nodes        {} ({} jobs active)",
            self.nodes, self.active_assignments
        )?;
        if self.held_segments > 0 {
            writeln!(
                f,
                "  held         {} verified payments wait for their challenge windows; the stake cannot be withdrawn before they are released",
                self.held_segments
            )?;
        }
        write!(
            f,
            "  record       {} completed, {} failures, {} USDC slashed",
            self.jobs_completed, self.failures, self.slashed_total
        )
    }
}
