//! The node's side: three answers, each given only once the seed before it is known.

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendError};
use crate::hash::{Digest, first_held_key, next_held_key};
use crate::merkle::{MerkleProof, MerkleTree};
use crate::params::Params;

/// What the node sends the checker after the open seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opening {
    /// Every held pass's root, in order: the checker chains them to the held digest.
    #[serde(with = "crate::wire::digests")]
    pub held_roots: Vec<Digest>,
    /// The rows [`Params::rows_to_open`] names, in its order.
    pub rows: Vec<OpenedRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenedRow {
    pub index: u64,
    #[serde(with = "crate::wire::values")]
    pub values: Vec<i32>,
    /// The row's commitment leaf in the commitment.
    pub proof: MerkleProof,
    pub pass: u32,
    /// The row's held leaf in that pass's root.
    pub held_proof: MerkleProof,
}

impl Opening {
    /// Bytes on the wire, packed: the roots, and per row its index, pass, values and both
    /// proofs.
    pub fn wire_bytes(&self) -> u64 {
        let rows: usize = self
            .rows
            .iter()
            .map(|r| {
                8 + 4
                    + 4 * r.values.len()
                    + 32 * (r.proof.siblings.len() + r.held_proof.siblings.len())
            })
            .sum();
        (32 * self.held_roots.len() + rows) as u64
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProverError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("the backend returned {got} leaves for {rows} rows")]
    WrongLeafCount { got: usize, rows: u64 },
    #[error("the held passes have not been run")]
    NotHeld,
}

/// A node answering one challenge.
pub struct Prover<B> {
    params: Params,
    backend: B,
    commitment: MerkleTree,
    held: Option<HeldRun>,
}

struct HeldRun {
    keys: Vec<Digest>,
    roots: Vec<Digest>,
}

impl<B: Backend> Prover<B> {
    /// After the challenge seed: compute the product and commit to its rows.
    pub fn commit(params: Params, mut backend: B) -> Result<Self, ProverError> {
        let leaves = backend.compute(&params)?;
        if leaves.len() as u64 != params.rows {
            return Err(ProverError::WrongLeafCount {
                got: leaves.len(),
                rows: params.rows,
            });
        }
        Ok(Self {
            params,
            backend,
            commitment: MerkleTree::new(leaves),
            held: None,
        })
    }

    /// The root to send on chain.
    pub fn commitment(&self) -> Digest {
        self.commitment.root()
    }

    /// After the held seed: every pass in turn, each keyed by the root before it. Returns
    /// the held digest to send on chain.
    pub fn hold(&mut self, held_seed: &Digest) -> Result<Digest, ProverError> {
        let mut key = first_held_key(&self.params.digest(), held_seed, &self.commitment());
        let passes = self.params.passes as usize;
        let (mut keys, mut roots) = (Vec::with_capacity(passes), Vec::with_capacity(passes));
        for _ in 0..passes {
            let root = self.backend.held_root(&key)?;
            keys.push(key);
            roots.push(root);
            key = next_held_key(&key, &root);
        }
        self.held = Some(HeldRun { keys, roots });
        Ok(key)
    }

    /// After the open seed: the named rows, each with its proofs. Passes are run again for
    /// the proofs (the node keeps only their roots), which the honest node holding the
    /// product does in a pass's time each.
    pub fn open(&mut self, open_seed: &Digest) -> Result<Opening, ProverError> {
        let held = self.held.as_ref().ok_or(ProverError::NotHeld)?;
        let cells = self.params.rows_to_open(open_seed);
        let mut passes: Vec<u32> = cells.iter().map(|c| c.pass).collect();
        passes.sort_unstable();
        passes.dedup();
        let mut held_proofs = vec![None; cells.len()];
        for pass in passes {
            let tree = MerkleTree::new(self.backend.held_leaves(&held.keys[pass as usize])?);
            for (proof, cell) in held_proofs.iter_mut().zip(&cells) {
                if cell.pass == pass {
                    *proof = Some(tree.proof(cell.row));
                }
            }
        }
        let mut rows = Vec::with_capacity(cells.len());
        for (cell, held_proof) in cells.iter().zip(held_proofs) {
            rows.push(OpenedRow {
                index: cell.row,
                values: self.backend.row(cell.row)?,
                proof: self.commitment.proof(cell.row),
                pass: cell.pass,
                held_proof: held_proof.expect("every pass opened"),
            });
        }
        Ok(Opening {
            held_roots: held.roots.clone(),
            rows,
        })
    }

    /// The held digest the passes ended on, once they have run.
    pub fn held_digest(&self) -> Option<Digest> {
        let held = self.held.as_ref()?;
        let (key, root) = (held.keys.last()?, held.roots.last()?);
        Some(next_held_key(key, root))
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }
}
