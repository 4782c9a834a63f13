//! The GPU backend: the challenge's work where the GPU's memory is, so that what is timed is
//! the card and not the host.
//!
//! Everything stays on the device: A and B are generated there (ChaCha8 is counter-based,
//! so a panel of A starts anywhere in its stream), the product runs on the int8 tensor
//! cores (cuBLAS `cublasGemmEx`, `CUDA_R_8I` × `CUDA_R_8I` → `CUDA_R_32I`, the "TN" layout
//! with B kept transposed), each panel's rows are hashed into their commitment leaves and
//! their low halves kept where they were computed, and each held pass hashes every kept row
//! and builds its Merkle tree level by level on the device; only digests and the opened
//! rows cross the bus. Generating A or hashing on the host would make the bound a bound on
//! the host and the bus, which a weaker card with a faster host would meet.
//!
//! Split as the rest of the crate: [`KernelBackend`] is the pipeline (panel sizes, which
//! kernel runs on which buffer, the tree's levels) over a [`Device`], the few operations a
//! device offers. The CUDA device (`cuda.rs`, feature `gpu`) loads the driver, NVRTC and
//! cuBLAS at run time, as the HAL loads NVML, so a node without them still starts and
//! answers on the CPU. The kernels (`kernels.cu`) are compiled by NVRTC on the node, and by
//! the build script as C on the host, where the tests run the same pipeline over a host
//! device ([`host`]) and hold it to the CPU backend's values.

use crate::backend::{Backend, BackendError};
use crate::hash::{Digest, LEAF_HEADER, held_leaf_header, row_leaf_header};
use crate::matrix::Inputs;
use crate::params::Params;

#[cfg(feature = "gpu")]
mod cuda;
#[cfg(test)]
pub(crate) mod host;

#[cfg(feature = "gpu")]
pub use cuda::CudaDevice;

/// The kernels' source, compiled on the node by NVRTC.
pub const KERNELS: &str = include_str!("kernels.cu");

/// The most rows of A generated and multiplied at once.
const MAX_PANEL_ROWS: u64 = 8192;
/// Panels are a multiple of this many rows, and so is every product cuBLAS is asked for
/// (the int8 tensor-core paths want dimensions in fours); rows past the real ones are
/// computed and never read.
const ROW_ALIGN: u64 = 4;

/// The operations the pipeline needs of a device. Buffers are of 32-bit words; every size
/// the challenge uses is a whole number of them. Calls are ordered as issued: a download
/// sees every launch before it.
pub trait Device {
    type Buf;

    /// Bytes the device can still give.
    fn free_bytes(&mut self) -> Result<u64, BackendError>;
    /// A buffer of `words` words, zeroed.
    fn alloc(&mut self, words: usize) -> Result<Self::Buf, BackendError>;
    fn upload(&mut self, words: &[u32]) -> Result<Self::Buf, BackendError>;
    /// Words `first..first + count` of `buf`.
    fn download(
        &mut self,
        buf: &Self::Buf,
        first: usize,
        count: usize,
    ) -> Result<Vec<u32>, BackendError>;

    /// `blocks` ChaCha8 blocks keyed by `key` (8 words), from block `first_block`, to `out`.
    fn gen_a(
        &mut self,
        key: &Self::Buf,
        first_block: u64,
        blocks: u64,
        out: &mut Self::Buf,
    ) -> Result<(), BackendError>;
    /// B (`width`², keyed by `key`) transposed into `out`.
    fn gen_bt(
        &mut self,
        key: &Self::Buf,
        width: u32,
        out: &mut Self::Buf,
    ) -> Result<(), BackendError>;
    /// `c` = the first `rows` rows of the panel `a` times B, given B transposed: cuBLAS's
    /// column-major "TN" product with m = k = `width`, n = `rows`.
    fn gemm_tn(
        &mut self,
        bt: &Self::Buf,
        a: &Self::Buf,
        c: &mut Self::Buf,
        width: u32,
        rows: u64,
    ) -> Result<(), BackendError>;
    /// The commitment leaves of rows `row0..row0 + rows` from the panel `c`, into `leaves`,
    /// and their low halves into `held`.
    #[allow(clippy::too_many_arguments)]
    fn row_leaves(
        &mut self,
        header: &Self::Buf,
        row0: u64,
        rows: u64,
        width: u32,
        c: &Self::Buf,
        held: &mut Self::Buf,
        leaves: &mut Self::Buf,
    ) -> Result<(), BackendError>;
    /// Every row's held leaf under the pass whose header is `header`.
    fn held_leaves(
        &mut self,
        header: &Self::Buf,
        rows: u64,
        width: u32,
        held: &Self::Buf,
        leaves: &mut Self::Buf,
    ) -> Result<(), BackendError>;
    /// One Merkle level: `n` digests in `below` to `n.div_ceil(2)` in `above`.
    fn merkle_level(
        &mut self,
        below: &Self::Buf,
        n: u64,
        above: &mut Self::Buf,
    ) -> Result<(), BackendError>;
}

/// For each GPU of a challenge (its PCI address, in the challenge's order), the CUDA ordinal
/// of the card at that address (`cuda`: the addresses CUDA gives, by ordinal). Addresses are
/// compared as the numbers `domain:bus:device` (in any case and width; the function is
/// ignored); a GPU CUDA does not see, an address that does not read, or one given twice, is
/// an error: the card that computes GPU `i`'s answer must
/// be the one whose attestation is read for it.
pub fn ordinals_by_address(challenge: &[String], cuda: &[String]) -> Result<Vec<usize>, String> {
    // (domain, bus, device) as numbers: NVML writes an eight-digit domain, CUDA none.
    let device = |address: &str| -> Option<(u32, u32, u32)> {
        let parts: Vec<&str> = address.trim().split(':').collect();
        let (domain, bus, devfn) = match parts.as_slice() {
            [domain, bus, devfn] => (*domain, *bus, *devfn),
            [bus, devfn] => ("0", *bus, *devfn),
            _ => return None,
        };
        let dev = devfn.split_once('.').map_or(devfn, |(dev, _)| dev);
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        Some((hex(domain)?, hex(bus)?, hex(dev)?))
    };
    let seen: Vec<Option<(u32, u32, u32)>> = cuda.iter().map(|a| device(a)).collect();
    let mut ordinals = Vec::with_capacity(challenge.len());
    for (gpu, address) in challenge.iter().enumerate() {
        let wanted = device(address);
        let ordinal = seen
            .iter()
            .position(|a| a.is_some() && *a == wanted)
            .ok_or_else(|| format!("GPU {gpu} ({address}) is not among the GPUs CUDA sees"))?;
        if ordinals.contains(&ordinal) {
            return Err(format!("GPU {gpu} ({address}) is named twice"));
        }
        ordinals.push(ordinal);
    }
    Ok(ordinals)
}

/// A digest as the kernels take a ChaCha key: eight little-endian words.
pub(crate) fn key_words(key: &Digest) -> [u32; 8] {
    std::array::from_fn(|i| u32::from_le_bytes(key[4 * i..4 * i + 4].try_into().expect("4")))
}

/// A leaf's header block as the sixteen big-endian words sha256 reads, its index left zero
/// (the kernel writes each row's).
pub(crate) fn header_words(header: &[u8; LEAF_HEADER]) -> [u32; 16] {
    std::array::from_fn(|i| u32::from_be_bytes(header[4 * i..4 * i + 4].try_into().expect("4")))
}

/// Digests as the kernels wrote them, eight words each.
fn digests(words: &[u32]) -> Vec<Digest> {
    words
        .chunks_exact(8)
        .map(|w| {
            let mut d = [0u8; 32];
            for (out, v) in d.chunks_exact_mut(4).zip(w) {
                out.copy_from_slice(&v.to_le_bytes());
            }
            d
        })
        .collect()
}

/// Words of a buffer of `bytes`.
fn words(bytes: u64) -> Result<usize, BackendError> {
    usize::try_from(bytes.div_ceil(4))
        .map_err(|_| BackendError::Device(format!("{bytes} bytes do not fit this host")))
}

/// The challenge run through a [`Device`]'s kernels.
pub struct KernelBackend<D: Device> {
    device: D,
    kept: Option<Kept<D::Buf>>,
}

/// What stays on the device between phases.
struct Kept<B> {
    rows: u64,
    width: u32,
    panel_rows: u64,
    a_key: B,
    bt: B,
    held: B,
    leaves: B,
    scratch: [B; 2],
    panel_a: B,
    panel_c: B,
}

impl<D: Device> KernelBackend<D> {
    pub fn new(device: D) -> Self {
        Self { device, kept: None }
    }

    pub fn device(&self) -> &D {
        &self.device
    }

    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Rows per panel, when the challenge was computed.
    pub fn panel_rows(&self) -> Option<u64> {
        self.kept.as_ref().map(|k| k.panel_rows)
    }

    fn kept(&mut self) -> Result<(&mut D, &mut Kept<D::Buf>), BackendError> {
        match self.kept.as_mut() {
            Some(kept) => Ok((&mut self.device, kept)),
            None => Err(BackendError::NotComputed),
        }
    }

    /// The held leaves of one pass, left in `kept.leaves`.
    fn held_pass(&mut self, key: &Digest) -> Result<(), BackendError> {
        let (device, kept) = self.kept()?;
        let header = device.upload(&header_words(&held_leaf_header(key, 0)))?;
        device.held_leaves(&header, kept.rows, kept.width, &kept.held, &mut kept.leaves)
    }
}

/// Bytes the pipeline keeps on the device besides the panels: B transposed, the held rows,
/// one digest per row and the tree's scratch (half and a quarter of that again).
fn kept_bytes(params: &Params) -> u64 {
    let digests = params.rows * 32;
    params.device_bytes() + digests + digests.div_ceil(2) + digests.div_ceil(4) + 64
}

/// Bytes of one panel row: A (int8) and C (int32).
fn panel_row_bytes(width: u32) -> u64 {
    5 * u64::from(width)
}

impl<D: Device> Backend for KernelBackend<D> {
    fn compute(&mut self, params: &Params) -> Result<Vec<Digest>, BackendError> {
        self.kept = None;
        let width = params.width;
        let rows = params.rows;
        let w = u64::from(width);
        let available = self.device.free_bytes()?;
        let least = kept_bytes(params) + ROW_ALIGN * panel_row_bytes(width);
        if available < least {
            return Err(BackendError::OutOfMemory {
                needed: least,
                available,
            });
        }
        // Half of what is left to the panels, the rest to cuBLAS's workspace and the
        // driver; never more rows than there are.
        let room = (available - kept_bytes(params)) / 2;
        let panel_rows = (room / panel_row_bytes(width))
            .min(MAX_PANEL_ROWS)
            .min(rows.next_multiple_of(ROW_ALIGN))
            / ROW_ALIGN
            * ROW_ALIGN;
        let panel_rows = panel_rows.max(ROW_ALIGN);

        let inputs = Inputs::new(params);
        let (a_key, b_key) = inputs.keys();
        let device = &mut self.device;
        let a_key = device.upload(&key_words(a_key))?;
        let b_key = device.upload(&key_words(b_key))?;
        let mut bt = device.alloc(words(w * w)?)?;
        device.gen_bt(&b_key, width, &mut bt)?;
        let mut held = device.alloc(words(params.held_bytes())?)?;
        let mut leaves = device.alloc(words(rows * 32)?)?;
        let scratch = [
            device.alloc(words(rows.div_ceil(2) * 32)?)?,
            device.alloc(words(rows.div_ceil(4) * 32)?)?,
        ];
        let mut panel_a = device.alloc(words(panel_rows * w)?)?;
        let mut panel_c = device.alloc(words(panel_rows * w * 4)?)?;
        let header = device.upload(&header_words(&row_leaf_header(0)))?;

        let blocks_per_row = w / 64;
        let mut row0 = 0;
        while row0 < rows {
            let n = panel_rows.min(rows - row0);
            device.gen_a(
                &a_key,
                row0 * blocks_per_row,
                n * blocks_per_row,
                &mut panel_a,
            )?;
            device.gemm_tn(
                &bt,
                &panel_a,
                &mut panel_c,
                width,
                n.next_multiple_of(ROW_ALIGN),
            )?;
            device.row_leaves(&header, row0, n, width, &panel_c, &mut held, &mut leaves)?;
            row0 += n;
        }
        let all = digests(&device.download(&leaves, 0, words(rows * 32)?)?);
        self.kept = Some(Kept {
            rows,
            width,
            panel_rows,
            a_key,
            bt,
            held,
            leaves,
            scratch,
            panel_a,
            panel_c,
        });
        Ok(all)
    }

    fn held_leaves(&mut self, key: &Digest) -> Result<Vec<Digest>, BackendError> {
        self.held_pass(key)?;
        let (device, kept) = self.kept()?;
        let count = words(kept.rows * 32)?;
        Ok(digests(&device.download(&kept.leaves, 0, count)?))
    }

    fn held_root(&mut self, key: &Digest) -> Result<Digest, BackendError> {
        self.held_pass(key)?;
        let (device, kept) = self.kept()?;
        // Level by level: the leaves → scratch 0 → scratch 1 → scratch 0 …; each level fits
        // the buffer it is written to (scratch 1, a quarter of the leaves, is first written
        // at the second level).
        let mut n = kept.rows;
        let mut top: Option<usize> = None;
        while n > 1 {
            let [s0, s1] = &mut kept.scratch;
            let (below, above, written): (&D::Buf, &mut D::Buf, usize) = match top {
                None => (&kept.leaves, s0, 0),
                Some(0) => (s0, s1, 1),
                Some(_) => (s1, s0, 0),
            };
            device.merkle_level(below, n, above)?;
            top = Some(written);
            n = n.div_ceil(2);
        }
        let top = top.map_or(&kept.leaves, |i| &kept.scratch[i]);
        Ok(digests(&device.download(top, 0, 8)?)[0])
    }

    fn row(&mut self, index: u64) -> Result<Vec<i32>, BackendError> {
        let (device, kept) = self.kept()?;
        if index >= kept.rows {
            return Err(BackendError::NoSuchRow(index));
        }
        let blocks_per_row = u64::from(kept.width) / 64;
        device.gen_a(
            &kept.a_key,
            index * blocks_per_row,
            blocks_per_row,
            &mut kept.panel_a,
        )?;
        device.gemm_tn(
            &kept.bt,
            &kept.panel_a,
            &mut kept.panel_c,
            kept.width,
            ROW_ALIGN,
        )?;
        let row = device.download(&kept.panel_c, 0, kept.width as usize)?;
        Ok(row.into_iter().map(|v| v as i32).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::ordinals_by_address;

    fn addresses(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| a.to_string()).collect()
    }

    /// CUDA numbers the faster card first; the challenge's order is the addresses'.
    #[test]
    fn each_gpu_is_computed_on_the_card_at_its_address() {
        let challenge = addresses(&["0000:01:00.0", "0000:41:00.0", "0000:81:00.0"]);
        let cuda = addresses(&["0000:81:00.0", "0000:01:00.0", "0000:41:00.0"]);
        assert_eq!(ordinals_by_address(&challenge, &cuda), Ok(vec![1, 2, 0]));
        // NVML's eight-digit domain, upper case and a missing function read the same.
        let nvml = addresses(&["00000000:01:00.0", "00000000:4A:00.0"]);
        assert_eq!(
            ordinals_by_address(&nvml, &addresses(&["0000:4a:00", "0000:01:00.0"])),
            Ok(vec![1, 0])
        );
    }

    #[test]
    fn a_gpu_cuda_does_not_see_or_one_named_twice_is_refused() {
        let cuda = addresses(&["0000:01:00.0", "0000:02:00.0"]);
        let missing = ordinals_by_address(&addresses(&["0000:03:00.0"]), &cuda).unwrap_err();
        assert!(missing.contains("GPU 0 (0000:03:00.0)"), "{missing}");
        let twice =
            ordinals_by_address(&addresses(&["0000:02:00.0", "0000:02:00.0"]), &cuda).unwrap_err();
        assert!(twice.contains("GPU 1"), "{twice}");
        let garbled = ordinals_by_address(&addresses(&["gpu0"]), &addresses(&["gpu0"]));
        assert!(
            garbled.is_err(),
            "an address that does not read matches nothing"
        );
    }
}
