//! The round's duties beyond placement and failure detection: verified progress
//! (`crate::verify`) and the hardware challenge (`crate::challenges`). Each reads what its
//! plan needs, plans purely (`transactions::duties`) and sends with the rest (`send_all`);
//! the challenge duties judge openings on blocking threads that no round waits for.

use super::*;
use mcjs_client::program::state::{ChallengeFailure, ChallengeVerdict};

impl<C: DaemonChain> Daemon<C> {
    /// The nodes whose agents heartbeat now and are not on battery
    /// (`Liveness::may_check`): the ones drawn as checkers and challenged.
    pub(super) fn live_on_mains(&self, nodes: &[(Pubkey, mcjs::state::Node)]) -> HashSet<Pubkey> {
        let liveness = self.liveness.lock().expect("liveness table");
        let (now_ms, detector) = ((self.clock)(), &self.config.detector);
        nodes
            .iter()
            .map(|(key, _)| *key)
            .filter(|key| {
                liveness.may_check(
                    key,
                    now_ms,
                    detector.heartbeat_timeout_ms,
                    detector.disconnect_grace_ms,
                )
            })
            .collect()
    }

    /// Draws attested intervals for verification, applies decided
    /// verifications and releases held payments that are due
    /// (`crate::verify`), one transaction each, in the order decided.
    pub(super) async fn verification_round(
        &self,
        snapshot: &Snapshot,
        deployment: &ix::Deployment,
        memory: &mut Memory,
    ) -> Result<(), ChainError> {
        let Snapshot {
            jobs,
            nodes,
            params,
            providers,
        } = snapshot;
        // Segments and verifications exist only for verified jobs, each
        // counted on its job until released or resolved. Without an open
        // verification, a segment off its node, or an interval still to
        // draw, there is nothing to draw, apply, release or serve, and the
        // round reads nothing for the duties (`verify::needs_chain_read`).
        if !jobs.iter().any(|(key, j)| {
            needs_chain_read(
                j,
                params,
                memory.passed_over.contains(&(*key, j.checkpoint_count)),
            )
        }) {
            *self.duties.write().expect("duties lock") = CheckRoster::default();
            return Ok(());
        }
        // The checker pools of the GPU models the nodes have: the draw's.
        let mut pools: Vec<Pubkey> = nodes
            .iter()
            .map(|(_, n)| mcjs_client::pda::checker_pool(&n.hardware.gpu_model))
            .collect();
        pools.sort();
        pools.dedup();
        let v = self.chain.verify_snapshot(&pools).await?;
        *self.duties.write().expect("duties lock") =
            CheckRoster::from_verifications(&v.verifications, v.now);
        let observation = VerifyObservation {
            pools: &v.pools,
            now: v.now,
            params,
            jobs,
            nodes,
            providers,
            verifications: &v.verifications,
            segments: &v.segments,
            slot_hashes: &v.slot_hashes,
        };
        for (key, job) in jobs {
            if passed_over(&observation, key, job) {
                memory.passed_over.insert((*key, job.checkpoint_count));
            }
        }
        let planned = plan_checks(&observation, &self.chain.scheduler(), deployment);
        self.send_all(planned, 1).await;
        Ok(())
    }

    /// Requests hardware challenges that are due, judges answered ones against the
    /// openings agents sent and records the verdicts, and records the unanswered
    /// (`crate::challenges`), one transaction each. Reads the chain's clock and slot hashes
    /// only when a challenge is in flight or may be requested.
    pub(super) async fn challenge_round(
        &self,
        snapshot: &Snapshot,
        memory: &mut Memory,
    ) -> Result<(), ChainError> {
        let nodes = &snapshot.nodes;
        let in_flight: HashMap<Pubkey, u64> = nodes
            .iter()
            .filter_map(|(key, node)| node.challenge.in_flight.map(|c| (*key, c.requested_slot)))
            .collect();
        *self.challenged.write().expect("challenges lock") = in_flight.clone();
        self.openings
            .lock()
            .expect("openings lock")
            .retain_in_flight(nodes);
        // A judge whose challenge is no longer the one in flight (recorded, or replaced)
        // has nothing left to record.
        memory.judging.retain(|node, (slot, judge)| {
            let current = in_flight.get(node) == Some(slot);
            if !current && let Judge::Thread(thread) = judge {
                thread.abort();
            }
            current
        });
        // Requests are considered every CHALLENGE_IDLE_READ_MS (the re-check draw's
        // round); challenges in flight are followed every round.
        let now_ms = (self.clock)();
        let request_round = self.config.challenge.enabled
            && memory
                .challenges_read_at
                .is_none_or(|at| now_ms.saturating_sub(at) >= CHALLENGE_IDLE_READ_MS);
        if !request_round && in_flight.is_empty() {
            return Ok(());
        }
        if request_round {
            memory.challenges_read_at = Some(now_ms);
        }
        let policy = &ChallengePolicy {
            enabled: request_round,
            ..self.config.challenge
        };
        let (slot_hashes, now) = self.chain.sysvars().await?;
        let alive = self.live_on_mains(nodes);
        let spacing = policy.request_spacing_secs;
        memory
            .challenges_requested_at
            .retain(|_, at| now.saturating_sub(*at) < spacing);
        let judges = judges(&mut memory.judging).await;
        let plan = plan_challenges(&ChallengeRead {
            scheduler: self.chain.scheduler(),
            observation: ChallengeObservation {
                now,
                nodes,
                alive: &alive,
                slot_hashes: &slot_hashes,
                policy,
                requested_at: &memory.challenges_requested_at,
            },
            openings: &self.openings.lock().expect("openings lock"),
            judges: &judges,
        });
        for node in &plan.collected {
            memory.judging.remove(node);
        }
        for (node, left) in &plan.left {
            if let Left::JudgeFailed(error) = left {
                warn!(%node, %error, "judging a hardware challenge failed");
            }
        }
        for (node, card, other) in &plan.uncredited {
            warn!(%node, card = format!("{card:016X}"), %other, "GPU attestation not credited: the card is credited to another node");
        }
        start_judging(plan.to_judge, &mut memory.judging);
        for duty in plan.planned.iter().flat_map(|p| &p.actions) {
            match duty {
                // Spaced whether or not it lands: a refused request is not sent every round.
                Duty::Request { node } => {
                    memory.challenges_requested_at.insert(*node, now);
                }
                Duty::Record {
                    node,
                    verdict,
                    attestation,
                    judged: true,
                } => info!(
                    %node,
                    verdict = %mcjs_client::history::challenge_verdict(verdict),
                    attested_gpus = attestation.map_or(0, |a| a.attested()),
                    "hardware challenge judged"
                ),
                Duty::Record { .. } | Duty::Check(_) => {}
            }
        }
        self.send_all(plan.planned, 1).await;
        Ok(())
    }
}

/// A judge of a node's opening, off the rounds: its thread, then what it gave.
pub(super) enum Judge {
    Thread(tokio::task::JoinHandle<Judged>),
    Ended(Judgement),
}

/// The judges as the plan reads them; those whose thread ended since the
/// last round give their outcome.
async fn judges(judging: &mut HashMap<Pubkey, (u64, Judge)>) -> HashMap<Pubkey, (u64, Judgement)> {
    for (_, judge) in judging.values_mut() {
        if let Judge::Thread(thread) = judge
            && thread.is_finished()
        {
            *judge = Judge::Ended(match thread.await {
                Ok(judged) => Judgement::Done(judged),
                Err(error) => Judgement::Failed(error.to_string()),
            });
        }
    }
    judging
        .iter()
        .map(|(node, (slot, judge))| {
            let judgement = match judge {
                Judge::Thread(_) => Judgement::Running,
                Judge::Ended(judgement) => judgement.clone(),
            };
            (*node, (*slot, judgement))
        })
        .collect()
}

/// Judges each opening on a blocking thread: the checker's only heavy work
/// (B·r, O(n²) per GPU, about 2.5 s of a core per GPU at full size), which
/// no round waits for; a later round records the verdict.
fn start_judging(to_judge: Vec<ToJudge>, judging: &mut HashMap<Pubkey, (u64, Judge)>) {
    for j in to_judge {
        let (node, slot) = (j.node, j.challenge.requested_slot);
        let thread = tokio::task::spawn_blocking(move || {
            judge_opening(
                &j.node,
                &j.account,
                &j.challenge,
                j.open_seed,
                &j.opening,
                &j.elsewhere,
            )
        });
        judging.insert(node, (slot, Judge::Thread(thread)));
    }
}

impl Sent for Duty {
    fn landed(&self) {
        match self {
            Duty::Check(action) => info!(action = self.name(), job = %action.job(), "done"),
            Duty::Request { node } | Duty::Record { node, .. } => {
                info!(action = self.name(), %node, "done")
            }
        }
    }

    fn refused(&self, err: &ChainError) {
        match self {
            Duty::Check(action) => {
                warn!(action = self.name(), job = %action.job(), error = %err, "verification duty refused; the next round starts from the chain again")
            }
            Duty::Request { node } | Duty::Record { node, .. } => {
                warn!(action = self.name(), %node, error = %err, "hardware challenge duty refused; the next round starts from the chain again")
            }
        }
    }
}

/// The scheduler's verdict on a node's opening: the challenge's parameters and draws from
/// what the chain recorded, the opening from the agent (`mcjs_challenge::judge_node`); with
/// a pass, each GPU's attestation evidence checked against its challenge's nonce and
/// NVIDIA's root at the chain's time of the request, and the cards it proves that no other
/// node's proof holds (`elsewhere`) recorded (`attestation_on_chain`). Evidence never
/// changes the verdict: the time bounds prove the class; a card proves the chip and which
/// card, not the SKU or the memory (docs/hardware-challenge.md).
fn judge_opening(
    key: &Pubkey,
    node: &mcjs::state::Node,
    challenge: &mcjs::state::HardwareChallenge,
    open_seed: [u8; 32],
    opening: &mcjs_challenge::NodeOpening,
    elsewhere: &HashMap<u64, Pubkey>,
) -> Judged {
    use mcjs_client::challenge::{answers_of, attestation_on_chain, params_of, verdict_on_chain};
    let (Some(commit), Some((draws, answers))) =
        (challenge.commit, answers_of(challenge, open_seed))
    else {
        return (ChallengeVerdict::Failed(ChallengeFailure::Unanswered), None);
    };
    let Ok(params) = params_of(
        &mcjs_challenge::bounds::MEASURED,
        key,
        node,
        challenge,
        &commit.seed.hash,
    ) else {
        // A claim too small to size: nothing is proven.
        return (ChallengeVerdict::Failed(ChallengeFailure::Malformed), None);
    };
    let verdict = verdict_on_chain(&mcjs_challenge::judge_node(
        &params, &draws, &answers, opening,
    ));
    let checked = mcjs_challenge::attest_node(&params, opening, challenge.requested_at);
    for (gpu, attested) in checked.iter().enumerate() {
        if let Some(Ok(attested)) = attested {
            tracing::info!(
                node = %key,
                gpu,
                chip = %attested.chip,
                device = %attested.device_id,
                driver = attested.driver_version.as_deref().unwrap_or("?"),
                "GPU attested by NVIDIA's device identity"
            );
        }
    }
    let (attestation, refused) = attestation_on_chain(key, &checked, opening, elsewhere);
    for (gpu, why) in refused {
        tracing::warn!(node = %key, gpu, error = %why, "GPU attestation not credited");
    }
    let attestation = attestation.filter(|_| matches!(verdict, ChallengeVerdict::Passed { .. }));
    (verdict, attestation)
}
