//! What the agents last said, timed by the scheduler's own clock. Only
//! authenticated heartbeats are recorded (`crate::auth`).

use std::collections::HashMap;

use mcjs_client::Pubkey;
use mcjs_protocol::{Heartbeat, JobReport};

#[derive(Clone, Debug)]
pub struct NodeHeartbeat {
    pub received_ms: i64,
    /// The heartbeat's sequence number: the next one must be above it.
    pub seq: u64,
    pub agent_url: String,
    pub jobs: Vec<JobReport>,
}

/// The latest heartbeat of every node, and when this daemon started
/// listening (a node is given one timeout after a restart before it is
/// judged).
#[derive(Clone, Debug)]
pub struct Liveness {
    pub listening_since_ms: i64,
    nodes: HashMap<Pubkey, NodeHeartbeat>,
}

#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    #[error("`node` is not a base58 public key: {0}")]
    BadNode(String),
}

impl Liveness {
    pub fn new(listening_since_ms: i64) -> Self {
        Self {
            listening_since_ms,
            nodes: HashMap::new(),
        }
    }

    pub fn record(&mut self, heartbeat: Heartbeat, received_ms: i64) -> Result<(), HeartbeatError> {
        let node: Pubkey = heartbeat
            .node
            .parse()
            .map_err(|_| HeartbeatError::BadNode(heartbeat.node.clone()))?;
        self.nodes.insert(
            node,
            NodeHeartbeat {
                received_ms,
                seq: heartbeat.seq,
                agent_url: heartbeat.agent_url,
                jobs: heartbeat.jobs,
            },
        );
        Ok(())
    }

    /// The sequence number of the node's last recorded heartbeat.
    pub fn last_seq(&self, node: &Pubkey) -> Option<u64> {
        self.nodes.get(node).map(|h| h.seq)
    }

    pub fn last(&self, node: &Pubkey) -> Option<&NodeHeartbeat> {
        self.nodes.get(node)
    }

    /// When the node last showed life: its last heartbeat, or when this
    /// daemon started listening if it has not heard from it since.
    pub fn last_sign_of_life_ms(&self, node: &Pubkey) -> i64 {
        self.nodes.get(node).map_or(self.listening_since_ms, |h| {
            h.received_ms.max(self.listening_since_ms)
        })
    }

    pub fn is_alive(&self, node: &Pubkey, now_ms: i64, timeout_ms: i64) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|h| now_ms.saturating_sub(h.received_ms) <= timeout_ms)
    }

    /// The agent's report about a job, if it is about that generation.
    pub fn report(&self, node: &Pubkey, job: &Pubkey, generation: u32) -> Option<&JobReport> {
        let job = job.to_string();
        self.nodes
            .get(node)?
            .jobs
            .iter()
            .find(|r| r.job == job && r.generation == generation)
    }

    pub fn nodes(&self) -> impl Iterator<Item = (&Pubkey, &NodeHeartbeat)> {
        self.nodes.iter()
    }
}
