//! The kernels compiled as C on the host (the build script), behind a [`Device`] whose
//! launches are loops over the thread indices and whose product is cuBLAS's "TN" definition
//! written out. The tests run [`KernelBackend`] over it: the same pipeline and the same
//! kernel text as on a GPU, held to the CPU backend's values. What they cannot show is
//! anything CUDA itself does (the launch grid, NVRTC, cuBLAS, device memory): that is the
//! device check's (`bench/gpu-challenge.sh`).

use super::{Device, KernelBackend};
use crate::backend::BackendError;
use crate::hash::{HELD_LEAF_INDEX_AT, ROW_LEAF_INDEX_AT};

unsafe extern "C" {
    fn mcjs_host_gen_a(key: *const u32, first_block: u64, blocks: u64, out: *mut u32);
    fn mcjs_host_gen_bt(key: *const u32, width: u32, out: *mut i8);
    fn mcjs_host_row_leaves(
        header: *const u32,
        index_at: u32,
        row0: u64,
        rows: u64,
        width: u32,
        c: *const u32,
        held: *mut u32,
        leaves: *mut u8,
    );
    fn mcjs_host_held_leaves(
        header: *const u32,
        index_at: u32,
        rows: u64,
        width: u32,
        held: *const u32,
        leaves: *mut u8,
    );
    fn mcjs_host_merkle_level(below: *const u8, n: u64, above: *mut u8);
}

/// A device of `memory` bytes on the host. Every launch first checks that its buffers hold
/// what the kernel will touch, as a GPU would not: a pipeline sizing error fails here
/// instead of writing past a buffer on a card.
#[derive(Debug)]
pub(crate) struct HostDevice {
    pub memory: u64,
    pub launches: u64,
}

impl HostDevice {
    pub fn new(memory: u64) -> Self {
        Self {
            memory,
            launches: 0,
        }
    }

    fn launch(&mut self, touched: &[(&str, usize, u64)]) {
        for &(name, have, need) in touched {
            assert!(
                have as u64 >= need,
                "{name} holds {have} words and the launch touches {need}"
            );
        }
        self.launches += 1;
    }
}

fn bytes_of(words: &[u32]) -> Vec<i8> {
    words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .map(|b| b as i8)
        .collect()
}

impl Device for HostDevice {
    type Buf = Vec<u32>;

    fn free_bytes(&mut self) -> Result<u64, BackendError> {
        Ok(self.memory)
    }

    fn alloc(&mut self, words: usize) -> Result<Vec<u32>, BackendError> {
        Ok(vec![0; words])
    }

    fn upload(&mut self, words: &[u32]) -> Result<Vec<u32>, BackendError> {
        Ok(words.to_vec())
    }

    fn download(
        &mut self,
        buf: &Vec<u32>,
        first: usize,
        count: usize,
    ) -> Result<Vec<u32>, BackendError> {
        Ok(buf[first..first + count].to_vec())
    }

    fn gen_a(
        &mut self,
        key: &Vec<u32>,
        first_block: u64,
        blocks: u64,
        out: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        self.launch(&[("key", key.len(), 8), ("A", out.len(), blocks * 16)]);
        unsafe { mcjs_host_gen_a(key.as_ptr(), first_block, blocks, out.as_mut_ptr()) };
        Ok(())
    }

    fn gen_bt(
        &mut self,
        key: &Vec<u32>,
        width: u32,
        out: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        let w = u64::from(width);
        self.launch(&[("key", key.len(), 8), ("B^T", out.len(), w * w / 4)]);
        unsafe { mcjs_host_gen_bt(key.as_ptr(), width, out.as_mut_ptr().cast()) };
        Ok(())
    }

    fn gemm_tn(
        &mut self,
        bt: &Vec<u32>,
        a: &Vec<u32>,
        c: &mut Vec<u32>,
        width: u32,
        rows: u64,
    ) -> Result<(), BackendError> {
        let w = width as usize;
        let n = rows as usize;
        self.launch(&[
            ("B^T", bt.len(), (w * w / 4) as u64),
            ("A", a.len(), (n * w / 4) as u64),
            ("C", c.len(), (n * w) as u64),
        ]);
        // cuBLAS, column-major, C = op(A)·op(B) with op(A) = Aᵀ: C[j + i·ldc] =
        // Σ_l A[l + j·lda] · B[l + i·ldb], A = B^T's buffer, B = the panel, lda = ldb =
        // ldc = width.
        let (bt, a) = (bytes_of(bt), bytes_of(a));
        for i in 0..n {
            for j in 0..w {
                let sum: i32 = (0..w)
                    .map(|l| i32::from(bt[l + j * w]) * i32::from(a[l + i * w]))
                    .sum();
                c[j + i * w] = sum as u32;
            }
        }
        Ok(())
    }

    fn row_leaves(
        &mut self,
        header: &Vec<u32>,
        row0: u64,
        rows: u64,
        width: u32,
        c: &Vec<u32>,
        held: &mut Vec<u32>,
        leaves: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        let w = u64::from(width);
        self.launch(&[
            ("header", header.len(), 16),
            ("C", c.len(), rows * w),
            ("held", held.len(), (row0 + rows) * w / 2),
            ("leaves", leaves.len(), (row0 + rows) * 8),
        ]);
        unsafe {
            mcjs_host_row_leaves(
                header.as_ptr(),
                ROW_LEAF_INDEX_AT as u32,
                row0,
                rows,
                width,
                c.as_ptr(),
                held.as_mut_ptr(),
                leaves.as_mut_ptr().cast(),
            )
        };
        Ok(())
    }

    fn held_leaves(
        &mut self,
        header: &Vec<u32>,
        rows: u64,
        width: u32,
        held: &Vec<u32>,
        leaves: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        self.launch(&[
            ("header", header.len(), 16),
            ("held", held.len(), rows * u64::from(width) / 2),
            ("leaves", leaves.len(), rows * 8),
        ]);
        unsafe {
            mcjs_host_held_leaves(
                header.as_ptr(),
                HELD_LEAF_INDEX_AT as u32,
                rows,
                width,
                held.as_ptr(),
                leaves.as_mut_ptr().cast(),
            )
        };
        Ok(())
    }

    fn merkle_level(
        &mut self,
        below: &Vec<u32>,
        n: u64,
        above: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        self.launch(&[
            ("below", below.len(), n * 8),
            ("above", above.len(), n.div_ceil(2) * 8),
        ]);
        unsafe { mcjs_host_merkle_level(below.as_ptr().cast(), n, above.as_mut_ptr().cast()) };
        Ok(())
    }
}

mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::gpu::{digests, header_words, key_words};
    use crate::hash::{held_leaf, held_leaf_header, held_value, row_leaf, row_leaf_header};
    use crate::matrix::{Inputs, multiply_rows};
    use crate::merkle::MerkleTree;
    use crate::tests::{DRAWS, answer, params};
    use crate::verify::{Verdict, judge};
    use crate::{CpuBackend, Digest};

    fn words_of(bytes: &[i8]) -> Vec<u32> {
        bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8]))
            .collect()
    }

    #[test]
    fn the_kernels_generate_a_and_b_as_the_reference() {
        let params = params();
        let inputs = Inputs::new(&params);
        let (a_key, b_key) = inputs.keys();
        let w = inputs.width();
        let mut device = HostDevice::new(0);

        let mut reference = vec![0i8; 4 * w];
        inputs.a_rows(3, &mut reference);
        let mut a = vec![0u32; w];
        let blocks = (w / 64) as u64;
        device
            .gen_a(&key_words(a_key).to_vec(), 3 * blocks, 4 * blocks, &mut a)
            .unwrap();
        assert_eq!(a, words_of(&reference), "rows 3..7 of A");

        let b = inputs.b();
        let mut bt = vec![0u32; w * w / 4];
        device
            .gen_bt(&key_words(b_key).to_vec(), w as u32, &mut bt)
            .unwrap();
        let transposed: Vec<i8> = (0..w * w).map(|at| b[(at % w) * w + at / w]).collect();
        assert_eq!(bt, words_of(&transposed), "B transposed");
    }

    #[test]
    fn the_leaf_kernels_hash_as_the_reference() {
        let params = params();
        let inputs = Inputs::new(&params);
        let w = inputs.width();
        let b = inputs.b();
        let (row0, rows) = (5u64, 6usize);
        let mut a = vec![0i8; rows * w];
        inputs.a_rows(row0, &mut a);
        let mut c = vec![0i32; rows * w];
        multiply_rows(&a, &b, w, &mut c);

        let mut device = HostDevice::new(0);
        let total = row0 as usize + rows;
        let (mut held, mut leaves) = (vec![0u32; total * w / 2], vec![0u32; total * 8]);
        let header = header_words(&row_leaf_header(0)).to_vec();
        let c_words: Vec<u32> = c.iter().map(|&v| v as u32).collect();
        device
            .row_leaves(
                &header,
                row0,
                rows as u64,
                w as u32,
                &c_words,
                &mut held,
                &mut leaves,
            )
            .unwrap();
        let got = digests(&leaves);
        for r in 0..rows {
            let index = row0 + r as u64;
            let values = &c[r * w..(r + 1) * w];
            assert_eq!(got[index as usize], row_leaf(index, values), "row {index}");
            let low: Vec<u16> = values.iter().map(|&v| held_value(v)).collect();
            let kept: Vec<u16> = held[index as usize * w / 2..(index as usize + 1) * w / 2]
                .iter()
                .flat_map(|&x| [x as u16, (x >> 16) as u16])
                .collect();
            assert_eq!(kept, low, "row {index}'s low halves");
        }
        assert!(
            got[..row0 as usize].iter().all(|d| *d == [0; 32]),
            "no other row touched"
        );

        let key: Digest = [0x5a; 32];
        let header = header_words(&held_leaf_header(&key, 0)).to_vec();
        let mut pass = vec![0u32; total * 8];
        device
            .held_leaves(&header, total as u64, w as u32, &held, &mut pass)
            .unwrap();
        let pass = digests(&pass);
        for index in row0 as usize..total {
            let low: Vec<u16> = held[index * w / 2..(index + 1) * w / 2]
                .iter()
                .flat_map(|&x| [x as u16, (x >> 16) as u16])
                .collect();
            assert_eq!(
                pass[index],
                held_leaf(&key, index as u64, &low),
                "held {index}"
            );
        }
    }

    #[test]
    fn the_merkle_kernel_builds_the_reference_tree_of_every_shape() {
        let mut device = HostDevice::new(0);
        for n in 1..=33u64 {
            let leaves: Vec<Digest> = (0..n)
                .map(|i| crate::hash::sha256(&[&i.to_le_bytes()]))
                .collect();
            let mut below: Vec<u32> = leaves
                .iter()
                .flat_map(|d| {
                    d.chunks_exact(4)
                        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                })
                .collect();
            let mut count = n;
            while count > 1 {
                let mut above = vec![0u32; count.div_ceil(2) as usize * 8];
                device.merkle_level(&below, count, &mut above).unwrap();
                below = above;
                count = count.div_ceil(2);
            }
            assert_eq!(
                digests(&below)[0],
                MerkleTree::new(leaves).root(),
                "{n} leaves"
            );
        }
    }

    #[test]
    fn the_kernel_pipeline_answers_as_the_cpu_backend_over_many_panels() {
        let params = params();
        let (reference, _) = answer(&params, CpuBackend::new());
        // Room for four panel rows at a time: the rows go through 49 panels, the last one
        // of two rows.
        let panel_bytes = 5 * u64::from(params.width);
        let memory = super::super::kept_bytes(&params) + 2 * 4 * panel_bytes + 7;
        let (got, prover) = answer(&params, KernelBackend::new(HostDevice::new(memory)));
        assert_eq!(prover.backend().panel_rows(), Some(4));
        assert_eq!(params.rows % 4, 2, "a last panel shorter than the rest");
        assert_eq!(got.commitment, reference.commitment);
        assert_eq!(got.held_digest, reference.held_digest);
        assert_eq!(got.opening, reference.opening);
        assert!(matches!(judge(&params, &DRAWS, &got), Verdict::Passed(_)));

        // With all the room it wants, one panel, the same answer.
        let (one, prover) = answer(&params, KernelBackend::new(HostDevice::new(1 << 30)));
        assert_eq!(
            prover.backend().panel_rows(),
            Some(params.rows.next_multiple_of(4))
        );
        assert_eq!(one.commitment, reference.commitment);
        assert_eq!(one.held_digest, reference.held_digest);
    }

    #[test]
    fn a_device_without_the_room_refuses_before_computing() {
        let params = params();
        let least = super::super::kept_bytes(&params) + 4 * 5 * u64::from(params.width);
        let mut backend = KernelBackend::new(HostDevice::new(least - 1));
        let err = backend.compute(&params).unwrap_err();
        assert_eq!(
            err,
            BackendError::OutOfMemory {
                needed: least,
                available: least - 1
            }
        );
        assert_eq!(backend.device().launches, 0, "nothing launched");
        assert_eq!(backend.row(0), Err(BackendError::NotComputed));
    }
}
