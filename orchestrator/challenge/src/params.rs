//! What a claim is challenged with: sizes from the claimed memory, the time bound from the
//! table, and the seeded draws (which rows are opened, the Freivalds vectors).

use std::collections::HashSet;

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::bounds::{self, BoundsTable, TimeBound};
use crate::hash::{Digest, sha256};
use crate::matrix::{MAX_WIDTH, WIDTH_STEP};

const PARAMS_TAG: &[u8] = b"mcjs-challenge/1/params";
const OPEN_TAG: &[u8] = b"mcjs-challenge/1/open";
const FREIVALDS_TAG: &[u8] = b"mcjs-challenge/1/freivalds";

/// Independent Freivalds vectors per check: each lets a wrong row pass with probability at
/// most 2^-32 (its entries are 32-bit), so two give 2^-64.
pub const FREIVALDS_VECTORS: usize = 2;

/// What a node says one of its GPUs is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Normalised model name.
    pub model: String,
    /// The GPU's memory, bytes.
    pub memory_bytes: u64,
}

impl Claim {
    pub fn new(model: &str, memory_bytes: u64) -> Self {
        Self {
            model: mcjs_spec::gpu::normalize_model(model),
            memory_bytes,
        }
    }

    /// From a node profile's figures (`vram_per_gpu_mib`).
    pub fn from_vram_mib(model: &str, vram_mib: u32) -> Self {
        Self::new(model, u64::from(vram_mib) << 20)
    }
}

/// The knobs of the challenge's size, in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizing {
    /// The share of the claimed memory the challenge fills (held product and B), percent.
    /// The rest is the honest node's room for the panels of A it generates, the product's
    /// workspace and the driver.
    pub fill_percent: u8,
    /// The widest product (n), a multiple of 64 and at most [`MAX_WIDTH`]: the checker
    /// regenerates n² bytes of B, and the commit phase's work per held byte grows with it.
    pub max_width: u32,
    /// Held passes, each reading every held byte after the one before it ended.
    pub passes: u32,
    /// Rows the checker opens.
    pub rows_opened: u32,
}

impl Sizing {
    pub const STANDARD: Sizing = Sizing {
        fill_percent: 85,
        max_width: 32_768,
        passes: 64,
        rows_opened: 32,
    };
}

/// Why a claim cannot be challenged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("a claim of {memory_bytes} bytes is too small to challenge")]
    TooSmall { memory_bytes: u64 },
    #[error("sizing {0:?} is out of range")]
    BadSizing(Sizing),
}

/// One GPU's challenge: C = A·B, A `rows`×`width` and B `width`×`width`, int8 from the
/// seed; the node holds the low 16 bits of every entry of C.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    pub seed: Digest,
    pub model: String,
    pub memory_bytes: u64,
    /// n: the inner dimension and the width of every row.
    pub width: u32,
    pub rows: u64,
    pub passes: u32,
    pub rows_opened: u32,
    pub bound: TimeBound,
}

/// One opened row, and the held pass it is checked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCell {
    pub row: u64,
    pub pass: u32,
}

impl Params {
    /// The standard challenge of `claim` with the measured table.
    pub fn for_claim(claim: &Claim, seed: Digest) -> Result<Self, ClaimError> {
        Self::for_claim_in(&bounds::MEASURED, &Sizing::STANDARD, claim, seed)
    }

    /// The width is the widest multiple of 64 (up to `max_width`) for which B (width² bytes)
    /// and a square of held entries (2 bytes each) fit the fill; the rows are as many as
    /// the fill then holds beside B.
    pub fn for_claim_in(
        table: &BoundsTable<'_>,
        sizing: &Sizing,
        claim: &Claim,
        seed: Digest,
    ) -> Result<Self, ClaimError> {
        let sizing_ok = (1..=100).contains(&sizing.fill_percent)
            && sizing.max_width >= WIDTH_STEP
            && sizing.max_width <= MAX_WIDTH
            && sizing.max_width.is_multiple_of(WIDTH_STEP)
            && sizing.passes > 0
            && sizing.rows_opened > 0;
        if !sizing_ok {
            return Err(ClaimError::BadSizing(*sizing));
        }
        let too_small = ClaimError::TooSmall {
            memory_bytes: claim.memory_bytes,
        };
        let fill = u128::from(claim.memory_bytes) * u128::from(sizing.fill_percent) / 100;
        let fill = u64::try_from(fill).expect("a share of a u64");
        let square = (fill / 3).isqrt() / u64::from(WIDTH_STEP) * u64::from(WIDTH_STEP);
        let width = square.min(u64::from(sizing.max_width));
        if width == 0 {
            return Err(too_small);
        }
        let rows = (fill - width * width) / (2 * width);
        if rows < u64::from(sizing.rows_opened) {
            return Err(too_small);
        }
        let width = u32::try_from(width).expect("at most MAX_WIDTH");
        let mut params = Self {
            seed,
            model: claim.model.clone(),
            memory_bytes: claim.memory_bytes,
            width,
            rows,
            passes: sizing.passes,
            rows_opened: sizing.rows_opened,
            bound: TimeBound::Unmeasured,
        };
        params.bound = table.bound(
            &params.model,
            params.macs(),
            u128::from(params.passes) * u128::from(params.held_bytes()),
        );
        Ok(params)
    }

    /// Binds every size and the seed; keys every draw and the matrices. The bound is not in
    /// it: it is the judge's, not the node's.
    pub fn digest(&self) -> Digest {
        sha256(&[
            PARAMS_TAG,
            &self.seed,
            &(self.model.len() as u64).to_le_bytes(),
            self.model.as_bytes(),
            &self.memory_bytes.to_le_bytes(),
            &self.width.to_le_bytes(),
            &self.rows.to_le_bytes(),
            &self.passes.to_le_bytes(),
            &self.rows_opened.to_le_bytes(),
        ])
    }

    pub fn width_usize(&self) -> usize {
        self.width as usize
    }

    /// Bytes the node holds: two per product entry.
    pub fn held_bytes(&self) -> u64 {
        self.rows * u64::from(self.width) * 2
    }

    /// What an honest device keeps: the held bytes and B (which it could regenerate, but
    /// needs at hand to recompute a row). Within the fill by construction.
    pub fn device_bytes(&self) -> u64 {
        self.held_bytes() + u64::from(self.width) * u64::from(self.width)
    }

    /// Multiply-accumulates in the product.
    pub fn macs(&self) -> u128 {
        u128::from(self.rows) * u128::from(self.width) * u128::from(self.width)
    }

    /// The rows the checker opens and the pass each is checked in, drawn from the open seed
    /// (a slot hash after the held digest landed): distinct rows, in draw order.
    pub fn rows_to_open(&self, open_seed: &Digest) -> Vec<OpenCell> {
        let mut rng = ChaCha8Rng::from_seed(sha256(&[OPEN_TAG, &self.digest(), open_seed]));
        let wanted = u64::from(self.rows_opened).min(self.rows) as usize;
        let mut seen = HashSet::with_capacity(wanted);
        let mut rows = Vec::with_capacity(wanted);
        while rows.len() < wanted {
            let row = uniform_below(&mut rng, self.rows);
            if seen.insert(row) {
                rows.push(row);
            }
        }
        rows.into_iter()
            .map(|row| OpenCell {
                row,
                pass: uniform_below(&mut rng, u64::from(self.passes)) as u32,
            })
            .collect()
    }

    /// The Freivalds vectors, 32-bit entries, from the open seed: public, so every checker
    /// and auditor reaches the same verdict, and unknown to the node until its product and
    /// held passes are committed.
    pub fn freivalds_vectors(&self, open_seed: &Digest) -> [Vec<u32>; FREIVALDS_VECTORS] {
        let mut rng = ChaCha8Rng::from_seed(sha256(&[FREIVALDS_TAG, &self.digest(), open_seed]));
        std::array::from_fn(|_| (0..self.width).map(|_| rng.next_u32()).collect())
    }
}

/// Uniform in `0..bound` by rejection, written out so that any implementation draws the
/// same values from the same stream.
fn uniform_below(rng: &mut ChaCha8Rng, bound: u64) -> u64 {
    assert!(bound > 0);
    // 2^64 mod bound: values below 2^64 - that are a whole number of `bound`s.
    let excess = (u64::MAX % bound + 1) % bound;
    loop {
        let x = rng.next_u64();
        if x <= u64::MAX - excess {
            return x % bound;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn an_80_gib_claim_fills_85_percent_at_the_widest_product() {
        let p = Params::for_claim(&Claim::new("NVIDIA A100-SXM4-80GB", 80 * GIB), [7; 32]).unwrap();
        assert_eq!(p.model, "a100-sxm4-80gb");
        assert_eq!(p.width, 32_768);
        assert_eq!(p.rows, (80 * GIB * 85 / 100 - (1 << 30)) / 2 / 32_768);
        let filled = p.device_bytes() as f64 / (80 * GIB) as f64;
        assert!((0.849..=0.85).contains(&filled), "{filled}");
        let held = p.held_bytes() as f64 / (80 * GIB) as f64;
        assert!((0.83..=0.84).contains(&held), "{held}");
        assert_eq!(p.bound, TimeBound::Unmeasured);
    }

    #[test]
    fn a_small_claim_gets_a_square_product() {
        let p = Params::for_claim(&Claim::new("t", 128 << 10), [7; 32]).unwrap();
        // 85% of 128 KiB is 111,411 bytes: width 192 (the square root of a third, rounded
        // down to 64s), B 36,864 bytes, and 194 rows of 384 held bytes in the rest.
        assert_eq!((p.width, p.rows), (192, 194));
        assert!(p.device_bytes() <= 128 << 10);
    }

    #[test]
    fn claims_too_small_to_open_are_refused() {
        for memory in [0, 1 << 10, 8 << 10, 14 << 10] {
            assert!(matches!(
                Params::for_claim(&Claim::new("t", memory), [0; 32]),
                Err(ClaimError::TooSmall { .. })
            ));
        }
    }

    #[test]
    fn params_are_deterministic_and_distinct_per_seed() {
        let claim = Claim::new("t", 1 << 20);
        let a = Params::for_claim(&claim, [1; 32]).unwrap();
        assert_eq!(a, Params::for_claim(&claim, [1; 32]).unwrap());
        assert_eq!(
            a.digest(),
            Params::for_claim(&claim, [1; 32]).unwrap().digest()
        );
        let b = Params::for_claim(&claim, [2; 32]).unwrap();
        assert_ne!(a.digest(), b.digest());
        assert_eq!(a.rows_to_open(&[9; 32]), a.rows_to_open(&[9; 32]));
        assert_ne!(a.rows_to_open(&[9; 32]), b.rows_to_open(&[9; 32]));
        assert_ne!(a.rows_to_open(&[9; 32]), a.rows_to_open(&[10; 32]));
        assert_eq!(a.freivalds_vectors(&[9; 32]), a.freivalds_vectors(&[9; 32]));
        assert_ne!(
            a.freivalds_vectors(&[9; 32]),
            a.freivalds_vectors(&[10; 32])
        );
        let other_memory = Params::for_claim(&Claim::new("t", 2 << 20), [1; 32]).unwrap();
        assert_ne!(a.digest(), other_memory.digest());
    }

    #[test]
    fn seeds_differ_per_node_and_per_gpu() {
        use crate::hash::challenge_seed;
        let slot = [3; 32];
        let s = challenge_seed(&slot, &[1; 32], 0);
        assert_ne!(s, challenge_seed(&slot, &[2; 32], 0));
        assert_ne!(s, challenge_seed(&slot, &[1; 32], 1));
        assert_ne!(s, challenge_seed(&[4; 32], &[1; 32], 0));
    }

    #[test]
    fn opened_rows_are_distinct_and_in_range() {
        let p = Params::for_claim(&Claim::new("t", 128 << 10), [5; 32]).unwrap();
        for seed in 0..50u8 {
            let cells = p.rows_to_open(&[seed; 32]);
            assert_eq!(cells.len(), p.rows_opened as usize);
            let rows: HashSet<u64> = cells.iter().map(|c| c.row).collect();
            assert_eq!(rows.len(), cells.len());
            assert!(cells.iter().all(|c| c.row < p.rows && c.pass < p.passes));
        }
    }

    #[test]
    fn uniform_draws_cover_their_range_evenly() {
        let mut rng = ChaCha8Rng::from_seed([0; 32]);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[uniform_below(&mut rng, 3) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }
}
