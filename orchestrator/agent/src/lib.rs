//! The MCJS node agent: one per provider host. It registers its node, watches
//! the chain for the jobs assigned to it, stages their data, runs their
//! containers under the job contract (docs/job-contract.md), checkpoints and
//! attests them, completes them, and stops at once when the chain fences it.
//!
//! * [`core`]: the decisions, a pure function of the chain's view, local
//!   events and `now`.
//! * [`shell`]: the async reconcile loop that carries them out.
//! * [`checking`]: the verification checks' decisions (which to take up,
//!   when an unavailable start is the answer), pure as the core is.
//! * [`chain`]: what the agent needs from the chain; [`rpc`] implements it.
//! * [`spec_store`], [`output`]: job specs and outputs in the store (from
//!   `mcjs_runtime`, which the owner's commands use without the agent).
//!
//! # Map
//!
//! The pure side:
//!
//! - `core.rs`: `Core`, one `Assignment` per job on this node. `Core::on_chain`
//!   fences what the chain moved on (a new generation stops its container)
//!   and launches what is new, restoring the job's last attested checkpoint;
//!   `Core::on_tick` signals a checkpoint when one is due and asks for the
//!   checkpoint directory to be collected; `Core::on_event` queues
//!   `start_job`, an attestation per stored checkpoint, the output and
//!   `complete_job`, and retries what may land if sent again (0.5 s doubling
//!   to 10 s). A job the chain says was billed its maximum duration stops as
//!   `cap_reached`. `core/messages.rs`: its events and actions.
//!   `core/power.rs`: the UPS: a loss of mains power asks every running job
//!   for a checkpoint at once (at most once per 30 s); a low battery stops
//!   each job as `power_lost` once a checkpoint taken after the warning is
//!   attested.
//! - `checking.rs`: which verification checks to take up, and what a try of
//!   one comes to.
//! - `gpus.rs`: which GPUs each container gets; a check never runs on the
//!   GPUs of the node's paid job.
//! - `fault.rs`: whose fault each thing the work ran into is
//!   (`classify`), as a stop reason the failure table prices.
//!
//! The shell: actors that share only the node and channels. `Agent`
//! (`shell.rs`) is the handle; `Agent::run` starts the job runner
//! (`JobRunner`, the reconcile loop `run` in named steps: the actors beside
//! it, the chain read, the node put back in service, a waiter per
//! container; its own state in `RunnerState`), which starts the checker,
//! the challenger, the heartbeats (fed its reports and the node's power on
//! `watch` channels) and the warm standby. The job runner reads the job its Node account
//! names, by address (`AgentChain::jobs_on_node`, one
//! `getMultipleAccounts`), when either account changes (an
//! `accountSubscribe`, `AgentChain::changes`) and every 30 s besides
//! (`RECONCILE_EVERY`), never by scanning the program (`ChainReads`). By
//! duty:
//!
//! - `shell/actions.rs`: what each of the core's actions does (`perform`),
//!   one named step each: collect, signal, send and count, stop, remove.
//! - `shell/launch.rs`: an assignment's run: spec, restore (a warm standby's
//!   copy, else the store, verified against the attested hash), the
//!   container and its GPUs (`launch`); `collect` hands the checkpoint
//!   directory to the runtime's pipeline, which hashes and stores each
//!   checkpoint; the exit, the output and the job's disk use.
//! - `shell/transactions.rs`: what the agent sends for an assignment
//!   (`send`: `start_job`, `attest_checkpoint` after flushing the job's
//!   printed lines, `complete_job`), with the accounts of the job as last
//!   read (`ChainJob::accounts_at`).
//! - `shell/output.rs`: a finished job's output, stored with its hash.
//! - `shell/heartbeat.rs`: `heartbeats`, signed with the operator key, one
//!   a second on one long-lived stream to every scheduler it is given, with
//!   the node's power where a UPS is named. Each sender (`Heart`) holds the
//!   node's identity, the chain client to sign with, and the job reports and
//!   power the reconcile loop publishes on `watch` channels.
//! - `shell/node.rs`: `NodeEnv`, what every actor shares, read-only (the
//!   node's identity, chain, engine, store, data cache, configuration,
//!   metrics), and the container of a paid run or a check, built alike.
//! - `shell/gpu_desk.rs`: the node's GPUs, owned by one task that keeps
//!   the `GpuLedger`; the job runner and the checker ask it on a channel
//!   (`GpuDesk`), and a check's `CheckGpus` gives them back when dropped.
//! - `shell/run_dirs.rs`: every run's directories under `runs/`, named by
//!   a keyed hash, so a job cannot tell a check from a paid run by its
//!   mounts; the volume that bounds them.
//! - `shell/checks.rs`: the `Checker`, verification checks (restore the interval's start,
//!   run the job as a paid run is run, hash with the possession digest,
//!   seal, then reveal); entering the node in its GPU model's checker pool
//!   and renewing it every 6 hours. `shell/check_finder.rs`: learning of
//!   its checks from the scheduler's `GET /v1/checks/{node}`, scanning the
//!   chain only while no scheduler answers.
//! - `shell/standby.rs`: a warm standby: the latest attested checkpoint of
//!   each job the scheduler names, kept so a launch moves it into place.
//! - `shell/challenge.rs`: the `Challenger`, which shares with the rest of
//!   the agent only the chain client and the node's identity, answering the
//!   node's hardware challenges, each step once its seed's slot hash
//!   exists, on the GPUs where CUDA sees them (matched by PCI address), else
//!   on the CPU backend; the opening,
//!   with each GPU's NVIDIA attestation evidence, sent to every scheduler
//!   until the verdict is on chain.
//! - `shell/power.rs`: the UPS, read for the core and the heartbeat.
//! - `shell/api.rs`: the HTTP API: the HAL's routes, metrics, job reports.
//!
//! Beside them: `chain.rs` (`AgentChain`, what the agent needs from the
//! chain; `chain_job`, the one place a program `Job` account becomes the
//! agent's `ChainJob`: its state, its `JobAccounts`, from when an
//! attestation may exhaust its bond; `CheckedJob`, what a check runs of the
//! job it checks; `NodeIdentity`, the node's accounts)
//! and `rpc.rs` (it, on the chain client); `register.rs` (the node
//! on chain, with its operator key only, never the provider's wallet, and
//! its profile kept current); `sequence.rs` (heartbeat sequence numbers
//! kept above all sent, across restarts, in `<work-dir>/heartbeat.seq`);
//! `metrics.rs`; `inject.rs` (the test-only `fault-injection` feature:
//! attest a made-up hash).

pub mod chain;
pub mod checking;
pub mod core;
pub mod fault;
pub mod gpus;
pub mod inject;
pub mod metrics;
pub mod register;
pub mod rpc;
pub mod sequence;
pub mod shell;

pub use mcjs_runtime::staging::StagingPolicy;
pub use mcjs_runtime::volume::DiskBound;
pub use shell::{Agent, AgentConfig, AgentError};
// Specs and outputs in the store are the owner's as much as the node's:
// they live in the runtime, which the owner's commands use without the agent.
pub use mcjs_runtime::{output, spec_store};
pub use spec_store::{get_spec, put_spec};
