//! What the agents last said, timed by the scheduler's own clock. Only
//! authenticated heartbeats are recorded (`crate::auth`).

use std::collections::HashMap;

use mcjs_client::Pubkey;
use mcjs_protocol::{Heartbeat, JobReport, NodePower};

#[derive(Clone, Debug)]
pub struct NodeHeartbeat {
    pub received_ms: i64,
    /// The heartbeat's sequence number: the next one must be above it.
    pub seq: u64,
    pub agent_url: String,
    pub jobs: Vec<JobReport>,
    /// The node's power as its UPS last said (absent: no UPS named).
    pub power: Option<NodePower>,
}

/// The latest heartbeat of every node, its agent's heartbeat stream, and
/// when this daemon started listening (a node is given one timeout after a
/// restart before it is judged).
#[derive(Clone, Debug)]
pub struct Liveness {
    pub listening_since_ms: i64,
    nodes: HashMap<Pubkey, NodeHeartbeat>,
    streams: HashMap<Pubkey, Stream>,
}

/// A node's heartbeat stream (`mcjs_protocol::HEARTBEAT_STREAM_PATH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Open; the id tells this connection from the node's earlier ones.
    Open { id: u64 },
    /// Closed without a goodbye at `at_ms`: the agent's process is gone, or
    /// a reconnect is on its way (which records a heartbeat after `at_ms`).
    Dropped { id: u64, at_ms: i64 },
    /// Closed after a goodbye at `at_ms`: the agent stopped on purpose.
    Closed { id: u64, at_ms: i64 },
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
            streams: HashMap::new(),
        }
    }

    /// Every node's timer starts again at `now_ms`, as if this scheduler
    /// had just begun listening: what a scheduler that takes the lease over
    /// does, so that nobody is judged silent for the time before it led
    /// (streams and heartbeats already received are kept).
    pub fn restart_timers(&mut self, now_ms: i64) {
        self.listening_since_ms = self.listening_since_ms.max(now_ms);
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
                power: heartbeat.power,
            },
        );
        Ok(())
    }

    /// A heartbeat stream `id` of `node` delivered its first authenticated
    /// heartbeat: it is the node's stream from now on.
    pub fn stream_opened(&mut self, node: Pubkey, id: u64) {
        self.streams.insert(node, Stream::Open { id });
    }

    /// Stream `id` of `node` ended at `now_ms`, after a goodbye or not. An
    /// older stream ending after a newer one opened changes nothing.
    pub fn stream_closed(&mut self, node: &Pubkey, id: u64, goodbye: bool, now_ms: i64) {
        if let Some(stream) = self.streams.get_mut(node)
            && *stream == (Stream::Open { id })
        {
            *stream = if goodbye {
                Stream::Closed { id, at_ms: now_ms }
            } else {
                Stream::Dropped { id, at_ms: now_ms }
            };
        }
    }

    pub fn stream(&self, node: &Pubkey) -> Option<Stream> {
        self.streams.get(node).copied()
    }

    /// When the node's agent vanished: its stream dropped without a
    /// goodbye and nothing was heard from it since.
    pub fn dropped_at(&self, node: &Pubkey) -> Option<i64> {
        match self.streams.get(node)? {
            Stream::Dropped { at_ms, .. }
                if self.nodes.get(node).is_none_or(|h| h.received_ms <= *at_ms) =>
            {
                Some(*at_ms)
            }
            _ => None,
        }
    }

    /// Whether the node's agent said goodbye and has not been heard from
    /// since: it is restarting (or going away on purpose).
    pub fn away(&self, node: &Pubkey) -> bool {
        match self.streams.get(node) {
            Some(Stream::Closed { at_ms, .. }) => {
                self.nodes.get(node).is_none_or(|h| h.received_ms <= *at_ms)
            }
            _ => false,
        }
    }

    /// Whether the node's agent vanished at least `grace_ms` ago.
    pub fn vanished(&self, node: &Pubkey, now_ms: i64, grace_ms: i64) -> bool {
        self.dropped_at(node)
            .is_some_and(|at| now_ms.saturating_sub(at) >= grace_ms)
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

    /// Heard from within `timeout_ms`, and its stream did not drop more than
    /// `grace_ms` ago without a word since.
    pub fn is_alive(&self, node: &Pubkey, now_ms: i64, timeout_ms: i64, grace_ms: i64) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|h| now_ms.saturating_sub(h.received_ms) <= timeout_ms)
            && !self.vanished(node, now_ms, grace_ms)
    }

    /// Whether the node's last heartbeat lets it take work: not on battery
    /// ([`NodePower::takes_work`]). A node never heard from is judged by
    /// its liveness, not here.
    pub fn takes_work(&self, node: &Pubkey) -> bool {
        NodePower::takes_work(self.nodes.get(node).and_then(|h| h.power))
    }

    /// Whether the node may be drawn as a checker: alive ([`Self::is_alive`])
    /// and not on battery ([`Self::takes_work`]).
    pub fn may_check(&self, node: &Pubkey, now_ms: i64, timeout_ms: i64, grace_ms: i64) -> bool {
        self.is_alive(node, now_ms, timeout_ms, grace_ms) && self.takes_work(node)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(node: &Pubkey, seq: u64) -> Heartbeat {
        Heartbeat {
            node: node.to_string(),
            provider: Pubkey::new_unique().to_string(),
            agent_url: String::new(),
            sent_at_unix_ms: 0,
            seq,
            session: String::new(),
            jobs: Vec::new(),
            goodbye: false,
            power: None,
        }
    }

    #[test]
    fn a_dropped_stream_is_a_vanished_agent_after_the_grace_unless_it_came_back() {
        let node = Pubkey::new_unique();
        let mut l = Liveness::new(0);
        l.record(beat(&node, 1), 1_000).unwrap();
        l.stream_opened(node, 7);
        assert!(l.is_alive(&node, 1_200, 3_000, 500));
        l.stream_closed(&node, 7, false, 1_300);
        assert_eq!(l.dropped_at(&node), Some(1_300));
        assert!(!l.vanished(&node, 1_799, 500), "within the grace");
        assert!(l.is_alive(&node, 1_799, 3_000, 500));
        assert!(l.vanished(&node, 1_800, 500));
        assert!(!l.is_alive(&node, 1_800, 3_000, 500));
        // A reconnect within the grace: its first heartbeat cancels it.
        l.record(beat(&node, 2), 1_700).unwrap();
        l.stream_opened(node, 8);
        assert_eq!(l.dropped_at(&node), None);
        assert!(l.is_alive(&node, 2_000, 3_000, 500));
    }

    #[test]
    fn a_node_on_battery_takes_no_work_nor_checks_until_its_ups_is_back_on_line() {
        let node = Pubkey::new_unique();
        let mut l = Liveness::new(0);
        assert!(l.takes_work(&node), "never heard from: liveness decides");
        l.record(beat(&node, 1), 1_000).unwrap();
        assert!(l.takes_work(&node), "no UPS named");
        for (seq, power, takes) in [
            (2, NodePower::OnLine, true),
            (3, NodePower::OnBattery, false),
            (4, NodePower::LowBattery, false),
            (5, NodePower::OnLine, true),
        ] {
            let mut b = beat(&node, seq);
            b.power = Some(power);
            l.record(b, 1_000 + seq as i64).unwrap();
            assert_eq!(l.takes_work(&node), takes, "{power:?}");
            assert!(l.is_alive(&node, 1_010, 3_000, 500), "alive all along");
            assert_eq!(l.may_check(&node, 1_010, 3_000, 500), takes, "{power:?}");
        }
    }

    #[test]
    fn a_goodbye_or_an_old_stream_closing_late_is_no_sign_of_death() {
        let node = Pubkey::new_unique();
        let mut l = Liveness::new(0);
        l.record(beat(&node, 1), 1_000).unwrap();
        l.stream_opened(node, 1);
        l.stream_closed(&node, 1, true, 1_100);
        assert_eq!(l.dropped_at(&node), None);
        assert!(l.away(&node), "said goodbye, not back yet");
        assert!(
            l.is_alive(&node, 3_900, 3_000, 500),
            "judged by the timeout only"
        );
        assert!(!l.is_alive(&node, 4_100, 3_000, 500));
        // The agent reconnected on stream 3 before stream 2's end was seen.
        l.stream_opened(node, 2);
        l.stream_opened(node, 3);
        l.stream_closed(&node, 2, false, 1_200);
        assert_eq!(l.stream(&node), Some(Stream::Open { id: 3 }));
        assert_eq!(l.dropped_at(&node), None);
    }
}
