//! Confirmation by batched status polls: transactions confirmed at once by
//! one client and its clones are asked about together, not one call each.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use mcjs_client::{ChainClient, Instruction, Keypair, Pubkey};
use serde_json::{Value, json};

/// How long after it was sent a transaction lands.
const LANDS_AFTER: Duration = Duration::from_millis(300);

#[tokio::test]
async fn transactions_confirmed_together_are_asked_about_in_shared_calls() {
    let sent = Arc::new(Mutex::new(HashMap::<String, Instant>::new()));
    let polls = Arc::new(Mutex::new(Vec::<usize>::new()));
    let (sent_log, poll_log) = (sent.clone(), polls.clone());
    let url = common::node(move |method, params| {
        let context = json!({"slot": 10});
        match method {
            "getLatestBlockhash" => json!({"context": context, "value": {
                "blockhash": "4sGjMW1sUnHzSxGspuhpqLDx6wiyjNtZAMdL4VZHirAn",
                "lastValidBlockHeight": 1000}}),
            "isBlockhashValid" => json!({"context": context, "value": true}),
            "getRecentPrioritizationFees" => json!([]),
            "sendTransaction" => {
                let wire = base64::engine::general_purpose::STANDARD
                    .decode(params[0].as_str().unwrap())
                    .unwrap();
                let signature = bs58(&wire[1..65]);
                sent_log
                    .lock()
                    .unwrap()
                    .entry(signature.clone())
                    .or_insert_with(Instant::now);
                Value::String(signature)
            }
            "getSignatureStatuses" => {
                let asked = params[0].as_array().unwrap();
                poll_log.lock().unwrap().push(asked.len());
                let sent = sent_log.lock().unwrap();
                let statuses: Vec<Value> = asked
                    .iter()
                    .map(|s| {
                        let landed = sent
                            .get(s.as_str().unwrap())
                            .is_some_and(|at| at.elapsed() >= LANDS_AFTER);
                        if landed {
                            json!({"slot": 11, "confirmations": null, "err": null,
                                "status": {"Ok": null}, "confirmationStatus": "finalized"})
                        } else {
                            Value::Null
                        }
                    })
                    .collect();
                json!({"context": context, "value": statuses})
            }
            other => panic!("unexpected call {other}"),
        }
    })
    .await;

    const SENDS: usize = 16;
    let client = ChainClient::new(&url);
    let payer = Arc::new(Keypair::new());
    let sends = (0..SENDS).map(|_| {
        let (client, payer) = (client.clone(), payer.clone());
        tokio::spawn(async move {
            let ix = Instruction::new_with_bytes(Pubkey::new_unique(), b"x", vec![]);
            client.send(&[ix], &[&payer]).await
        })
    });
    for send in futures_util::future::join_all(sends).await {
        send.unwrap().unwrap();
    }

    assert_eq!(sent.lock().unwrap().len(), SENDS);
    let polls = polls.lock().unwrap();
    let asked: usize = polls.iter().sum();
    // Each waited about LANDS_AFTER, polling every 5 ms: asked separately,
    // one signature a call; together, most of them in each call.
    assert!(
        asked > 4 * polls.len(),
        "{} calls asked about {asked} signatures: {polls:?}",
        polls.len()
    );
    assert!(polls.iter().any(|&n| n >= SENDS / 2), "{polls:?}");
}

fn bs58(bytes: &[u8]) -> String {
    mcjs_client::Signature::try_from(bytes).unwrap().to_string()
}
