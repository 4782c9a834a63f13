//! Dishonest nodes, each the cheapest way to fake one part of the challenge, for the tests
//! and the cost bench (feature `adversaries`).

use std::collections::HashSet;

use crate::backend::{Backend, BackendError, CpuBackend, leaves_in_parallel};
use crate::hash::{Digest, held_leaf, held_leaf_of_row, held_value, row_leaf, sha256};
use crate::matrix::{Inputs, product_row};
use crate::params::Params;

/// What a node with less memory than it claims does about the rows it could not keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Makes up their held leaves: as fast as holding them.
    MakeUp,
    /// Computes them again from A and B whenever a pass reads them: right, and slow.
    Recompute,
}

/// A node whose device has `memory_bytes`: it computes every row (streaming them into the
/// commitment costs no memory), keeps B and as many rows' low halves as fit, and answers
/// for the rest as `missing` says. The opened rows it recomputes, as an honest node does.
#[derive(Debug)]
pub struct ShortMemory {
    device: CpuBackend,
    memory_bytes: u64,
    missing: Missing,
    rows: u64,
    kept: u64,
}

impl ShortMemory {
    pub fn new(memory_bytes: u64, missing: Missing) -> Self {
        Self {
            device: CpuBackend::new(),
            memory_bytes,
            missing,
            rows: 0,
            kept: 0,
        }
    }

    pub fn with_threads(mut self, threads: usize) -> Self {
        self.device = self.device.with_threads(threads);
        self
    }

    /// Rows whose low halves it kept.
    pub fn kept_rows(&self) -> u64 {
        self.kept
    }
}

impl Backend for ShortMemory {
    fn compute(&mut self, params: &Params) -> Result<Vec<Digest>, BackendError> {
        let b_bytes = u64::from(params.width) * u64::from(params.width);
        let row_bytes = 2 * u64::from(params.width);
        self.rows = params.rows;
        self.kept = (self.memory_bytes.saturating_sub(b_bytes) / row_bytes).min(params.rows);
        let leaves = self.device.compute(params)?;
        self.device.forget_rows_from(self.kept);
        Ok(leaves)
    }

    fn held_leaves(&mut self, key: &Digest) -> Result<Vec<Digest>, BackendError> {
        let (inputs, b, low) = self.device.kept()?;
        let (kept, missing, width) = (self.kept, self.missing, inputs.width());
        Ok(leaves_in_parallel(self.device.threads(), self.rows, |i| {
            if i < kept {
                let start = i as usize * width;
                held_leaf(key, i, &low[start..start + width])
            } else {
                match missing {
                    Missing::MakeUp => sha256(&[b"made up", key, &i.to_le_bytes()]),
                    Missing::Recompute => held_leaf_of_row(key, i, &product_row(inputs, b, i)),
                }
            }
        }))
    }

    fn row(&mut self, index: u64) -> Result<Vec<i32>, BackendError> {
        self.device.row(index)
    }
}

/// A node that computes the product of another seed's inputs (one it computed earlier, or
/// one it was sent) and answers every phase consistently with it.
#[derive(Debug)]
pub struct OtherSeed {
    device: CpuBackend,
    seed: Digest,
}

impl OtherSeed {
    pub fn new(seed: Digest) -> Self {
        Self {
            device: CpuBackend::new(),
            seed,
        }
    }
}

impl Backend for OtherSeed {
    fn compute(&mut self, params: &Params) -> Result<Vec<Digest>, BackendError> {
        let other = Params {
            seed: self.seed,
            ..params.clone()
        };
        self.device.compute(&other)
    }

    fn held_leaves(&mut self, key: &Digest) -> Result<Vec<Digest>, BackendError> {
        self.device.held_leaves(key)
    }

    fn row(&mut self, index: u64) -> Result<Vec<i32>, BackendError> {
        self.device.row(index)
    }
}

/// A node that skipped some rows, answering zeros for them everywhere (commitment, held
/// passes, opening), so that only Freivalds can tell.
#[derive(Debug)]
pub struct PartialWork {
    skipped: HashSet<u64>,
    rows: Vec<Vec<i32>>,
}

impl PartialWork {
    pub fn new(skipped: impl IntoIterator<Item = u64>) -> Self {
        Self {
            skipped: skipped.into_iter().collect(),
            rows: Vec::new(),
        }
    }
}

impl Backend for PartialWork {
    fn compute(&mut self, params: &Params) -> Result<Vec<Digest>, BackendError> {
        let inputs = Inputs::new(params);
        let b = inputs.b();
        self.rows = (0..params.rows)
            .map(|i| {
                if self.skipped.contains(&i) {
                    vec![0; inputs.width()]
                } else {
                    product_row(&inputs, &b, i)
                }
            })
            .collect();
        Ok(self
            .rows
            .iter()
            .enumerate()
            .map(|(i, row)| row_leaf(i as u64, row))
            .collect())
    }

    fn held_leaves(&mut self, key: &Digest) -> Result<Vec<Digest>, BackendError> {
        Ok(self
            .rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let low: Vec<u16> = row.iter().map(|&v| held_value(v)).collect();
                held_leaf(key, i as u64, &low)
            })
            .collect())
    }

    fn row(&mut self, index: u64) -> Result<Vec<i32>, BackendError> {
        self.rows
            .get(index as usize)
            .cloned()
            .ok_or(BackendError::NoSuchRow(index))
    }
}
