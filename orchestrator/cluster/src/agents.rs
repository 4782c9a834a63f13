//! The cluster's agents: registering their nodes, starting them, and the
//! faults a test injects into them (SIGKILL, a stop on purpose, a
//! partition from the chain and the scheduler).

use super::*;

impl Cluster {
    /// The provider's wallet makes an operator key for its node and
    /// registers the node with it, as a provider would before starting an agent.
    pub(crate) fn register_node(&self, i: usize) -> anyhow::Result<(Pubkey, PathBuf)> {
        let wallet = self.provider_wallet(i)?;
        let owner = mcjs_localnet::read_keypair(&wallet)?.pubkey();
        let provider = pda::provider(&owner);
        let index = self.node_index(i);
        let node = pda::node(&provider, index);
        let keys = self.config.dir.join("keys");
        std::fs::create_dir_all(&keys)?;
        let node_key = keys.join(format!("node-{}.json", i + 1));
        if !node_key.exists() {
            self.run_mcjs(
                &wallet,
                &["node", "keygen", "-o", &node_key.to_string_lossy()],
            )?;
        }
        let profile = &self.config.profiles[i % self.config.profiles.len()];
        let price = &self.config.prices[i % self.config.prices.len()];
        self.run_mcjs(
            &wallet,
            &[
                "node",
                "register",
                "--index",
                &index.to_string(),
                "--operator",
                &node_key.to_string_lossy(),
                "--profile",
                &profile.to_string_lossy(),
                "--price",
                price,
            ],
        )?;
        Ok((node, node_key))
    }

    pub(crate) async fn add_agent(&mut self, i: usize) -> anyhow::Result<()> {
        let wallet = self.provider_wallet(i)?;
        let owner = mcjs_localnet::read_keypair(&wallet)?.pubkey();
        let provider = pda::provider(&owner);
        let (node, node_key) = self.register_node(i)?;
        let work_dir = self.config.dir.join(format!("agent-{}", i + 1));
        std::fs::create_dir_all(&work_dir)?;
        let listen = format!("127.0.0.1:{}", free_port(false).await?);

        let rpc: std::net::SocketAddr = self.info.rpc_url.trim_start_matches("http://").parse()?;
        let ws = std::net::SocketAddr::new(rpc.ip(), rpc.port() + 1);
        let scheduler: std::net::SocketAddr = self.scheduler_listen.parse()?;
        let rpc_port = free_port(true).await?;
        // Under a profile, the agent's endpoint takes the port, in front of its link.
        let (rpc_link, endpoint) = match self.config.endpoint {
            None => (
                Link::open(TcpListener::bind(("127.0.0.1", rpc_port)).await?, rpc).await?,
                None,
            ),
            Some(profile) => {
                let link = Link::open(TcpListener::bind("127.0.0.1:0").await?, rpc).await?;
                let endpoint = Endpoint::open(
                    TcpListener::bind(("127.0.0.1", rpc_port)).await?,
                    format!("http://{}", link.listen),
                    profile,
                )
                .await?;
                (link, Some(endpoint))
            }
        };
        let rpc_url = match &endpoint {
            Some(endpoint) => endpoint.url(),
            None => format!("http://{}", rpc_link.listen),
        };
        let ws_link = Link::open(TcpListener::bind(("127.0.0.1", rpc_port + 1)).await?, ws).await?;
        let sched_link = Link::open(TcpListener::bind("127.0.0.1:0").await?, scheduler).await?;
        let mut links = vec![rpc_link, ws_link, sched_link];
        let mut standby_urls = Vec::new();
        for standby in &self.standbys {
            let link = Link::open(
                TcpListener::bind("127.0.0.1:0").await?,
                standby.listen.parse()?,
            )
            .await?;
            standby_urls.push(format!("http://{}", link.listen));
            links.push(link);
        }
        let mut agent = AgentProcess {
            index: i,
            node_key,
            node,
            provider,
            work_dir,
            listen,
            child: None,
            rpc_url,
            scheduler_url: format!("http://{}", links[2].listen),
            standby_urls,
            links,
            endpoint,
        };
        self.spawn_agent(&mut agent)?;
        self.agents.push(agent);
        Ok(())
    }

    pub(crate) fn spawn_agent(&self, agent: &mut AgentProcess) -> anyhow::Result<()> {
        let logs = self.config.dir.join("logs");
        let profile = &self.config.profiles[agent.index % self.config.profiles.len()];
        let name = format!("agent-{}", agent.index + 1);
        let bin = self
            .config
            .agent_bin
            .as_ref()
            .unwrap_or(&self.config.mcjs_bin);
        let child = Command::new(bin)
            .arg("-u")
            .arg(&agent.rpc_url)
            .args(["agent", "run", "--node", &agent.node.to_string()])
            .envs(
                self.config
                    .agent_env
                    .iter()
                    .filter(|(i, _, _)| *i == agent.index)
                    .map(|(_, k, v)| (k, v)),
            )
            .arg("--node-key")
            .arg(&agent.node_key)
            .arg("--work-dir")
            .arg(&agent.work_dir)
            .current_dir(&agent.work_dir)
            // The store: whatever the scheduler publishes.
            .args(["--scheduler", &agent.scheduler_url])
            .args(
                agent
                    .standby_urls
                    .iter()
                    .flat_map(|url| ["--standby-scheduler", url.as_str()]),
            )
            .args(["--listen", &agent.listen])
            .arg("--profile")
            .arg(profile)
            .args(
                self.config
                    .data_roots
                    .iter()
                    .flat_map(|d| [std::ffi::OsStr::new("--data-root"), d.as_os_str()]),
            )
            .stdin(Stdio::null())
            .stdout(log_file(&logs, &name)?)
            .stderr(log_file(&logs, &format!("{name}.err"))?)
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        agent.child = Some(child);
        Ok(())
    }

    /// SIGKILLs agent `i` and every container it started: the node is gone.
    pub fn kill_agent(&mut self, i: usize) {
        let agent = &mut self.agents[i];
        if let Some(mut child) = agent.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        kill_containers(&format!("mcjs.node={}", agent.node));
    }

    /// Stops agent `i` on purpose (SIGINT, as Ctrl-C or a service manager
    /// would): it says goodbye to the scheduler and leaves its containers
    /// running for the next start to adopt.
    pub fn stop_agent(&mut self, i: usize) {
        if let Some(mut child) = self.agents[i].child.take() {
            // SAFETY: kill(2) on a child we spawned and have not reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGINT);
            }
            let _ = child.wait();
        }
    }

    /// Restarts a killed agent on the same node (same operator key, work dir, links).
    pub fn restart_agent(&mut self, i: usize) -> anyhow::Result<()> {
        let mut agent = std::mem::replace(&mut self.agents[i], placeholder());
        let result = self.spawn_agent(&mut agent);
        self.agents[i] = agent;
        result
    }

    /// Cuts agent `i` off the chain and the scheduler; its process and
    /// containers go on running.
    pub fn partition_agent(&self, i: usize) {
        for link in &self.agents[i].links {
            link.cut();
        }
    }

    pub fn heal_agent(&self, i: usize) {
        for link in &self.agents[i].links {
            link.heal();
        }
    }

    /// Cuts the agent off from the schedulers only, standbys included
    /// (heartbeats and the store gateway), or heals that; its links to the
    /// chain stay up, so it can still attest.
    pub fn cut_from_scheduler(&self, i: usize, cut: bool) {
        for link in &self.agents[i].links[2..] {
            if cut { link.cut() } else { link.heal() }
        }
    }

    /// The agent whose node a job is on.
    pub fn agent_of_node(&self, node: &Pubkey) -> Option<usize> {
        self.agents.iter().position(|a| a.node == *node)
    }
}

fn placeholder() -> AgentProcess {
    AgentProcess {
        index: 0,
        node_key: PathBuf::new(),
        node: Pubkey::default(),
        provider: Pubkey::default(),
        work_dir: PathBuf::new(),
        listen: String::new(),
        child: None,
        links: Vec::new(),
        endpoint: None,
        rpc_url: String::new(),
        scheduler_url: String::new(),
        standby_urls: Vec::new(),
    }
}

/// `docker kill` every container matching a label filter.
impl Cluster {
    /// The lines of agent `i`'s logs (stdout and stderr) that contain
    /// `needle`, without their terminal colours.
    pub fn agent_lines(&self, i: usize, needle: &str) -> Vec<String> {
        ["log", "err.log"]
            .iter()
            .map(|ext| self.config.dir.join(format!("logs/agent-{}.{ext}", i + 1)))
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .flat_map(|log| {
                log.lines()
                    .map(plain)
                    .filter(|l| l.contains(needle))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Pauses (`docker pause`) every container the agent `i` runs: its jobs
    /// freeze where they are (no new checkpoint) while the agent lives on.
    pub fn pause_containers_of(&self, i: usize) {
        containers_do("pause", &format!("mcjs.node={}", self.agents[i].node));
    }
}

/// A log line without its terminal colours (`ESC [ … m`).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn kill_containers(label: &str) {
    containers_do("kill", label);
}

/// `docker <action>` on every running container labelled `label`.
fn containers_do(action: &str, label: &str) {
    let Ok(out) = Command::new("docker")
        .args(["ps", "-q", "--filter", &format!("label={label}")])
        .output()
    else {
        return;
    };
    for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        let _ = Command::new("docker").args([action, id]).output();
    }
}
