//! Where the node's work runs: one trait, the CPU implementation here, the GPU one in
//! [`crate::gpu`] ([`crate::KernelBackend`] over a CUDA device). Both must reproduce
//! [`crate::hash`] and [`crate::matrix`] byte for byte; the pinned values in the tests say
//! what.

use crate::hash::{Digest, held_leaf, held_value, row_leaf};
use crate::matrix::{Inputs, multiply_rows, product_row};
use crate::merkle::MerkleTree;
use crate::params::Params;

/// Why a backend could not do its part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("the challenge needs {needed} bytes and the device has {available}")]
    OutOfMemory { needed: u64, available: u64 },
    #[error("nothing has been computed yet")]
    NotComputed,
    #[error("row {0} is not in the product")]
    NoSuchRow(u64),
    #[error("device error: {0}")]
    Device(String),
}

/// A node's device: computes the product, keeps it, reads it back.
pub trait Backend {
    /// Generates A and B for `params`, multiplies them, keeps the held form of every row
    /// (its low 16 bits) and returns every row's commitment leaf, in row order.
    fn compute(&mut self, params: &Params) -> Result<Vec<Digest>, BackendError>;

    /// One held pass: the held leaf of every row under `key`, in row order (for the
    /// opening; not timed).
    fn held_leaves(&mut self, key: &Digest) -> Result<Vec<Digest>, BackendError>;

    /// One held pass's Merkle root (timed: this is the held phase). A device that can build
    /// the tree where the rows are overrides it.
    fn held_root(&mut self, key: &Digest) -> Result<Digest, BackendError> {
        Ok(MerkleTree::new(self.held_leaves(key)?).root())
    }

    /// Row `index` of the product, in full.
    fn row(&mut self, index: u64) -> Result<Vec<i32>, BackendError>;
}

/// A backend reached through a pointer: boxed, where a node's GPUs are of different kinds
/// (or a test mixes honest and dishonest devices); lent, where a device opened once serves
/// several challenges (a bench).
macro_rules! forward_backend {
    ($($pointer:ty),*) => {$(
        impl<B: Backend + ?Sized> Backend for $pointer {
            fn compute(&mut self, params: &Params) -> Result<Vec<Digest>, BackendError> {
                (**self).compute(params)
            }

            fn held_leaves(&mut self, key: &Digest) -> Result<Vec<Digest>, BackendError> {
                (**self).held_leaves(key)
            }

            fn held_root(&mut self, key: &Digest) -> Result<Digest, BackendError> {
                (**self).held_root(key)
            }

            fn row(&mut self, index: u64) -> Result<Vec<i32>, BackendError> {
                (**self).row(index)
            }
        }
    )*};
}

forward_backend!(Box<B>, &mut B);

/// Plain Rust on the host's cores: the reference the GPU backend is tested against, the
/// backend of CPU-only nodes, and the one the tests run.
#[derive(Debug)]
pub struct CpuBackend {
    threads: usize,
    memory_bytes: Option<u64>,
    held: Option<Held>,
}

/// What the CPU backend keeps between phases.
#[derive(Debug)]
struct Held {
    rows: u64,
    inputs: Inputs,
    b: Vec<i8>,
    low: Vec<u16>,
}

/// Rows generated and multiplied at a time by one thread.
const ROW_BLOCK: usize = 32;

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuBackend {
    /// All the host's cores, and as much memory as the host gives.
    pub fn new() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            threads,
            memory_bytes: None,
            held: None,
        }
    }

    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// A device of `bytes`: the challenge is refused when what it holds does not fit.
    pub fn with_memory(mut self, bytes: u64) -> Self {
        self.memory_bytes = Some(bytes);
        self
    }

    fn held(&self) -> Result<&Held, BackendError> {
        self.held.as_ref().ok_or(BackendError::NotComputed)
    }
}

impl Backend for CpuBackend {
    fn compute(&mut self, params: &Params) -> Result<Vec<Digest>, BackendError> {
        let needed = params.device_bytes();
        if let Some(available) = self.memory_bytes.filter(|&a| a < needed) {
            return Err(BackendError::OutOfMemory { needed, available });
        }
        self.held = None;
        let inputs = Inputs::new(params);
        let b = inputs.b();
        let width = inputs.width();
        let rows = usize::try_from(params.rows).expect("rows fit in memory");
        let mut low = vec![0u16; rows * width];
        let mut leaves = vec![[0u8; 32]; rows];
        let per_thread = rows.div_ceil(self.threads);
        std::thread::scope(|s| {
            for (t, (low, leaves)) in low
                .chunks_mut(per_thread * width)
                .zip(leaves.chunks_mut(per_thread))
                .enumerate()
            {
                let (inputs, b) = (&inputs, &b);
                s.spawn(move || {
                    let first = t * per_thread;
                    let mut a = vec![0i8; ROW_BLOCK * width];
                    let mut c = vec![0i32; ROW_BLOCK * width];
                    for (blk, (low, leaves)) in low
                        .chunks_mut(ROW_BLOCK * width)
                        .zip(leaves.chunks_mut(ROW_BLOCK))
                        .enumerate()
                    {
                        let n = leaves.len();
                        let row0 = first + blk * ROW_BLOCK;
                        inputs.a_rows(row0 as u64, &mut a[..n * width]);
                        multiply_rows(&a[..n * width], b, width, &mut c[..n * width]);
                        for (r, leaf) in leaves.iter_mut().enumerate() {
                            let row = &c[r * width..(r + 1) * width];
                            *leaf = row_leaf((row0 + r) as u64, row);
                            for (l, &v) in low[r * width..(r + 1) * width].iter_mut().zip(row) {
                                *l = held_value(v);
                            }
                        }
                    }
                });
            }
        });
        self.held = Some(Held {
            rows: params.rows,
            inputs,
            b,
            low,
        });
        Ok(leaves)
    }

    fn held_leaves(&mut self, key: &Digest) -> Result<Vec<Digest>, BackendError> {
        let held = self.held()?;
        let width = held.inputs.width();
        Ok(leaves_in_parallel(self.threads, held.rows, |i| {
            let start = i as usize * width;
            held_leaf(key, i, &held.low[start..start + width])
        }))
    }

    fn row(&mut self, index: u64) -> Result<Vec<i32>, BackendError> {
        let held = self.held()?;
        if index >= held.rows {
            return Err(BackendError::NoSuchRow(index));
        }
        Ok(product_row(&held.inputs, &held.b, index))
    }
}

impl CpuBackend {
    /// The inputs, B and the low halves kept, for the adversaries built on this backend.
    #[cfg(any(test, feature = "adversaries"))]
    pub(crate) fn kept(&self) -> Result<(&Inputs, &[i8], &[u16]), BackendError> {
        let held = self.held()?;
        Ok((&held.inputs, &held.b, &held.low))
    }

    /// Drops the low halves of every row from `first` on, as a device too small to keep
    /// them would never have had them.
    #[cfg(any(test, feature = "adversaries"))]
    pub(crate) fn forget_rows_from(&mut self, first: u64) {
        if let Some(held) = self.held.as_mut() {
            held.low.truncate(first as usize * held.inputs.width());
            held.low.shrink_to_fit();
        }
    }

    #[cfg(any(test, feature = "adversaries"))]
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }
}

/// `leaf(i)` for every row `i` in `0..rows`, on `threads` threads, in row order.
pub(crate) fn leaves_in_parallel(
    threads: usize,
    rows: u64,
    leaf: impl Fn(u64) -> Digest + Sync,
) -> Vec<Digest> {
    let mut leaves = vec![[0u8; 32]; rows as usize];
    let per_thread = leaves.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (t, chunk) in leaves.chunks_mut(per_thread).enumerate() {
            let leaf = &leaf;
            s.spawn(move || {
                for (r, out) in chunk.iter_mut().enumerate() {
                    *out = leaf((t * per_thread + r) as u64);
                }
            });
        }
    });
    leaves
}
