//! A local MCJS cluster made of real processes: the local chain, the
//! scheduler daemon and N agents, each agent in its own working directory
//! with its own node profile. The store is either one directory shared by
//! every process ([`StoreKind::Dir`]) or an S3-compatible server
//! (`s3s-fs`, started here) behind the scheduler's gateway
//! ([`StoreKind::S3`]), where the processes share nothing but the chain
//! and the S3 endpoint: only the scheduler holds the store's credentials.
//! Every agent reaches the chain and the scheduler through a [`Link`] that
//! can be cut, so a test can partition it from the rest.
//!
//! Faults it can inject: SIGKILL an agent (and its containers), kill a job's
//! container, partition an agent and heal it, SIGKILL and restart the
//! scheduler, corrupt the newest checkpoint in the store.
//!
//! Used by `mcjs demo` and by the end-to-end tests.
//!
//! # Map
//!
//! All of it is shell: real processes, sockets and containers.
//!
//! - `lib.rs` (this file): `ClusterConfig` and `Cluster`: starting the
//!   chain, the store, the scheduler (and standby schedulers) and the
//!   agents; the scheduler's kill and restart; submitting a job, reading its
//!   output, corrupting its newest checkpoint; `Cluster::log_lines`, what a
//!   failed test prints of the processes' logs.
//! - `agents.rs`: registering, starting and faulting the agents (SIGKILL
//!   with their containers, a stop on purpose, a partition).
//! - `link.rs`: `Link`, the TCP link that can be cut between an agent and
//!   the chain or the scheduler.
//! - `endpoint.rs`: a public endpoint's manners put between each process
//!   and the chain where `ClusterConfig::endpoint` asks for them
//!   (`EndpointProfile::PUBLIC`: 100 ms per call, HTTP 429 past 100 calls
//!   per 10 s or 40 of one method, one send in ten dropped), counted in
//!   `Cluster::endpoint_stats`; `Cluster::rpc_outage` (every call 503, every
//!   websocket held) and `Cluster::store_outage` (the S3 server stopped,
//!   then started again over what it held).
//! - `s3.rs`: the S3-compatible store (`s3s-fs`) and the keys only the
//!   scheduler holds.
//! - `workload.rs`: the reference workload: the trainer image, a dataset
//!   from a fixed seed, its spec, and an uninterrupted reference run to
//!   compare against.

mod agents;
pub mod endpoint;
pub mod link;
mod s3;
pub mod workload;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcjs::state::{Job, JobState};
use mcjs_client::{ChainClient, Keypair, Pubkey, Signer, ix, pda};
use mcjs_localnet::LocalnetInfo;
use tokio::net::TcpListener;

pub use agents::kill_containers;
pub use endpoint::{Endpoint, EndpointProfile, EndpointStats};
pub use link::Link;
pub use s3::{
    S3_ACCESS_KEY, S3_BUCKET, S3_PREFIX, S3_SECRET_KEY, S3_USER_BUCKET, S3Server, s3s_fs_bin,
};

#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Everything goes under this directory (chain, store, agents, logs).
    pub dir: PathBuf,
    /// The `mcjs` binary that runs every process.
    pub mcjs_bin: PathBuf,
    /// Where set, the binary the agents run instead: a provider's own build
    /// (`cargo install --path app/cli`, release, no test features), which
    /// the benchmarks measure.
    pub agent_bin: Option<PathBuf>,
    pub agents: usize,
    pub slot_time_ms: u64,
    pub heartbeat_timeout_ms: u64,
    /// HAL profile (JSON) each agent claims; the i-th agent uses
    /// `profiles[i % len]`.
    pub profiles: Vec<PathBuf>,
    /// USDC per GPU-hour of each agent (same cycling).
    pub prices: Vec<String>,
    pub provider_stake_usdc: u64,
    /// Directories the agents take file:// inputs from (`--data-root`).
    pub data_roots: Vec<PathBuf>,
    pub store: StoreKind,
    /// Extra environment of the i-th agent: `(i, name, value)`.
    pub agent_env: Vec<(usize, String, String)>,
    /// Where set, the scheduler and every agent reach the chain's JSON-RPC
    /// through an [`Endpoint`] of their own with these manners (latency,
    /// 429s, dropped sends), as they would a public endpoint.
    pub endpoint: Option<EndpointProfile>,
    /// Standby schedulers besides the Config's, each with its own key,
    /// named in the scheduler lease ([`STANDBY_LEASE_SLOTS`] slots a
    /// renewal); agents heartbeat to each and use their gateways when the
    /// leader's is down. They reach the chain directly, under no profile.
    pub standbys: usize,
    /// Extra arguments of `mcjs scheduler` (the Config's scheduler, not the
    /// standbys), e.g. `--challenge-hardware`; read at each (re)start.
    pub scheduler_args: Vec<String>,
}

/// The lease's length in every cluster: 200 slots (10 s at the fault
/// suite's 50 ms slots), so that a holder reading the lease every second
/// renews it well before it runs out, even on a machine running several
/// clusters at once (at 100 slots a leader on 2 cores shared by three
/// clusters once missed its renewal and lost the lease before the fault was
/// injected). A lone scheduler's lease is kept live too: while it is, no
/// stranger may report a job (`SchedulerLive`), and the default 25 slots
/// (1.25 s here) would lapse between two reads.
pub const STANDBY_LEASE_SLOTS: u64 = 200;

/// A standby scheduler: its key, where it listens, its process.
pub struct StandbyScheduler {
    pub key: PathBuf,
    pub listen: String,
    child: Option<Child>,
}

/// Where the cluster keeps specs, checkpoints and outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoreKind {
    /// A directory every process opens (the single-machine default).
    #[default]
    Dir,
    /// An S3-compatible server (`s3s-fs`), reached by agents and users only
    /// through the scheduler's gateway.
    S3,
}

pub struct AgentProcess {
    pub index: usize,
    /// The node's operator key: all the agent holds (the provider's wallet
    /// stays with the cluster, as it would stay off a real host).
    pub node_key: PathBuf,
    /// The agent's Node account.
    pub node: Pubkey,
    pub provider: Pubkey,
    pub work_dir: PathBuf,
    pub listen: String,
    pub child: Option<Child>,
    /// The agent's links to the chain (RPC and websocket) and to the scheduler.
    pub links: Vec<Link>,
    /// The endpoint its JSON-RPC calls go through, under a profile.
    pub endpoint: Option<Endpoint>,
    rpc_url: String,
    scheduler_url: String,
    /// The standby schedulers, through links of their own.
    standby_urls: Vec<String>,
}

pub struct Cluster {
    pub config: ClusterConfig,
    pub info: LocalnetInfo,
    /// Where the store's objects are on this machine's disk: the shared
    /// directory, or the S3 server's copy of the bucket's prefix (for fault
    /// injection and inspection only; no MCJS process reads it).
    pub store: PathBuf,
    /// The store's URL, as the scheduler publishes it.
    pub store_url: String,
    pub s3: Option<S3Server>,
    /// The user's working directory (`run_mcjs` runs there).
    pub user_dir: PathBuf,
    pub scheduler_listen: String,
    chain: Child,
    scheduler: Option<Child>,
    /// The scheduler's own endpoint (and its websocket link), under a profile.
    scheduler_endpoint: Option<(Endpoint, Link)>,
    pub standbys: Vec<StandbyScheduler>,
    pub agents: Vec<AgentProcess>,
}

/// An [`Endpoint`] in front of the chain at `rpc_url`, on a port whose
/// successor links to the chain's websocket (as a node serves them).
async fn endpoint_to(rpc_url: &str, profile: EndpointProfile) -> anyhow::Result<(Endpoint, Link)> {
    let rpc: std::net::SocketAddr = rpc_url.trim_start_matches("http://").parse()?;
    let ws = std::net::SocketAddr::new(rpc.ip(), rpc.port() + 1);
    let port = free_port(true).await?;
    let endpoint = Endpoint::open(
        TcpListener::bind(("127.0.0.1", port)).await?,
        rpc_url.to_string(),
        profile,
    )
    .await?;
    let ws_link = Link::open(TcpListener::bind(("127.0.0.1", port + 1)).await?, ws).await?;
    Ok((endpoint, ws_link))
}

/// A free local TCP port (and, with `pair`, the next one too).
pub(crate) async fn free_port(pair: bool) -> anyhow::Result<u16> {
    Ok(if pair {
        mcjs_localnet::free_port_pair()
    } else {
        mcjs_localnet::free_port()
    })
}

pub(crate) fn log_file(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(dir.join(format!("{name}.log")))
        .with_context(|| format!("cannot create the log of {name}"))
}

impl Cluster {
    /// Starts the chain, registers one provider per agent, then starts the
    /// scheduler and the agents. Returns once every agent's node is on chain.
    pub async fn start(config: ClusterConfig) -> anyhow::Result<Self> {
        let dir = config.dir.clone();
        std::fs::create_dir_all(dir.join("logs"))?;
        let logs = dir.join("logs");
        let (store, store_url, s3) = match config.store {
            StoreKind::Dir => {
                let store = dir.join("store");
                std::fs::create_dir_all(&store)?;
                let url = format!("file://{}", std::fs::canonicalize(&store)?.display());
                (store, url, None)
            }
            StoreKind::S3 => {
                let server =
                    S3Server::start(&dir.join("s3"), &logs, &[S3_BUCKET, S3_USER_BUCKET]).await?;
                let url = format!("s3://{S3_BUCKET}/{S3_PREFIX}?endpoint={}", server.endpoint);
                (
                    server.root.join(S3_BUCKET).join(S3_PREFIX),
                    url,
                    Some(server),
                )
            }
        };
        let user_dir = dir.join("user");
        std::fs::create_dir_all(&user_dir)?;

        let rpc_port = free_port(true).await?;
        let chain_dir = dir.join("chain");
        let chain = Command::new(&config.mcjs_bin)
            .args(["localnet", "--rpc-port", &rpc_port.to_string()])
            .arg("--dir")
            .arg(&chain_dir)
            .args(["--slot-time-ms", &config.slot_time_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(log_file(&logs, "chain")?)
            .stderr(log_file(&logs, "chain.err")?)
            .spawn()
            .context("cannot start the local chain")?;
        let info = wait_for_localnet(&chain_dir, Duration::from_secs(120)).await?;

        let scheduler_port = free_port(false).await?;
        let scheduler_endpoint = match config.endpoint {
            Some(profile) => Some(endpoint_to(&info.rpc_url, profile).await?),
            None => None,
        };
        let mut cluster = Self {
            info,
            store,
            store_url,
            s3,
            user_dir,
            scheduler_listen: format!("127.0.0.1:{scheduler_port}"),
            chain,
            scheduler: None,
            scheduler_endpoint,
            standbys: Vec::new(),
            agents: Vec::new(),
            config,
        };
        for i in 0..cluster.config.agents {
            cluster.register_provider(i)?;
        }
        cluster.set_scheduler_lease().await?;
        cluster.start_scheduler()?;
        for i in 0..cluster.standbys.len() {
            cluster.start_standby(i)?;
        }
        for i in 0..cluster.config.agents {
            cluster.add_agent(i).await?;
        }
        cluster.wait_for_nodes(Duration::from_secs(120)).await?;
        Ok(cluster)
    }

    /// Registers `n` more agents, each with a node (of a provider of its
    /// own while the chain's provider wallets last), after the cluster
    /// started.
    pub async fn add_agents(&mut self, n: usize) -> anyhow::Result<()> {
        let first = self.agents.len();
        for i in first..first + n {
            self.register_provider(i)?;
            self.add_agent(i).await?;
        }
        self.wait_for_nodes(Duration::from_secs(120)).await
    }

    pub fn client(&self) -> ChainClient {
        ChainClient::new(&self.info.rpc_url)
    }

    pub fn scheduler_url(&self) -> String {
        format!("http://{}", self.scheduler_listen)
    }

    fn mcjs(&self, wallet: &Path) -> Command {
        self.mcjs_at(&self.info.rpc_url, wallet)
    }

    fn mcjs_at(&self, rpc_url: &str, wallet: &Path) -> Command {
        let mut cmd = Command::new(&self.config.mcjs_bin);
        cmd.arg("-u").arg(rpc_url).arg("-k").arg(wallet);
        cmd.stdin(Stdio::null());
        cmd.current_dir(&self.user_dir);
        cmd
    }

    /// Runs an `mcjs` command to completion and returns its stdout.
    pub fn run_mcjs(&self, wallet: &Path, args: &[&str]) -> anyhow::Result<String> {
        self.run_mcjs_with_env(wallet, args, &[])
    }

    /// [`Cluster::run_mcjs`] with extra environment variables.
    pub fn run_mcjs_with_env(
        &self,
        wallet: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<String> {
        let output = self
            .mcjs(wallet)
            .envs(env.iter().copied())
            .args(args)
            .output()
            .with_context(|| format!("cannot run mcjs {}", args.join(" ")))?;
        if !output.status.success() {
            bail!(
                "mcjs {} failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The wallet of the provider that owns agent `i`'s node: the chain
    /// funds a few provider wallets, and agents beyond them are further
    /// nodes of the same providers, in turn.
    fn provider_wallet(&self, i: usize) -> anyhow::Result<PathBuf> {
        let wallets = &self.info.wallets.providers;
        anyhow::ensure!(
            !wallets.is_empty(),
            "the local chain has no provider wallet"
        );
        Ok(wallets[i % wallets.len()].clone())
    }

    /// Agent `i`'s node index under its provider.
    fn node_index(&self, i: usize) -> u32 {
        (i / self.info.wallets.providers.len().max(1)) as u32
    }

    /// Registers agent `i`'s provider, where it is the provider's first node.
    fn register_provider(&self, i: usize) -> anyhow::Result<()> {
        if self.node_index(i) > 0 {
            return Ok(());
        }
        let wallet = self.provider_wallet(i)?;
        self.run_mcjs(
            &wallet,
            &[
                "provider",
                "register",
                "--stake",
                &self.config.provider_stake_usdc.to_string(),
            ],
        )?;
        Ok(())
    }

    pub fn start_scheduler(&mut self) -> anyhow::Result<()> {
        let rpc_url = match &self.scheduler_endpoint {
            Some((endpoint, _)) => endpoint.url(),
            None => self.info.rpc_url.clone(),
        };
        let child = self.spawn_scheduler(
            "scheduler",
            &rpc_url,
            &self.info.wallets.scheduler,
            &self.scheduler_listen,
            &self.config.scheduler_args,
        )?;
        self.scheduler = Some(child);
        Ok(())
    }

    /// `mcjs scheduler` as `name`, signing with `wallet`, listening on `listen`.
    fn spawn_scheduler(
        &self,
        name: &str,
        rpc_url: &str,
        wallet: &Path,
        listen: &str,
        extra: &[String],
    ) -> anyhow::Result<Child> {
        let logs = self.config.dir.join("logs");
        let dir = self.config.dir.join(name);
        std::fs::create_dir_all(&dir)?;
        let mut command = self.mcjs_at(rpc_url, wallet);
        if self.s3.is_some() {
            command
                .env("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY)
                .env("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY);
        }
        command
            .current_dir(&dir)
            .args(["scheduler", "--listen", listen])
            .args(["--store", &self.store_url])
            .args([
                "--heartbeat-timeout-ms",
                &self.config.heartbeat_timeout_ms.to_string(),
            ])
            .args(extra)
            .stdout(log_file(&logs, name)?)
            .stderr(log_file(&logs, &format!("{name}.err"))?)
            .spawn()
            .with_context(|| format!("cannot start {name}"))
    }

    /// Makes a key for each standby the config asks for, funds it from the
    /// admin's wallet and names them in the scheduler lease, with the
    /// lease's length (`mcjs admin set-schedulers`), as an operator would.
    async fn set_scheduler_lease(&mut self) -> anyhow::Result<()> {
        let keys = self.config.dir.join("keys");
        std::fs::create_dir_all(&keys)?;
        let admin = mcjs_localnet::read_keypair(&self.info.wallets.admin)?;
        let client = self.client();
        let mut args = vec!["admin".to_string(), "set-schedulers".to_string()];
        for i in 0..self.config.standbys {
            let key = keys.join(format!("standby-{}.json", i + 1));
            let keypair = Keypair::new();
            mcjs_localnet::write_keypair(&key, &keypair)?;
            client
                .send(
                    &[ix::fund_operator(
                        &admin.pubkey(),
                        &keypair.pubkey(),
                        10_000_000_000,
                    )],
                    &[&admin],
                )
                .await
                .context("funding a standby scheduler")?;
            args.extend(["--standby".to_string(), keypair.pubkey().to_string()]);
            self.standbys.push(StandbyScheduler {
                key,
                listen: format!("127.0.0.1:{}", free_port(false).await?),
                child: None,
            });
        }
        args.extend(["--lease-slots".to_string(), STANDBY_LEASE_SLOTS.to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run_mcjs(&self.info.wallets.admin, &args)?;
        Ok(())
    }

    /// Starts standby scheduler `i` (again, after a kill).
    pub fn start_standby(&mut self, i: usize) -> anyhow::Result<()> {
        let child = self.spawn_scheduler(
            &format!("standby-{}", i + 1),
            &self.info.rpc_url,
            &self.standbys[i].key,
            &self.standbys[i].listen,
            &[],
        )?;
        self.standbys[i].child = Some(child);
        Ok(())
    }

    /// SIGKILLs standby scheduler `i`.
    pub fn kill_standby(&mut self, i: usize) {
        if let Some(mut child) = self.standbys[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGKILL: no chance to clean up, as in a crash.
    pub fn kill_scheduler(&mut self) {
        if let Some(mut child) = self.scheduler.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub async fn wait_for_nodes(&self, timeout: Duration) -> anyhow::Result<()> {
        let client = self.client();
        let deadline = Instant::now() + timeout;
        loop {
            let mut registered = 0;
            for agent in &self.agents {
                // Nodes are registered by their providers before the agents
                // start; an agent is up once it serves its API (it does so
                // after adopting its node with its operator key).
                let on_chain = client.node(&agent.node).await.ok().flatten().is_some();
                let serving = tokio::net::TcpStream::connect(&agent.listen).await.is_ok();
                if on_chain && serving {
                    registered += 1;
                }
            }
            if registered == self.agents.len() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "only {registered} of {} agents registered their node within {:?}; see {}",
                    self.agents.len(),
                    timeout,
                    self.config.dir.join("logs").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Polls the job until `done` holds (or the job's account is gone).
    pub async fn wait_for_job(
        &self,
        job: &Pubkey,
        timeout: Duration,
        mut done: impl FnMut(&Job) -> bool,
    ) -> anyhow::Result<Job> {
        let client = self.client();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(state) = client.job(job).await? {
                if done(&state) {
                    return Ok(state);
                }
                if Instant::now() > deadline {
                    bail!("job {job} still {:?} after {:?}", state.state, timeout);
                }
            } else if Instant::now() > deadline {
                bail!("job {job} not found after {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn user_wallet(&self) -> anyhow::Result<Keypair> {
        Ok(mcjs_localnet::read_keypair(&self.info.wallets.user)?)
    }

    /// Overwrites the newest stored checkpoint of `job` with garbage, as a
    /// failing disk or a bad upload would.
    pub fn corrupt_latest_checkpoint(&self, job: &Pubkey) -> anyhow::Result<PathBuf> {
        // Layout of mcjs-runtime's CheckpointStore: jobs/<job>/checkpoints/<key>/files/...
        let dir = self
            .store
            .join("jobs")
            .join(job.to_string())
            .join("checkpoints");
        let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
        for entry in walk(&dir)? {
            let modified = std::fs::metadata(&entry)?.modified()?;
            if entry.components().any(|c| c.as_os_str() == "files")
                && newest.as_ref().is_none_or(|(t, _)| modified > *t)
            {
                newest = Some((modified, entry));
            }
        }
        let (_, path) = newest
            .with_context(|| format!("no stored checkpoint of job {job} in {}", dir.display()))?;
        let mut bytes = std::fs::read(&path)?;
        for b in bytes.iter_mut().take(64) {
            *b ^= 0xa5;
        }
        std::fs::write(&path, bytes)?;
        Ok(path)
    }

    /// Uploads a data file as the user (`mcjs job upload`); returns the URI
    /// to declare and its sha256.
    pub fn upload_input(&self, file: &Path) -> anyhow::Result<(String, String)> {
        let out = self.run_mcjs(
            &self.info.wallets.user,
            &[
                "job",
                "upload",
                &file.to_string_lossy(),
                "--scheduler",
                &self.scheduler_url(),
                "--output",
                "json",
            ],
        )?;
        let v: serde_json::Value = serde_json::from_str(&out)
            .with_context(|| format!("`mcjs job upload` printed {out}"))?;
        match (v["uri"].as_str(), v["sha256"].as_str()) {
            (Some(uri), Some(sha)) => Ok((uri.to_string(), sha.to_string())),
            _ => bail!("`mcjs job upload` printed {out}"),
        }
    }

    /// Submits `spec` as the user with `bond` USDC and job id `job_id`,
    /// publishing the spec through the scheduler; returns the Job account.
    pub fn submit_job(&self, spec: &Path, bond: &str, job_id: u64) -> anyhow::Result<Pubkey> {
        self.run_mcjs(
            &self.info.wallets.user,
            &[
                "job",
                "submit",
                &spec.to_string_lossy(),
                "--bond",
                bond,
                "--job-id",
                &job_id.to_string(),
                "--scheduler",
                &self.scheduler_url(),
            ],
        )?;
        Ok(pda::job(&self.user_wallet()?.pubkey(), job_id))
    }

    /// Runs `mcjs job output` as the user (`args` added), into `to`.
    pub fn job_output(&self, job: &Pubkey, to: &Path, args: &[&str]) -> anyhow::Result<String> {
        let scheduler = self.scheduler_url();
        let mut all = vec!["job", "output", "--scheduler", scheduler.as_str()];
        let job = job.to_string();
        let to = to.to_string_lossy().into_owned();
        all.extend([job.as_str(), "--to", to.as_str()]);
        all.extend(args);
        self.run_mcjs(&self.info.wallets.user, &all)
    }

    /// Every line of every process's log that contains `needle`, prefixed
    /// with the log's name: what a failed assertion prints, since the
    /// cluster's directory is gone when the test ends.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(self.config.dir.join("logs")) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = dir.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        let mut out = Vec::new();
        for path in paths {
            let name = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read(&path).unwrap_or_default();
            out.extend(
                String::from_utf8_lossy(&text)
                    .lines()
                    .filter(|l| l.contains(needle))
                    .map(|l| format!("{name}: {l}")),
            );
        }
        out
    }

    /// Stops everything: agents (and their containers), scheduler, chain.
    pub fn stop(&mut self) {
        for i in 0..self.agents.len() {
            self.kill_agent(i);
        }
        self.kill_scheduler();
        for i in 0..self.standbys.len() {
            self.kill_standby(i);
        }
        let _ = self.chain.kill();
        let _ = self.chain.wait();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        // Killed agents leave their runs' volumes mounted (for the next
        // agent to adopt); the cluster's directories go, so they go too.
        for agent in &self.agents {
            mcjs_runtime::volume::release_all_under(&agent.work_dir);
        }
    }
}

fn walk(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if !dir.exists() {
        return Ok(files);
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files.extend(walk(&path)?);
        } else {
            files.push(path);
        }
    }
    Ok(files)
}

async fn wait_for_localnet(dir: &Path, timeout: Duration) -> anyhow::Result<LocalnetInfo> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(info) = LocalnetInfo::load(dir) {
            let client = ChainClient::new(&info.rpc_url);
            if client.config().await.is_ok() {
                return Ok(info);
            }
        }
        if Instant::now() > deadline {
            bail!("the local chain did not come up within {timeout:?}; see its log");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// True when the job is on a node and running.
pub fn is_running(job: &Job) -> bool {
    matches!(job.state, JobState::Running { .. })
}
