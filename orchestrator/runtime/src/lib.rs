//! The parts of the MCJS node agent that do not need the chain: the job
//! container runner, the checkpoint pipeline (detect, hash, store, restore),
//! data staging and checkpoint deadline tracking; and what a node and a job's
//! owner share in the store: specs by their hash (`spec_store`), a job's
//! output (`output`) and the caps a spec sets on what a job writes
//! (`limits`), so the owner's commands need nothing of the agent. The job
//! contract they implement is docs/job-contract.md.
//!
//! # Map
//!
//! Pure or nearly so:
//!
//! - `checkpoint.rs`: finding a job's complete checkpoints (a manifest in
//!   place, `complete_checkpoints_in`) and the checkpoint hash: per-file
//!   digests combined by `CheckpointDigest::combine`, as docs/job-contract.md
//!   ("The checkpoint hash") defines it; the possession digest of a check.
//! - `contract.rs`: the contract's names and paths (`MCJS_RESTORE_DIR` and
//!   the rest). `limits.rs`: the caps a spec sets on checkpoints and output.
//! - `deadline.rs`: whether a job keeps to its checkpoint schedule.
//!
//! Over the node's disk, Docker and the store:
//!
//! - `confined.rs`: every read of what a job wrote, `openat2` confined to
//!   the mount (no symlinks, no other mounts, regular files only, capped in
//!   size and file count).
//! - `staging.rs`: a job's declared inputs fetched into a content-addressed
//!   cache, verified by sha256 and linked into its data directory;
//!   `staging/net.rs`: only public addresses are reached.
//! - `engine.rs`: what the agent asks of a container engine
//!   (`ContainerEngine`, `ContainerSpec`); `docker.rs`: it on Docker through
//!   bollard; `docker/output.rs`: the container's output, attached before
//!   the start and read at a bounded rate, since the engine keeps no log;
//!   `fake.rs` (feature `fake`): an in-memory engine for tests.
//! - `launch.rs`: `launch`: inputs staged and verified, then the container
//!   started, so a job never sees unverified data.
//! - `volume.rs`: each run's writable directories on a loop-mounted ext4
//!   image of the declared disk, so no write passes it.
//! - `store.rs` and `store/`: the checkpoint store: upload (each file
//!   hashed in the same read that stores it), restore (verified against
//!   the attested hash, in parallel ranges, falling back to older attested
//!   checkpoints), pruning; docs/ARCHITECTURE.md, "The checkpoint store",
//!   names its files.
//! - `brokered.rs`: an `ObjectStore` over the scheduler's gateway, holding
//!   no credentials; `brokered/upload.rs`: its multipart uploads.
//! - `logs.rs`: the job's printed lines shipped to the store in bounded
//!   chunks, flushed before each attestation; `logs/metrics.rs`: its
//!   metrics file, followed as it grows.
//! - `spec_store.rs`, `output.rs`: specs by their hash, and a job's output
//!   with its descriptor, shared with the owner's commands.

pub mod brokered;
pub mod checkpoint;
pub mod confined;
pub mod contract;
pub mod deadline;
pub mod docker;
pub mod engine;
/// In-memory engine for testing code built on this crate (feature `fake`).
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod launch;
pub mod limits;
pub mod logs;
pub mod output;
pub mod spec_store;
pub mod staging;
pub mod store;
pub mod volume;
