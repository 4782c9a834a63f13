//! The round's decisions as transactions. Pure: the shell sends what these
//! plans return (`Daemon::send_all`) and applies the one error policy (a
//! refused transaction is forgotten; the next round starts from the chain
//! again). [`plan`]: the core's actions (failures, placements), every
//! account resolved from the round's snapshot; [`duties`]: the verification
//! and hardware challenge duties.

use std::collections::{HashMap, HashSet};

use mcjs::state::{ConfigParams, Job, Provider};
use mcjs_client::ix::{self, JobAccounts};
use mcjs_client::{Instruction, Pubkey};

use crate::core::Action;

pub mod duties;
pub use duties::{Duty, plan_challenges, plan_checks};

/// One transaction to send, and what to send instead when it is refused.
#[derive(Clone, Debug)]
pub struct Planned<A = Action> {
    pub actions: Vec<A>,
    pub instructions: Vec<Instruction>,
    /// The transaction of a prefix of `actions`, sent when this one is
    /// refused. A report paired with its job's new placement is retried
    /// alone: the report must land even when the placement cannot (a node
    /// that went busy, a stake that fell), and the job is placed in the next
    /// round.
    pub fallback: Option<Box<Planned<A>>>,
}

impl<A> Planned<A> {
    /// `action` alone, in one transaction of one instruction.
    pub fn one(action: A, instruction: Instruction) -> Self {
        Self {
            actions: vec![action],
            instructions: vec![instruction],
            fallback: None,
        }
    }
}

/// An action that could not be turned into a transaction, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unplanned {
    pub action: Action,
    pub reason: String,
}

/// What the shell needs to resolve accounts: the round's snapshot.
pub struct Accounts<'a> {
    pub scheduler: Pubkey,
    pub deployment: &'a ix::Deployment,
    pub params: &'a ConfigParams,
    pub jobs: &'a HashMap<Pubkey, &'a Job>,
    pub providers: &'a HashMap<Pubkey, Provider>,
}

/// The transactions for `actions`, in order. A job reported failed and
/// placed again in the same round travels in one transaction (report, then
/// assignment), so recovery does not wait for another round.
pub fn plan(actions: Vec<Action>, a: &Accounts<'_>) -> (Vec<Planned>, Vec<Unplanned>) {
    let reported: HashSet<Pubkey> = actions
        .iter()
        .filter_map(|a| match a {
            Action::ReportFailure { job, .. } => Some(*job),
            Action::Assign { .. } => None,
        })
        .collect();
    let mut placed_with_report: HashMap<Pubkey, Action> = HashMap::new();
    let mut order = Vec::new();
    for action in actions {
        match &action {
            Action::Assign { job, .. } if reported.contains(job) => {
                placed_with_report.insert(*job, action);
            }
            _ => order.push(action),
        }
    }
    let (mut planned, mut unplanned) = (Vec::new(), Vec::new());
    for action in order {
        let alone = match transaction(std::slice::from_ref(&action), a) {
            Ok(t) => t,
            Err(reason) => {
                unplanned.push(Unplanned { action, reason });
                continue;
            }
        };
        let follow_up = match &action {
            Action::ReportFailure { job, .. } => placed_with_report.remove(job),
            Action::Assign { .. } => None,
        };
        planned.push(match follow_up {
            Some(assign) => match transaction(&[action.clone(), assign], a) {
                Ok(mut both) => {
                    both.fallback = Some(Box::new(alone));
                    both
                }
                Err(_) => alone,
            },
            None => alone,
        });
    }
    (planned, unplanned)
}

/// `actions` in one transaction. A report before an assignment of the same
/// job moves it one generation on: the assignment's new Segment is one
/// further.
fn transaction(actions: &[Action], a: &Accounts<'_>) -> Result<Planned, String> {
    let mut instructions = Vec::with_capacity(actions.len());
    let mut reported = Vec::new();
    for action in actions {
        let offset = match action {
            Action::Assign { job, .. } => u32::from(reported.contains(job)),
            Action::ReportFailure { job, .. } => {
                reported.push(*job);
                0
            }
        };
        instructions.push(instruction(action, a, offset)?);
    }
    Ok(Planned {
        actions: actions.to_vec(),
        instructions,
        fallback: None,
    })
}

fn instruction(
    action: &Action,
    a: &Accounts<'_>,
    generation_offset: u32,
) -> Result<Instruction, String> {
    let me = a.scheduler;
    match action {
        Action::Assign {
            job,
            node,
            provider,
        } => {
            let new_segment = a
                .jobs
                .get(job)
                .filter(|state| state.holds_payment_under(a.params))
                .map(|state| state.generation + generation_offset);
            Ok(ix::assign_job(&me, job, node, provider, new_segment))
        }
        Action::ReportFailure {
            job,
            node,
            provider,
            generation,
            cause,
            ..
        } => {
            let payout = a
                .providers
                .get(provider)
                .map(|p| p.payout)
                .ok_or_else(|| format!("provider {provider} is not on chain"))?;
            let state = a
                .jobs
                .get(job)
                .ok_or_else(|| format!("job {job} is not on chain"))?;
            let on = JobAccounts::on_node(*job, state, payout, *a.deployment)
                .ok_or_else(|| format!("job {job} is on no node"))?;
            if (on.node, on.provider, on.generation) != (*node, *provider, *generation) {
                return Err(format!(
                    "job {job} is no longer at generation {generation} on node {node}"
                ));
            }
            Ok(on.report_failure(&me, *cause))
        }
    }
}
