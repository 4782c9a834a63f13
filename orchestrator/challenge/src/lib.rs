//! The hardware challenge: a node shows that a GPU is the model and memory it claims by
//! answering, in time, what only such a GPU answers in time.
//!
//! A pure core in the manner of quinn-proto: parameters, seeds and answers in, a
//! [`Verdict`] out; the chain's times are given, never read from a clock. The work itself
//! runs behind [`Backend`]: [`CpuBackend`], and the GPU backend [`KernelBackend`] ([`gpu`]). docs/hardware-challenge.md is the protocol for people, with the costs.
//!
//! # The protocol
//!
//! One challenge per GPU, all of a node's GPUs at once, each seeded by
//! [`hash::challenge_seed`]`(slot hash, node, gpu index)`:
//!
//! 1. **Commit.** From the challenge seed, A (`rows`×`width`) and B (`width`×`width`) are
//!    int8 matrices drawn from ChaCha8 ([`matrix`]); the node computes C = A·B in i32
//!    (exact), keeps the low 16 bits of every entry and sends the Merkle root over C's rows.
//!    Bound: the claimed model's measured time for the product.
//! 2. **Hold.** From a slot hash after the commitment landed (the held seed), the node runs
//!    `passes` passes over what it keeps; pass `p` hashes every row's low halves under key
//!    `p`, and key `p+1` needs pass `p`'s root ([`hash::next_held_key`]). It sends the key
//!    after the last pass. Bound: the model's measured time for the passes.
//! 3. **Open.** From a slot hash after the held digest landed (the open seed), `rows_opened`
//!    distinct rows are named, each with a pass ([`Params::rows_to_open`]). The node sends
//!    every pass's root and each named row in full with its proof in the commitment and its
//!    held leaf's proof in that pass's root. The checker verifies the proofs, chains the
//!    roots to the held digest, and checks each row with Freivalds' algorithm against the
//!    seeded inputs.
//!
//! # What is proven, and by what
//!
//! - **The product is right.** A row that is not A_i·B passes Freivalds with probability
//!   at most 2^-32 per vector (32-bit entries, exact integer arithmetic: i64 for B·r,
//!   i128 for the dot products), 2^-64 with the two used. A node that computed a fraction
//!   f of the rows and made up the rest is caught unless every opened row is a computed
//!   one: probability f^k with replacement, a little less without (the rows are
//!   distinct); k = 32: f = 1/2 escapes with 2.3·10^-10, f = 0.9 with 0.034. Only
//!   skipping a large share saves much time, and that is what is caught.
//! - **The speed.** Only the time bound proves it: the seed is a slot hash after the
//!   request, so nothing can be computed before it, and the commitment's landing slot is
//!   on chain.
//! - **The memory, and why not a seeded fill.** A hash over seeded data proves nothing:
//!   a node regenerates ChaCha output on the fly at about the speed it reads memory, and
//!   far faster than it fetches data over PCIe. What the
//!   node holds must be dear to regenerate: a product row costs `width`² multiply-adds,
//!   reading it back costs 2·`width` bytes. It must also be incompressible, or a smaller
//!   card holds it packed: a whole i32 entry of C carries about 22 bits of information at
//!   width 32,768 (a Gaussian of standard deviation about 2^20), so the node holds only
//!   the low 16 bits of each entry, which are uniform. And the passes must be separate
//!   reads: each pass's key needs the previous pass's root, so a node that keeps rows
//!   elsewhere fetches them once per pass. A node with half the memory then has two
//!   choices: make up the held leaves of the rows it lacks, caught at each opened row that
//!   is one of them (its opened rows are checked by Freivalds, and the held leaf is
//!   recomputed from them), or fetch or recompute them each pass, which takes longer than
//!   the bound. So memory too is proven by the time bound, through the held passes; and
//!   only to the held share of the claim: [`Sizing::fill_percent`] (85%) less B, 83.7% of
//!   an 80 GiB claim. The rest is the honest node's room for B, its workspace and the
//!   driver.
//! - **Why the held data is the product and not A and B.** They are seeded, so cheap to
//!   regenerate; the product is the only thing in the challenge that costs compute.
//!
//! # The draws
//!
//! The Freivalds vectors and the opened rows come from the open seed, not from the
//! checker's own randomness: a slot hash after both commitments, so the node cannot know
//! them before it is bound to its answers, and every checker and auditor reaches the same
//! verdict from the chain. A leader that could choose the open slot's hash among a few
//! values gains nothing: each choice escapes with probability 2^-32 or less.
//!
//! # Bounds
//!
//! [`bounds::MEASURED`] holds one row per model, with its source. A model without measured
//! figures gets no bound; its verdict is at best [`Verdict::Unbounded`], which proves only
//! the lowest class ([`ProvenClass::Lowest`]). One GPU is measured so far: the H100 80GB HBM3
//! (bench/results/challenge-gpu.txt).
//!
//! # Map
//!
//! - `params.rs`: what a claim is challenged with: sizes from the claimed
//!   memory (`Params::for_claim`), the time bound, the seeded draws.
//! - `matrix.rs`, `hash.rs`, `merkle.rs`: the seeded int8 inputs and their
//!   exact product, every hash the challenge defines, the Merkle tree.
//! - `prover.rs`: the node's side, `Prover`: the commitment, the held
//!   passes, the opening. `verify.rs`: the checker's side, `judge`, and the
//!   class a verdict proves.
//! - `node.rs`: a whole node's challenge, one per GPU, one commitment and
//!   one held digest per node on chain (`NodeProver`, `judge_node`).
//! - `backend.rs`: where the work runs (`Backend`; `CpuBackend` here).
//!   `gpu/mod.rs`: the GPU backend, `KernelBackend`, over a `Device`:
//!   `gpu/cuda.rs` (feature `gpu`: the driver, NVRTC and cuBLAS loaded at
//!   run time by `cudarc`), with the kernels in `gpu/kernels.cu`, which
//!   `build.rs` also compiles as C for `gpu/host.rs`, so the tests run them
//!   on the host. `CudaDevice` is the crate's only impure part.
//! - `attestation.rs`: NVIDIA GPU attestation: the identity chain to the
//!   pinned Device Identity CA (`attestation/nvidia-device-identity-ca.pem`),
//!   the report's signature and nonce.
//! - `bounds.rs`: the time bounds per GPU model, each with its source.
//! - `wire.rs`: the opening's rows, digests and evidence as base64 in JSON.
//! - `adversary.rs` (feature `adversaries`): the cheapest dishonest nodes,
//!   for the tests and the cost bench.
//!
//! Used by the program's tests and, through `mcjs_client::challenge`, by
//! the scheduler (which requests and judges) and the agent (which answers).

pub mod attestation;
pub mod backend;
pub mod bounds;
pub mod gpu;
pub mod hash;
pub mod matrix;
pub mod merkle;
pub mod node;
pub mod params;
pub mod prover;
pub mod verify;
pub mod wire;

#[cfg(any(test, feature = "adversaries"))]
pub mod adversary;

#[cfg(test)]
mod tests;

pub use backend::{Backend, BackendError, CpuBackend};
pub use bounds::{BoundsTable, Entry, Figures, TimeBound};
#[cfg(feature = "gpu")]
pub use gpu::CudaDevice;
pub use gpu::{Device, KernelBackend, ordinals_by_address};
pub use hash::{Digest, challenge_seed};
pub use merkle::{MerkleProof, MerkleTree};
pub use node::{
    GpuOpening, NodeAnswers, NodeClaim, NodeOpening, NodeProver, attest_node, judge_node,
    node_commitment, node_held_digest,
};
pub use params::{Claim, ClaimError, OpenCell, Params, Sizing};
pub use prover::{OpenedRow, Opening, Prover, ProverError};
pub use verify::{
    Answer, Draws, Failure, Phase, PhaseTimes, ProvenClass, ProvenProfile, Verdict, judge,
};
