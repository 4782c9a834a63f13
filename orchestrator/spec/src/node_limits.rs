//! The bounds a node's hardware profile must respect to be scheduled: any real machine is far
//! inside them, so a profile outside is a broken probe or an account that lies to attract
//! jobs. The scheduler skips such nodes one by one; the program keeps its own copy of these
//! numbers for registration, held together with this one by a test.

use crate::validate::MAX_GPU_COUNT;

/// GPUs on one node: at least one (MCJS schedules GPU work), at most what a job may request.
pub const MAX_NODE_GPUS: u8 = MAX_GPU_COUNT;
/// 1 TiB of memory per GPU.
pub const MAX_VRAM_PER_GPU_MIB: u32 = 1 << 20;
/// sm 99.9, the largest compute capability `ComputeCapability` represents.
pub const MAX_COMPUTE_CAPABILITY_SM: u16 = 999;
/// 64 TiB of RAM.
pub const MAX_RAM_MIB: u32 = 64 << 20;
/// 1 PiB of free disk.
pub const MAX_DISK_GIB: u32 = 1 << 20;
/// 1 TiB/s of sustained checkpoint writes.
pub const MAX_CHECKPOINT_WRITE_MIBPS: u32 = 1 << 20;
/// 100 is a perfect readiness score.
pub const MAX_READINESS: u8 = 100;

/// A reported value a node cannot have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
pub enum NodeLimitError {
    #[error("gpu count {0} is outside 1..={MAX_NODE_GPUS}")]
    GpuCount(u8),
    #[error("{0} MiB of vram per gpu is more than {MAX_VRAM_PER_GPU_MIB}")]
    Vram(u32),
    #[error("compute capability sm {0} is more than {MAX_COMPUTE_CAPABILITY_SM}")]
    ComputeCapability(u16),
    #[error("{0} MiB of ram is more than {MAX_RAM_MIB}")]
    Ram(u32),
    #[error("{0} GiB of free disk is more than {MAX_DISK_GIB}")]
    Disk(u32),
    #[error("{0} MiB/s of checkpoint writes is more than {MAX_CHECKPOINT_WRITE_MIBPS}")]
    CheckpointWrite(u32),
    #[error("readiness {0} is outside 0..={MAX_READINESS}")]
    Readiness(u8),
}

/// The measured and declared sizes of a node, as every component carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSizes {
    pub gpu_count: u8,
    pub vram_per_gpu_mib: u32,
    pub compute_capability_sm: u16,
    pub ram_mib: u32,
    pub disk_gib: u32,
    pub checkpoint_write_mibps: u32,
    pub readiness: u8,
}

impl NodeSizes {
    /// The first value outside its bound, in the order of the fields.
    pub fn check(&self) -> Result<(), NodeLimitError> {
        use NodeLimitError as E;
        if !(1..=MAX_NODE_GPUS).contains(&self.gpu_count) {
            return Err(E::GpuCount(self.gpu_count));
        }
        if self.vram_per_gpu_mib > MAX_VRAM_PER_GPU_MIB {
            return Err(E::Vram(self.vram_per_gpu_mib));
        }
        if self.compute_capability_sm > MAX_COMPUTE_CAPABILITY_SM {
            return Err(E::ComputeCapability(self.compute_capability_sm));
        }
        if self.ram_mib > MAX_RAM_MIB {
            return Err(E::Ram(self.ram_mib));
        }
        if self.disk_gib > MAX_DISK_GIB {
            return Err(E::Disk(self.disk_gib));
        }
        if self.checkpoint_write_mibps > MAX_CHECKPOINT_WRITE_MIBPS {
            return Err(E::CheckpointWrite(self.checkpoint_write_mibps));
        }
        if self.readiness > MAX_READINESS {
            return Err(E::Readiness(self.readiness));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100_node() -> NodeSizes {
        NodeSizes {
            gpu_count: 8,
            vram_per_gpu_mib: 80 * 1024,
            compute_capability_sm: 90,
            ram_mib: 2 << 20,
            disk_gib: 30_000,
            checkpoint_write_mibps: 5_000,
            readiness: 100,
        }
    }

    #[test]
    fn real_machines_are_inside_the_bounds_and_each_absurd_value_is_named() {
        assert_eq!(h100_node().check(), Ok(()));
        type Break = fn(&mut NodeSizes);
        let cases: [(Break, NodeLimitError); 8] = [
            (|n| n.gpu_count = 0, NodeLimitError::GpuCount(0)),
            (|n| n.gpu_count = 17, NodeLimitError::GpuCount(17)),
            (
                |n| n.vram_per_gpu_mib = u32::MAX,
                NodeLimitError::Vram(u32::MAX),
            ),
            (
                |n| n.compute_capability_sm = 1000,
                NodeLimitError::ComputeCapability(1000),
            ),
            (|n| n.ram_mib = u32::MAX, NodeLimitError::Ram(u32::MAX)),
            (|n| n.disk_gib = u32::MAX, NodeLimitError::Disk(u32::MAX)),
            (
                |n| n.checkpoint_write_mibps = u32::MAX,
                NodeLimitError::CheckpointWrite(u32::MAX),
            ),
            (|n| n.readiness = 200, NodeLimitError::Readiness(200)),
        ];
        for (break_it, expected) in cases {
            let mut node = h100_node();
            break_it(&mut node);
            assert_eq!(node.check(), Err(expected));
        }
    }
}
