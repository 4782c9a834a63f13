//! The round's duties beyond placement and failure detection: verified progress
//! (`crate::verify`) and the hardware challenge (`crate::challenges`), each deciding purely
//! and sending one transaction per action.

use super::*;

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
    /// (`crate::verify`), one transaction each.
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
            *self.duties.write().expect("duties lock") = CheckDuties::default();
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
            CheckDuties::from_verifications(&v.verifications, v.now);
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
        let duties = verify_duties(&observation);
        for (key, job) in jobs {
            if passed_over(&observation, key, job) {
                memory.passed_over.insert((*key, job.checkpoint_count));
            }
        }
        let me = self.chain.scheduler();
        for duty in duties {
            let ix = match &duty {
                VerifyAction::Open {
                    job,
                    segment_generation,
                    interval,
                    checkers,
                    draw,
                } => {
                    ix::open_verification(&me, job, *segment_generation, *interval, checkers, draw)
                }
                VerifyAction::Resolve {
                    job,
                    verification,
                    owner_token,
                    loser,
                    current,
                } => ix::resolve_verification(
                    &me,
                    job,
                    verification,
                    owner_token,
                    deployment,
                    *loser,
                    *current,
                ),
                VerifyAction::Release { job, segment } => {
                    ix::release_segment(&me, job, segment, deployment)
                }
                VerifyAction::Replace {
                    job,
                    verification,
                    segment,
                    role,
                    node,
                    provider,
                    draw,
                } => ix::replace_checker(
                    &me,
                    verification,
                    job,
                    segment,
                    *role,
                    node,
                    provider,
                    draw,
                ),
                VerifyAction::SecondRound {
                    job,
                    verification,
                    segment,
                    checkers,
                    draw,
                } => ix::open_second_round(&me, verification, job, segment, checkers, draw),
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
                    segment: Some(mcjs_client::pda::segment(job, *generation)),
                    deployment: deployment.clone(),
                }
                .complete(&me, *output_hash),
            };
            match self.chain.send(&[ix]).await {
                Ok(()) => info!(action = duty.name(), job = %duty.job(), "done"),
                Err(err) => {
                    self.metrics.transaction_errors.inc();
                    warn!(action = duty.name(), job = %duty.job(), error = %err, "verification duty refused; the next round starts from the chain again");
                }
            }
        }
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
            if !current {
                judge.abort();
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
        let duties = challenge_duties(&ChallengeObservation {
            now,
            nodes,
            alive: &alive,
            slot_hashes: &slot_hashes,
            policy,
            requested_at: &memory.challenges_requested_at,
        });
        let me = self.chain.scheduler();
        // The cards nodes' proofs hold, with those credited as this round records.
        let mut held_cards =
            mcjs_client::challenge::attested_cards(nodes.iter().map(|(k, n)| (k, n)));
        for duty in duties {
            let (node, name) = (duty.node(), duty.name());
            let ix = match duty {
                ChallengeAction::Request { node } => {
                    ix::request_challenge(&me, &node, policy.sizing)
                }
                ChallengeAction::Record { node, verdict } => {
                    ix::record_challenge(&me, &node, verdict, None)
                }
                ChallengeAction::Judge {
                    node,
                    challenge,
                    open_seed,
                    overdue,
                } => {
                    let slot = challenge.requested_slot;
                    let (verdict, attestation) = match memory.judging.get(&node) {
                        // Judged already (or being judged): recorded once the judge is done.
                        Some((judged, judge)) if *judged == slot => {
                            if !judge.is_finished() {
                                continue;
                            }
                            let (_, judge) = memory.judging.remove(&node).expect("present");
                            match judge.await {
                                Ok(judged) => judged,
                                Err(error) => {
                                    warn!(%node, %error, "judging a hardware challenge failed");
                                    continue;
                                }
                            }
                        }
                        _ => {
                            let opening = self
                                .openings
                                .lock()
                                .expect("openings lock")
                                .get(&node, slot)
                                .cloned();
                            match opening {
                                Some(opening) => {
                                    let Some(chain_node) = nodes
                                        .iter()
                                        .find(|(k, _)| *k == node)
                                        .map(|(_, n)| n.clone())
                                    else {
                                        continue;
                                    };
                                    let elsewhere = mcjs_client::challenge::attested_cards(
                                        nodes
                                            .iter()
                                            .filter(|(k, _)| *k != node)
                                            .map(|(k, n)| (k, n)),
                                    );
                                    // The checker's only heavy work (B·r, O(n²) per GPU, about
                                    // 2.5 s of a core per GPU at full size): on a blocking
                                    // thread that no round waits for; a later round records.
                                    let judge = tokio::task::spawn_blocking(move || {
                                        judge_opening(
                                            &node,
                                            &chain_node,
                                            &challenge,
                                            open_seed,
                                            &opening,
                                            &elsewhere,
                                        )
                                    });
                                    memory.judging.insert(node, (slot, judge));
                                    continue;
                                }
                                None if overdue => {
                                    (ChallengeVerdict::Failed(ChallengeFailure::Unanswered), None)
                                }
                                None => continue,
                            }
                        }
                    };
                    // Judged against an earlier read: held again to the cards credited
                    // since, so two nodes judged at once are not both credited one card.
                    let attestation = attestation.and_then(|a| {
                        mcjs_client::challenge::credit_once(&node, a, &mut held_cards)
                            .inspect_err(|(card, other)| {
                                warn!(%node, card = format!("{card:016X}"), %other, "GPU attestation not credited: the card is credited to another node")
                            })
                            .ok()
                    });
                    info!(
                        %node,
                        verdict = %mcjs_client::history::challenge_verdict(&verdict),
                        attested_gpus = attestation.map_or(0, |a| a.attested()),
                        "hardware challenge judged"
                    );
                    ix::record_challenge(&me, &node, verdict, attestation)
                }
            };
            if name == "request_challenge" {
                // Spaced whether or not it lands: a refused request is not sent every round.
                memory.challenges_requested_at.insert(node, now);
            }
            match self.chain.send(&[ix]).await {
                Ok(()) => info!(action = name, %node, "done"),
                Err(err) => {
                    self.metrics.transaction_errors.inc();
                    warn!(action = name, %node, error = %err, "hardware challenge duty refused; the next round starts from the chain again");
                }
            }
        }
        Ok(())
    }
}

/// A judge's result: the verdict, and with a pass what attestation the chain records.
pub(super) type Judged = (ChallengeVerdict, Option<mcjs::state::GpuAttestation>);

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
