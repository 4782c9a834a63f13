//! The seeded int8 inputs and the exact int8 product.
//!
//! A and B are drawn from ChaCha8 keyed by the parameters' digest, one key each. Row `i` of
//! A starts at byte `i * width` of its stream, so any row is generated on its own: the
//! checker regenerates only the rows it opens, and a GPU generates A panel by panel.
//!
//! C = A·B accumulates in i32, which is what GPU int8 tensor cores compute (cuBLAS
//! `cublasGemmEx`, `CUDA_R_8I` inputs, `CUDA_R_32I` output). It is exact: an entry is a sum
//! of `width` products of at most 128·128 = 2^14 in magnitude, and `width` ≤ 2^15, so no
//! entry reaches 2^29.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::hash::{Digest, sha256};
use crate::params::Params;

/// The widest product: entries stay below 2^29, and the checker's B·r below 2^54.
pub const MAX_WIDTH: u32 = 1 << 15;
/// Widths are multiples of this (whole ChaCha words per row; tiles for a GPU kernel).
pub const WIDTH_STEP: u32 = 64;

const _: () = assert!((MAX_WIDTH as i64) * 128 * 128 < i32::MAX as i64);
const _: () = assert!((MAX_WIDTH as i128) * 128 * (u32::MAX as i128) < i64::MAX as i128);

const A_TAG: &[u8] = b"mcjs-challenge/1/a";
const B_TAG: &[u8] = b"mcjs-challenge/1/b";

/// The keys of A and B for one challenge.
#[derive(Debug, Clone)]
pub struct Inputs {
    a_key: Digest,
    b_key: Digest,
    width: usize,
}

impl Inputs {
    pub fn new(params: &Params) -> Self {
        let digest = params.digest();
        Self {
            a_key: sha256(&[A_TAG, &digest]),
            b_key: sha256(&[B_TAG, &digest]),
            width: params.width_usize(),
        }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// The ChaCha8 keys of A and B, for a device that generates them itself.
    pub fn keys(&self) -> (&Digest, &Digest) {
        (&self.a_key, &self.b_key)
    }

    /// Rows `first..` of A into `out` (a whole number of rows).
    pub fn a_rows(&self, first: u64, out: &mut [i8]) {
        fill_from(&self.a_key, first, self.width, out);
    }

    /// Rows `first..` of B into `out`.
    pub fn b_rows(&self, first: u64, out: &mut [i8]) {
        fill_from(&self.b_key, first, self.width, out);
    }

    /// All of B, row-major.
    pub fn b(&self) -> Vec<i8> {
        let mut b = vec![0; self.width * self.width];
        self.b_rows(0, &mut b);
        b
    }
}

fn fill_from(key: &Digest, first_row: u64, width: usize, out: &mut [i8]) {
    debug_assert_eq!(out.len() % width, 0);
    let mut rng = ChaCha8Rng::from_seed(*key);
    rng.set_word_pos(u128::from(first_row) * width as u128 / 4);
    let mut buf = [0u8; 4096];
    for chunk in out.chunks_mut(buf.len()) {
        let bytes = &mut buf[..chunk.len()];
        rng.fill_bytes(bytes);
        for (v, b) in chunk.iter_mut().zip(bytes.iter()) {
            *v = *b as i8;
        }
    }
}

/// Rows of C for the rows of A in `a` (row-major, `width` wide) into `c`.
///
/// Blocked so that a block of C's rows and a slice of B's row stay in cache; the inner loop
/// is a widening multiply-add the compiler vectorises. Wrapping arithmetic only to drop the
/// debug overflow checks: nothing wraps (see the module's bound).
pub fn multiply_rows(a: &[i8], b: &[i8], width: usize, c: &mut [i32]) {
    const ROWS: usize = 8;
    const COLS: usize = 512;
    assert_eq!(a.len(), c.len());
    assert_eq!(b.len(), width * width);
    c.fill(0);
    for (a_block, c_block) in a.chunks(ROWS * width).zip(c.chunks_mut(ROWS * width)) {
        let rows = a_block.len() / width;
        for j0 in (0..width).step_by(COLS) {
            let j1 = (j0 + COLS).min(width);
            for l in 0..width {
                let b_seg = &b[l * width + j0..l * width + j1];
                for r in 0..rows {
                    let x = i32::from(a_block[r * width + l]);
                    let c_seg = &mut c_block[r * width + j0..r * width + j1];
                    for (cv, &bv) in c_seg.iter_mut().zip(b_seg) {
                        *cv = cv.wrapping_add(x.wrapping_mul(i32::from(bv)));
                    }
                }
            }
        }
    }
}

/// One row of C: row `index` of A times B.
pub fn product_row(inputs: &Inputs, b: &[i8], index: u64) -> Vec<i32> {
    let mut a = vec![0; inputs.width];
    inputs.a_rows(index, &mut a);
    let mut c = vec![0; inputs.width];
    multiply_rows(&a, b, inputs.width, &mut c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[i8], b: &[i8], width: usize) -> Vec<i32> {
        let rows = a.len() / width;
        let mut c = vec![0i64; rows * width];
        for i in 0..rows {
            for j in 0..width {
                c[i * width + j] = (0..width)
                    .map(|l| i64::from(a[i * width + l]) * i64::from(b[l * width + j]))
                    .sum();
            }
        }
        c.into_iter().map(|v| i32::try_from(v).unwrap()).collect()
    }

    #[test]
    fn the_blocked_product_equals_the_textbook_one() {
        let mut rng = ChaCha8Rng::from_seed([1; 32]);
        for (rows, width) in [(1, 64), (7, 64), (9, 128), (17, 576)] {
            let mut bytes = vec![0u8; rows * width + width * width];
            rng.fill_bytes(&mut bytes);
            let (a, b): (Vec<i8>, Vec<i8>) = (
                bytes[..rows * width].iter().map(|&x| x as i8).collect(),
                bytes[rows * width..].iter().map(|&x| x as i8).collect(),
            );
            let mut c = vec![0; rows * width];
            multiply_rows(&a, &b, width, &mut c);
            assert_eq!(c, naive(&a, &b, width), "{rows}x{width}");
        }
    }

    #[test]
    fn the_largest_entries_are_exact() {
        let width = 128;
        let a = vec![-128i8; 3 * width];
        let b = vec![-128i8; width * width];
        let mut c = vec![0; 3 * width];
        multiply_rows(&a, &b, width, &mut c);
        assert!(c.iter().all(|&v| v == 128 * 128 * width as i32));
        let b = vec![127i8; width * width];
        multiply_rows(&a, &b, width, &mut c);
        assert!(c.iter().all(|&v| v == -128 * 127 * width as i32));
    }

    #[test]
    fn any_row_of_a_is_generated_on_its_own() {
        let params = Params::for_claim(&crate::params::Claim::new("t", 1 << 20), [2; 32]).unwrap();
        let inputs = Inputs::new(&params);
        let w = inputs.width();
        let mut all = vec![0; 10 * w];
        inputs.a_rows(0, &mut all);
        let mut row7 = vec![0; w];
        inputs.a_rows(7, &mut row7);
        assert_eq!(row7, all[7 * w..8 * w]);
        let mut b_row3 = vec![0; w];
        inputs.b_rows(3, &mut b_row3);
        assert_eq!(b_row3, inputs.b()[3 * w..4 * w]);
        assert_ne!(b_row3, all[3 * w..4 * w], "A and B have their own keys");
    }
}
