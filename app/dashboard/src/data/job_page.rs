//! The job page: a job's account, where its bond went, its checkpoints,
//! placements and failures, and the audit's verdict on its record.

use std::collections::BTreeMap;

use mcjs::state::Job;
use mcjs_client::history::{HistoryEntry, McjsEvent, failure_cause};
use mcjs_client::{ChainClient, ChainError, Pubkey};
use mcjs_ledger::audit::{AuditStep, Divergence, audit_job};
use serde::Serialize;

use super::{DashError, HISTORY_CAP};

#[derive(Debug, Serialize)]
pub struct JobView {
    pub key: String,
    /// The state on chain; `"closed"` once the account is gone.
    pub state: &'static str,
    pub account: Option<JobAccount>,
    pub bond_flow: BondFlow,
    pub audit: AuditVerdict,
    pub events: Vec<AuditStep>,
    pub checkpoints: Vec<CheckpointRow>,
    pub placements: Vec<Placement>,
    pub failures: Vec<FailureRow>,
    /// The intervals drawn for verification, their checkers and outcomes.
    pub verifications: Vec<mcjs_ledger::audit::VerificationRecord>,
    pub output_hash: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct JobAccount {
    pub owner: String,
    pub job_id: u64,
    pub spec_hash: String,
    pub node: Option<String>,
    pub provider: Option<String>,
    pub generation: u32,
    pub rate_per_hour: u64,
    pub bond: u64,
    pub paid: u64,
    pub accrued: u64,
    pub restarts_used: u8,
    pub restart_budget: u8,
    pub checkpoint_interval_secs: u32,
    pub max_duration_secs: u32,
    pub checkpoint_count: u32,
    pub submitted_at: i64,
    pub finished_at: Option<i64>,
    pub last_failure: Option<&'static str>,
    pub compensated: u64,
}

/// Where the job's bond went, from its events.
#[derive(Debug, Default, Serialize)]
pub struct BondFlow {
    /// The bond locked at submission.
    pub locked: u64,
    pub top_ups: Vec<TopUp>,
    pub topped_up: u64,
    /// Provider share of every settled segment, per provider.
    pub paid_to_providers: Vec<ProviderPayment>,
    pub paid_total: u64,
    pub commission: u64,
    /// What went back to the owner at the terminal state.
    pub refund: u64,
    /// Paid to the owner from the insurance pool.
    pub compensated: u64,
}

#[derive(Debug, Serialize)]
pub struct TopUp {
    pub amount: u64,
    pub by: String,
    pub signature: String,
}

#[derive(Debug, Serialize)]
pub struct ProviderPayment {
    pub provider: String,
    pub amount: u64,
    pub commission: u64,
    pub segments: u32,
}

#[derive(Debug, Serialize)]
pub struct AuditVerdict {
    pub verified: bool,
    /// The first divergence, in words; `None` when verified.
    pub divergence: Option<String>,
    pub divergence_detail: Option<Divergence>,
    /// The attestation where the record first diverges, when it is one.
    pub diverged_at_checkpoint: Option<u32>,
    pub attestations: u32,
    pub recomputed_chain: String,
    pub on_chain_commitment: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct CheckpointRow {
    pub index: u32,
    pub generation: u32,
    pub epoch: u32,
    pub step: u64,
    pub hash: String,
    pub recorded_chain: String,
    pub recomputed_chain: String,
    pub slot: u64,
    pub block_time: Option<i64>,
    pub signature: String,
    /// `verified`, `diverged` (the first divergence), or `unverified` (after it).
    pub status: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Placement {
    pub node: String,
    pub provider: String,
    pub generation: u32,
    pub rate_per_hour: u64,
    pub slot: u64,
    pub signature: String,
}

#[derive(Debug, Serialize)]
pub struct FailureRow {
    pub node: String,
    pub provider: String,
    pub generation: u32,
    pub cause: &'static str,
    pub slashed: u64,
    pub slashed_to: String,
    pub reported_by: String,
    pub job_failed: bool,
    pub at: i64,
    pub slot: u64,
    pub signature: String,
}

pub async fn job(client: &ChainClient, key: &Pubkey) -> Result<JobView, DashError> {
    let account = match client.job(key).await {
        Ok(account) => account,
        Err(ChainError::Decode { .. }) => {
            return Err(DashError::NotFound(format!(
                "{key} is not an MCJS job account"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let history = client.job_history_capped(key, HISTORY_CAP).await?;
    if account.is_none() && history.is_empty() {
        return Err(DashError::NotFound(format!(
            "no job at {key}, and no transaction history for it"
        )));
    }
    Ok(job_view(key, account.as_ref(), &history))
}

/// A segment paid to `provider`: its share and the commission.
fn paid(
    flow: &mut BondFlow,
    payments: &mut BTreeMap<Pubkey, ProviderPayment>,
    provider: Pubkey,
    amount: u64,
    commission: u64,
) {
    flow.paid_total += amount;
    flow.commission += commission;
    let p = payments.entry(provider).or_insert_with(|| ProviderPayment {
        provider: provider.to_string(),
        amount: 0,
        commission: 0,
        segments: 0,
    });
    p.amount += amount;
    p.commission += commission;
    p.segments += 1;
}

/// The job page from its account (`None` once closed) and its history, oldest first.
pub fn job_view(key: &Pubkey, account: Option<&Job>, history: &[HistoryEntry]) -> JobView {
    let audit = audit_job(key, account, history);
    let diverged_at_checkpoint = match &audit.divergence {
        Some(Divergence::EventChain { index, .. })
        | Some(Divergence::Generation { index, .. })
        | Some(Divergence::NotAdvancing { index, .. }) => Some(*index),
        _ => None,
    };
    let checkpoints = audit
        .steps
        .iter()
        .filter_map(|step| {
            let c = step.chain.as_ref()?;
            let status = match diverged_at_checkpoint {
                Some(i) if c.index == i => "diverged",
                Some(i) if c.index > i => "unverified",
                _ if audit.divergence.is_some() && diverged_at_checkpoint.is_none() => "consistent",
                _ => "verified",
            };
            Some(CheckpointRow {
                index: c.index,
                generation: c.generation,
                epoch: c.epoch,
                step: c.step,
                hash: c.checkpoint_hash.clone(),
                recorded_chain: c.recorded.clone(),
                recomputed_chain: c.recomputed.clone(),
                slot: step.slot,
                block_time: step.block_time,
                signature: step.signature.clone(),
                status,
            })
        })
        .collect();

    let mut flow = BondFlow::default();
    let mut payments: BTreeMap<Pubkey, ProviderPayment> = BTreeMap::new();
    let mut placements = Vec::new();
    let mut failures = Vec::new();
    let mut output_hash = None;
    for entry in history
        .iter()
        .filter(|e| e.event.job().as_ref() == Some(key))
    {
        match &entry.event {
            McjsEvent::JobSubmitted(e) => flow.locked += e.bond,
            McjsEvent::BondToppedUp(e) => {
                flow.topped_up += e.amount;
                flow.top_ups.push(TopUp {
                    amount: e.amount,
                    by: e.by.to_string(),
                    signature: entry.signature.clone(),
                });
            }
            // A verified job's segment is paid when released, after its window.
            McjsEvent::SegmentReleased(e) if !e.refunded => paid(
                &mut flow,
                &mut payments,
                e.provider,
                e.provider_amount,
                e.commission,
            ),
            // A proven-wrong segment goes back to the owner; a confirmed
            // check's fee comes out of the commission.
            McjsEvent::VerificationResolved(e) => {
                flow.refund += e.refund;
                if e.slashed == 0 {
                    flow.commission += e.fees;
                }
            }
            McjsEvent::SegmentSettled(e) => paid(
                &mut flow,
                &mut payments,
                e.provider,
                e.provider_amount,
                e.commission,
            ),
            McjsEvent::JobCompleted(e) => {
                flow.refund += e.refund;
                output_hash = Some(hex::encode(e.output_hash));
            }
            McjsEvent::JobCancelled(e) => flow.refund += e.refund,
            McjsEvent::JobExpired(e) => flow.refund += e.refund,
            McjsEvent::OwnerCompensated(e) => flow.compensated += e.amount,
            McjsEvent::JobAssigned(e) => placements.push(Placement {
                node: e.node.to_string(),
                provider: e.provider.to_string(),
                generation: e.generation,
                rate_per_hour: e.rate_per_hour,
                slot: entry.slot,
                signature: entry.signature.clone(),
            }),
            McjsEvent::FailureReported(e) => {
                if e.job_failed {
                    flow.refund += e.refund;
                }
                failures.push(FailureRow {
                    node: e.node.to_string(),
                    provider: e.provider.to_string(),
                    generation: e.failed_generation,
                    cause: failure_cause(e.cause),
                    slashed: e.slashed,
                    slashed_to: e.slashed_to.to_string(),
                    reported_by: e.by.to_string(),
                    job_failed: e.job_failed,
                    at: e.at,
                    slot: entry.slot,
                    signature: entry.signature.clone(),
                });
            }
            _ => {}
        }
    }
    flow.paid_to_providers = payments.into_values().collect();
    if let Some(hash) = account.and_then(|j| j.output_hash) {
        output_hash = Some(hex::encode(hash));
    }

    JobView {
        key: key.to_string(),
        state: account.map_or("closed", |j| j.state.name()),
        account: account.map(|j| JobAccount {
            owner: j.owner.to_string(),
            job_id: j.job_id,
            spec_hash: hex::encode(j.spec_hash),
            node: j.node.map(|n| n.to_string()),
            provider: j.provider.map(|p| p.to_string()),
            generation: j.generation,
            rate_per_hour: j.rate_per_hour,
            bond: j.bond,
            paid: j.paid,
            accrued: j.accrued,
            restarts_used: j.restarts_used,
            restart_budget: j.terms.restart_budget,
            checkpoint_interval_secs: j.terms.checkpoint_interval_secs,
            max_duration_secs: j.terms.max_duration_secs,
            checkpoint_count: j.checkpoint_count,
            submitted_at: j.submitted_at,
            finished_at: j.finished_at,
            last_failure: j.last_failure.map(failure_cause),
            compensated: j.compensated,
        }),
        bond_flow: flow,
        audit: AuditVerdict {
            verified: audit.verified(),
            divergence: audit.divergence.as_ref().map(|d| d.to_string()),
            divergence_detail: audit.divergence.clone(),
            diverged_at_checkpoint,
            attestations: audit.attestations,
            recomputed_chain: audit.recomputed_chain.clone(),
            on_chain_commitment: audit.on_chain_commitment.clone(),
        },
        events: audit.steps,
        checkpoints,
        placements,
        failures,
        verifications: audit.verifications,
        output_hash,
    }
}
