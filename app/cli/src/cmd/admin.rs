//! `mcjs admin`: the program's Config.

use std::fmt;

use anyhow::bail;
use mcjs::instructions::{InitializeArgs, SetSchedulersArgs, UpdateConfigArgs};
use mcjs::state::{Config, ConfigParams, SchedulerLease};
use mcjs_client::{ChainClient, ChainError, Signer, ix};
use serde::Serialize;

use crate::chain::{Ctx, parse_pubkey, parse_usdc, require_funds, usdc};
use crate::{EXIT_OK, GlobalArgs};

#[derive(clap::Args, Debug, Default)]
pub struct ParamArgs {
    /// MCJS commission on payments to providers, in basis points.
    #[arg(long)]
    pub commission_bps: Option<u16>,
    /// USDC slashed from a provider's stake per infrastructure failure.
    #[arg(long, value_parser = parse_usdc)]
    pub slash: Option<u64>,
    /// USDC a provider must stake to register nodes.
    #[arg(long, value_parser = parse_usdc)]
    pub min_stake: Option<u64>,
    /// Checkpoint intervals without progress before anyone may report a job.
    #[arg(long)]
    pub liveness_factor: Option<u8>,
    /// Seconds between a stake-withdrawal request and the withdrawal.
    #[arg(long)]
    pub withdrawal_cooldown_secs: Option<u32>,
    /// Seconds a verified job's segment payment is held (and its latest
    /// interval may be drawn for verification); 0 turns verification off.
    #[arg(long)]
    pub challenge_window_secs: Option<u32>,
    /// Share of a verified interval's commission paid to its verifier, in basis points.
    #[arg(long)]
    pub verification_fee_bps: Option<u16>,
    /// Seconds a verified job's attestations are kept apart (the scheduler's
    /// time to draw the latest interval).
    #[arg(long)]
    pub draw_secs: Option<u32>,
    /// Send jobs that name a GPU model or a memory floor only to nodes whose
    /// profile a hardware challenge proved (true or false).
    #[arg(long)]
    pub require_proven_hardware: Option<bool>,
}

impl ParamArgs {
    fn apply(&self, mut p: ConfigParams) -> ConfigParams {
        if let Some(v) = self.commission_bps {
            p.commission_bps = v;
        }
        if let Some(v) = self.slash {
            p.slash_amount = v;
        }
        if let Some(v) = self.min_stake {
            p.min_provider_stake = v;
        }
        if let Some(v) = self.liveness_factor {
            p.liveness_factor = v;
        }
        if let Some(v) = self.withdrawal_cooldown_secs {
            p.withdrawal_cooldown_secs = v;
        }
        if let Some(v) = self.challenge_window_secs {
            p.challenge_window_secs = v;
        }
        if let Some(v) = self.verification_fee_bps {
            p.verification_fee_bps = v;
        }
        if let Some(v) = self.draw_secs {
            p.draw_secs = v;
        }
        if let Some(v) = self.require_proven_hardware {
            p.require_proven_hardware = v;
        }
        p
    }

    fn any(&self) -> bool {
        self.commission_bps.is_some()
            || self.slash.is_some()
            || self.min_stake.is_some()
            || self.liveness_factor.is_some()
            || self.withdrawal_cooldown_secs.is_some()
            || self.challenge_window_secs.is_some()
            || self.verification_fee_bps.is_some()
            || self.draw_secs.is_some()
            || self.require_proven_hardware.is_some()
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum AdminCommand {
    /// Create the program's Config (once per deployment); the wallet becomes its admin.
    Init {
        /// The USDC mint.
        #[arg(long)]
        usdc_mint: String,
        /// Token account of that mint that receives the commission.
        #[arg(long)]
        treasury: String,
        /// The scheduler authority's key.
        #[arg(long)]
        scheduler: String,
        /// Unset parameters take the defaults: 500 bps, 5 USDC slash, 100 USDC
        /// minimum stake, liveness factor 3, 86400 s cooldown.
        #[command(flatten)]
        params: ParamArgs,
    },
    /// Change the Config (admin only); unset fields keep their value.
    Set {
        #[arg(long)]
        admin: Option<String>,
        #[arg(long)]
        scheduler: Option<String>,
        #[arg(long)]
        treasury: Option<String>,
        /// Stop new submissions, assignments and node registrations.
        #[arg(long, conflicts_with = "unpause")]
        pause: bool,
        #[arg(long)]
        unpause: bool,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// Name the standby schedulers (admin only): up to four keys besides
    /// the Config's scheduler that may take the scheduler lease when its
    /// holder stops renewing it. Each runs `mcjs scheduler` with its own
    /// keypair; the one holding the lease acts, the others follow.
    SetSchedulers {
        /// A standby's key; repeat for several; none clears the list.
        #[arg(long = "standby", value_name = "PUBKEY")]
        standbys: Vec<String>,
        /// How many slots a renewal of the lease lasts (a standby takes
        /// over this long after the holder's last renewal).
        #[arg(long, default_value_t = mcjs::state::DEFAULT_LEASE_SLOTS)]
        lease_slots: u64,
    },
    /// Deploy the program's SBF ELF (scripts/build-sbf.sh) by loader
    /// transactions: write a buffer, deploy at the program keypair's
    /// address, hand the upgrade authority on. The wallet pays; `initialize`
    /// then accepts only the upgrade authority.
    Deploy {
        /// The program's ELF.
        #[arg(long, value_name = "SO")]
        so: std::path::PathBuf,
        /// The keypair of the address the program declares (declare_id!).
        #[arg(long, value_name = "KEYPAIR")]
        program_keypair: std::path::PathBuf,
        /// Who may upgrade the program (and initialise it); default: the wallet.
        #[arg(long, value_name = "PUBKEY")]
        upgrade_authority: Option<String>,
        /// Replace the code of a deployed program (the wallet must be its
        /// upgrade authority).
        #[arg(long)]
        upgrade: bool,
    },
    /// Publish the program's Anchor IDL on chain, in Anchor's IDL account
    /// (where anchorpy, Anchor's `legacy-idl fetch` and explorers read it);
    /// the upgrade authority only. Sends nothing when the chain holds it.
    PublishIdl {
        /// The IDL's JSON; default: the one this build of mcjs carries
        /// (idl/mcjs.json).
        #[arg(long, value_name = "JSON")]
        idl: Option<std::path::PathBuf>,
    },
    /// Show the Config and the insurance pool's balance.
    Show,
    /// Pay the owner of a job that failed for good through its providers'
    /// fault from the insurance pool (admin only), at most what the owner
    /// paid for the job, to the account its bond came from.
    Compensate {
        /// The Job account.
        job: String,
        /// USDC, e.g. 2.5.
        #[arg(long, value_parser = crate::chain::parse_usdc)]
        amount: u64,
    },
}

fn default_params() -> ConfigParams {
    ConfigParams {
        commission_bps: 500,
        slash_amount: 5_000_000,
        min_provider_stake: 100_000_000,
        liveness_factor: 3,
        withdrawal_cooldown_secs: 86_400,
        challenge_window_secs: 3_600,
        verification_fee_bps: 2_000,
        draw_secs: 30,
        require_proven_hardware: false,
    }
}

pub fn run(cmd: AdminCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    let ctx = Ctx::resolve(global)?;
    crate::chain::runtime()?.block_on(async {
        let client = ctx.client();
        match cmd {
            AdminCommand::Init {
                usdc_mint,
                treasury,
                scheduler,
                params,
            } => {
                let wallet = ctx.wallet()?;
                client.check_program().await?;
                match client.config().await {
                    Ok(_) => bail!("the program on {} is already initialised; use `mcjs admin set`", client.url()),
                    Err(ChainError::NotInitialised { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
                require_funds(&client, &wallet, &wallet.pubkey(), 0).await?;
                let sig = client
                    .send(
                        &[ix::initialize(
                            &wallet.pubkey(),
                            &parse_pubkey(&usdc_mint, "--usdc-mint")?,
                            &parse_pubkey(&treasury, "--treasury")?,
                            InitializeArgs {
                                scheduler: parse_pubkey(&scheduler, "--scheduler")?,
                                params: params.apply(default_params()),
                            },
                        )],
                        &[&wallet],
                    )
                    .await?;
                show(&client, global, "initialised", Some(sig)).await
            }
            AdminCommand::Set {
                admin,
                scheduler,
                treasury,
                pause,
                unpause,
                params,
            } => {
                let wallet = ctx.wallet()?;
                let (_, config) = client.config().await?;
                if config.admin != wallet.pubkey() {
                    bail!("the wallet {} is not the admin ({}): sign with the admin's keypair (-k)", wallet.pubkey(), config.admin);
                }
                let args = UpdateConfigArgs {
                    admin: admin.map(|a| parse_pubkey(&a, "--admin")).transpose()?,
                    scheduler: scheduler.map(|s| parse_pubkey(&s, "--scheduler")).transpose()?,
                    params: params.any().then(|| params.apply(config.params)),
                    paused: if pause { Some(true) } else if unpause { Some(false) } else { None },
                };
                let treasury = treasury.map(|t| parse_pubkey(&t, "--treasury")).transpose()?;
                if args.admin.is_none() && args.scheduler.is_none() && args.params.is_none() && args.paused.is_none() && treasury.is_none() {
                    bail!("nothing to change: give at least one of --admin, --scheduler, --treasury, --pause, --unpause or a parameter");
                }
                let sig = client
                    .send(&[ix::update_config(&wallet.pubkey(), treasury, args)], &[&wallet])
                    .await?;
                show(&client, global, "updated", Some(sig)).await
            }
            AdminCommand::SetSchedulers { standbys, lease_slots } => {
                let wallet = ctx.wallet()?;
                let (_, config) = client.config().await?;
                if config.admin != wallet.pubkey() {
                    bail!("the wallet {} is not the admin ({}): sign with the admin's keypair (-k)", wallet.pubkey(), config.admin);
                }
                let standbys = standbys
                    .iter()
                    .map(|s| parse_pubkey(s, "--standby"))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                if standbys.len() > mcjs::state::MAX_STANDBYS {
                    bail!("at most {} standbys (got {})", mcjs::state::MAX_STANDBYS, standbys.len());
                }
                if standbys.contains(&config.scheduler) {
                    bail!("{} is the Config's scheduler, a member already: name only the other schedulers", config.scheduler);
                }
                if lease_slots == 0 {
                    bail!("--lease-slots must be at least 1");
                }
                let sig = client
                    .send(
                        &[ix::set_schedulers(&wallet.pubkey(), SetSchedulersArgs { standbys, lease_slots })],
                        &[&wallet],
                    )
                    .await?;
                show(&client, global, "schedulers set", Some(sig)).await
            }
            AdminCommand::Deploy { so, program_keypair, upgrade_authority, upgrade } => {
                let wallet = ctx.wallet()?;
                let view = crate::cmd::deploy::deploy(
                    &client,
                    &wallet,
                    &so,
                    &program_keypair,
                    upgrade_authority.as_deref(),
                    upgrade,
                )
                .await?;
                global.output.print(&view)?;
                Ok(EXIT_OK)
            }
            AdminCommand::PublishIdl { idl } => {
                let wallet = ctx.wallet()?;
                let view = crate::cmd::deploy::publish_idl(&client, &wallet, idl.as_deref()).await?;
                global.output.print(&view)?;
                Ok(EXIT_OK)
            }
            AdminCommand::Show => show(&client, global, "config", None).await,
            AdminCommand::Compensate { job, amount } => {
                let wallet = ctx.wallet()?;
                let job = parse_pubkey(&job, "job")?;
                let account = client
                    .job(&job)
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("no job at {job} on {}", client.url()))?;
                let mint = client.config().await?.1.usdc_mint;
                let sig = client
                    .send(
                        &[ix::compensate_owner(
                            &wallet.pubkey(),
                            &job,
                            &account.refund_account,
                            &mint,
                            amount,
                        )],
                        &[&wallet],
                    )
                    .await?;
                show(&client, global, "compensated", Some(sig)).await
            }
        }
    })
}

async fn show(
    client: &ChainClient,
    global: &GlobalArgs,
    action: &'static str,
    signature: Option<mcjs_client::Signature>,
) -> anyhow::Result<u8> {
    let (key, config) = client.config().await?;
    let pool = client.token_balance(&config.insurance_pool).await?;
    let lease = client.lease_view().await.ok();
    let mut view = ConfigView::new(action, signature, key, &config, pool);
    view.lease = lease.map(|l| LeaseShown::new(&l.lease, l.slot));
    global.output.print(&view)?;
    Ok(EXIT_OK)
}

#[derive(Serialize)]
struct ConfigView {
    action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
    config: String,
    admin: String,
    scheduler: String,
    usdc_mint: String,
    usdc_decimals: u8,
    treasury: String,
    insurance_pool: String,
    /// What the pool holds: every slash so far, less compensations paid.
    insurance_pool_balance: String,
    commission_bps: u16,
    slash_amount: String,
    min_provider_stake: String,
    liveness_factor: u8,
    withdrawal_cooldown_secs: u32,
    challenge_window_secs: u32,
    verification_fee_bps: u16,
    draw_secs: u32,
    require_proven_hardware: bool,
    paused: bool,
    /// The scheduler lease: who acts now.
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<LeaseShown>,
}

#[derive(Serialize)]
struct LeaseShown {
    holder: String,
    term: u64,
    expires_slot: u64,
    /// The chain's slot when it was read.
    slot: u64,
    lease_slots: u64,
    standbys: Vec<String>,
}

impl LeaseShown {
    fn new(lease: &SchedulerLease, slot: u64) -> Self {
        Self {
            holder: lease.holder.to_string(),
            term: lease.term,
            expires_slot: lease.expires_slot,
            slot,
            lease_slots: lease.lease_slots,
            standbys: lease
                .standbys
                .iter()
                .filter(|k| **k != mcjs_client::Pubkey::default())
                .map(|k| k.to_string())
                .collect(),
        }
    }
}

impl ConfigView {
    fn new(
        action: &'static str,
        signature: Option<mcjs_client::Signature>,
        key: mcjs_client::Pubkey,
        c: &Config,
        pool_balance: u64,
    ) -> Self {
        Self {
            action,
            signature: signature.map(|s| s.to_string()),
            config: key.to_string(),
            admin: c.admin.to_string(),
            scheduler: c.scheduler.to_string(),
            usdc_mint: c.usdc_mint.to_string(),
            usdc_decimals: c.usdc_decimals,
            treasury: c.treasury.to_string(),
            insurance_pool: c.insurance_pool.to_string(),
            insurance_pool_balance: usdc(pool_balance),
            commission_bps: c.params.commission_bps,
            slash_amount: usdc(c.params.slash_amount),
            min_provider_stake: usdc(c.params.min_provider_stake),
            liveness_factor: c.params.liveness_factor,
            withdrawal_cooldown_secs: c.params.withdrawal_cooldown_secs,
            challenge_window_secs: c.params.challenge_window_secs,
            verification_fee_bps: c.params.verification_fee_bps,
            draw_secs: c.params.draw_secs,
            require_proven_hardware: c.params.require_proven_hardware,
            paused: c.paused,
            lease: None,
        }
    }
}

impl fmt::Display for ConfigView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.action, self.config)?;
        if let Some(sig) = &self.signature {
            write!(f, " (transaction {sig})")?;
        }
        writeln!(f)?;
        writeln!(f, "  admin        {}", self.admin)?;
        writeln!(f, "  scheduler    {}", self.scheduler)?;
        writeln!(
            f,
            "  USDC mint    {} ({} decimals)",
            self.usdc_mint, self.usdc_decimals
        )?;
        writeln!(f, "  treasury     {}", self.treasury)?;
        writeln!(
            f,
            "  insurance    {} ({} USDC; receives every slash, paid out only by `mcjs admin compensate`)",
            self.insurance_pool, self.insurance_pool_balance
        )?;
        writeln!(f, "  commission   {} bps", self.commission_bps)?;
        writeln!(
            f,
            "  slash        {} USDC per infrastructure failure, into the insurance pool",
            self.slash_amount
        )?;
        writeln!(f, "  min stake    {} USDC", self.min_provider_stake)?;
        writeln!(
            f,
            "  liveness     {} checkpoint intervals",
            self.liveness_factor
        )?;
        writeln!(f, "  cooldown     {} s", self.withdrawal_cooldown_secs)?;
        writeln!(
            f,
            "  challenge    {} s (verified jobs' payments held; 0: verification off)",
            self.challenge_window_secs
        )?;
        writeln!(
            f,
            "  verify fee   {} bps of a verified interval's commission",
            self.verification_fee_bps
        )?;
        writeln!(
            f,
            "  draw gap     {} s between a verified job's attestations",
            self.draw_secs
        )?;
        writeln!(
            f,
            "  hardware     {}",
            if self.require_proven_hardware {
                "proven by a challenge, for jobs that name a model or memory"
            } else {
                "as reported (challenges recorded, not required)"
            }
        )?;
        write!(f, "  paused       {}", self.paused)?;
        if let Some(l) = &self.lease {
            let standbys = if l.standbys.is_empty() {
                "no standbys".to_string()
            } else {
                format!("standbys {}", l.standbys.join(", "))
            };
            write!(
                f,
                "\n  lease        held by {} in term {}, to slot {} (now {}; {} slots a renewal; {standbys})",
                l.holder, l.term, l.expires_slot, l.slot, l.lease_slots
            )?;
        }
        Ok(())
    }
}
