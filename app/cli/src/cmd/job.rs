//! `mcjs job`: what a job owner does, and what anyone may do about a stalled job.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use futures_util::StreamExt;
use mcjs::state::{FailureCause, Job, JobState, PauseReason};
use mcjs_client::ix::JobAccounts;
use mcjs_client::{ChainClient, JobFilter, Pubkey, Signer, decode, ix, pda};
use mcjs_spec::{JobSpec, spec_hash};
use serde::Serialize;

use crate::chain::{Ctx, now_unix, parse_pubkey, parse_usdc, require_funds, usdc};
use crate::{EXIT_ERROR, EXIT_FALSE, EXIT_OK, GlobalArgs};

#[derive(clap::Subcommand, Debug)]
pub enum JobCommand {
    /// Validate a job spec, hash it, lock the bond and submit the job; prints its address.
    Submit {
        /// Job specification (JSON).
        spec: PathBuf,
        /// USDC locked as the job's bond, e.g. 100 or 12.5.
        #[arg(long, value_parser = parse_usdc)]
        bond: u64,
        /// Job id (part of the job's address); default: the wallet's next (ids only grow).
        #[arg(long)]
        job_id: Option<u64>,
        /// Lock the bond without publishing the spec anywhere (a chain run
        /// by hand, with no store): no agent can run the job until the spec
        /// is published.
        #[arg(long)]
        chain_only: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Upload a data file into your own space of the deployment's S3 store
    /// (users/<wallet>/data/<name>); prints the s3:// URI and sha256 to
    /// declare as a spec's data input. Only the nodes running your jobs can
    /// read it, through the scheduler's gateway.
    Upload {
        file: PathBuf,
        /// The name in the store (default: the file's name).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Download a job's output into a directory, every file verified
    /// against the output hash the chain attests; a file that does not
    /// match is refused by name and nothing is written.
    Output {
        job: String,
        /// Where to put it: a new directory (default `<job>-output`), or an
        /// `s3://bucket/prefix` of your own, written with your own
        /// credentials (AWS_* in your environment) after verification. By
        /// default the spec's s3:// `output.destination`, if it has one.
        #[arg(long)]
        to: Option<String>,
        /// The job's last attested checkpoint instead, verified against its
        /// attested hash (for specs with `output.return_partial`; works
        /// before the job ends and after it failed).
        #[arg(long)]
        partial: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show a job.
    Status { job: String },
    /// List jobs, optionally of one owner ("me" for the wallet) or in one state.
    List {
        #[arg(long)]
        owner: Option<String>,
        #[arg(long, value_enum)]
        state: Option<StateArg>,
    },
    /// Follow a job live until it ends: exit 0 when completed, 1 when it ended otherwise.
    Watch { job: String },
    /// Cancel a job that is not on a node; the whole bond comes back.
    Cancel { job: String },
    /// Pause a job on a node; its provider is paid for attested progress.
    Pause { job: String },
    /// Put a paused job back in the queue.
    Resume { job: String },
    /// Add USDC to a job's bond.
    TopUp {
        job: String,
        #[arg(long, value_parser = parse_usdc)]
        amount: u64,
    },
    /// Report a job whose node stopped attesting; allowed to anyone once it has stalled.
    ReportFailure {
        job: String,
        #[arg(long, value_enum, default_value_t = CauseArg::NodeLost)]
        cause: CauseArg,
    },
}

/// Where the deployment's store is.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StoreArgs {
    /// The deployment's store: a directory (`file:///dir` or a path), or an
    /// `s3://` URL reached through the scheduler's gateway, signed by your
    /// wallet. Default: `store_url` from the config file, else what the
    /// scheduler publishes.
    #[arg(long)]
    pub store: Option<mcjs_protocol::store::StoreUrl>,
    /// The scheduler's base URL. Default: `scheduler_url` from the config
    /// file, else http://127.0.0.1:7400.
    #[arg(long)]
    pub scheduler: Option<String>,
}

impl StoreArgs {
    pub fn scheduler(&self, ctx: &Ctx) -> String {
        self.scheduler
            .clone()
            .or_else(|| ctx.scheduler_url.clone())
            .unwrap_or_else(|| crate::store::DEFAULT_SCHEDULER_URL.to_string())
    }

    /// Whether the user said where the store is (a flag or the config file).
    fn given(&self, ctx: &Ctx) -> bool {
        self.store.is_some()
            || ctx.store_url.is_some()
            || self.scheduler.is_some()
            || ctx.scheduler_url.is_some()
    }

    pub async fn resolve(&self, ctx: &Ctx) -> anyhow::Result<mcjs_protocol::store::StoreUrl> {
        let url = crate::store::resolve(
            self.store.clone(),
            ctx.store_url.as_deref(),
            &self.scheduler(ctx),
        )
        .await?;
        crate::cmd::scheduler::absolute(url)
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateArg {
    Pending,
    Assigned,
    Running,
    Paused,
    Recovering,
    Completed,
    Failed,
    Cancelled,
    Expired,
}

impl StateArg {
    fn state(self) -> JobState {
        match self {
            StateArg::Pending => JobState::Pending { since: 0 },
            StateArg::Assigned => JobState::Assigned { since: 0 },
            StateArg::Running => JobState::Running { since: 0 },
            StateArg::Paused => JobState::Paused {
                since: 0,
                reason: PauseReason::Owner,
            },
            StateArg::Recovering => JobState::Recovering { since: 0 },
            StateArg::Completed => JobState::Completed { at: 0 },
            StateArg::Failed => JobState::Failed { at: 0 },
            StateArg::Cancelled => JobState::Cancelled { at: 0 },
            StateArg::Expired => JobState::Expired { at: 0 },
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseArg {
    NodeLost,
    ContainerDied,
    CheckpointOverdue,
}

impl From<CauseArg> for FailureCause {
    fn from(c: CauseArg) -> Self {
        match c {
            CauseArg::NodeLost => FailureCause::NodeLost,
            CauseArg::ContainerDied => FailureCause::ContainerDied,
            CauseArg::CheckpointOverdue => FailureCause::CheckpointOverdue,
        }
    }
}

pub fn run(cmd: JobCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    let ctx = Ctx::resolve(global)?;
    crate::chain::runtime()?.block_on(run_async(cmd, global, ctx))
}

async fn run_async(cmd: JobCommand, global: &GlobalArgs, ctx: Ctx) -> anyhow::Result<u8> {
    let client = ctx.client();
    match cmd {
        JobCommand::Submit {
            spec,
            bond,
            job_id,
            chain_only,
            store,
        } => {
            let publish = (!chain_only).then_some(store);
            submit(&ctx, &client, global, spec, bond, job_id, publish).await
        }
        JobCommand::Upload { file, name, store } => {
            crate::cmd::job_output::upload(&ctx, global, &file, name, &store).await
        }
        JobCommand::Output {
            job,
            to,
            partial,
            store,
        } => crate::cmd::job_output::run(&ctx, &client, global, &job, to, partial, &store).await,
        JobCommand::Status { job } => {
            let key = parse_pubkey(&job, "job")?;
            let job = fetch_job(&client, &key).await?;
            global
                .output
                .print(&JobView::new(key, &job, chain_now(&client).await))?;
            Ok(EXIT_OK)
        }
        JobCommand::List { owner, state } => {
            let filter = match (owner, state) {
                (Some(owner), _) => {
                    let owner = if owner == "me" {
                        ctx.wallet()?.pubkey()
                    } else {
                        parse_pubkey(&owner, "owner")?
                    };
                    JobFilter::Owner(owner)
                }
                (None, Some(state)) => JobFilter::State(state.state()),
                (None, None) => JobFilter::All,
            };
            client.config().await?;
            let now = chain_now(&client).await;
            let jobs: Vec<JobView> = client
                .jobs(filter)
                .await?
                .into_iter()
                .filter(|(_, job)| state.is_none_or(|s| job.state.name() == s.state().name()))
                .map(|(key, job)| JobView::new(key, &job, now))
                .collect();
            global.output.print(&JobList { jobs })?;
            Ok(EXIT_OK)
        }
        JobCommand::Watch { job } => watch(&client, global, parse_pubkey(&job, "job")?).await,
        JobCommand::Cancel { job } => {
            let key = parse_pubkey(&job, "job")?;
            let wallet = ctx.wallet()?;
            let job = owned_job(&client, &key, &wallet.pubkey()).await?;
            let deployment = client.deployment().await?;
            let owner_token = ix::usdc_account(&job.owner, &deployment.usdc_mint);
            require_funds(&client, &wallet, &owner_token, 0).await?;
            let sig = client
                .send(
                    &[ix::cancel_job(
                        &wallet.pubkey(),
                        &key,
                        &owner_token,
                        &deployment.usdc_mint,
                    )],
                    &[&wallet],
                )
                .await?;
            done(&client, global, key, "cancelled", sig).await
        }
        JobCommand::Pause { job } => {
            let key = parse_pubkey(&job, "job")?;
            let wallet = ctx.wallet()?;
            let job = owned_job(&client, &key, &wallet.pubkey()).await?;
            let Some(on) = on_node(&client, key, &job).await? else {
                bail!(
                    "job {key} is {} and not on a node: only an assigned or running job can be paused",
                    job.state.name()
                );
            };
            let sig = client
                .send(&[on.pause(&wallet.pubkey())], &[&wallet])
                .await?;
            done(&client, global, key, "paused", sig).await
        }
        JobCommand::Resume { job } => {
            let key = parse_pubkey(&job, "job")?;
            let wallet = ctx.wallet()?;
            owned_job(&client, &key, &wallet.pubkey()).await?;
            let sig = client
                .send(&[ix::resume_job(&wallet.pubkey(), &key)], &[&wallet])
                .await?;
            done(&client, global, key, "resumed", sig).await
        }
        JobCommand::TopUp { job, amount } => {
            let key = parse_pubkey(&job, "job")?;
            let wallet = ctx.wallet()?;
            owned_job(&client, &key, &wallet.pubkey()).await?;
            let deployment = client.deployment().await?;
            let token = ix::usdc_account(&wallet.pubkey(), &deployment.usdc_mint);
            require_funds(&client, &wallet, &token, amount).await?;
            let sig = client
                .send(
                    &[ix::top_up(
                        &wallet.pubkey(),
                        &key,
                        &token,
                        &deployment.usdc_mint,
                        amount,
                    )],
                    &[&wallet],
                )
                .await?;
            done(&client, global, key, "topped up", sig).await
        }
        JobCommand::ReportFailure { job, cause } => {
            let key = parse_pubkey(&job, "job")?;
            let wallet = ctx.wallet()?;
            let job = fetch_job(&client, &key).await?;
            let Some(on) = on_node(&client, key, &job).await? else {
                bail!(
                    "job {key} is {} and not on a node: there is no assignment to report",
                    job.state.name()
                );
            };
            require_funds(&client, &wallet, &on.refund, 0).await?;
            let sig = client
                .send(
                    &[on.report_failure(&wallet.pubkey(), cause.into())],
                    &[&wallet],
                )
                .await?;
            done(&client, global, key, "failure reported", sig).await
        }
    }
}

async fn submit(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    spec_path: PathBuf,
    bond: u64,
    job_id: Option<u64>,
    publish: Option<StoreArgs>,
) -> anyhow::Result<u8> {
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
    Ok(EXIT_OK)
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

/// The chain's clock, which deadlines are judged by; the local clock if unreadable.
async fn chain_now(client: &ChainClient) -> i64 {
    client.chain_time().await.unwrap_or_else(|_| now_unix())
}

async fn fetch_job(client: &ChainClient, key: &Pubkey) -> anyhow::Result<Job> {
    match client.job(key).await {
        Ok(Some(job)) => Ok(job),
        Ok(None) => {
            client.check_program().await?;
            bail!(
                "no job at {key} on {}: check the address (`mcjs job list --owner me` lists yours)",
                client.url()
            )
        }
        Err(mcjs_client::ChainError::Decode { .. }) => {
            bail!("{key} is not an MCJS job account: check the address")
        }
        Err(e) => Err(e.into()),
    }
}

async fn owned_job(client: &ChainClient, key: &Pubkey, wallet: &Pubkey) -> anyhow::Result<Job> {
    let job = fetch_job(client, key).await?;
    if job.owner != *wallet {
        bail!(
            "job {key} belongs to {}, not to the wallet {wallet}: sign with the owner's keypair (-k)",
            job.owner
        );
    }
    Ok(job)
}

/// The accounts of the job's current assignment (with its provider's
/// payout and a verified job's Segment); `None` when it is on no node.
async fn on_node(
    client: &ChainClient,
    key: Pubkey,
    job: &mcjs::state::Job,
) -> anyhow::Result<Option<JobAccounts>> {
    let Some(provider) = job.provider else {
        return Ok(None);
    };
    let payout = client
        .provider(&provider)
        .await?
        .ok_or_else(|| anyhow!("the job's provider account {provider} is missing"))?
        .payout;
    let deployment = client.deployment().await?;
    Ok(JobAccounts::on_node(key, job, payout, deployment))
}

async fn done(
    client: &ChainClient,
    global: &GlobalArgs,
    key: Pubkey,
    action: &'static str,
    signature: mcjs_client::Signature,
) -> anyhow::Result<u8> {
    let job = client.job(&key).await?;
    global.output.print(&Done {
        action,
        signature: signature.to_string(),
        job: match job {
            Some(j) => Some(JobView::new(key, &j, chain_now(client).await)),
            None => None,
        },
    })?;
    Ok(EXIT_OK)
}

async fn watch(client: &ChainClient, global: &GlobalArgs, key: Pubkey) -> anyhow::Result<u8> {
    let first = fetch_job(client, &key).await?;
    let people = !global.output.is_json();
    let bar = people.then(|| {
        let bar = indicatif::ProgressBar::new(u64::from(first.terms.max_duration_secs).max(1));
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix:>10} [{bar:30}] {pos}/{len} s billed  {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        bar
    });
    let mut updates = Box::pin(client.watch_account(key));
    let mut last_json = String::new();
    while let Some(update) = updates.next().await {
        let account = update?;
        let Some(account) = account else {
            if let Some(bar) = &bar {
                bar.finish_with_message("the job account was closed");
            } else {
                println!(
                    "{}",
                    serde_json::json!({ "job": key.to_string(), "closed": true })
                );
            }
            return Ok(EXIT_OK);
        };
        let job =
            decode::job(&account.data).with_context(|| format!("{key} is no longer a job"))?;
        let view = JobView::new(key, &job, chain_now(client).await);
        match &bar {
            Some(bar) => {
                bar.set_prefix(view.state.to_string());
                bar.set_position(job.billed_secs);
                bar.set_message(view.progress_line());
            }
            None => {
                let line = serde_json::to_string(&view)?;
                if line != last_json {
                    println!("{line}");
                    last_json = line;
                }
            }
        }
        if job.state.is_terminal() {
            if let Some(bar) = &bar {
                bar.finish();
                println!("{view}");
            }
            return Ok(if matches!(job.state, JobState::Completed { .. }) {
                EXIT_OK
            } else {
                EXIT_FALSE
            });
        }
    }
    Ok(EXIT_ERROR)
}

/// A job as people and scripts read it.
#[derive(Serialize)]
pub struct JobView {
    pub job: String,
    pub job_id: u64,
    pub owner: String,
    pub state: &'static str,
    pub state_since: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<&'static str>,
    pub spec_hash: String,
    pub node: Option<String>,
    pub provider: Option<String>,
    pub generation: u32,
    pub bond: String,
    pub paid: String,
    pub accrued: String,
    pub bond_used_percent: f64,
    pub rate_per_hour: String,
    pub checkpoints: u32,
    pub last_checkpoint: Option<CheckpointView>,
    pub checkpoint_chain: String,
    pub billed_secs: u64,
    pub max_duration_secs: u32,
    pub checkpoint_interval_secs: u32,
    pub deadline: Option<i64>,
    pub secs_to_deadline: Option<i64>,
    pub restarts_used: u8,
    pub restart_budget: u8,
    pub output_hash: Option<String>,
    pub submitted_at: i64,
}

#[derive(Serialize)]
pub struct CheckpointView {
    pub epoch: u32,
    pub step: u64,
    pub hash: String,
    pub generation: u32,
    pub time: i64,
}

fn state_since(state: &JobState) -> i64 {
    match *state {
        JobState::Pending { since }
        | JobState::Assigned { since }
        | JobState::Running { since }
        | JobState::Paused { since, .. }
        | JobState::Recovering { since } => since,
        JobState::Completed { at }
        | JobState::Failed { at }
        | JobState::Cancelled { at }
        | JobState::Expired { at } => at,
    }
}

impl JobView {
    pub fn new(key: Pubkey, job: &Job, now: i64) -> Self {
        let total = job.bond + job.paid;
        let used = job.paid + job.accrued;
        Self {
            job: key.to_string(),
            job_id: job.job_id,
            owner: job.owner.to_string(),
            state: job.state.name(),
            state_since: state_since(&job.state),
            pause_reason: match job.state {
                JobState::Paused {
                    reason: PauseReason::Owner,
                    ..
                } => Some("owner"),
                JobState::Paused {
                    reason: PauseReason::InsufficientBond,
                    ..
                } => Some("bond exhausted"),
                _ => None,
            },
            spec_hash: hex::encode(job.spec_hash),
            node: job.node.map(|k| k.to_string()),
            provider: job.provider.map(|k| k.to_string()),
            generation: job.generation,
            bond: usdc(job.bond),
            paid: usdc(job.paid),
            accrued: usdc(job.accrued),
            bond_used_percent: if total == 0 {
                0.0
            } else {
                (used as f64 * 1000.0 / total as f64).round() / 10.0
            },
            rate_per_hour: usdc(job.rate_per_hour),
            checkpoints: job.checkpoint_count,
            last_checkpoint: job.last_checkpoint.map(|c| CheckpointView {
                epoch: c.epoch,
                step: c.step,
                hash: hex::encode(c.hash),
                generation: c.generation,
                time: c.time,
            }),
            checkpoint_chain: hex::encode(job.checkpoint_chain),
            billed_secs: job.billed_secs,
            max_duration_secs: job.terms.max_duration_secs,
            checkpoint_interval_secs: job.terms.checkpoint_interval_secs,
            deadline: job.terms.deadline,
            secs_to_deadline: job.terms.deadline.map(|d| d - now),
            restarts_used: job.restarts_used,
            restart_budget: job.terms.restart_budget,
            output_hash: job.output_hash.map(hex::encode),
            submitted_at: job.submitted_at,
        }
    }

    fn progress_line(&self) -> String {
        let checkpoint = self
            .last_checkpoint
            .as_ref()
            .map_or("no checkpoint yet".to_string(), |c| {
                format!("epoch {} step {}", c.epoch, c.step)
            });
        let deadline = self
            .secs_to_deadline
            .map_or("no deadline".to_string(), |s| {
                format!("{} to deadline", human_secs(s))
            });
        format!(
            "{checkpoint} | {deadline} | bond used {}% ({} paid, {} accrued of {})",
            self.bond_used_percent, self.paid, self.accrued, self.bond
        )
    }
}

fn human_secs(secs: i64) -> String {
    if secs < 0 {
        return format!("{} past", human_secs(-secs));
    }
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else {
        format!("{m}m{s:02}s")
    }
}

impl fmt::Display for JobView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "job {} (id {}, owner {})",
            self.job, self.job_id, self.owner
        )?;
        write!(
            f,
            "  state        {} since {}",
            self.state, self.state_since
        )?;
        if let Some(reason) = self.pause_reason {
            write!(f, " ({reason})")?;
        }
        writeln!(f)?;
        writeln!(f, "  spec         {}", self.spec_hash)?;
        if let (Some(node), Some(provider)) = (&self.node, &self.provider) {
            writeln!(
                f,
                "  node         {node} (provider {provider}) at {} USDC/hour",
                self.rate_per_hour
            )?;
        }
        writeln!(f, "  generation   {}", self.generation)?;
        writeln!(
            f,
            "  bond         {} USDC held, {} paid, {} accrued ({}% used)",
            self.bond, self.paid, self.accrued, self.bond_used_percent
        )?;
        match &self.last_checkpoint {
            Some(c) => writeln!(
                f,
                "  checkpoints  {}, last epoch {} step {} (generation {}) hash {}",
                self.checkpoints, c.epoch, c.step, c.generation, c.hash
            )?,
            None => writeln!(f, "  checkpoints  none")?,
        }
        writeln!(f, "  chain        {}", self.checkpoint_chain)?;
        writeln!(
            f,
            "  billed       {} s of at most {} s (checkpoint every {} s)",
            self.billed_secs, self.max_duration_secs, self.checkpoint_interval_secs
        )?;
        match self.secs_to_deadline {
            Some(s) => writeln!(
                f,
                "  deadline     {} ({})",
                self.deadline.unwrap_or_default(),
                human_secs(s)
            )?,
            None => writeln!(f, "  deadline     none")?,
        }
        write!(
            f,
            "  restarts     {} of {}",
            self.restarts_used, self.restart_budget
        )?;
        if let Some(out) = &self.output_hash {
            write!(f, "\n  output       {out}")?;
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct JobList {
    jobs: Vec<JobView>,
}

impl fmt::Display for JobList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.jobs.is_empty() {
            return write!(f, "no jobs");
        }
        writeln!(
            f,
            "{:<44}  {:>6}  {:<10}  {:>12}  {:>11}  checkpoint",
            "job", "id", "state", "bond USDC", "checkpoints"
        )?;
        for (i, j) in self.jobs.iter().enumerate() {
            let last = j.last_checkpoint.as_ref().map_or("-".to_string(), |c| {
                format!("epoch {} step {}", c.epoch, c.step)
            });
            write!(
                f,
                "{:<44}  {:>6}  {:<10}  {:>12}  {:>11}  {last}",
                j.job, j.job_id, j.state, j.bond, j.checkpoints
            )?;
            if i + 1 < self.jobs.len() {
                writeln!(f)?;
            }
        }
        Ok(())
    }
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

#[derive(Serialize)]
struct Done {
    action: &'static str,
    signature: String,
    job: Option<JobView>,
}

impl fmt::Display for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} (transaction {})", self.action, self.signature)?;
        match &self.job {
            Some(job) => write!(f, "{job}"),
            None => write!(f, "the job account is closed"),
        }
    }
}
