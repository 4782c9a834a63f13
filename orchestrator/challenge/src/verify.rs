//! The checker's side: a verdict from the parameters, the draws, what the node answered and
//! when its answers landed. Pure: the times are the chain's, given by the caller.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bounds::TimeBound;
use crate::hash::{Digest, held_keys, held_leaf_of_row, row_leaf};
use crate::matrix::Inputs;
use crate::merkle;
use crate::params::{FREIVALDS_VECTORS, Params};
use crate::prover::Opening;

/// The seeds drawn after the challenge seed, each a slot hash after the answer before it
/// landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Draws {
    /// Drawn after the commitment landed: keys the held passes.
    pub held_seed: Digest,
    /// Drawn after the held digest landed: names the opened rows and the Freivalds vectors.
    pub open_seed: Digest,
}

/// How long each phase took on the chain: from its seed's slot to the answer's landing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseTimes {
    pub commit: Duration,
    pub held: Duration,
}

/// Everything a node answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// On chain: the Merkle root over the product's rows.
    pub commitment: Digest,
    /// On chain: the key after the last held pass.
    pub held_digest: Digest,
    pub times: PhaseTimes,
    /// Off chain, to the checker.
    pub opening: Opening,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Commit,
    Held,
}

/// Why a challenge failed: the first check that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Failure {
    #[error("no answer to the {phase:?} phase")]
    Unanswered { phase: Phase },
    #[error("the {phase:?} phase took {took:?}, over its bound of {bound:?}")]
    Late {
        phase: Phase,
        took: Duration,
        bound: Duration,
    },
    #[error("the opening is malformed: {0}")]
    Malformed(String),
    #[error("the held roots do not chain to the held digest")]
    HeldChainMismatch,
    #[error("row {row} is not in the commitment")]
    BadProof { row: u64 },
    #[error("row {row}'s held leaf is not in the root of pass {pass}")]
    HeldMismatch { row: u64, pass: u32 },
    #[error("row {row} is not its row of A times B")]
    FreivaldsMismatch { row: u64 },
}

/// What a passed challenge proves about one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvenProfile {
    /// The claimed model, whose measured figures the node met.
    pub model: String,
    pub claimed_memory_bytes: u64,
    /// Bytes of incompressible data the node read back at the model's measured rate
    /// (within the slack): the memory proven, a share of the claim
    /// ([`crate::params::Sizing::fill_percent`]).
    pub held_bytes: u64,
}

/// The class placement may rely on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProvenClass {
    /// Nothing proven about speed or memory: a failed challenge, or a model with no
    /// measured bound. Placed only where a job names no GPU model and no memory floor.
    Lowest,
    Proven(ProvenProfile),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Every check held within the claimed model's measured bounds.
    Passed(ProvenProfile),
    /// Every check held, but the model has no measured bound: the node computes correctly
    /// and nothing is known of its speed or memory.
    Unbounded,
    Failed(Failure),
}

impl Verdict {
    /// A model without a measured bound is never promoted above the lowest class, however
    /// well it answered.
    pub fn proven_class(&self) -> ProvenClass {
        match self {
            Verdict::Passed(profile) => ProvenClass::Proven(profile.clone()),
            Verdict::Unbounded | Verdict::Failed(_) => ProvenClass::Lowest,
        }
    }

    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Verdict::Failed(f) => Some(f),
            _ => None,
        }
    }
}

/// Judges an answer. Time first (a late node costs the checker nothing), then the shape,
/// the held chain, the proofs, and last Freivalds (the checker's only O(n²) work).
pub fn judge(params: &Params, draws: &Draws, answer: &Answer) -> Verdict {
    match check(params, draws, answer) {
        Err(failure) => Verdict::Failed(failure),
        Ok(()) => match params.bound {
            TimeBound::Measured { .. } => Verdict::Passed(ProvenProfile {
                model: params.model.clone(),
                claimed_memory_bytes: params.memory_bytes,
                held_bytes: params.held_bytes(),
            }),
            TimeBound::Unmeasured => Verdict::Unbounded,
        },
    }
}

fn check(params: &Params, draws: &Draws, answer: &Answer) -> Result<(), Failure> {
    if let TimeBound::Measured { commit, held } = params.bound {
        for (phase, took, bound) in [
            (Phase::Commit, answer.times.commit, commit),
            (Phase::Held, answer.times.held, held),
        ] {
            if took > bound {
                return Err(Failure::Late { phase, took, bound });
            }
        }
    }

    let opening = &answer.opening;
    let cells = params.rows_to_open(&draws.open_seed);
    if opening.held_roots.len() != params.passes as usize {
        return Err(Failure::Malformed(format!(
            "{} held roots for {} passes",
            opening.held_roots.len(),
            params.passes
        )));
    }
    if opening.rows.len() != cells.len() {
        return Err(Failure::Malformed(format!(
            "{} rows opened, {} asked",
            opening.rows.len(),
            cells.len()
        )));
    }
    for (row, cell) in opening.rows.iter().zip(&cells) {
        if (row.index, row.pass) != (cell.row, cell.pass) {
            return Err(Failure::Malformed(format!(
                "row {} pass {} opened where row {} pass {} was asked",
                row.index, row.pass, cell.row, cell.pass
            )));
        }
        if row.values.len() != params.width_usize() {
            return Err(Failure::Malformed(format!(
                "row {} has {} values",
                row.index,
                row.values.len()
            )));
        }
    }

    let (keys, digest) = held_keys(
        &params.digest(),
        &draws.held_seed,
        &answer.commitment,
        &opening.held_roots,
    );
    if digest != answer.held_digest {
        return Err(Failure::HeldChainMismatch);
    }

    for row in &opening.rows {
        let leaf = row_leaf(row.index, &row.values);
        if !merkle::verify(
            &answer.commitment,
            params.rows,
            row.index,
            &leaf,
            &row.proof,
        ) {
            return Err(Failure::BadProof { row: row.index });
        }
        let pass = row.pass as usize;
        let held = held_leaf_of_row(&keys[pass], row.index, &row.values);
        if !merkle::verify(
            &opening.held_roots[pass],
            params.rows,
            row.index,
            &held,
            &row.held_proof,
        ) {
            return Err(Failure::HeldMismatch {
                row: row.index,
                pass: row.pass,
            });
        }
    }

    freivalds(params, &draws.open_seed, opening)
}

/// For each opened row i and each vector r: C_i·r == A_i·(B·r), in exact integers. A row
/// that is not A_i·B passes one vector with probability at most 2^-32 (its difference from
/// A_i·B has a nonzero entry, and one value of that entry's r in 2^32 cancels the rest).
fn freivalds(params: &Params, open_seed: &Digest, opening: &Opening) -> Result<(), Failure> {
    let inputs = Inputs::new(params);
    let width = inputs.width();
    let vectors = params.freivalds_vectors(open_seed);
    let br = b_times(&inputs, &vectors);
    let mut a = vec![0i8; width];
    for row in &opening.rows {
        inputs.a_rows(row.index, &mut a);
        for (r, br) in vectors.iter().zip(&br) {
            let claimed: i128 = row
                .values
                .iter()
                .zip(r)
                .map(|(&c, &r)| i128::from(c) * i128::from(r))
                .sum();
            let expected: i128 = a
                .iter()
                .zip(br)
                .map(|(&a, &br)| i128::from(a) * i128::from(br))
                .sum();
            if claimed != expected {
                return Err(Failure::FreivaldsMismatch { row: row.index });
            }
        }
    }
    Ok(())
}

/// B·r for every vector, B regenerated a block of rows at a time. Exact in i64: an entry is
/// at most 2^15 · 2^7 · 2^32 = 2^54.
fn b_times(
    inputs: &Inputs,
    vectors: &[Vec<u32>; FREIVALDS_VECTORS],
) -> [Vec<i64>; FREIVALDS_VECTORS] {
    const BLOCK: usize = 64;
    let width = inputs.width();
    let mut out: [Vec<i64>; FREIVALDS_VECTORS] = std::array::from_fn(|_| vec![0; width]);
    let mut b = vec![0i8; BLOCK * width];
    for first in (0..width).step_by(BLOCK) {
        let n = BLOCK.min(width - first);
        inputs.b_rows(first as u64, &mut b[..n * width]);
        for (j, b_row) in b[..n * width].chunks(width).enumerate() {
            for (out, r) in out.iter_mut().zip(vectors) {
                out[first + j] = b_row
                    .iter()
                    .zip(r)
                    .map(|(&b, &r)| i64::from(b) * i64::from(r))
                    .sum();
            }
        }
    }
    out
}
