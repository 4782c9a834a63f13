//! What signing costs the scheduler per heartbeat, measured in one run:
//! opening an unsigned heartbeat as the daemon did before (parse the JSON,
//! decode the node key) against opening a signed one as it does now (parse
//! the envelope and the body, decode the node and signer keys, verify the
//! ed25519 signature strictly, check the clock window and the sequence).
//!
//! ```text
//! cargo run --release -p mcjs-protocol --example heartbeat_cost [ROUNDS]
//! ```
//!
//! Prints the median time per heartbeat of each path over ROUNDS rounds of
//! 200 heartbeats (interleaved, so both see the same machine), and the ratio.

use std::hint::black_box;
use std::time::Instant;

use ed25519_dalek::{Signer, SigningKey};
use mcjs_protocol::auth::{check_fresh, check_sequence};
use mcjs_protocol::{
    HEARTBEAT_PATH, Heartbeat, JobPhase, JobReport, SignedRequest, StopReason, StopReport,
};

const PER_ROUND: usize = 200;

fn heartbeat(seq: u64) -> Heartbeat {
    // A node with one running job and one that just stopped: a typical beat.
    let job = |n: u8| bs58::encode([n; 32]).into_string();
    Heartbeat {
        node: job(7),
        provider: job(8),
        agent_url: "http://10.0.0.7:7400".into(),
        sent_at_unix_ms: 1_700_000_000_000,
        seq,
        session: "0123456789abcdef0123456789abcdef".into(),
        jobs: vec![
            JobReport {
                job: job(1),
                generation: 3,
                phase: JobPhase::Running,
                last_checkpoint: Some((2, 1_200)),
                exit: None,
                checkpoint_overdue: false,
            },
            JobReport {
                job: job(2),
                generation: 1,
                phase: JobPhase::Exited,
                last_checkpoint: Some((0, 40)),
                exit: Some(StopReport {
                    stop: StopReason::Exited { code: 86 },
                    last_logs: vec!["step 45: halting".into(); 5],
                }),
                checkpoint_overdue: false,
            },
        ],
        goodbye: false,
        power: None,
    }
}

fn decode_node(text: &str) -> [u8; 32] {
    bs58::decode(text).into_vec().unwrap().try_into().unwrap()
}

/// What the daemon did before: parse and decode the node.
fn open_unsigned(raw: &[u8]) -> Heartbeat {
    let hb: Heartbeat = serde_json::from_slice(raw).unwrap();
    black_box(decode_node(&hb.node));
    hb
}

/// What it does now (`mcjs_scheduler_daemon::auth::authenticate` less the
/// directory lookup, a hash map probe).
fn open_signed(raw: &[u8], authorised: &[u8; 32], now_ms: i64, last: Option<u64>) -> Heartbeat {
    let request = SignedRequest::parse(raw).unwrap();
    let hb: Heartbeat = request.message().unwrap();
    black_box(decode_node(&hb.node));
    assert_eq!(&request.signer_key().unwrap(), authorised);
    request.verify(HEARTBEAT_PATH).unwrap();
    check_fresh(hb.sent_at_unix_ms, now_ms).unwrap();
    check_sequence(hb.seq, last).unwrap();
    hb
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let key = SigningKey::from_bytes(&[42; 32]);
    let signer = key.verifying_key().to_bytes();
    let beats: Vec<Heartbeat> = (1..=PER_ROUND as u64).map(heartbeat).collect();
    let unsigned: Vec<Vec<u8>> = beats
        .iter()
        .map(|b| serde_json::to_vec(b).unwrap())
        .collect();
    let signed: Vec<Vec<u8>> = beats
        .iter()
        .map(|b| {
            let sealed =
                SignedRequest::seal(HEARTBEAT_PATH, b, &signer, |m| key.sign(m).to_bytes());
            serde_json::to_vec(&sealed).unwrap()
        })
        .collect();
    let now_ms = 1_700_000_000_000 + 30_000;

    let (mut before, mut after, mut sealing) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for raw in &unsigned {
            black_box(open_unsigned(black_box(raw)));
        }
        before.push(t.elapsed().as_secs_f64() / PER_ROUND as f64);

        let t = Instant::now();
        for (i, raw) in signed.iter().enumerate() {
            let last = i.checked_sub(1).map(|p| p as u64);
            black_box(open_signed(black_box(raw), &signer, now_ms, last));
        }
        after.push(t.elapsed().as_secs_f64() / PER_ROUND as f64);

        let t = Instant::now();
        for b in &beats {
            black_box(SignedRequest::seal(HEARTBEAT_PATH, b, &signer, |m| {
                key.sign(m).to_bytes()
            }));
        }
        sealing.push(t.elapsed().as_secs_f64() / PER_ROUND as f64);
    }
    let (b, a, s) = (median(before), median(after), median(sealing));
    println!(
        "heartbeat of {} bytes unsigned, {} bytes signed; {rounds} rounds of {PER_ROUND}",
        unsigned[0].len(),
        signed[0].len()
    );
    println!(
        "scheduler, before (unsigned: parse):        median {:>8.2} µs",
        b * 1e6
    );
    println!(
        "scheduler, after (signed: parse + verify):  median {:>8.2} µs",
        a * 1e6
    );
    println!(
        "ratio after / before:                       {:>8.2}x",
        a / b
    );
    println!(
        "agent, sealing one heartbeat (sign):        median {:>8.2} µs",
        s * 1e6
    );
    println!(
        "at one heartbeat per node per second, one core verifies {:.0} nodes",
        1.0 / a
    );
}
