//! The MCJS scheduler daemon.
//!
//! [`core`] is the decision core: a pure function from what the chain says
//! (jobs, nodes), what the agents said (heartbeats) and `now` to the actions
//! to take (assign a job, report a failure). The async shell around it only
//! observes, calls the core, and sends the resulting transactions
//! ([`transactions`] resolves their accounts, [`chain::DaemonChain`] is all
//! it reads and writes, so rounds are tested over an in-memory chain); the chain
//! stays the source of truth, so a restarted daemon carries on where the
//! last one stopped and the program refuses anything done twice.
//!
//! # Map
//!
//! The pure core (no I/O, no clock; each tested on its own):
//!
//! - `core.rs`: `reconcile`, one round's decision. `detect_failure` reports
//!   a job whose node went silent for the heartbeat timeout or whose
//!   heartbeat stream closed without a goodbye (`StopReason::NodeLost`),
//!   whose agent reported it stopped, or whose checkpoint is overdue; the
//!   brake (`Brake`, `mass_failure`) holds lost-node reports when too many
//!   nodes look dead at once; outages of the chain or the store excuse
//!   lateness (`excused_ms`). `core/placement.rs`: placement through
//!   `mcjs-scheduler`, converting node by node and job by job so that a
//!   malformed account is skipped (and counted in `mcjs_skipped_accounts`),
//!   never the whole fleet; a job goes to its warm standby first; a node on
//!   battery takes no work (`Liveness::takes_work`); the hardware proof is
//!   read where the Config requires it; reliability-aware placement
//!   (`mcjs scheduler --reliability`) is fed each free node's `failures`
//!   and `service_secs` and each job's limit less its billed progress.
//! - `transactions.rs`: the round's decisions as transactions. `plan`: the
//!   core's actions, every account resolved from the round's snapshot; a
//!   failure report and the job's new placement travel in one transaction,
//!   the report alone when refused. `transactions/duties.rs`: `plan_checks`
//!   (the verification duties due) and `plan_challenges` (requests, steps
//!   gone unanswered, verdicts of judged openings, each card credited to one
//!   node; what it leaves and why, and which openings to judge).
//! - `liveness.rs`: what the agents last said, on the scheduler's clock.
//! - `auth.rs`: which heartbeats to believe (the node's key, fresh, new).
//! - `verify.rs`: verified progress: which attested intervals the draw
//!   selects, who checks them (`choose_checkers`, the program's own draw
//!   from the attester's GPU model's checker pool), which decided checks to
//!   apply, which held payments to release, and `finish` (completing a job
//!   whose output is attested); `needs_chain_read` says when a round needs
//!   the clock and slot hashes.
//! - `challenges.rs`: the hardware challenge, the scheduler's part: whom to
//!   challenge (never challenged under their profile, retried after a
//!   verdict that proved nothing, re-checked at random), steps gone
//!   unanswered, openings ready to judge.
//! - `standby.rs`: warm standbys, chosen by the core each round.
//! - `duties.rs`: each node's due checks, from the round's read of the
//!   Verification accounts, served at `GET /v1/checks/{node}`.
//! - `store_gate.rs`: who may touch which object of the store (the tests in
//!   `store_gate/tests.rs`); `quota.rs`: what one wallet may keep there
//!   (bytes, objects, open uploads, published specs).
//! - `sight.rs`: the chain's and the store's outages, as the detector saw
//!   them; `funds.rs`: the scheduler's SOL and its spending rate;
//!   `lease.rs`: what to do about the scheduler lease (`lease_step`).
//!
//! The shell:
//!
//! - `shell.rs`: `Daemon`, the reconcile loop. `Daemon::round` reads the
//!   snapshot, acts only while this scheduler holds the lease, calls
//!   `reconcile`, plans with `transactions::plan` and sends what any plan
//!   produced through `send_all` (the core's transactions
//!   `DaemonConfig::sends_in_flight` at a time, a duty's one at a time; a
//!   refused transaction's fallback, the logs and
//!   `mcjs_transaction_errors`). Its `Memory` starts again when the
//!   scheduler starts or takes the lease (`Memory::started_at`), so nobody
//!   is judged late for the time before; a job that leaves the working set
//!   is read once by address to count how it ended. `shell/duties.rs`:
//!   `verification_round` and `challenge_round` read what their plans need
//!   and judge openings on blocking threads (`--challenge-hardware` turns
//!   requests on). `shell/standby.rs`: the round's standbys, published to
//!   agents and to the store gate.
//! - `chain.rs`: `DaemonChain`, all a round reads and writes. `LiveChain`
//!   reads the snapshot from the client's `ProgramIndex` while it is live
//!   (a scan of the program only while it is not), reads back what each
//!   landed transaction wrote, and keeps a round to its working set
//!   (`in_working_set`: jobs not settled); the round tests use an
//!   in-memory chain. `index_stream.rs`: the index's stream (websocket or
//!   Yellowstone gRPC).
//! - `server.rs`: the HTTP side: the signed heartbeat stream
//!   (`heartbeat_stream`, bounded whoever opens it), the challenge openings
//!   agents send (`POST /v1/challenge/opening`, kept only from the node's
//!   operator key for the challenge in flight), the checks and standbys
//!   owed, the fleet view and the metrics (`metrics.rs`).
//! - `gateway.rs`: the store gateway, the only holder of an S3 store's
//!   credentials; it signs short-lived URLs for what `store_gate` allows
//!   (`gateway/sign.rs`: `sign` as its steps, `open_request`, `identify`,
//!   `authorize_ops`, `admit`, `presign`, each with its own error).
//!   `s3.rs`: the store as the gateway reaches it. `node_views.rs`: each
//!   node's standing, from the index while it is live, else read at most
//!   every 2 s and kept through 30 s of chain outage.
//! - `watch.rs`: loops beside the rounds: `probe_store` (a HEAD of an
//!   `s3://` store every 2 s), `watch_funds` (`getBalance` every minute into
//!   `mcjs_scheduler_lamports`), `hold_lease` (the lease read every second).
//! - `benches/scale.rs` and `benches/placement.rs` measure a round at fleet
//!   size and how fast an idle fleet fills.

pub mod auth;
pub mod chain;
pub mod challenges;
pub mod core;
pub mod duties;
pub mod funds;
pub mod gateway;
pub mod index_stream;
pub mod lease;
pub mod liveness;
pub mod metrics;
pub mod node_views;
pub mod quota;
pub mod s3;
pub mod server;
pub mod shell;
pub mod sight;
pub mod standby;
pub mod store_gate;
pub mod transactions;
pub mod verify;
pub mod watch;

pub use crate::core::{
    AccountKind, Action, Decision, DetectorConfig, Observation, Skipped, reconcile,
};
pub use crate::liveness::Liveness;
/// The planner's knobs, as `DetectorConfig::placement` takes them.
pub use mcjs_scheduler::PlacementConfig;
