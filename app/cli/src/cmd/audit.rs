//! `mcjs audit`: what anyone can verify from the chain alone.

use std::fmt;

use anyhow::anyhow;
use mcjs_client::ChainError;
use mcjs_ledger::audit::{JobAudit, ProviderAudit, audit_job, audit_provider};
use mcjs_ledger::reliability::Reliability;
use serde::Serialize;

use crate::chain::{Ctx, parse_pubkey, usdc};
use crate::{EXIT_FALSE, EXIT_OK, GlobalArgs};

#[derive(clap::Subcommand, Debug)]
pub enum AuditCommand {
    /// Rebuild a job's history from the transaction logs, recompute its
    /// checkpoint chain and check it against the on-chain commitment:
    /// exit 0 when it verifies, 1 when not.
    Job { job: String },
    /// A provider's record: completion rate, failures, slashes, and the
    /// reliability of the provider and of each of its nodes from the chain's
    /// history (assignments completed and failed by cause, time in service,
    /// failures per 100 hours in service, share completed).
    Provider {
        /// A Provider account or its owner's wallet.
        provider: String,
    },
}

pub fn run(cmd: AuditCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    let ctx = Ctx::resolve(global)?;
    crate::chain::runtime()?.block_on(async {
        let client = ctx.client();
        match cmd {
            AuditCommand::Job { job } => {
                let key = parse_pubkey(&job, "job")?;
                let account = match client.job(&key).await {
                    Ok(account) => account,
                    Err(ChainError::Decode { .. }) => {
                        anyhow::bail!("{key} is not an MCJS job account: check the address")
                    }
                    Err(e) => return Err(e.into()),
                };
                let history = client.job_history(&key).await?;
                if account.is_none() && history.is_empty() {
                    client.check_program().await?;
                    anyhow::bail!(
                        "no job at {key} and no transaction history for it on {}: check the address and the network",
                        client.url()
                    );
                }
                let audit = audit_job(&key, account.as_ref(), &history);
                let verified = audit.verified();
                global.output.print(&JobAuditView(audit))?;
                Ok(if verified { EXIT_OK } else { EXIT_FALSE })
            }
            AuditCommand::Provider { provider } => {
                let given = parse_pubkey(&provider, "provider")?;
                let key = crate::cmd::provider::provider_key(&client, &given).await?;
                let account = client
                    .provider(&key)
                    .await?
                    .ok_or_else(|| anyhow!("no provider at {given} (nor owned by it) on {}", client.url()))?;
                let history = client.account_history(&key).await?;
                let now = client.chain_time().await?;
                global.output.print(&ProviderAuditView(audit_provider(
                    &key, &account, &history, now,
                )))?;
                Ok(EXIT_OK)
            }
        }
    })
}

#[derive(Serialize)]
#[serde(transparent)]
struct JobAuditView(JobAudit);

impl fmt::Display for JobAuditView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.0;
        writeln!(
            f,
            "job {} ({}), {} events, {} checkpoint attestations",
            a.job,
            a.state.unwrap_or("closed"),
            a.steps.len(),
            a.attestations
        )?;
        for (i, step) in a.steps.iter().enumerate() {
            writeln!(
                f,
                "{:>3}. slot {:<8} {:<20} {}",
                i + 1,
                step.slot,
                step.event,
                step.description
            )?;
            writeln!(
                f,
                "     signed by {}  tx {}",
                step.signers.join(", "),
                step.signature
            )?;
        }
        if !a.verifications.is_empty() {
            writeln!(f, "verified intervals:")?;
        }
        for v in &a.verifications {
            writeln!(
                f,
                "  interval {:>3}  {} -> step {}  by provider {}: {}",
                v.interval,
                v.from_step
                    .map_or_else(|| "start".to_string(), |s| format!("step {s}")),
                v.to_step,
                v.provider,
                v.outcome.unwrap_or("open")
            )?;
            for (node, hash) in &v.checks {
                let role = if *node == v.verifier_node {
                    "verifier"
                } else {
                    "referee "
                };
                let agrees = if *hash == v.claimed_hash {
                    "agrees"
                } else {
                    "differs"
                };
                writeln!(f, "      {role} {node}: {agrees} ({}…)", &hash[..16])?;
            }
            if v.slashed > 0 {
                writeln!(
                    f,
                    "      slashed {} USDC from provider {}; owner refunded {} USDC",
                    usdc(v.slashed),
                    v.slashed_provider.as_deref().unwrap_or("?"),
                    usdc(v.refund)
                )?;
            }
            for (provider, amount) in &v.checkers_slashed {
                writeln!(
                    f,
                    "      first-round checker {provider} proven wrong by the second round: slashed {} USDC",
                    usdc(*amount)
                )?;
            }
        }
        writeln!(f, "recomputed chain     {}", a.recomputed_chain)?;
        writeln!(
            f,
            "on-chain commitment  {}",
            a.on_chain_commitment
                .as_deref()
                .unwrap_or("(account closed)")
        )?;
        match &a.divergence {
            None => write!(
                f,
                "VERIFIED: the history reproduces the on-chain commitment"
            ),
            Some(d) => write!(f, "NOT VERIFIED: {d}"),
        }
    }
}

#[derive(Serialize)]
#[serde(transparent)]
struct ProviderAuditView(ProviderAudit);

impl fmt::Display for ProviderAuditView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.0;
        writeln!(f, "provider {} (owner {})", a.provider, a.owner)?;
        writeln!(f, "  stake        {} USDC", usdc(a.stake))?;
        writeln!(
            f,
            "  nodes        {} ({} jobs active)",
            a.nodes, a.active_assignments
        )?;
        writeln!(
            f,
            "  completed    {} jobs; completion rate {}",
            a.jobs_completed,
            a.completion_rate
                .map_or("n/a (no job ended yet)".to_string(), |r| format!(
                    "{:.1}%",
                    r * 100.0
                ))
        )?;
        write!(
            f,
            "  failures     {}, slashed {} USDC in all (into the insurance pool, never to a job's owner or its reporter)",
            a.failures,
            usdc(a.slashed_total)
        )?;
        for r in &a.failure_reports {
            write!(
                f,
                "\n    {} job {} node {} generation {}: {}, slashed {} USDC to {}, reported by {}",
                r.at,
                r.job,
                r.node,
                r.generation,
                r.cause,
                usdc(r.slashed),
                r.slashed_to,
                r.reported_by
            )?;
        }
        let r = &a.reliability;
        write!(
            f,
            "\nreliability from the chain's history (failures the provider answers for; a job's own faults are not held against it)"
        )?;
        write_reliability(f, "  ", &r.record)?;
        write!(
            f,
            "\n  verifications lost {} (slashed for a wrong result; not an assignment's end)",
            r.verification_losses
        )?;
        for node in &r.nodes {
            write!(f, "\n  node {}", node.node)?;
            write_reliability(f, "    ", &node.record)?;
        }
        Ok(())
    }
}

/// A reliability record as people read it, each line after a newline and
/// `indent`; "no history" for a record with no assignment.
pub(crate) fn write_reliability(
    f: &mut fmt::Formatter<'_>,
    indent: &str,
    r: &Reliability,
) -> fmt::Result {
    if !r.has_history() {
        return write!(
            f,
            "\n{indent}no history: no assignment on chain to judge by"
        );
    }
    write!(
        f,
        "\n{indent}assignments  {} since {}: {} completed, {} failed on the provider, {} by the job's own fault, {} taken off, {} open",
        r.assignments,
        r.since.unwrap_or_default(),
        r.completed,
        r.provider_failures,
        r.job_faults,
        r.taken_off,
        r.open
    )?;
    write!(
        f,
        "\n{indent}in service   {:.1} hours; {} failures per 100 hours in service; {} of assignments completed",
        r.hours_in_service(),
        r.failures_per_100_hours
            .map_or("n/a".to_string(), |x| format!("{x:.2}")),
        r.completed_share.map_or(
            "n/a (none completed or failed on the provider yet)".to_string(),
            |x| format!("{:.1}%", x * 100.0)
        )
    )?;
    if !r.failures_by_cause.is_empty() {
        let causes: Vec<String> = r
            .failures_by_cause
            .iter()
            .map(|(cause, n)| format!("{} {n}", cause.replace('_', " ")))
            .collect();
        write!(f, "\n{indent}failures     {}", causes.join(", "))?;
    }
    Ok(())
}
