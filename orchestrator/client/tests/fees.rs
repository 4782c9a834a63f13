//! Priority fees: a transaction offers what recent transactions writing its
//! accounts paid (the policy's percentile), never more than the operator's
//! ceiling, more each time it is signed again after expiring, and is sent
//! all the same when the node will not say what recent slots paid.

mod common;

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use mcjs_client::compute::{COMPUTE_BUDGET_PROGRAM, FeePolicy, set_unit_price};
use mcjs_client::{ChainClient, Instruction, Keypair, Pubkey, Signature, Signer};
use serde_json::{Value, json};
use solana_transaction::Transaction;

const BLOCKHASHES: [&str; 3] = [
    "4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn",
    "9mwfGgL4xHRUMCTqgC3LdswEdJXrHvRzHjFhNT5Tdb3r",
    "6Y8PRgkfVsNMfrMHsy7yaXR3vmvdTa9fnPW4zV9TFhRA",
];

/// What a fake node saw: every call, and every transaction sent.
#[derive(Default)]
struct Seen {
    calls: Vec<(String, Value)>,
    sent: Vec<Transaction>,
}

/// A node whose recent slots paid `recent` (None: it refuses the method,
/// as nodes without it do) and on which a transaction lands once signed
/// `lands_at` times (each earlier blockhash expires unconfirmed).
async fn fake_node(recent: Option<Vec<u64>>, lands_at: usize) -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let log = seen.clone();
    let url = common::node_with_errors(move |method, params| {
        let mut seen = log.lock().unwrap();
        seen.calls.push((method.to_string(), params.clone()));
        let context = json!({"slot": 10});
        let signings = {
            let mut hashes: Vec<_> = seen
                .sent
                .iter()
                .map(|tx| tx.message.recent_blockhash)
                .collect();
            hashes.dedup();
            hashes.len()
        };
        Ok(match method {
            "getLatestBlockhash" => json!({"context": context, "value": {
                "blockhash": BLOCKHASHES[signings.min(BLOCKHASHES.len() - 1)],
                "lastValidBlockHeight": 1000}}),
            // Every blockhash but the one it lands with has expired.
            "isBlockhashValid" => json!({"context": context, "value": signings >= lands_at}),
            "getRecentPrioritizationFees" => match &recent {
                Some(fees) => Value::Array(
                    fees.iter()
                        .enumerate()
                        .map(|(slot, fee)| json!({"slot": slot, "prioritizationFee": fee}))
                        .collect(),
                ),
                None => return Err((-32601, "Method not found".into())),
            },
            "sendTransaction" => {
                let wire = base64::engine::general_purpose::STANDARD
                    .decode(params[0].as_str().unwrap())
                    .unwrap();
                let tx: Transaction = bincode::deserialize(&wire).unwrap();
                let signature = tx.signatures[0].to_string();
                seen.sent.push(tx);
                Value::String(signature)
            }
            "getSignatureStatuses" => {
                let landed = signings >= lands_at;
                let status = landed.then(|| {
                    json!({"slot": 11, "confirmations": null, "err": null,
                        "status": {"Ok": null}, "confirmationStatus": "finalized"})
                });
                json!({"context": context, "value": [status]})
            }
            other => panic!("unexpected call {other}"),
        })
    })
    .await;
    (url, seen)
}

/// An instruction that writes `written` and reads `read`.
fn touching(written: Pubkey, read: Pubkey) -> Instruction {
    Instruction::new_with_bytes(
        Pubkey::new_unique(),
        b"x",
        vec![
            anchor_lang::solana_program::instruction::AccountMeta::new(written, false),
            anchor_lang::solana_program::instruction::AccountMeta::new_readonly(read, false),
        ],
    )
}

/// The `SetComputeUnitPrice` instructions of `tx`, as instructions.
fn prices(tx: &Transaction) -> Vec<Instruction> {
    let keys = &tx.message.account_keys;
    tx.message
        .instructions
        .iter()
        .filter(|ix| keys[ix.program_id_index as usize] == COMPUTE_BUDGET_PROGRAM)
        .filter(|ix| ix.data.first() == Some(&3))
        .map(|ix| Instruction::new_with_bytes(COMPUTE_BUDGET_PROGRAM, &ix.data, vec![]))
        .collect()
}

fn fee_calls(seen: &Seen) -> Vec<&Value> {
    seen.calls
        .iter()
        .filter(|(method, _)| method == "getRecentPrioritizationFees")
        .map(|(_, params)| params)
        .collect()
}

#[tokio::test]
async fn a_transaction_offers_the_recent_percentile_for_its_writable_accounts() {
    let recent: Vec<u64> = (1..=100).map(|n| n * 1_000).collect();
    let (url, seen) = fake_node(Some(recent), 1).await;
    let payer = Keypair::new();
    let (job, config) = (Pubkey::new_unique(), Pubkey::new_unique());
    let client = ChainClient::new(&url).with_fees(FeePolicy::with_ceiling(500_000));
    let signature: Signature = client
        .send(&[touching(job, config)], &[&payer])
        .await
        .unwrap();

    let seen = seen.lock().unwrap();
    // Asked about exactly what the transaction writes: the payer and the job.
    let asked = fee_calls(&seen);
    assert_eq!(asked.len(), 1, "{:?}", seen.calls);
    assert_eq!(
        asked[0][0],
        json!([payer.pubkey().to_string(), job.to_string()])
    );
    assert_eq!(seen.sent.len(), 1);
    assert_eq!(seen.sent[0].signatures[0], signature);
    assert_eq!(prices(&seen.sent[0]), vec![set_unit_price(75_000)]);
}

#[tokio::test]
async fn the_offer_never_exceeds_the_operators_ceiling() {
    let (url, seen) = fake_node(Some(vec![u64::MAX / 2; 150]), 1).await;
    let payer = Keypair::new();
    let client = ChainClient::new(&url).with_fees(FeePolicy::with_ceiling(3_000));
    let ix = touching(Pubkey::new_unique(), Pubkey::new_unique());
    client.send(&[ix], &[&payer]).await.unwrap();
    assert_eq!(
        prices(&seen.lock().unwrap().sent[0]),
        vec![set_unit_price(3_000)]
    );
}

#[tokio::test]
async fn a_local_chain_has_no_fee_market_to_follow() {
    let (url, seen) = fake_node(Some(vec![50_000; 150]), 1).await;
    assert!(url.starts_with("http://127.0.0.1:"));
    let client = ChainClient::new(&url);
    assert_eq!(client.fees(), FeePolicy::NONE);
    let payer = Keypair::new();
    let ix = touching(Pubkey::new_unique(), Pubkey::new_unique());
    client.send(&[ix], &[&payer]).await.unwrap();
    let seen = seen.lock().unwrap();
    assert!(fee_calls(&seen).is_empty(), "{:?}", seen.calls);
    assert!(prices(&seen.sent[0]).is_empty());
    // A cluster's default.
    assert_eq!(
        ChainClient::new("https://api.mainnet-beta.solana.com").fees(),
        FeePolicy::default()
    );
}

#[tokio::test]
async fn with_no_ceiling_no_fee_is_offered_and_none_asked_for() {
    let (url, seen) = fake_node(Some(vec![50_000; 150]), 1).await;
    let payer = Keypair::new();
    let client = ChainClient::new(&url).with_fees(FeePolicy::NONE);
    let ix = touching(Pubkey::new_unique(), Pubkey::new_unique());
    client.send(&[ix], &[&payer]).await.unwrap();
    let seen = seen.lock().unwrap();
    assert!(fee_calls(&seen).is_empty(), "{:?}", seen.calls);
    assert!(prices(&seen.sent[0]).is_empty());
}

#[tokio::test]
async fn a_node_that_will_not_say_what_slots_paid_still_gets_the_transaction() {
    let (url, seen) = fake_node(None, 1).await;
    let payer = Keypair::new();
    let client = ChainClient::new(&url).with_fees(FeePolicy::default());
    let ix = touching(Pubkey::new_unique(), Pubkey::new_unique());
    client.send(&[ix], &[&payer]).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(fee_calls(&seen).len(), 1);
    assert_eq!(seen.sent.len(), 1);
    assert!(prices(&seen.sent[0]).is_empty());
}

#[tokio::test]
async fn a_transaction_signed_again_after_expiring_offers_twice_as_much() {
    // Recent slots paid 20,000; the first signing expires unconfirmed.
    let (url, seen) = fake_node(Some(vec![20_000; 10]), 2).await;
    let payer = Keypair::new();
    let client = ChainClient::new(&url).with_fees(FeePolicy::with_ceiling(1_000_000));
    let ix = touching(Pubkey::new_unique(), Pubkey::new_unique());
    let signature = client.send(&[ix], &[&payer]).await.unwrap();
    let seen = seen.lock().unwrap();
    let first = &seen.sent[0];
    let last = seen.sent.last().unwrap();
    assert_ne!(
        first.message.recent_blockhash,
        last.message.recent_blockhash
    );
    assert_eq!(last.signatures[0], signature);
    assert_eq!(prices(first), vec![set_unit_price(20_000)]);
    assert_eq!(prices(last), vec![set_unit_price(40_000)]);
}

/// A node that takes longer than [`FEE_READ_TIMEOUT`] to say what recent
/// slots paid (overloaded, or rate-limiting with backoff) holds the
/// transaction no longer than that: it is priced as if they paid nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_slow_to_say_what_slots_paid_holds_the_transaction_at_most_the_fee_timeout() {
    use mcjs_client::rpc::FEE_READ_TIMEOUT;
    let late = FEE_READ_TIMEOUT * 2;
    let url = common::node(move |method, _| match method {
        "getRecentPrioritizationFees" => {
            // Blocks one of the fake node's workers; the client's own
            // runtime is not this one's concern.
            std::thread::sleep(late);
            json!([{"slot": 1, "prioritizationFee": 900_000}])
        }
        other => panic!("unexpected call {other}"),
    })
    .await;
    let client = ChainClient::new(&url).with_fees(FeePolicy::with_ceiling(1_000_000));
    let ix = touching(Pubkey::new_unique(), Pubkey::new_unique());
    let started = std::time::Instant::now();
    let price = client.unit_price(&[ix], &Pubkey::new_unique(), 0).await;
    let waited = started.elapsed();
    assert!(waited >= FEE_READ_TIMEOUT, "gave up after {waited:?}");
    assert!(waited < late, "waited {waited:?} for the late answer");
    assert_eq!(
        price,
        FeePolicy::with_ceiling(1_000_000).price(&[], 0),
        "priced as if recent slots paid nothing"
    );
}
