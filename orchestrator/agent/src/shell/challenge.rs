//! The hardware challenge, the node's part (docs/hardware-challenge.md): when the program
//! records a challenge of this node, answer it step by step, each once its seed exists on
//! chain: the product and its commitment after the challenge seed, the held passes after
//! the held seed, and the opening, sent to the scheduler (the checker), after the open seed.
//!
//! The node's account is read when the chain says it changed (its own subscription), and
//! every 400 ms while a challenge is in flight. The work runs off the async workers: on the
//! node's GPUs (`mcjs_challenge::KernelBackend` over a `CudaDevice` each, GPU `i` of the
//! challenge on the card at the `i`-th PCI address, matched to CUDA's numbering by address)
//! where CUDA sees every GPU challenged, else on the CPU backend. A challenge the CPU backend would answer that is
//! larger than half the node's registered RAM, or whose product would take it more than
//! [`MAX_CPU_PRODUCT`], is not attempted: the node is recorded unanswered, which proves
//! nothing and costs it nothing but the lowest class.

use super::next_change;
use crate::chain::{AgentChain, ChainFailure, NodeIdentity};
use mcjs_challenge::bounds::MEASURED;
use mcjs_challenge::{
    Backend, CpuBackend, CudaDevice, KernelBackend, NodeOpening, NodeProver, Params,
};
use mcjs_client::challenge::{params_of, seed_for_commit, seed_for_hold, seed_for_open};
use mcjs_client::ix;
use mcjs_client::program::state::{ChallengeStep, HardwareChallenge, Node};
use mcjs_protocol::SignedRequest;
use mcjs_protocol::{CHALLENGE_OPENING_PATH, ChallengeOpening};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

/// How often the node's account is read while a challenge is in flight (each step waits
/// for a slot to pass), and while none is: with a chain that tells of changes to the
/// account (a request is one), rarely; without, often enough that the wait is a small part
/// of the commit phase's time.
const IN_FLIGHT_POLL: Duration = Duration::from_millis(400);
const IDLE_POLL_WATCHED: Duration = Duration::from_secs(60);
const IDLE_POLL: Duration = Duration::from_secs(2);
/// How soon the opening is sent again until the verdict is on chain: soon while a scheduler
/// has not taken it (its round may not have seen the challenge yet), seldom once every one
/// has (an opening is megabytes per GPU; it is sent again only in case a scheduler
/// restarted and lost it).
const RESEND_OPENING: Duration = Duration::from_secs(5);
const RESEND_TAKEN_OPENING: Duration = Duration::from_secs(30);
/// The longest product the CPU backend starts, by the CPU reference's measured rate: a
/// longer one could not be answered in a scheduler's time, and its thread would go on
/// taking the node's cores after the challenge was recorded unanswered and the node had
/// taken a job.
const MAX_CPU_PRODUCT: Duration = Duration::from_secs(300);

/// The product's time on this host, by the CPU reference's measured rate (this backend
/// on the 2-core build VM; `bounds::MEASURED`).
fn cpu_product_time(macs: u128) -> Option<Duration> {
    match MEASURED.entry("cpu-reference")?.figures {
        mcjs_challenge::Figures::Measured {
            commit_macs_per_s, ..
        } if commit_macs_per_s > 0 => {
            let secs = macs / u128::from(commit_macs_per_s);
            Some(Duration::from_secs(u64::try_from(secs).unwrap_or(u64::MAX)))
        }
        _ => None,
    }
}

/// The PCI addresses of the node's GPUs in the challenge's order (sorted, as the node's
/// profile lists them): NVML's, else CUDA's; empty where neither sees a GPU. GPU `i` of a
/// challenge is the card at the `i`-th address, for its work and for its attestation alike.
fn challenge_addresses() -> Vec<String> {
    mcjs_hal::probe::nvml::gpu_pci_bus_ids(None).unwrap_or_else(|why| {
        tracing::debug!(%why, "NVML lists no GPUs; taking CUDA's");
        let mut cuda = CudaDevice::pci_bus_ids().unwrap_or_default();
        cuda.sort();
        cuda
    })
}

/// The GPU backends of a challenge over the GPUs at `addresses` (one per challenged GPU),
/// each the CUDA device at that address with the kernels compiled for it; or why not (no
/// CUDA, a GPU CUDA does not see, one would not open).
fn open_gpus_at(
    addresses: Vec<String>,
) -> impl FnOnce() -> Result<Vec<Box<dyn Backend + Send>>, String> + Send + 'static {
    move || {
        let missing = CudaDevice::missing_libraries();
        if !missing.is_empty() {
            return Err(format!("cannot load {}", missing.join(", ")));
        }
        let cuda = CudaDevice::pci_bus_ids().map_err(|e| e.to_string())?;
        let ordinals = mcjs_challenge::ordinals_by_address(&addresses, &cuda)?;
        ordinals
            .into_iter()
            .zip(&addresses)
            .map(|(ordinal, address)| {
                let device =
                    CudaDevice::open(ordinal).map_err(|e| format!("GPU {address}: {e}"))?;
                tracing::info!(pci = %address, ordinal, name = device.name(), "challenge on the GPU");
                Ok(Box::new(KernelBackend::new(device)) as Box<dyn Backend + Send>)
            })
            .collect()
    }
}

/// Each GPU's attestation evidence over its challenge's nonce, where NVML gives one
/// (Hopper and later, with a driver that offers it): the checker verifies it. GPU `i` of the
/// challenge is the card at `addresses[i]`, the one that computed its answer.
fn attach_attestations(opening: &mut NodeOpening, params: &[&Params], addresses: &[String]) {
    use mcjs_challenge::attestation::{GpuEvidence, attestation_nonce, certificates_from_pem};
    for (i, (gpu, p)) in opening.gpus.iter_mut().zip(params).enumerate() {
        let Some(address) = addresses.get(i) else {
            break;
        };
        let nonce = attestation_nonce(&p.seed);
        let evidence = mcjs_hal::probe::nvml::gpu_attestation(None, address, nonce).and_then(|e| {
            Ok(GpuEvidence {
                report: e.report,
                certificates: certificates_from_pem(&e.certificate_chain_pem)
                    .map_err(|e| e.to_string())?,
            })
        });
        match evidence {
            Ok(evidence) => gpu.attestation = Some(evidence),
            Err(why) => tracing::debug!(gpu = i, %why, "no attestation evidence"),
        }
    }
}

/// Whether the CPU backend takes on `params`: what it holds within half the node's
/// registered RAM, and its product within [`MAX_CPU_PRODUCT`] at the CPU reference's rate.
fn cpu_can_answer(params: &[Params], node: &Node) -> Result<(), String> {
    let bytes: u64 = params.iter().map(|p| p.device_bytes()).sum();
    let room = (u64::from(node.hardware.ram_mib) << 20) / 2;
    if bytes > room {
        return Err(format!(
            "the challenge needs {bytes} bytes, more than half this node's RAM ({room}), and no GPU answers it here"
        ));
    }
    let macs: u128 = params.iter().map(|p| p.macs()).sum();
    let time = cpu_product_time(macs);
    if time.is_none_or(|t| t > MAX_CPU_PRODUCT) {
        return Err(format!(
            "the challenge's product ({macs} multiply-adds) would take the CPU backend {time:?}, over {MAX_CPU_PRODUCT:?}, and no GPU answers it here"
        ));
    }
    Ok(())
}

/// One challenge being answered.
struct Answering {
    requested_slot: u64,
    prover: Option<NodeProver<Box<dyn Backend + Send>>>,
    /// The PCI addresses of the GPUs challenged, in order (empty where none is seen).
    addresses: Vec<String>,
    opening: Option<NodeOpening>,
    /// When the opening was last sent, and how soon to send it again.
    sent_at: Option<(Instant, Duration)>,
    /// Nothing more can be done for this challenge (too large, or this process lost the
    /// product it committed to): the scheduler records it unanswered.
    given_up: bool,
}

impl Answering {
    fn new(requested_slot: u64) -> Self {
        Self {
            requested_slot,
            prover: None,
            addresses: Vec::new(),
            opening: None,
            sent_at: None,
            given_up: false,
        }
    }
}

/// The challenger: answers this node's hardware challenges. What it knows
/// of the challenge in flight is its own; it shares with the rest of the
/// agent only the chain client and the node's identity.
pub(super) struct Challenger<C> {
    pub(super) chain: Arc<C>,
    pub(super) me: NodeIdentity,
    /// Every scheduler the agent heartbeats to: an opening goes to each.
    pub(super) schedulers: Vec<String>,
}

/// Answers this node's hardware challenges while the agent runs.
pub(super) async fn answer_challenges<C: AgentChain>(s: Challenger<C>, cancel: CancellationToken) {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("an HTTP client");
    // NVRTC's compile ahead of any challenge: a challenge's GPUs are opened only once its
    // seed is drawn, inside the timed commit phase (an opening waits for this one).
    tokio::task::spawn_blocking(|| match CudaDevice::prepare_kernels() {
        Ok(0) => {}
        Ok(capabilities) => tracing::info!(capabilities, "hardware challenge kernels compiled"),
        Err(error) => tracing::warn!(%error, "cannot compile the hardware challenge's kernels"),
    });
    let mut answering: Option<Answering> = None;
    // A request changes the node's account: heard at once where the chain tells.
    let mut watch = s.chain.changes(s.me.node);
    loop {
        let poll = match (&answering, &watch) {
            (Some(_), _) => IN_FLIGHT_POLL,
            (None, Some(_)) => IDLE_POLL_WATCHED,
            (None, None) => IDLE_POLL,
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(poll) => {}
            Some(()) = next_change(watch.as_mut()) => {}
        }
        let node = match s.chain.node(s.me.node).await {
            Ok(Some(node)) => node,
            Ok(None) => continue,
            Err(error) => {
                tracing::debug!(%error, "cannot read this node's account for challenges");
                continue;
            }
        };
        let Some(challenge) = node.challenge.in_flight else {
            answering = None;
            continue;
        };
        let current = answering
            .take()
            .filter(|a| a.requested_slot == challenge.requested_slot)
            .unwrap_or_else(|| {
                tracing::info!(
                    slot = challenge.requested_slot,
                    "hardware challenge requested"
                );
                Answering::new(challenge.requested_slot)
            });
        let current = answering.insert(current);
        if current.given_up {
            continue;
        }
        if let Err(why) = step(&s, &http, &node, &challenge, current).await {
            tracing::warn!(error = %why, "hardware challenge step failed");
        }
    }
}

/// Why a step could not be taken now.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Chain(#[from] ChainFailure),
    #[error("{0}")]
    Work(String),
}

/// Takes whichever step the chain is waiting for, if its seed exists.
async fn step<C: AgentChain>(
    s: &Challenger<C>,
    http: &reqwest::Client,
    node: &Node,
    challenge: &HardwareChallenge,
    a: &mut Answering,
) -> Result<(), StepError> {
    match (challenge.commit, challenge.hold) {
        (None, _) => {
            if a.prover.is_none() {
                let slot_hashes = s.chain.slot_hashes().await?;
                let Some(seed) = seed_for_commit(challenge, &slot_hashes) else {
                    return Ok(());
                };
                let params = params_of(&MEASURED, &s.me.node, node, challenge, &seed)
                    .map_err(|e| StepError::Work(e.to_string()))?;
                let mut addresses = tokio::task::spawn_blocking(challenge_addresses)
                    .await
                    .map_err(|e| StepError::Work(e.to_string()))?;
                addresses.truncate(params.len());
                let gpus = if addresses.len() < params.len() {
                    Err(format!(
                        "{} GPUs are seen here and {} were challenged",
                        addresses.len(),
                        params.len()
                    ))
                } else {
                    tokio::task::spawn_blocking(open_gpus_at(addresses.clone()))
                        .await
                        .map_err(|e| StepError::Work(e.to_string()))?
                };
                let backends = match gpus {
                    Ok(gpus) => gpus,
                    Err(why) => {
                        tracing::info!(%why, "answering the hardware challenge on the CPU");
                        if let Err(refused) = cpu_can_answer(&params, node) {
                            a.given_up = true;
                            return Err(StepError::Work(refused));
                        }
                        params
                            .iter()
                            .map(|_| Box::new(CpuBackend::new()) as Box<dyn Backend + Send>)
                            .collect()
                    }
                };
                let started = Instant::now();
                let prover = tokio::task::spawn_blocking(move || {
                    let mut backends = backends.into_iter();
                    NodeProver::commit(params, |_| backends.next().expect("one per GPU"))
                })
                .await
                .map_err(|e| StepError::Work(e.to_string()))?
                .map_err(|e| StepError::Work(e.to_string()))?;
                tracing::info!(
                    secs = started.elapsed().as_secs_f64(),
                    "challenge product computed"
                );
                a.prover = Some(prover);
                a.addresses = addresses;
            }
            let commitment = a.prover.as_ref().expect("computed").commitment();
            s.chain
                .send(ix::answer_challenge(
                    &s.chain.authority(),
                    &s.me.node,
                    ChallengeStep::Commit { commitment },
                ))
                .await?;
            tracing::info!("challenge commitment sent");
        }
        (Some(commit), None) => {
            let Some(mut prover) = a.prover.take() else {
                a.given_up = true;
                return Err(StepError::Work(
                    "this process did not compute the product committed to (restarted?)".into(),
                ));
            };
            if prover.commitment() != commit.answer {
                a.given_up = true;
                return Err(StepError::Work(
                    "the commitment on chain is not this process's".into(),
                ));
            }
            let slot_hashes = s.chain.slot_hashes().await?;
            let Some(held_seed) = seed_for_hold(challenge, &slot_hashes) else {
                a.prover = Some(prover);
                return Ok(());
            };
            let (prover, held) = tokio::task::spawn_blocking(move || {
                let held = prover.hold(&held_seed);
                (prover, held)
            })
            .await
            .map_err(|e| StepError::Work(e.to_string()))?;
            a.prover = Some(prover);
            let held_digest = held.map_err(|e| StepError::Work(e.to_string()))?;
            s.chain
                .send(ix::answer_challenge(
                    &s.chain.authority(),
                    &s.me.node,
                    ChallengeStep::Hold { held_digest },
                ))
                .await?;
            tracing::info!("challenge held digest sent");
        }
        (Some(_), Some(_)) => {
            if a.opening.is_none() {
                let slot_hashes = s.chain.slot_hashes().await?;
                let Some(open_seed) = seed_for_open(challenge, &slot_hashes) else {
                    return Ok(());
                };
                let Some(mut prover) = a.prover.take() else {
                    a.given_up = true;
                    return Err(StepError::Work(
                        "this process did not run the held passes answered (restarted?)".into(),
                    ));
                };
                let addresses = a.addresses.clone();
                let opening = tokio::task::spawn_blocking(move || {
                    let mut opening = prover.open(&open_seed)?;
                    attach_attestations(&mut opening, &prover.params(), &addresses);
                    Ok::<_, mcjs_challenge::ProverError>(opening)
                })
                .await
                .map_err(|e| StepError::Work(e.to_string()))?
                .map_err(|e| StepError::Work(e.to_string()))?;
                a.opening = Some(opening);
            }
            if a.sent_at.is_some_and(|(at, again)| at.elapsed() < again) {
                return Ok(());
            }
            let opening = a.opening.clone().expect("built");
            // Not sent again for a while whatever the answer: a refused opening is not
            // uploaded again every poll.
            a.sent_at = Some((Instant::now(), RESEND_OPENING));
            if send_opening(s, http, a.requested_slot, opening).await? {
                a.sent_at = Some((Instant::now(), RESEND_TAKEN_OPENING));
            }
        }
    }
    Ok(())
}

/// Sends the opening, sealed with the node's operator key, to every scheduler this agent
/// heartbeats to (whichever holds the lease judges it). Whether every one took it; an error
/// when none did.
async fn send_opening<C: AgentChain>(
    s: &Challenger<C>,
    http: &reqwest::Client,
    requested_slot: u64,
    opening: NodeOpening,
) -> Result<bool, StepError> {
    let message = ChallengeOpening {
        node: s.me.node.to_string(),
        requested_slot,
        sent_at_unix_ms: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or_default(),
        opening,
    };
    let signer = s.chain.authority().to_bytes();
    let sealed = SignedRequest::seal(CHALLENGE_OPENING_PATH, &message, &signer, |m| {
        s.chain.sign(m)
    });
    let (mut sent, mut refused) = (false, false);
    let mut last_error = String::from("no scheduler to send it to");
    for url in &s.schedulers {
        let endpoint = format!("{}{CHALLENGE_OPENING_PATH}", url.trim_end_matches('/'));
        match http.post(&endpoint).json(&sealed).send().await {
            Ok(response) if response.status().is_success() => sent = true,
            Ok(response) => {
                refused = true;
                last_error = format!(
                    "{endpoint}: {} {}",
                    response.status(),
                    response.text().await.unwrap_or_default()
                )
            }
            Err(error) => {
                refused = true;
                last_error = format!("{endpoint}: {error}");
            }
        }
    }
    if sent {
        if refused {
            tracing::info!(%last_error, "challenge opening sent; a scheduler did not take it");
        } else {
            tracing::info!("challenge opening sent");
        }
        Ok(!refused)
    } else {
        Err(StepError::Work(format!(
            "the opening was not taken: {last_error}"
        )))
    }
}
