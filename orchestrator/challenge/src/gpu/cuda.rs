//! The CUDA device: the driver, NVRTC and cuBLAS, each loaded at run time by `cudarc`.
//!
//! Nothing here runs on a machine without them: [`CudaDevice::open`] checks that all three
//! libraries load before the first call (cudarc panics on a missing library), and says
//! which is missing. The kernels are compiled for the card's own compute capability when a
//! device is opened, once per challenge.

use std::sync::Arc;

use cudarc::cublas::{CudaBlas, result as blas, sys as blas_sys};
use cudarc::driver::sys::CUdevice_attribute as A;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};

use super::{Device, KERNELS};
use crate::backend::BackendError;
use crate::hash::{HELD_LEAF_INDEX_AT, ROW_LEAF_INDEX_AT};

/// Threads per block of every kernel: each thread's work is independent.
const BLOCK: u32 = 256;

/// A CUDA error as the backend reports it, saying what was being done.
fn device_error<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> BackendError + '_ {
    move |e| BackendError::Device(format!("{what}: {e:?}"))
}

/// One GPU, its stream, its cuBLAS handle and the challenge's kernels.
pub struct CudaDevice {
    ordinal: usize,
    name: String,
    capability: (i32, i32),
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    gen_a: CudaFunction,
    gen_bt: CudaFunction,
    row_leaves: CudaFunction,
    held_leaves: CudaFunction,
    merkle_level: CudaFunction,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish()
    }
}

impl CudaDevice {
    /// Which of the driver, NVRTC and cuBLAS cannot be loaded here; empty when all can.
    /// Looked up once per process (opening NVRTC alone maps about 100 MB).
    pub fn missing_libraries() -> Vec<&'static str> {
        static MISSING: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        MISSING
            .get_or_init(|| {
                let mut missing = Vec::new();
                // SAFETY: each only tries to open a shared library by name.
                unsafe {
                    if !cudarc::driver::sys::is_culib_present() {
                        missing.push("the CUDA driver (libcuda)");
                    }
                    if !cudarc::nvrtc::sys::is_culib_present() {
                        missing.push("NVRTC (libnvrtc)");
                    }
                    if !cudarc::cublas::sys::is_culib_present() {
                        missing.push("cuBLAS (libcublas)");
                    }
                }
                missing
            })
            .clone()
    }

    /// GPUs the driver sees (0 where CUDA cannot be loaded).
    pub fn count() -> usize {
        if !Self::missing_libraries().is_empty() {
            return 0;
        }
        CudaContext::device_count().map_or(0, |n| usize::try_from(n).unwrap_or(0))
    }

    /// The PCI address of each GPU the driver sees, by ordinal, as `dddd:bb:dd.0` (lowercase
    /// hex, NVML's canonical form): CUDA numbers cards fastest first unless told otherwise,
    /// NVML in PCI order, so a card is matched by its address ([`super::ordinals_by_address`]).
    pub fn pci_bus_ids() -> Result<Vec<String>, BackendError> {
        (0..Self::count())
            .map(|ordinal| {
                let read = attribute_reader(ordinal, "reading its PCI address")?;
                Ok(format!(
                    "{:04x}:{:02x}:{:02x}.0",
                    read(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                    read(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                    read(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
                ))
            })
            .collect()
    }

    /// Compiles the kernels for the compute capability of every GPU the driver sees, ahead of
    /// any challenge, so that NVRTC's compile (part of the 3.5 s an H100 took to open, with
    /// its context and cuBLAS handle) is not inside a timed phase: a node opens its GPUs only
    /// once a challenge's seed is drawn. Opens no context (no GPU memory is taken). The
    /// number of distinct capabilities compiled; 0 where CUDA cannot be loaded.
    pub fn prepare_kernels() -> Result<usize, BackendError> {
        let mut capabilities = Vec::new();
        for ordinal in 0..Self::count() {
            let read = attribute_reader(ordinal, "reading its compute capability")?;
            let capability = (
                read(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                read(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            );
            if !capabilities.contains(&capability) {
                kernels_for(capability)?;
                capabilities.push(capability);
            }
        }
        Ok(capabilities.len())
    }

    /// GPU `ordinal`, with the kernels compiled for it.
    pub fn open(ordinal: usize) -> Result<Self, BackendError> {
        let missing = Self::missing_libraries();
        if !missing.is_empty() {
            return Err(BackendError::Device(format!(
                "cannot load {}: install the NVIDIA driver and the CUDA toolkit's NVRTC and \
                 cuBLAS (12.x or later) and put them on the loader's path (ldconfig or \
                 LD_LIBRARY_PATH)",
                missing.join(", ")
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(device_error("opening the GPU"))?;
        let name = ctx.name().map_err(device_error("reading its name"))?;
        let capability = ctx
            .compute_capability()
            .map_err(device_error("reading its compute capability"))?;
        let ptx = kernels_for(capability)?;
        let module = ctx
            .load_module(ptx)
            .map_err(device_error("loading the kernels"))?;
        let function = |name: &str| module.load_function(name).map_err(device_error(name));
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(device_error("cuBLAS"))?;
        Ok(Self {
            ordinal,
            name,
            capability,
            gen_a: function("gen_a")?,
            gen_bt: function("gen_bt")?,
            row_leaves: function("row_leaves")?,
            held_leaves: function("held_leaves")?,
            merkle_level: function("merkle_level")?,
            stream,
            blas,
        })
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The name the driver gives the card.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The card's memory, bytes.
    pub fn total_bytes(&self) -> Result<u64, BackendError> {
        self.stream
            .context()
            .total_mem()
            .map(|b| b as u64)
            .map_err(device_error("reading its memory"))
    }

    pub fn capability(&self) -> (i32, i32) {
        self.capability
    }

    /// Waits for everything issued so far (the timed phases end on it).
    pub fn synchronize(&self) -> Result<(), BackendError> {
        self.stream
            .synchronize()
            .map_err(device_error("synchronizing"))
    }
}

/// A reader of GPU `ordinal`'s attributes, without a context; its errors say `what` failed.
fn attribute_reader(
    ordinal: usize,
    what: &'static str,
) -> Result<impl Fn(A) -> Result<i32, BackendError>, BackendError> {
    let dev = cudarc::driver::result::device::get(ordinal as i32)
        .map_err(device_error("opening the GPU"))?;
    // SAFETY: `dev` was returned by `device::get`.
    Ok(move |attribute| unsafe {
        cudarc::driver::result::device::get_attribute(dev, attribute).map_err(device_error(what))
    })
}

/// The kernels compiled in this process, by compute capability.
static COMPILED: std::sync::Mutex<Vec<((i32, i32), Ptx)>> = std::sync::Mutex::new(Vec::new());

/// The kernels for `capability`, compiled by NVRTC once per process and kept.
fn kernels_for(capability: (i32, i32)) -> Result<Ptx, BackendError> {
    let mut compiled = COMPILED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, ptx)) = compiled.iter().find(|(c, _)| *c == capability) {
        return Ok(ptx.clone());
    }
    let ptx = compile_kernels(capability)?;
    compiled.push((capability, ptx.clone()));
    Ok(ptx)
}

/// The kernels as PTX for compute capability `capability`, by NVRTC.
pub fn compile_kernels(capability: (i32, i32)) -> Result<Ptx, BackendError> {
    compile_ptx_with_opts(
        KERNELS,
        CompileOptions {
            name: Some("mcjs-challenge.cu".into()),
            options: vec![format!(
                "--gpu-architecture=compute_{}{}",
                capability.0, capability.1
            )],
            ..Default::default()
        },
    )
    .map_err(device_error("compiling the kernels"))
}

/// A launch of `threads` independent threads.
fn grid(threads: u64) -> Result<LaunchConfig, BackendError> {
    let blocks = u32::try_from(threads.div_ceil(u64::from(BLOCK)))
        .map_err(|_| BackendError::Device(format!("{threads} threads do not fit a grid")))?;
    Ok(LaunchConfig {
        grid_dim: (blocks.max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    })
}

fn launched(
    result: Result<
        Option<(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>,
        cudarc::driver::DriverError,
    >,
    name: &str,
) -> Result<(), BackendError> {
    result.map(|_| ()).map_err(device_error(name))
}

impl Device for CudaDevice {
    type Buf = CudaSlice<u32>;

    fn free_bytes(&mut self) -> Result<u64, BackendError> {
        // Buffers dropped before (a previous challenge's) are freed in stream order, into
        // the stream's pool: only once the stream has caught up are they back on the card,
        // where the driver counts them free.
        self.stream
            .synchronize()
            .map_err(device_error("waiting for the stream"))?;
        let (free, _total) = self
            .stream
            .context()
            .mem_get_info()
            .map_err(device_error("reading free memory"))?;
        Ok(free as u64)
    }

    fn alloc(&mut self, words: usize) -> Result<CudaSlice<u32>, BackendError> {
        self.stream
            .alloc_zeros::<u32>(words)
            .map_err(device_error("allocating"))
    }

    fn upload(&mut self, words: &[u32]) -> Result<CudaSlice<u32>, BackendError> {
        self.stream
            .clone_htod(words)
            .map_err(device_error("copying to the GPU"))
    }

    fn download(
        &mut self,
        buf: &CudaSlice<u32>,
        first: usize,
        count: usize,
    ) -> Result<Vec<u32>, BackendError> {
        self.stream
            .clone_dtoh(&buf.slice(first..first + count))
            .map_err(device_error("copying from the GPU"))
    }

    fn gen_a(
        &mut self,
        key: &CudaSlice<u32>,
        first_block: u64,
        blocks: u64,
        out: &mut CudaSlice<u32>,
    ) -> Result<(), BackendError> {
        let mut launch = self.stream.launch_builder(&self.gen_a);
        launch.arg(key).arg(&first_block).arg(&blocks).arg(out);
        // SAFETY: the arguments are the kernel's, in order; `out` holds `blocks` × 16 words
        // (the pipeline sizes it, and the host device checks the same sizes in the tests).
        launched(unsafe { launch.launch(grid(blocks)?) }, "gen_a")
    }

    fn gen_bt(
        &mut self,
        key: &CudaSlice<u32>,
        width: u32,
        out: &mut CudaSlice<u32>,
    ) -> Result<(), BackendError> {
        let threads = u64::from(width) * u64::from(width) / 64;
        let mut launch = self.stream.launch_builder(&self.gen_bt);
        launch.arg(key).arg(&width).arg(out);
        // SAFETY: as gen_a; `out` holds width² bytes.
        launched(unsafe { launch.launch(grid(threads)?) }, "gen_bt")
    }

    fn gemm_tn(
        &mut self,
        bt: &CudaSlice<u32>,
        a: &CudaSlice<u32>,
        c: &mut CudaSlice<u32>,
        width: u32,
        rows: u64,
    ) -> Result<(), BackendError> {
        let to_int = |v: u64| {
            i32::try_from(v).map_err(|_| BackendError::Device(format!("{v} exceeds cuBLAS's int")))
        };
        let (w, n) = (to_int(u64::from(width))?, to_int(rows)?);
        let (alpha, beta) = (1i32, 0i32);
        let (bt_ptr, _bt_sync) = bt.device_ptr(&self.stream);
        let (a_ptr, _a_sync) = a.device_ptr(&self.stream);
        let (c_ptr, _c_sync) = c.device_ptr_mut(&self.stream);
        // SAFETY: column-major C^T (width × rows) = (B^T as stored)ᵀ · A^T: every buffer
        // holds what the dimensions and leading dimensions (all `width`) reach; alpha and
        // beta are host integers, as CUBLAS_COMPUTE_32I with the default pointer mode wants.
        unsafe {
            blas::gemm_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                w,
                n,
                w,
                (&raw const alpha).cast(),
                bt_ptr as *const _,
                blas_sys::cudaDataType_t::CUDA_R_8I,
                w,
                a_ptr as *const _,
                blas_sys::cudaDataType_t::CUDA_R_8I,
                w,
                (&raw const beta).cast(),
                c_ptr as *mut _,
                blas_sys::cudaDataType_t::CUDA_R_32I,
                w,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32I,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(device_error("cublasGemmEx (int8)"))
    }

    fn row_leaves(
        &mut self,
        header: &CudaSlice<u32>,
        row0: u64,
        rows: u64,
        width: u32,
        c: &CudaSlice<u32>,
        held: &mut CudaSlice<u32>,
        leaves: &mut CudaSlice<u32>,
    ) -> Result<(), BackendError> {
        let index_at = ROW_LEAF_INDEX_AT as u32;
        let mut launch = self.stream.launch_builder(&self.row_leaves);
        launch
            .arg(header)
            .arg(&index_at)
            .arg(&row0)
            .arg(&rows)
            .arg(&width)
            .arg(c)
            .arg(held)
            .arg(leaves);
        // SAFETY: as gen_a; `held` and `leaves` cover rows up to row0 + rows.
        launched(unsafe { launch.launch(grid(rows)?) }, "row_leaves")
    }

    fn held_leaves(
        &mut self,
        header: &CudaSlice<u32>,
        rows: u64,
        width: u32,
        held: &CudaSlice<u32>,
        leaves: &mut CudaSlice<u32>,
    ) -> Result<(), BackendError> {
        let index_at = HELD_LEAF_INDEX_AT as u32;
        let mut launch = self.stream.launch_builder(&self.held_leaves);
        launch
            .arg(header)
            .arg(&index_at)
            .arg(&rows)
            .arg(&width)
            .arg(held)
            .arg(leaves);
        // SAFETY: as gen_a.
        launched(unsafe { launch.launch(grid(rows)?) }, "held_leaves")
    }

    fn merkle_level(
        &mut self,
        below: &CudaSlice<u32>,
        n: u64,
        above: &mut CudaSlice<u32>,
    ) -> Result<(), BackendError> {
        let mut launch = self.stream.launch_builder(&self.merkle_level);
        launch.arg(below).arg(&n).arg(above);
        // SAFETY: as gen_a; `above` holds n.div_ceil(2) digests.
        launched(
            unsafe { launch.launch(grid(n.div_ceil(2))?) },
            "merkle_level",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: where it is installed (scripts/setup.sh installs it from PyPI,
    /// and scripts/test.sh then requires it), the kernels are compiled as a node compiles
    /// them, for every generation a node may have, from Pascal to Hopper.
    #[test]
    fn the_kernels_compile_with_nvrtc_for_every_generation_a_node_may_have() {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            assert!(
                std::env::var_os("MCJS_REQUIRE_NVRTC").is_none(),
                "NVRTC (libnvrtc.so.12) is not on the loader's path: scripts/setup.sh installs it"
            );
            eprintln!("NVRTC is not installed here; the kernels were not compiled");
            return;
        }
        for capability in [
            (6, 0),
            (6, 1),
            (7, 0),
            (7, 5),
            (8, 0),
            (8, 6),
            (8, 9),
            (9, 0),
        ] {
            let ptx = compile_kernels(capability)
                .unwrap_or_else(|e| panic!("compute {capability:?}: {e}"))
                .to_src();
            let target = format!(".target sm_{}{}", capability.0, capability.1);
            assert!(ptx.contains(&target), "{capability:?}: no {target}");
            for entry in [
                "gen_a",
                "gen_bt",
                "row_leaves",
                "held_leaves",
                "merkle_level",
            ] {
                assert!(
                    ptx.contains(&format!(".entry {entry}(")),
                    "{capability:?}: no kernel {entry}"
                );
            }
        }
    }

    /// A node compiles the kernels once per capability and process (ahead of a challenge, by
    /// `prepare_kernels`), not at every opening of a GPU.
    #[test]
    fn the_kernels_are_compiled_once_per_capability() {
        // SAFETY: only tries to open the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            assert!(std::env::var_os("MCJS_REQUIRE_NVRTC").is_none());
            return;
        }
        let held = |capability| {
            COMPILED
                .lock()
                .unwrap()
                .iter()
                .filter(|(c, _)| *c == capability)
                .count()
        };
        // Sixth generation's second minor: no other test compiles through the cache for it.
        let capability = (6, 2);
        assert_eq!(held(capability), 0);
        let first = kernels_for(capability).unwrap().to_src();
        let again = kernels_for(capability).unwrap().to_src();
        assert_eq!(first, again);
        assert!(first.contains(".target sm_62"));
        assert_eq!(
            held(capability),
            1,
            "kept once, and the second call took it"
        );
    }
}
