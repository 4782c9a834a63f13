//! The agent's Prometheus metrics, served at `/v1/agent/metrics` beside the HAL API.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder, exponential_buckets,
};

#[derive(Clone)]
pub struct AgentMetrics {
    registry: Registry,
    /// Assignments by phase.
    pub jobs: IntGaugeVec,
    /// Transactions sent, by kind and outcome.
    pub transactions: IntCounterVec,
    /// Collect-hash-store of one checkpoint, seconds.
    pub checkpoint_seconds: Histogram,
    pub checkpoint_bytes: Histogram,
    /// Bytes hashed per second of the last checkpoint.
    pub hash_bytes_per_second: prometheus::Gauge,
    /// From a checkpoint stored to its attestation confirmed, seconds.
    pub attestation_latency_seconds: Histogram,
    pub overdue: IntCounter,
    pub data_rejected: IntCounter,
    pub exits: IntCounterVec,
    pub fenced: IntCounter,
    /// One verification run (restore, re-execute the interval, hash), seconds:
    /// the cost of checking other providers' work.
    pub check_seconds: Histogram,
}

impl AgentMetrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let jobs = IntGaugeVec::new(
            Opts::new("mcjs_agent_jobs", "Assignments the agent holds, by phase"),
            &["phase"],
        )
        .expect("valid metric");
        let transactions = IntCounterVec::new(
            Opts::new(
                "mcjs_agent_transactions_total",
                "Chain transactions, by kind and outcome",
            ),
            &["tx", "outcome"],
        )
        .expect("valid metric");
        let checkpoint_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "mcjs_agent_checkpoint_seconds",
                "Time to hash and store one checkpoint",
            )
            .buckets(exponential_buckets(0.001, 2.0, 18).expect("valid buckets")),
        )
        .expect("valid metric");
        let checkpoint_bytes = Histogram::with_opts(
            HistogramOpts::new("mcjs_agent_checkpoint_bytes", "Size of stored checkpoints")
                .buckets(exponential_buckets(1024.0, 4.0, 14).expect("valid buckets")),
        )
        .expect("valid metric");
        let hash_bytes_per_second = prometheus::Gauge::new(
            "mcjs_agent_hash_bytes_per_second",
            "Hash-and-store throughput of the last checkpoint",
        )
        .expect("valid metric");
        let attestation_latency_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "mcjs_agent_attestation_latency_seconds",
                "From a checkpoint stored to its attestation confirmed",
            )
            .buckets(exponential_buckets(0.01, 2.0, 14).expect("valid buckets")),
        )
        .expect("valid metric");
        let overdue = IntCounter::new(
            "mcjs_agent_checkpoint_overdue_total",
            "Jobs that missed their checkpoint deadline",
        )
        .expect("valid metric");
        let data_rejected = IntCounter::new(
            "mcjs_agent_data_rejected_total",
            "Jobs refused because an input did not match its sha256",
        )
        .expect("valid metric");
        let exits = IntCounterVec::new(
            Opts::new(
                "mcjs_agent_container_exits_total",
                "Container exits, by meaning",
            ),
            &["meaning"],
        )
        .expect("valid metric");
        let fenced = IntCounter::new(
            "mcjs_agent_fenced_total",
            "Assignments stopped because the chain moved the job on",
        )
        .expect("valid metric");
        let check_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "mcjs_agent_check_seconds",
                "One verification run: restore, re-execute the interval, hash",
            )
            .buckets(exponential_buckets(0.1, 2.0, 16).expect("valid buckets")),
        )
        .expect("valid metric");
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(check_seconds.clone()),
            Box::new(jobs.clone()),
            Box::new(transactions.clone()),
            Box::new(checkpoint_seconds.clone()),
            Box::new(checkpoint_bytes.clone()),
            Box::new(hash_bytes_per_second.clone()),
            Box::new(attestation_latency_seconds.clone()),
            Box::new(overdue.clone()),
            Box::new(data_rejected.clone()),
            Box::new(exits.clone()),
            Box::new(fenced.clone()),
        ];
        for c in collectors {
            registry.register(c).expect("metric names are unique");
        }
        Self {
            registry,
            jobs,
            transactions,
            checkpoint_seconds,
            checkpoint_bytes,
            hash_bytes_per_second,
            attestation_latency_seconds,
            overdue,
            data_rejected,
            exits,
            fenced,
            check_seconds,
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding of gathered metrics");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

impl Default for AgentMetrics {
    fn default() -> Self {
        Self::new()
    }
}
