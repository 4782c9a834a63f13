//! A whole node's challenge: one per GPU, answered together, with one value per step on
//! chain.
//!
//! The program keeps one commitment and one held digest per node (32 bytes each, whatever
//! the GPU count): [`node_commitment`] over the GPUs' product roots and [`node_held_digest`]
//! over their held digests, in GPU order. The opening carries each GPU's pair, and the
//! checker holds them to the node's values before judging each GPU.

use serde::{Deserialize, Serialize};

use crate::attestation::{AttestationError, Attested, GpuEvidence, attestation_nonce};
use crate::backend::Backend;
use crate::bounds::BoundsTable;
use crate::hash::{Digest, challenge_seed, sha256};
use crate::params::{Claim, ClaimError, Params, Sizing};
use crate::prover::{Opening, Prover, ProverError};
use crate::verify::{Answer, Draws, Failure, PhaseTimes, ProvenProfile, Verdict, judge};

const NODE_COMMITMENT_TAG: &[u8] = b"mcjs-challenge/1/node-commitment";
const NODE_HELD_TAG: &[u8] = b"mcjs-challenge/1/node-held";

/// What the node claims and how large its challenge is, as the program records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeClaim {
    /// The node's account address: binds every GPU's seed to it.
    pub node: [u8; 32],
    pub model: String,
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    pub sizing: Sizing,
    /// The claim is sized as if each GPU had `vram >> memory_shift` bytes (0 on a real
    /// cluster).
    pub memory_shift: u8,
}

impl NodeClaim {
    /// Each GPU's parameters under the challenge seed the program drew (the hash of the
    /// first slot after the request).
    pub fn params(
        &self,
        table: &BoundsTable<'_>,
        slot_hash: &Digest,
    ) -> Result<Vec<Params>, ClaimError> {
        let memory = (u64::from(self.vram_per_gpu_mib) << 20)
            .checked_shr(u32::from(self.memory_shift))
            .unwrap_or(0);
        let claim = Claim::new(&self.model, memory);
        (0..self.gpu_count)
            .map(|gpu| {
                let seed = challenge_seed(slot_hash, &self.node, gpu);
                Params::for_claim_in(table, &self.sizing, &claim, seed)
            })
            .collect()
    }
}

/// The node's commitment on chain: one root over its GPUs' product roots.
pub fn node_commitment(gpu_commitments: &[Digest]) -> Digest {
    combine(NODE_COMMITMENT_TAG, gpu_commitments)
}

/// The node's held digest on chain: over its GPUs' held digests.
pub fn node_held_digest(gpu_held_digests: &[Digest]) -> Digest {
    combine(NODE_HELD_TAG, gpu_held_digests)
}

fn combine(tag: &[u8], parts: &[Digest]) -> Digest {
    let count = (parts.len() as u64).to_le_bytes();
    let mut pieces: Vec<&[u8]> = vec![tag, &count];
    pieces.extend(parts.iter().map(|p| p.as_slice()));
    sha256(&pieces)
}

/// One GPU's part of the node's opening.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuOpening {
    #[serde(with = "crate::wire::digest")]
    pub commitment: Digest,
    #[serde(with = "crate::wire::digest")]
    pub held_digest: Digest,
    pub opening: Opening,
    /// The GPU's attestation evidence over its challenge's nonce, where the card and its
    /// driver give one ([`crate::attestation`]); checked apart from the verdict
    /// ([`attest_node`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<GpuEvidence>,
}

/// Each GPU's attestation, checked against the nonce of its challenge (`params`, in GPU
/// order) at `now_unix`: `None` where the node sent none.
pub fn attest_node(
    params: &[Params],
    opening: &NodeOpening,
    now_unix: i64,
) -> Vec<Option<Result<Attested, AttestationError>>> {
    opening
        .gpus
        .iter()
        .enumerate()
        .map(|(i, gpu)| {
            let evidence = gpu.attestation.as_ref()?;
            Some(match params.get(i) {
                Some(p) => {
                    crate::attestation::verify(evidence, &attestation_nonce(&p.seed), now_unix)
                }
                None => Err(AttestationError::Malformed(format!(
                    "no GPU {i} was challenged"
                ))),
            })
        })
        .collect()
}

/// What the node sends the checker after the open seed: every GPU's answers, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeOpening {
    pub gpus: Vec<GpuOpening>,
}

/// What the chain holds of the node's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAnswers {
    pub commitment: Digest,
    pub held_digest: Digest,
    pub times: PhaseTimes,
}

/// Judges a node: its opening must carry one answer per GPU whose values combine to what
/// the chain holds; then every GPU is judged ([`judge`]). The first failure fails the node;
/// every GPU must pass for the node to pass, and then it proves the least held memory of
/// them.
pub fn judge_node(
    params: &[Params],
    draws: &Draws,
    answers: &NodeAnswers,
    opening: &NodeOpening,
) -> Verdict {
    if opening.gpus.len() != params.len() {
        return Verdict::Failed(Failure::Malformed(format!(
            "{} GPUs answered, {} challenged",
            opening.gpus.len(),
            params.len()
        )));
    }
    let commitments: Vec<Digest> = opening.gpus.iter().map(|g| g.commitment).collect();
    if node_commitment(&commitments) != answers.commitment {
        return Verdict::Failed(Failure::Malformed(
            "the GPUs' commitments do not make the node's".into(),
        ));
    }
    let held: Vec<Digest> = opening.gpus.iter().map(|g| g.held_digest).collect();
    if node_held_digest(&held) != answers.held_digest {
        return Verdict::Failed(Failure::HeldChainMismatch);
    }
    let mut proven: Option<ProvenProfile> = None;
    let mut unbounded = false;
    for (params, gpu) in params.iter().zip(&opening.gpus) {
        let answer = Answer {
            commitment: gpu.commitment,
            held_digest: gpu.held_digest,
            times: answers.times,
            opening: gpu.opening.clone(),
        };
        match judge(params, draws, &answer) {
            Verdict::Failed(failure) => return Verdict::Failed(failure),
            Verdict::Unbounded => unbounded = true,
            Verdict::Passed(profile) => {
                proven = Some(match proven {
                    Some(p) if p.held_bytes <= profile.held_bytes => p,
                    _ => profile,
                })
            }
        }
    }
    match (unbounded, proven) {
        (false, Some(profile)) => Verdict::Passed(profile),
        _ => Verdict::Unbounded,
    }
}

/// A node answering its challenge: one [`Prover`] per GPU, each on its own backend. The
/// GPUs work at once, one thread each: every GPU's phase is timed from the same seed to
/// the node's one answer, so a node that worked through its GPUs in turn would take their
/// sum.
pub struct NodeProver<B> {
    gpus: Vec<Prover<B>>,
}

/// `work` on every element at once, one thread each; the results in order.
fn on_every_gpu<T: Send, R: Send>(items: Vec<T>, work: impl Fn(T) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let work = &work;
        let running: Vec<_> = items
            .into_iter()
            .map(|item| s.spawn(move || work(item)))
            .collect();
        running
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

impl<B: Backend + Send> NodeProver<B> {
    /// After the challenge seed: every GPU's product and commitment, `backend(i)` for GPU
    /// `i`.
    pub fn commit(
        params: Vec<Params>,
        backend: impl FnMut(usize) -> B,
    ) -> Result<Self, ProverError> {
        let backends: Vec<B> = (0..params.len()).map(backend).collect();
        let gpus = on_every_gpu(params.into_iter().zip(backends).collect(), |(p, b)| {
            Prover::commit(p, b)
        })
        .into_iter()
        .collect::<Result<_, _>>()?;
        Ok(Self { gpus })
    }

    /// Each GPU's challenge, in order (its seed keys the attestation nonce).
    pub fn params(&self) -> Vec<&Params> {
        self.gpus.iter().map(|g| g.params()).collect()
    }

    /// The node's commitment, for the chain.
    pub fn commitment(&self) -> Digest {
        node_commitment(&self.gpu_commitments())
    }

    fn gpu_commitments(&self) -> Vec<Digest> {
        self.gpus.iter().map(|g| g.commitment()).collect()
    }

    /// After the held seed: every GPU's passes. Returns the node's held digest.
    pub fn hold(&mut self, held_seed: &Digest) -> Result<Digest, ProverError> {
        let digests = on_every_gpu(self.gpus.iter_mut().collect(), |g| g.hold(held_seed))
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        Ok(node_held_digest(&digests))
    }

    /// After the open seed: the node's opening.
    pub fn open(&mut self, open_seed: &Digest) -> Result<NodeOpening, ProverError> {
        let gpus = on_every_gpu(self.gpus.iter_mut().collect(), |gpu| {
            Ok(GpuOpening {
                commitment: gpu.commitment(),
                held_digest: gpu.held_digest().ok_or(ProverError::NotHeld)?,
                opening: gpu.open(open_seed)?,
                attestation: None,
            })
        })
        .into_iter()
        .collect::<Result<_, ProverError>>()?;
        Ok(NodeOpening { gpus })
    }
}
