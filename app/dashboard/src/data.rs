//! What each page shows, computed from the chain alone: accounts read
//! through the chain client, histories from transaction logs, and the
//! verdicts of the client's audit. Nothing here is assumed; a badge is
//! whatever the audit returned.

mod job_page;

pub use job_page::{
    AuditVerdict, BondFlow, CheckpointRow, FailureRow, JobAccount, JobView, Placement,
    ProviderPayment, TopUp, job, job_view,
};

use std::collections::BTreeMap;

use mcjs::state::{Job, JobState, NodeStatus};
use mcjs_client::history::{McjsEvent, failure_cause, node_status};
use mcjs_client::{ChainClient, ChainError, JobFilter, PROGRAM_ID, Pubkey, pda};
use mcjs_ledger::audit::audit_provider;
use mcjs_ledger::completion::{CompletionRate, job_ends};
use mcjs_ledger::reliability::{Reliability, node_reliability};
use serde::Serialize;

use crate::chart::{self, Timeline};

/// Job states in the program's order.
pub const JOB_STATES: [&str; 9] = [
    "pending",
    "assigned",
    "running",
    "paused",
    "recovering",
    "completed",
    "failed",
    "cancelled",
    "expired",
];

const NODE_STATUSES: [NodeStatus; 3] =
    [NodeStatus::Available, NodeStatus::Busy, NodeStatus::Offline];

#[derive(Debug, thiserror::Error)]
pub enum DashError {
    /// The request itself is wrong (a malformed address).
    #[error("{0}")]
    BadRequest(String),
    /// Nothing of that kind at that address.
    #[error("{0}")]
    NotFound(String),
    /// The chain could not be read.
    #[error("the chain could not be read: {0}")]
    Chain(#[from] ChainError),
}

/// A base-58 address from a request, refused with a message people can act on.
pub fn parse_address(text: &str, what: &str) -> Result<Pubkey, DashError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DashError::BadRequest(format!("no {what} address given")));
    }
    if text.len() > 44 || !text.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(DashError::BadRequest(format!(
            "{what} address {:?} is not a Solana address (base-58, 32 bytes)",
            text.chars().take(64).collect::<String>()
        )));
    }
    text.parse().map_err(|_| {
        DashError::BadRequest(format!(
            "{what} address {text:?} is not a Solana address (base-58, 32 bytes)"
        ))
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Count {
    pub name: &'static str,
    pub count: u64,
}

// ----- overview -----

#[derive(Debug, Serialize)]
pub struct Overview {
    pub program_id: String,
    pub chain_time: i64,
    pub jobs_total: usize,
    pub jobs_by_state: Vec<Count>,
    /// Jobs waiting for a node: pending and recovering.
    pub queue_length: u64,
    pub providers_total: usize,
    pub nodes_total: usize,
    pub nodes_by_status: Vec<Count>,
    /// The treasury's token balance: every commission the program paid into it.
    pub commission_collected: u64,
    pub treasury: String,
    /// Every slash of the program's history, oldest first.
    pub slashes: Vec<SlashRow>,
    pub slashed_total: u64,
    pub insurance_pool: String,
    pub insurance_pool_balance: u64,
    pub jobs: Vec<JobRow>,
    pub providers: Vec<ProviderRow>,
    pub nodes: Vec<NodeRow>,
    /// Jobs by state over the last hour, replayed from the program's history.
    pub timeline: Timeline,
    /// The completion rate over the jobs that ended in the window
    /// (`mcjs_ledger::completion`), against the founders' 80% line.
    pub completion: CompletionRate,
}

#[derive(Debug, Serialize)]
pub struct JobRow {
    pub key: String,
    pub state: &'static str,
    pub owner: String,
    pub node: Option<String>,
    pub bond: u64,
    pub paid: u64,
    pub checkpoints: u32,
    pub submitted_at: i64,
}

#[derive(Debug, Serialize)]
pub struct ProviderRow {
    pub key: String,
    pub owner: String,
    pub stake: u64,
    pub nodes: u32,
    pub jobs_completed: u64,
    pub failures: u64,
    pub slashed_total: u64,
}

#[derive(Debug, Serialize)]
pub struct NodeRow {
    pub key: String,
    pub provider: String,
    pub index: u32,
    pub gpu_model: String,
    pub gpu_count: u8,
    pub status: &'static str,
    pub price_per_gpu_hour: u64,
    pub current_job: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SlashRow {
    pub signature: String,
    pub slot: u64,
    pub at: i64,
    pub job: String,
    pub node: String,
    pub provider: String,
    pub cause: &'static str,
    pub amount: u64,
    pub slashed_to: String,
    pub reported_by: String,
}

/// The newest transactions a page reads of any address's history: a
/// page's cost does not grow with the address (the overview reads the
/// program's, which grows for ever).
pub const HISTORY_CAP: usize = 10_000;
/// The newest transactions `/search` reads of an address that is no MCJS
/// account, to find a closed job.
pub const LOCATE_CAP: usize = 32;

/// The overview's completion rate is over the jobs that ended in the last
/// 60 days of chain time, unless the request says otherwise (`?window_days=`).
pub const COMPLETION_WINDOW_DAYS: u32 = 60;
/// The longest window a request may ask for: ten years.
pub const MAX_COMPLETION_WINDOW_DAYS: u32 = 3_650;

/// The overview's `?window_days=`: whole days, 1 to [`MAX_COMPLETION_WINDOW_DAYS`].
pub fn parse_window_days(text: Option<&str>) -> Result<u32, DashError> {
    let Some(text) = text else {
        return Ok(COMPLETION_WINDOW_DAYS);
    };
    match text.trim().parse::<u32>() {
        Ok(days) if (1..=MAX_COMPLETION_WINDOW_DAYS).contains(&days) => Ok(days),
        _ => Err(DashError::BadRequest(format!(
            "window_days {:?} is not a whole number of days from 1 to {MAX_COMPLETION_WINDOW_DAYS}",
            text.chars().take(32).collect::<String>()
        ))),
    }
}

pub async fn overview(client: &ChainClient, window_days: u32) -> Result<Overview, DashError> {
    let (_, config) = client.config().await?;
    let jobs = client.jobs(JobFilter::All).await?;
    let providers = client.providers().await?;
    let nodes = client.nodes().await?;
    let chain_time = client.chain_time().await?;
    let commission_collected = client.token_balance(&config.treasury).await?;
    let insurance_pool_balance = client.token_balance(&config.insurance_pool).await?;
    let history = client
        .account_history_capped(&PROGRAM_ID, HISTORY_CAP)
        .await?;

    let jobs_by_state = JOB_STATES
        .iter()
        .map(|&name| Count {
            name,
            count: jobs.iter().filter(|(_, j)| j.state.name() == name).count() as u64,
        })
        .collect();
    let queue_length = jobs
        .iter()
        .filter(|(_, j)| {
            matches!(
                j.state,
                JobState::Pending { .. } | JobState::Recovering { .. }
            )
        })
        .count() as u64;
    let nodes_by_status = NODE_STATUSES
        .iter()
        .map(|&status| Count {
            name: node_status(status),
            count: nodes.iter().filter(|(_, n)| n.status == status).count() as u64,
        })
        .collect();
    let slashes: Vec<SlashRow> = history
        .iter()
        .filter_map(|entry| match &entry.event {
            McjsEvent::FailureReported(e) if e.slashed > 0 => Some(SlashRow {
                signature: entry.signature.clone(),
                slot: entry.slot,
                at: e.at,
                job: e.job.to_string(),
                node: e.node.to_string(),
                provider: e.provider.to_string(),
                cause: failure_cause(e.cause),
                amount: e.slashed,
                slashed_to: e.slashed_to.to_string(),
                reported_by: e.by.to_string(),
            }),
            _ => None,
        })
        .collect();

    Ok(Overview {
        program_id: PROGRAM_ID.to_string(),
        chain_time,
        jobs_total: jobs.len(),
        jobs_by_state,
        queue_length,
        providers_total: providers.len(),
        nodes_total: nodes.len(),
        nodes_by_status,
        commission_collected,
        treasury: config.treasury.to_string(),
        slashed_total: slashes.iter().map(|s| s.amount).sum(),
        slashes,
        insurance_pool: config.insurance_pool.to_string(),
        insurance_pool_balance,
        jobs: jobs.iter().rev().map(|(k, j)| job_row(k, j)).collect(),
        providers: providers
            .iter()
            .map(|(k, p)| ProviderRow {
                key: k.to_string(),
                owner: p.owner.to_string(),
                stake: p.stake,
                nodes: p.node_count,
                jobs_completed: p.jobs_completed,
                failures: p.failures,
                slashed_total: p.slashed_total,
            })
            .collect(),
        nodes: nodes.iter().map(|(k, n)| node_row(k, n)).collect(),
        timeline: chart::jobs_by_state(&history, chain_time),
        completion: CompletionRate::over(
            job_ends(jobs.iter().map(|(k, j)| (k, &j.state)), &history).values(),
            chain_time,
            i64::from(window_days) * 86_400,
        ),
    })
}

fn job_row(key: &Pubkey, job: &Job) -> JobRow {
    JobRow {
        key: key.to_string(),
        state: job.state.name(),
        owner: job.owner.to_string(),
        node: job.node.map(|n| n.to_string()),
        bond: job.bond,
        paid: job.paid,
        checkpoints: job.checkpoint_count,
        submitted_at: job.submitted_at,
    }
}

fn node_row(key: &Pubkey, node: &mcjs::state::Node) -> NodeRow {
    NodeRow {
        key: key.to_string(),
        provider: node.provider.to_string(),
        index: node.index,
        gpu_model: node.hardware.gpu_model.clone(),
        gpu_count: node.hardware.gpu_count,
        status: node_status(node.status),
        price_per_gpu_hour: node.price_per_gpu_hour,
        current_job: node.current_job.map(|j| j.to_string()),
    }
}

// ----- provider -----

#[derive(Debug, Serialize)]
pub struct ProviderView {
    pub key: String,
    pub owner: String,
    pub payout: String,
    pub stake: u64,
    pub pending_withdrawal: Option<PendingWithdrawal>,
    pub registered_at: i64,
    pub active_assignments: u32,
    pub jobs_completed: u64,
    pub failures: u64,
    /// The account's counters: completed over completed plus `failures`
    /// (every slash); `None` before any ended.
    pub completion_rate: Option<f64>,
    /// The provider's reliability record over all its nodes, from its
    /// history (`mcjs_ledger::reliability`, as `mcjs audit provider`).
    pub reliability: Reliability,
    /// Verifications that proved the provider wrong and slashed it.
    pub verification_losses: u32,
    pub failures_by_cause: Vec<Count>,
    /// Reports that slashed the stake (into the insurance pool), with who reported them.
    pub slashes: Vec<mcjs_ledger::audit::FailureRecord>,
    pub slashed_total: u64,
    pub failure_reports: Vec<mcjs_ledger::audit::FailureRecord>,
    pub nodes: Vec<ProviderNodeRow>,
}

/// One of a provider's nodes, with its reliability record.
#[derive(Debug, Serialize)]
pub struct ProviderNodeRow {
    #[serde(flatten)]
    pub node: NodeRow,
    pub reliability: Reliability,
}

#[derive(Debug, Serialize)]
pub struct PendingWithdrawal {
    pub amount: u64,
    pub requested_at: i64,
}

/// A Provider account, or the wallet that owns one.
pub async fn provider(client: &ChainClient, given: &Pubkey) -> Result<ProviderView, DashError> {
    let not_a_provider =
        || DashError::NotFound(format!("no provider at {given} (nor owned by it)"));
    let (key, account) = match client.provider(given).await {
        Ok(Some(account)) => (*given, account),
        Ok(None) | Err(ChainError::Decode { .. }) => {
            let owned = pda::provider(given);
            match client.provider(&owned).await {
                Ok(Some(account)) => (owned, account),
                Ok(None) | Err(ChainError::Decode { .. }) => return Err(not_a_provider()),
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    let history = client.account_history_capped(&key, HISTORY_CAP).await?;
    let nodes = client.nodes_of(&key).await?;
    let now = client.chain_time().await?;
    let audit = audit_provider(&key, &account, &history, now);
    let mut by_cause: BTreeMap<&'static str, u64> = BTreeMap::new();
    for r in &audit.failure_reports {
        *by_cause.entry(r.cause).or_default() += 1;
    }
    Ok(ProviderView {
        key: key.to_string(),
        owner: audit.owner.clone(),
        payout: account.payout.to_string(),
        stake: account.stake,
        pending_withdrawal: account.pending_withdrawal.map(|w| PendingWithdrawal {
            amount: w.amount,
            requested_at: w.requested_at,
        }),
        registered_at: account.registered_at,
        active_assignments: account.active_assignments,
        jobs_completed: audit.jobs_completed,
        failures: audit.failures,
        completion_rate: audit.completion_rate,
        failures_by_cause: by_cause
            .into_iter()
            .map(|(name, count)| Count { name, count })
            .collect(),
        slashes: audit
            .failure_reports
            .iter()
            .filter(|r| r.slashed > 0)
            .cloned()
            .collect(),
        slashed_total: audit.slashed_total,
        failure_reports: audit.failure_reports,
        reliability: audit.reliability.record,
        verification_losses: audit.reliability.verification_losses,
        // The provider's history holds every assignment of its nodes.
        nodes: nodes
            .iter()
            .map(|(k, n)| ProviderNodeRow {
                node: node_row(k, n),
                reliability: node_reliability(k, &history, now),
            })
            .collect(),
    })
}

// ----- node -----

#[derive(Debug, Serialize)]
pub struct NodeView {
    pub key: String,
    pub provider: String,
    pub index: u32,
    pub operator: String,
    pub hardware: Hardware,
    pub readiness: u8,
    pub price_per_gpu_hour: u64,
    pub status: &'static str,
    pub status_since: i64,
    pub current_job: Option<String>,
    /// The program's own record on the Node account (what reliability-aware
    /// placement reads): assignments ended by the provider's fault, and the
    /// seconds the node has held jobs.
    pub failures: u32,
    pub service_secs: u64,
    /// The hardware challenge's verdict on the profile, for people
    /// (docs/hardware-challenge.md): proven, or the lowest class and why.
    pub hardware_proof: String,
    /// Memory each GPU proved it held, KiB, when proven.
    pub held_kib_per_gpu: Option<u32>,
    /// From the node's history (`mcjs_ledger::reliability`).
    pub reliability: Reliability,
}

/// The node's HAL summary as the chain records it.
#[derive(Debug, Serialize)]
pub struct Hardware {
    pub gpu_model: String,
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    /// e.g. 75 for 7.5.
    pub compute_capability: u16,
    pub cpu_cores: u16,
    pub ram_mib: u32,
    pub disk_gib: u32,
    pub checkpoint_write_mibps: u32,
}

pub async fn node(client: &ChainClient, key: &Pubkey) -> Result<NodeView, DashError> {
    let node = match client.node(key).await {
        Ok(Some(node)) => node,
        Ok(None) => return Err(DashError::NotFound(format!("no node at {key}"))),
        Err(ChainError::Decode { .. }) => {
            return Err(DashError::NotFound(format!(
                "{key} is not an MCJS node account"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let history = client.account_history_capped(key, HISTORY_CAP).await?;
    let now = client.chain_time().await?;
    let h = &node.hardware;
    Ok(NodeView {
        key: key.to_string(),
        provider: node.provider.to_string(),
        index: node.index,
        operator: node.operator.to_string(),
        hardware: Hardware {
            gpu_model: h.gpu_model.clone(),
            gpu_count: h.gpu_count,
            vram_per_gpu_mib: h.vram_per_gpu_mib,
            compute_capability: h.compute_capability,
            cpu_cores: h.cpu_cores,
            ram_mib: h.ram_mib,
            disk_gib: h.disk_gib,
            checkpoint_write_mibps: h.checkpoint_write_mibps,
        },
        readiness: node.readiness,
        price_per_gpu_hour: node.price_per_gpu_hour,
        status: node_status(node.status),
        status_since: node.status_since,
        current_job: node.current_job.map(|j| j.to_string()),
        failures: node.failures,
        service_secs: node.service_secs,
        hardware_proof: hardware_proof(&node.challenge),
        held_kib_per_gpu: node.challenge.proven.map(|p| p.held_kib_per_gpu),
        reliability: node_reliability(key, &history, now),
    })
}

/// What the node's challenge record says of its profile.
pub fn hardware_proof(record: &mcjs::state::ChallengeRecord) -> String {
    use mcjs::state::ChallengeResult;
    let state = match (record.proven, record.last) {
        (Some(p), _) => match &p.attestation {
            Some(a) => format!(
                "proven by a hardware challenge at {}; {}",
                p.at,
                mcjs_client::challenge::attestation_summary(a, p.gpu_count)
            ),
            None => format!("proven by a hardware challenge at {}", p.at),
        },
        (None, None) => "not challenged under this profile: the lowest class".to_string(),
        (None, Some(ChallengeResult::Unbounded)) => {
            "answered right, but the model has no measured bound: the lowest class".to_string()
        }
        (None, Some(ChallengeResult::Failed(f))) => {
            format!("failed its hardware challenge ({f:?}): the lowest class")
        }
        (None, Some(ChallengeResult::Passed)) => "the lowest class".to_string(),
    };
    if record.in_flight.is_some() {
        format!("{state}; answering a challenge now")
    } else {
        state
    }
}

// ----- program -----

#[derive(Debug, Serialize)]
pub struct ProgramView {
    pub program_id: String,
    pub config: String,
    pub admin: String,
    pub scheduler: String,
    pub usdc_mint: String,
    pub usdc_decimals: u8,
    pub treasury: String,
    pub insurance_pool: String,
    pub commission_bps: u16,
    pub slash_amount: u64,
    pub min_provider_stake: u64,
    pub liveness_factor: u8,
    pub withdrawal_cooldown_secs: u32,
    pub challenge_window_secs: u32,
    pub verification_fee_bps: u16,
    pub draw_secs: u32,
    pub require_proven_hardware: bool,
    pub paused: bool,
    /// The program's loader, and its upgrade authority where the loader has one.
    pub loader: Option<String>,
    pub upgrade_authority: Option<String>,
}

const UPGRADEABLE_LOADER: Pubkey =
    Pubkey::from_str_const("BPFLoaderUpgradeab1e11111111111111111111111");

pub async fn program(client: &ChainClient) -> Result<ProgramView, DashError> {
    let (key, config) = client.config().await?;
    let program = client.account(&PROGRAM_ID).await?;
    let loader = program.as_ref().map(|a| a.owner);
    let upgrade_authority = match loader {
        Some(owner) if owner == UPGRADEABLE_LOADER => client
            .upgrade_authority(&PROGRAM_ID)
            .await?
            .flatten()
            .map(|key| key.to_string()),
        _ => None,
    };
    let p = &config.params;
    Ok(ProgramView {
        program_id: PROGRAM_ID.to_string(),
        config: key.to_string(),
        admin: config.admin.to_string(),
        scheduler: config.scheduler.to_string(),
        usdc_mint: config.usdc_mint.to_string(),
        usdc_decimals: config.usdc_decimals,
        treasury: config.treasury.to_string(),
        insurance_pool: config.insurance_pool.to_string(),
        commission_bps: p.commission_bps,
        slash_amount: p.slash_amount,
        min_provider_stake: p.min_provider_stake,
        liveness_factor: p.liveness_factor,
        withdrawal_cooldown_secs: p.withdrawal_cooldown_secs,
        challenge_window_secs: p.challenge_window_secs,
        verification_fee_bps: p.verification_fee_bps,
        draw_secs: p.draw_secs,
        require_proven_hardware: p.require_proven_hardware,
        paused: config.paused,
        loader: loader.map(|l| l.to_string()),
        upgrade_authority,
    })
}

// ----- search -----

/// Where an address is shown: `/job/..`, `/provider/..`, `/node/..` or `/program`.
pub async fn locate(client: &ChainClient, key: &Pubkey) -> Result<String, DashError> {
    use mcjs_client::decode;
    if *key == PROGRAM_ID || *key == pda::config() {
        return Ok("/program".into());
    }
    if let Some(account) = client.account(key).await?
        && account.owner == PROGRAM_ID
    {
        if decode::job(&account.data).is_ok() {
            return Ok(format!("/job/{key}"));
        }
        if decode::provider(&account.data).is_ok() {
            return Ok(format!("/provider/{key}"));
        }
        if decode::node(&account.data).is_ok() {
            return Ok(format!("/node/{key}"));
        }
    }
    if client
        .provider(&pda::provider(key))
        .await
        .ok()
        .flatten()
        .is_some()
    {
        return Ok(format!("/provider/{key}"));
    }
    // A closed job's address: its last transactions are MCJS's. Anything
    // else (the token program has millions) costs a page, not a history.
    if !client.job_history_capped(key, LOCATE_CAP).await?.is_empty() {
        return Ok(format!("/job/{key}"));
    }
    Err(DashError::NotFound(format!(
        "nothing of MCJS at {key}: not a job (open or closed), provider, provider's wallet, node or the program"
    )))
}

/// A cheap fingerprint of what the pages show, for live updates: the data
/// of one account, or of every MCJS account.
pub async fn fingerprint(
    client: &ChainClient,
    watch: Option<&Pubkey>,
) -> Result<String, DashError> {
    use sha2::{Digest, Sha256};
    match watch {
        Some(key) => {
            let mut hasher = Sha256::new();
            if let Some(account) = client.account(key).await? {
                hasher.update(&account.data);
            }
            Ok(hex::encode(&hasher.finalize()[..12]))
        }
        None => Ok(fingerprint_of(
            &client.jobs(JobFilter::All).await?,
            &client.nodes().await?,
            &client.providers().await?,
        )),
    }
}

/// The fingerprint of every MCJS account, from the accounts themselves
/// (read from the chain, or from an index that follows it).
pub fn fingerprint_of(
    jobs: &[(Pubkey, mcjs::state::Job)],
    nodes: &[(Pubkey, mcjs::state::Node)],
    providers: &[(Pubkey, mcjs::state::Provider)],
) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for (key, job) in jobs {
        hasher.update(key.as_ref());
        hasher.update([mcjs_client::rpc::state_tag(&job.state)]);
        hasher.update(job.checkpoint_count.to_le_bytes());
        hasher.update(job.paid.to_le_bytes());
    }
    for (key, node) in nodes {
        hasher.update(key.as_ref());
        hasher.update([node.status as u8]);
    }
    for (key, provider) in providers {
        hasher.update(key.as_ref());
        hasher.update(provider.stake.to_le_bytes());
    }
    hex::encode(&hasher.finalize()[..12])
}
