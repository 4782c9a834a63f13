//! What MCJS agents and the MCJS scheduler say to each other.
//!
//! The chain is the source of truth for every job's state; this channel only
//! carries what the chain cannot know quickly: that a node is alive, what its
//! containers are doing, and why a container stopped. Agents push a
//! [`Heartbeat`] to the scheduler every [`HEARTBEAT_INTERVAL_MS`]; the
//! scheduler declares a node failed when it has heard nothing for its
//! configured timeout (default [`DEFAULT_HEARTBEAT_TIMEOUT_MS`]).
//!
//! Every request an agent makes is signed ([`auth`]): a heartbeat can get a
//! provider slashed, so the scheduler believes only the node's own key.
//! Why a job stopped, and who pays for it, is decided in one place
//! ([`fault`]) for the agent and the scheduler alike.
//!
//! Keys are base58 strings so that this crate needs no Solana types.
//!
//! # Map
//!
//! - `lib.rs` (this file): the messages and their paths: `Heartbeat` (with
//!   a `JobReport` per job: phase, last checkpoint, why it stopped; and the
//!   node's `NodePower` where a UPS is named), the heartbeat stream and
//!   session, the checks and standbys a node owes, the challenge opening,
//!   the fleet view; the heartbeat interval (1 s) and the default timeout
//!   (3 s) and grace for a closed stream (500 ms).
//! - `auth.rs`: `SignedRequest`, ed25519 over a domain-separated body with
//!   the node, a timestamp and a sequence number; `Refusal` says why one
//!   was refused.
//! - `fault.rs`: the failure table: every `StopReason`, whose fault it is
//!   (`StopReason::fault`) and the on-chain cause it is reported as
//!   (`StopReason::chain_cause`); docs/job-contract.md is its page for
//!   people.
//! - `store.rs`: the store gateway's requests and answers, and store URLs;
//!   `store/layout.rs`: the one place a store path is made
//!   (`ObjectKind::classify` reads them back, and a test holds the two
//!   together).
//! - `peer.rs` (feature `http`): per-address limits for the public HTTP
//!   endpoints, keyed by the peer's IPv4 address or IPv6 /64.

pub mod auth;
pub mod fault;
#[cfg(feature = "http")]
pub mod peer;
pub mod store;

pub use auth::{MAX_CLOCK_SKEW_MS, Refusal, SIGNING_DOMAIN, SignedRequest};
pub use fault::{ChainCause, Fault, JobOutcome, StopReason};

use serde::{Deserialize, Serialize};

/// `POST` a [`Heartbeat`] here, sealed in a [`SignedRequest`] (JSON); the
/// answer is a [`HeartbeatAck`], or an error `{"error": ...}` with 400, 401
/// or 403 (see [`Refusal`]).
pub const HEARTBEAT_PATH: &str = "/v1/heartbeat";
/// `POST` a stream of heartbeats on one long-lived request: each line of the
/// body is a sealed [`Heartbeat`] (signed for [`HEARTBEAT_PATH`]), one per
/// [`HEARTBEAT_INTERVAL_MS`]. The connection itself is a sign of life: when
/// it closes without a heartbeat marked [`Heartbeat::goodbye`], the agent's
/// process is gone (its kernel closed the socket), and the scheduler
/// declares the node lost after a short grace in which a reconnect cancels
/// it. A partition closes nothing, so it still waits out the timeout.
pub const HEARTBEAT_STREAM_PATH: &str = "/v1/heartbeat/stream";
/// `GET` the scheduler's current [`HeartbeatSession`]: an agent asks before
/// it opens each heartbeat stream.
pub const HEARTBEAT_SESSION_PATH: &str = "/v1/heartbeat/session";

/// A scheduler process's heartbeat session: random, new at each start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatSession {
    pub session: String,
}

/// `GET {CHECKS_PATH}/{node}`: the verifications the scheduler last read
/// in which `node` must act now (seal or reveal), as [`CheckDuties`]. An
/// agent reads them by address and acts only on what the chain confirms;
/// the list only spares it scanning the program for them. Public: every
/// Verification account is.
pub const CHECKS_PATH: &str = "/v1/checks";

/// What a node owes as a checker, by the scheduler's last read of the chain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckDuties {
    /// Verification accounts (base58), earliest interval of each job first.
    pub verifications: Vec<String>,
    /// The chain time (unix seconds) of the read they come from; 0 before
    /// the scheduler's first read.
    pub read_at: i64,
}

/// `GET {STANDBY_PATH}/{node}`: the jobs `node` stands by for, as
/// [`StandbyDuties`] (a spec's `checkpoint.standby`; the scheduler names
/// the node). The agent keeps each one's latest attested checkpoint on its
/// disk, verified, so that the job starts there without a download when its
/// node is lost. What the list names is only a hint: the store gives the
/// node only the checkpoint the chain attests, and the agent uses its copy
/// only when the chain's hash is the one it verified.
pub const STANDBY_PATH: &str = "/v1/standby";

/// What a node keeps ready for, by the scheduler's last round.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyDuties {
    pub jobs: Vec<StandbyJob>,
}

/// A job a node stands by for, and its latest attested checkpoint as the
/// scheduler read it (none yet: nothing to fetch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyJob {
    /// The Job account (base58).
    pub job: String,
    /// The job's spec hash (hex): its `checkpoint.max_size` bounds what the
    /// node fetches.
    pub spec: String,
    /// The checkpoint's step and hash (hex), as the chain attests them.
    pub step: Option<u64>,
    pub hash: Option<String>,
}

/// `POST` a node's [`ChallengeOpening`] here, sealed in a [`SignedRequest`] by the node's
/// operator key: the hardware challenge's last answer (docs/hardware-challenge.md), which
/// the scheduler, as the checker, judges against what the chain holds. The answer is 202
/// (kept), or an error `{"error": ...}` with 400, 401, 403 or 413. The agent sends it again
/// until the verdict is on chain: a scheduler that restarted has lost it, and a copy sent
/// twice changes nothing.
pub const CHALLENGE_OPENING_PATH: &str = "/v1/challenge/opening";

/// The largest opening accepted: 16 GPUs of the standard challenge (4.2 MB each packed,
/// about 2.5 times that as JSON), with room.
pub const MAX_CHALLENGE_OPENING_BYTES: usize = 256 * 1024 * 1024;

/// A node's opening of the challenge the program requested at `requested_slot`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChallengeOpening {
    /// The Node account.
    pub node: String,
    /// The challenge it answers: the slot of its request, as the Node account records it.
    pub requested_slot: u64,
    /// The agent's clock; the scheduler refuses one further than [`MAX_CLOCK_SKEW_MS`]
    /// from its own.
    pub sent_at_unix_ms: i64,
    pub opening: mcjs_challenge::NodeOpening,
}

/// The longest line of a heartbeat stream.
pub const MAX_HEARTBEAT_BYTES: usize = 256 * 1024;
/// `GET` the scheduler's view of the fleet: a [`FleetView`].
pub const FLEET_PATH: &str = "/v1/fleet";

pub const HEARTBEAT_INTERVAL_MS: u64 = 1_000;
pub const DEFAULT_HEARTBEAT_TIMEOUT_MS: u64 = 3_000;
/// How long after an agent's heartbeat stream closed without a goodbye the
/// scheduler waits for it to reconnect before declaring the node lost.
pub const DEFAULT_DISCONNECT_GRACE_MS: u64 = 500;
/// How long an agent that said goodbye (a restart on purpose) has to come
/// back before the scheduler declares its node lost.
pub const DEFAULT_RESTART_GRACE_MS: u64 = 15_000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The Node account.
    pub node: String,
    /// The Provider account that owns the node.
    pub provider: String,
    /// Base URL of the agent's HAL API (profile, capability, metrics).
    pub agent_url: String,
    /// The agent's clock. The scheduler refuses a heartbeat further than
    /// [`MAX_CLOCK_SKEW_MS`] from its own clock, and times liveness by its own.
    pub sent_at_unix_ms: i64,
    /// Grows with every request the agent sends ([`auth::next_sequence`]);
    /// the scheduler refuses one not above the last it accepted from the node.
    pub seq: u64,
    /// The scheduler's session ([`HeartbeatSession`], from
    /// [`HEARTBEAT_SESSION_PATH`]) the agent heartbeats into. A scheduler
    /// starts a new one each time it starts and refuses every other, so a
    /// line captured before a restart cannot be replayed after it, when the
    /// scheduler no longer knows the node's last sequence number.
    #[serde(default)]
    pub session: String,
    /// Every job the agent is working on or has just finished with.
    pub jobs: Vec<JobReport>,
    /// The agent is stopping on purpose (and will be back, or the node goes
    /// offline on chain): its connection closing right after is no sign of
    /// a crash.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub goodbye: bool,
    /// The node's mains power as its UPS reports it (`mcjs agent --ups`);
    /// absent when no UPS is named or it cannot be read. A node on battery
    /// is given no work ([`NodePower::takes_work`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<NodePower>,
}

/// A node's power, as its UPS says (`docs/job-contract.md`, "Power").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodePower {
    /// On mains power.
    OnLine,
    /// Mains lost, running on the battery: the agent has asked every job
    /// for a checkpoint.
    OnBattery,
    /// The battery is about to run out: the agent stops each job once a
    /// checkpoint taken after the warning is attested (`power_lost`).
    LowBattery,
}

impl NodePower {
    /// Whether the scheduler may place work on the node: only on mains, or
    /// when the node has no UPS to say otherwise (`None`).
    pub fn takes_work(power: Option<Self>) -> bool {
        matches!(power, None | Some(Self::OnLine))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobReport {
    /// The Job account.
    pub job: String,
    /// The assignment generation the agent works under.
    pub generation: u32,
    pub phase: JobPhase,
    /// Epoch and step of the last checkpoint the agent attested.
    pub last_checkpoint: Option<(u32, u64)>,
    /// Set once the container has exited.
    pub exit: Option<StopReport>,
    /// The job went past its checkpoint interval and grace without a checkpoint.
    #[serde(default)]
    pub checkpoint_overdue: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobPhase {
    /// Fetching and verifying inputs; never billed.
    Staging,
    /// Restoring the last attested checkpoint.
    Restoring,
    Running,
    /// The container exited 0 with its output; completing on chain.
    Completing,
    /// The job stopped otherwise (or never started); see [`JobReport::exit`].
    Exited,
    /// An input's hash did not match its declaration; the job never started.
    DataRejected,
    /// The chain moved the job to another generation; the agent stopped its
    /// container and will not attest for it again.
    Fenced,
}

/// How a job stopped on its node, as the agent reports it (a
/// [`JobReport`]'s `exit`); the container's own exit, as the engine saw it,
/// is `mcjs_runtime::engine::ExitReport`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopReport {
    /// What the agent saw; the scheduler decides who pays with
    /// [`StopReason::fault`].
    pub stop: StopReason,
    /// The last lines the container wrote.
    pub last_logs: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatAck {
    /// The scheduler's clock when it recorded the heartbeat.
    pub received_at_unix_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetView {
    pub nodes: Vec<NodeLiveness>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLiveness {
    pub node: String,
    pub last_heartbeat_unix_ms: Option<i64>,
    pub alive: bool,
    /// What the node's last heartbeat said of its power (absent: no UPS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<NodePower>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_round_trips_and_unknown_fields_are_refused() {
        let hb = Heartbeat {
            session: "s".into(),
            node: "N".into(),
            provider: "P".into(),
            agent_url: "http://127.0.0.1:1".into(),
            sent_at_unix_ms: 5,
            seq: 9,
            jobs: vec![JobReport {
                job: "J".into(),
                generation: 3,
                phase: JobPhase::Exited,
                last_checkpoint: Some((1, 20)),
                checkpoint_overdue: false,
                exit: Some(StopReport {
                    stop: StopReason::Exited { code: 137 },
                    last_logs: vec!["killed".into()],
                }),
            }],
            goodbye: false,
            power: None,
        };
        let text = serde_json::to_string(&hb).unwrap();
        assert!(text.contains("\"phase\":\"exited\""));
        assert!(text.contains(r#""stop":{"reason":"exited","code":137}"#));
        assert_eq!(serde_json::from_str::<Heartbeat>(&text).unwrap(), hb);
        let extra = text.replacen('{', "{\"bogus\":1,", 1);
        assert!(serde_json::from_str::<Heartbeat>(&extra).is_err());
    }
}
