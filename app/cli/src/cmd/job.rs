//! `mcjs job`: what a job owner does, and what anyone may do about a stalled job.

mod logs;
mod metrics;
mod progress;
mod run;
mod submit;
mod view;

pub use view::JobView;

pub(crate) use logs::transcript;

/// A job's metrics rows as CSV (`mcjs job metrics --csv`).
pub(crate) fn metrics_csv(rows: &[metrics::MetricsRow]) -> String {
    metrics::to_csv(rows)
}

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use futures_util::StreamExt;
use mcjs::state::{FailureCause, Job, JobState, PauseReason};
use mcjs_client::ix::JobAccounts;
use mcjs_client::{ChainClient, JobFilter, Pubkey, Signer, decode, ix};

use crate::chain::{Ctx, now_unix, parse_pubkey, parse_usdc, require_funds};
use crate::{EXIT_ERROR, EXIT_FALSE, EXIT_OK, GlobalArgs};
use submit::submit_job;
use view::{Done, JobList};

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
    /// Run a job from an image, a command and data files, without writing
    /// a spec: checks everything it can first (the files, the image, a node
    /// that fits, the bond, your funds), uploads the data, submits with the
    /// bond it shows, and follows what the job prints until it ends.
    /// `--dry-run` prints the spec and stops.
    Run(Box<run::RunArgs>),
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
        /// Do not keep the job's logs and metrics beside the output (by
        /// default `<to>.logs.txt` and `<to>.metrics.csv`, for a local
        /// destination).
        #[arg(long)]
        no_logs: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print what a job printed (its stdout and stderr, as one stream),
    /// across every node it ran on, each move marked. Only the job's owner
    /// may read them.
    Logs {
        job: String,
        /// Keep printing new lines as the job prints them, until it ends.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Only what this generation (one assignment to a node) printed.
        #[arg(long)]
        generation: Option<u32>,
        /// Only what it printed since: a while ago (`30s`, `10m`, `2h`,
        /// `1d`), or a step (`480`: from when its first checkpoint at or
        /// past that step was attested).
        #[arg(long, value_parser = logs::parse_since)]
        since: Option<logs::Since>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the progress a job wrote to its metrics file (MCJS_METRICS_FILE:
    /// one JSON object per line, e.g. {"step": 120, "loss": 0.41}), across
    /// every node it ran on: a table, CSV (--csv) or JSON (--output json).
    /// Only the job's owner may read them.
    Metrics {
        job: String,
        /// Only what this generation (one assignment to a node) wrote.
        #[arg(long)]
        generation: Option<u32>,
        /// Comma-separated values with a header row, for a spreadsheet or a plot.
        #[arg(long)]
        csv: bool,
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
    /// Follow a job live until it ends: exit 0 when completed, 1 when it
    /// ended otherwise. Where the store is known (--store, --scheduler or
    /// the config file) and the wallet owns the job, its progress too: the
    /// step against the spec's target, the step rate, the latest metrics
    /// and an estimate of the time and cost to finish (MCJS_METRICS_FILE).
    Watch {
        job: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Cancel a job that is not on a node; the whole bond comes back.
    Cancel { job: String },
    /// Close a finished job (completed, failed, cancelled or expired): its
    /// account's rent comes back, and whatever its vault still holds (a
    /// refund its refund account could not take because it was closed,
    /// tokens anyone sent to it) goes to your wallet's USDC account,
    /// created if missing.
    Close { job: String },
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
    /// Report a job whose node stopped attesting; allowed to anyone once it
    /// has stalled and no scheduler acts (its lease has lapsed: a live
    /// scheduler alone judges lateness).
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
            submit_job(&ctx, &client, global, spec, bond, job_id, publish).await?;
            Ok(EXIT_OK)
        }
        JobCommand::Run(args) => run::run(&ctx, &client, global, *args).await,
        JobCommand::Upload { file, name, store } => {
            crate::cmd::job_output::upload(&ctx, global, &file, name, &store).await
        }
        JobCommand::Output {
            job,
            to,
            partial,
            no_logs,
            store,
        } => {
            let fetch = crate::cmd::job_output::Fetch {
                to,
                partial,
                keep_logs: !no_logs,
            };
            crate::cmd::job_output::run(&ctx, &client, global, &job, fetch, &store).await
        }
        JobCommand::Logs {
            job,
            follow,
            generation,
            since,
            store,
        } => {
            let key = parse_pubkey(&job, "job")?;
            let filter = logs::Filter { generation, since };
            logs::run(&ctx, &client, global, key, follow, filter, &store).await
        }
        JobCommand::Metrics {
            job,
            generation,
            csv,
            store,
        } => {
            let key = parse_pubkey(&job, "job")?;
            metrics::run(&ctx, &client, global, key, generation, csv, &store).await
        }
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
        JobCommand::Watch { job, store } => {
            watch(&ctx, &client, global, parse_pubkey(&job, "job")?, &store).await
        }
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
        JobCommand::Close { job } => {
            let key = parse_pubkey(&job, "job")?;
            let wallet = ctx.wallet()?;
            let job = owned_job(&client, &key, &wallet.pubkey()).await?;
            if !job.state.is_terminal() {
                bail!(
                    "job {key} is {}: only a finished job (completed, failed, cancelled or expired) can be closed; `mcjs job cancel` ends a queued or paused one",
                    job.state.name()
                );
            }
            let deployment = client.deployment().await?;
            let token = ix::usdc_account(&wallet.pubkey(), &deployment.usdc_mint);
            require_funds(&client, &wallet, &token, 0).await?;
            let sig = client
                .send(
                    &[
                        ix::create_usdc_account(
                            &wallet.pubkey(),
                            &wallet.pubkey(),
                            &deployment.usdc_mint,
                        ),
                        ix::close_job(&wallet.pubkey(), &key, &token, &deployment.usdc_mint),
                    ],
                    &[&wallet],
                )
                .await?;
            done(&client, global, key, "closed", sig).await
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

/// The store holding a job's objects (its logs, metrics and output),
/// opened with the wallet's signature (the gateway serves them to the
/// job's owner only), and the job. `what` names what is read, for the
/// error a wallet that is not the owner's gets.
pub(crate) async fn open_owners_store(
    ctx: &Ctx,
    client: &ChainClient,
    key: &Pubkey,
    store_args: &StoreArgs,
    what: &str,
) -> anyhow::Result<(std::sync::Arc<dyn object_store::ObjectStore>, Job)> {
    let Some(job) = client.job(key).await? else {
        bail!("no job at {key} on {}: check the address", client.url());
    };
    let wallet = ctx.wallet()?;
    let url = store_args.resolve(ctx).await?;
    if matches!(url, mcjs_protocol::store::StoreUrl::S3(_)) && job.owner != wallet.pubkey() {
        bail!(
            "job {key} belongs to {}; only its owner may read its {what}: sign with the owner's keypair (-k)",
            job.owner
        );
    }
    let identity = crate::store::identity(mcjs_protocol::store::Role::Owner, &wallet);
    let store = crate::store::open(&url, &store_args.scheduler(ctx), identity)?;
    Ok((store, job))
}

/// A job's metrics as `mcjs job watch` follows them: the rows read so far
/// (each chunk once) and the targets its spec declares.
struct ProgressFeed {
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    read: std::collections::BTreeSet<String>,
    rows: Vec<metrics::MetricsRow>,
    target_steps: Option<u64>,
    target_epochs: Option<u32>,
}

impl ProgressFeed {
    /// The job's store, where the wallet may read its metrics; `None`
    /// where the store is not known (then the chain's view is all).
    async fn open(
        ctx: &Ctx,
        client: &ChainClient,
        key: &Pubkey,
        store_args: &StoreArgs,
    ) -> anyhow::Result<Option<Self>> {
        if !store_args.given(ctx) {
            return Ok(None);
        }
        let (store, job) = open_owners_store(ctx, client, key, store_args, "metrics").await?;
        let spec = mcjs_runtime::spec_store::get_spec(store.as_ref(), &job.spec_hash)
            .await
            .ok();
        Ok(Some(Self {
            store,
            read: Default::default(),
            rows: Vec::new(),
            target_steps: spec.as_ref().and_then(|s| s.work.target_steps),
            target_epochs: spec.as_ref().and_then(|s| s.work.target_epochs),
        }))
    }

    /// Reads the chunks shipped since the last look.
    async fn refresh(&mut self, key: &Pubkey) -> anyhow::Result<()> {
        for ((g, ..), path, size) in logs::chunks(&self.store, key, None).await? {
            if !self.read.insert(path.clone()) {
                continue;
            }
            if let Some(lines) = logs::read_chunk(&self.store, &path, size).await? {
                self.rows.extend(metrics::metrics_rows(g, &lines));
            }
        }
        Ok(())
    }

    fn progress(&self, rate_per_hour: u64) -> Option<progress::Progress> {
        progress::estimate(
            &self.rows,
            self.target_steps,
            self.target_epochs,
            rate_per_hour,
        )
    }
}

/// One line of `mcjs job watch --output json`: the job as `job status`
/// shows it, and its progress where its metrics can be read.
#[derive(serde::Serialize)]
struct WatchLine<'a> {
    #[serde(flatten)]
    view: &'a JobView,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<progress::Progress>,
}

/// How often `mcjs job watch` looks for new metrics (the agent ships every 2 s).
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

async fn watch(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    key: Pubkey,
    store_args: &StoreArgs,
) -> anyhow::Result<u8> {
    let first = fetch_job(client, &key).await?;
    let people = !global.output.is_json();
    let mut feed = match ProgressFeed::open(ctx, client, &key, store_args).await {
        Ok(feed) => feed,
        Err(e) => {
            eprintln!("the job's progress cannot be read ({e:#}); following the chain only");
            None
        }
    };
    if let Some(feed) = &mut feed {
        // What is stored already shows with the first state (a finished
        // job's whole run).
        let _ = feed.refresh(&key).await;
    }
    let bar = people.then(|| {
        let bar = indicatif::ProgressBar::new(u64::from(first.terms.max_duration_secs).max(1));
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix:>10} [{bar:30}] {pos}/{len} s billed  {wide_msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        bar
    });
    let mut updates = Box::pin(client.watch_account(key));
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_json = String::new();
    let mut latest: Option<(Job, JobView)> = None;
    loop {
        let update = tokio::select! {
            update = updates.next() => match update {
                Some(update) => Some(update?),
                None => break,
            },
            _ = tick.tick(), if feed.is_some() => None,
        };
        if let Some(account) = update {
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
            latest = Some((job, view));
        } else if let Some(feed) = &mut feed {
            // A look that fails (the store or gateway briefly away) is
            // made again at the next tick.
            let _ = feed.refresh(&key).await;
        }
        let Some((job, view)) = &latest else {
            continue;
        };
        if job.state.is_terminal()
            && let Some(feed) = &mut feed
        {
            // The run's last metrics were shipped before it ended.
            let _ = feed.refresh(&key).await;
        }
        let progress = feed.as_ref().and_then(|f| f.progress(job.rate_per_hour));
        match &bar {
            Some(bar) => {
                bar.set_prefix(view.state.to_string());
                bar.set_position(job.billed_secs);
                bar.set_message(match &progress {
                    Some(p) => format!("{} | {}", p.line(), view.progress_line()),
                    None => view.progress_line(),
                });
            }
            None => {
                let line = serde_json::to_string(&WatchLine { view, progress })?;
                if line != last_json {
                    println!("{line}");
                    last_json = line;
                }
            }
        }
        if job.state.is_terminal() {
            if let Some(bar) = &bar {
                // As it stands: `finish` would fill the bar to the cap the
                // job did not use.
                bar.abandon();
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
