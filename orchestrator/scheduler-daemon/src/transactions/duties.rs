//! The round's duties beyond placement and failure detection as
//! transactions: verified progress (`crate::verify`) and the hardware
//! challenge (`crate::challenges`). Pure, like [`plan`](super::plan): from
//! what the round read to one transaction per duty, and for a challenge
//! duty that sends nothing, why. Judging an opening is the scheduler's only
//! heavy work: the plan names the openings to judge and the shell judges
//! them off the round; a later round's plan records the verdict.

use std::collections::HashMap;

use mcjs_challenge::NodeOpening;
use mcjs_client::challenge::{attested_cards, credit_once};
use mcjs_client::program::state::{
    ChallengeFailure, ChallengeVerdict, GpuAttestation, HardwareChallenge, Node,
};
use mcjs_client::{Instruction, Pubkey, ix, pda};

use super::Planned;
use crate::challenges::{ChallengeAction, ChallengeObservation, Openings, challenge_duties};
use crate::verify::{VerifyAction, VerifyObservation, verify_duties};

/// A duty, as one transaction carries it.
#[derive(Clone, Debug)]
pub enum Duty {
    /// A verification duty.
    Check(VerifyAction),
    /// Challenge the node's claimed hardware.
    Request { node: Pubkey },
    /// Record a challenge's verdict, with a pass the cards it credits.
    /// `judged`: the scheduler judged the node's opening (or found none in
    /// its time); otherwise an earlier step went unanswered.
    Record {
        node: Pubkey,
        verdict: ChallengeVerdict,
        attestation: Option<GpuAttestation>,
        judged: bool,
    },
}

impl Duty {
    /// The program instruction it sends.
    pub fn name(&self) -> &'static str {
        match self {
            Duty::Check(action) => action.name(),
            Duty::Request { .. } => "request_challenge",
            Duty::Record { .. } => "record_challenge",
        }
    }
}

/// The verification duties due now ([`verify_duties`]), one transaction each,
/// in the order decided.
pub fn plan_checks(
    o: &VerifyObservation<'_>,
    scheduler: &Pubkey,
    deployment: &ix::Deployment,
) -> Vec<Planned<Duty>> {
    verify_duties(o)
        .into_iter()
        .map(|action| {
            let instruction = check(&action, scheduler, deployment);
            Planned::one(Duty::Check(action), instruction)
        })
        .collect()
}

fn check(action: &VerifyAction, me: &Pubkey, deployment: &ix::Deployment) -> Instruction {
    match action {
        VerifyAction::Open {
            job,
            segment_generation,
            interval,
            checkers,
            draw,
        } => ix::open_verification(me, job, *segment_generation, *interval, checkers, draw),
        VerifyAction::Resolve {
            job,
            verification,
            owner_token,
            loser,
            current,
        } => ix::resolve_verification(
            me,
            job,
            verification,
            owner_token,
            deployment,
            *loser,
            *current,
        ),
        VerifyAction::Release { job, segment } => ix::release_segment(me, job, segment, deployment),
        VerifyAction::Replace {
            job,
            verification,
            segment,
            role,
            node,
            provider,
            draw,
        } => ix::replace_checker(me, verification, job, segment, *role, node, provider, draw),
        VerifyAction::SecondRound {
            job,
            verification,
            segment,
            checkers,
            draw,
        } => ix::open_second_round(me, verification, job, segment, checkers, draw),
        VerifyAction::Finish {
            job,
            node,
            provider,
            payout,
            refund,
            generation,
            output_hash,
        } => ix::JobAccounts {
            job: *job,
            node: *node,
            provider: *provider,
            payout: *payout,
            refund: *refund,
            generation: *generation,
            segment: Some(pda::segment(job, *generation)),
            deployment: *deployment,
        }
        .complete(me, *output_hash),
    }
}

/// A judge's result: the verdict, and with a pass what attestation the chain records.
pub type Judged = (ChallengeVerdict, Option<GpuAttestation>);

/// How far the judging of a node's opening has come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    Running,
    Done(Judged),
    /// The judge ended without a verdict (its thread failed).
    Failed(String),
}

/// What the challenge duties plan from: the chain as read for them, the
/// openings agents sent, and the judges already started.
pub struct ChallengeRead<'a> {
    pub scheduler: Pubkey,
    pub observation: ChallengeObservation<'a>,
    pub openings: &'a Openings,
    /// Each node's judge: the request slot of the challenge it judges, and
    /// how far it has come.
    pub judges: &'a HashMap<Pubkey, (u64, Judgement)>,
}

/// An opening to judge off the round: what `judge_opening` reads.
#[derive(Clone, Debug)]
pub struct ToJudge {
    pub node: Pubkey,
    /// The node's account as read.
    pub account: Node,
    pub challenge: HardwareChallenge,
    pub open_seed: [u8; 32],
    pub opening: NodeOpening,
    /// The cards other nodes' standing proofs hold (card → node).
    pub elsewhere: HashMap<u64, Pubkey>,
}

/// Why a challenge due to be judged sends nothing this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Left {
    /// Its opening is being judged (or starts being judged now): a later
    /// round records the verdict.
    Judging,
    /// Both answers landed and the node has not sent its opening yet, with
    /// time left.
    AwaitingOpening,
    /// Its judge failed: the next round judges the opening again.
    JudgeFailed(String),
    /// The node is not in the round's read.
    Unread,
}

/// The challenge duties' transactions, and what else the shell does.
#[derive(Clone, Debug, Default)]
pub struct ChallengePlan {
    pub planned: Vec<Planned<Duty>>,
    /// Openings to judge now.
    pub to_judge: Vec<ToJudge>,
    /// Judges whose outcome this plan took (a verdict recorded, or a
    /// failure): the shell forgets them.
    pub collected: Vec<Pubkey>,
    pub left: Vec<(Pubkey, Left)>,
    /// Attestations not credited (node, card, the node credited with it):
    /// the verdict is recorded without them.
    pub uncredited: Vec<(Pubkey, u64, Pubkey)>,
}

/// The hardware challenge duties due now ([`challenge_duties`]), one
/// transaction each: requests, steps gone unanswered, and the verdicts of
/// judged openings. A verdict judged against an earlier read is held again
/// to the cards credited since (the nodes' standing proofs, and the
/// verdicts recorded before it in this plan), so two nodes judged at once
/// are not both credited one card.
pub fn plan_challenges(read: &ChallengeRead<'_>) -> ChallengePlan {
    let o = &read.observation;
    let me = read.scheduler;
    let mut plan = ChallengePlan::default();
    let mut held_cards = attested_cards(o.nodes.iter().map(|(k, n)| (k, n)));
    for action in challenge_duties(o) {
        let planned = match action {
            ChallengeAction::Request { node } => Planned::one(
                Duty::Request { node },
                ix::request_challenge(&me, &node, o.policy.sizing),
            ),
            ChallengeAction::Record { node, verdict } => record(&me, node, verdict, None, false),
            ChallengeAction::Judge {
                node,
                challenge,
                open_seed,
                overdue,
            } => {
                let slot = challenge.requested_slot;
                let (verdict, attestation) = match read.judges.get(&node) {
                    Some((judged, judgement)) if *judged == slot => match judgement {
                        Judgement::Running => {
                            plan.left.push((node, Left::Judging));
                            continue;
                        }
                        Judgement::Done(judged) => {
                            plan.collected.push(node);
                            *judged
                        }
                        Judgement::Failed(error) => {
                            plan.collected.push(node);
                            plan.left.push((node, Left::JudgeFailed(error.clone())));
                            continue;
                        }
                    },
                    _ => match read.openings.get(&node, slot) {
                        Some(opening) => {
                            let why = match o.nodes.iter().find(|(k, _)| *k == node) {
                                Some((_, account)) => {
                                    plan.to_judge.push(ToJudge {
                                        node,
                                        account: account.clone(),
                                        challenge,
                                        open_seed,
                                        opening: opening.clone(),
                                        elsewhere: attested_cards(
                                            o.nodes
                                                .iter()
                                                .filter(|(k, _)| *k != node)
                                                .map(|(k, n)| (k, n)),
                                        ),
                                    });
                                    Left::Judging
                                }
                                None => Left::Unread,
                            };
                            plan.left.push((node, why));
                            continue;
                        }
                        None if overdue => {
                            (ChallengeVerdict::Failed(ChallengeFailure::Unanswered), None)
                        }
                        None => {
                            plan.left.push((node, Left::AwaitingOpening));
                            continue;
                        }
                    },
                };
                let attestation = attestation.and_then(|a| {
                    credit_once(&node, a, &mut held_cards)
                        .map_err(|(card, other)| plan.uncredited.push((node, card, other)))
                        .ok()
                });
                record(&me, node, verdict, attestation, true)
            }
        };
        plan.planned.push(planned);
    }
    plan
}

fn record(
    me: &Pubkey,
    node: Pubkey,
    verdict: ChallengeVerdict,
    attestation: Option<GpuAttestation>,
    judged: bool,
) -> Planned<Duty> {
    Planned::one(
        Duty::Record {
            node,
            verdict,
            attestation,
            judged,
        },
        ix::record_challenge(me, &node, verdict, attestation),
    )
}
