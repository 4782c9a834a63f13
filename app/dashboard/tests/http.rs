//! The dashboard served over a real local chain: its JSON equals what the
//! chain client reads, the audit badge is computed live, hostile input is
//! refused cleanly and hostile chain strings are escaped.

mod common;

use anchor_lang::AccountSerialize;
use common::Story;
use mcjs::state::FailureCause;
use mcjs_client::history::failure_cause;
use mcjs_client::{JobFilter, Keypair, Pubkey, Signer, pda};
use reqwest::StatusCode;
use reqwest::header::ACCEPT;
use serde_json::Value;

async fn json(url: &str) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .get(url)
        .header(ACCEPT, "application/json")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{url}: {e}: {body}"));
    (status, value)
}

async fn html(url: &str) -> (StatusCode, String) {
    let response = reqwest::Client::new()
        .get(url)
        .header(ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_shows_what_the_chain_holds_and_catches_a_tampered_chain() {
    let story = Story::build().await;
    let client = &story.client;
    let (_, config) = client.config().await.unwrap();

    // Overview: counts and balances equal the chain's.
    let (status, overview) = json(&story.url("/")).await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    assert_eq!(overview["jobs_total"], 3);
    let by_state = |name: &str| {
        overview["jobs_by_state"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["count"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        [
            by_state("completed"),
            by_state("failed"),
            by_state("cancelled")
        ],
        [1, 1, 1]
    );
    assert_eq!(overview["queue_length"], 0);
    assert_eq!(overview["providers_total"], 1);
    assert_eq!(overview["nodes_total"], 2);
    let treasury = client.token_balance(&config.treasury).await.unwrap();
    assert!(treasury > 0, "the story pays commission");
    assert_eq!(overview["commission_collected"], treasury);
    let pool = client.token_balance(&config.insurance_pool).await.unwrap();
    let provider = client.provider(&story.provider).await.unwrap().unwrap();
    assert!(
        provider.slashed_total > 0,
        "the lost node slashes its provider"
    );
    assert_eq!(overview["insurance_pool_balance"], pool);
    assert_eq!(overview["slashed_total"], provider.slashed_total);
    assert_eq!(
        overview["slashes"][0]["reported_by"],
        story.scheduler.pubkey().to_string()
    );
    let now = overview["timeline"]["samples"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(now["counts"]["completed"], 1, "{now}");
    assert_eq!(now["counts"]["failed"], 1, "{now}");
    assert_eq!(now["counts"]["cancelled"], 1, "{now}");

    // The completion rate over the last 60 days of chain time: the recovered
    // job completed and the fatal one failed; the cancelled one is counted
    // apart. One of two: under the 80% line.
    let completion = &overview["completion"];
    assert_eq!(completion["window_secs"], 60 * 86_400, "{completion}");
    assert_eq!(completion["to"], overview["chain_time"], "{completion}");
    assert_eq!(
        ["completed", "failed", "cancelled", "expired"].map(|end| completion[end].as_u64()),
        [Some(1), Some(1), Some(1), Some(0)],
        "{completion}"
    );
    assert_eq!(completion["ended"], 2, "{completion}");
    assert_eq!(completion["rate"], 0.5, "{completion}");
    assert_eq!(completion["line"], 0.8, "{completion}");
    assert_eq!(completion["meets_line"], false, "{completion}");
    let (status, page) = html(&story.url("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("<strong id=\"completion-rate\">50.0%</strong>"),
        "{page}"
    );
    assert!(page.contains("below the 80% line"), "{page}");
    let (status, week) = json(&story.url("/?window_days=7")).await;
    assert_eq!(status, StatusCode::OK, "{week}");
    assert_eq!(week["completion"]["window_secs"], 7 * 86_400);
    assert_eq!(week["completion"]["ended"], 2, "every end is minutes old");

    // The recovered job: bond flow, checkpoints, nodes, failure, output.
    let job = client.job(&story.recovered).await.unwrap().unwrap();
    let (status, page) = json(&story.url(&format!("/job/{}", story.recovered))).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["state"], "completed");
    let flow = &page["bond_flow"];
    let paid = flow["paid_total"].as_u64().unwrap();
    let commission = flow["commission"].as_u64().unwrap();
    assert!(paid > 0 && commission > 0, "{flow}");
    assert_eq!(paid + commission, job.paid, "{flow}");
    assert_eq!(flow["locked"], 10 * mcjs_localnet::USDC);
    assert_eq!(
        flow["locked"].as_u64().unwrap(),
        job.paid + flow["refund"].as_u64().unwrap(),
        "what was locked was paid or refunded: {flow}"
    );
    assert_eq!(
        flow["paid_to_providers"][0]["provider"],
        story.provider.to_string()
    );
    assert_eq!(flow["paid_to_providers"][0]["segments"], 2);
    assert_eq!(page["audit"]["verified"], true, "{}", page["audit"]);
    let checkpoints = page["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 3);
    assert!(checkpoints.iter().all(|c| c["status"] == "verified"));
    assert_eq!(
        checkpoints[1]["generation"],
        page["placements"][1]["generation"]
    );
    assert_eq!(checkpoints[2]["hash"], hex::encode([30u8; 32]));
    assert_eq!(
        page["audit"]["on_chain_commitment"],
        hex::encode(job.checkpoint_chain)
    );
    let placements: Vec<&Value> = page["placements"].as_array().unwrap().iter().collect();
    assert_eq!(placements.len(), 2);
    assert_eq!(placements[0]["node"], story.nodes[0].to_string());
    assert_eq!(placements[1]["node"], story.nodes[1].to_string());
    assert_eq!(
        page["failures"][0]["cause"],
        failure_cause(FailureCause::NodeLost)
    );
    assert_eq!(
        page["failures"][0]["reported_by"],
        story.scheduler.pubkey().to_string()
    );
    assert_eq!(page["output_hash"], hex::encode(story.output_hash));
    let events = page["events"].as_array().unwrap();
    assert_eq!(events[0]["event"], "JobSubmitted");
    assert_eq!(events[0]["signers"][0], story.user.pubkey().to_string());
    assert!(
        events
            .iter()
            .all(|e| e["slot"].as_u64().unwrap() > 0 && e["signature"].is_string())
    );

    // The failed and cancelled jobs refund what was left.
    let (_, failed) = json(&story.url(&format!("/job/{}", story.failed))).await;
    assert_eq!(failed["state"], "failed");
    assert_eq!(
        failed["failures"][0]["cause"],
        failure_cause(FailureCause::JobFatal)
    );
    assert_eq!(failed["failures"][0]["slashed"], 0);
    let (_, cancelled) = json(&story.url(&format!("/job/{}", story.cancelled))).await;
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(cancelled["bond_flow"]["refund"], 10 * mcjs_localnet::USDC);

    // Provider, node, program.
    let (_, page) = json(&story.url(&format!("/provider/{}", story.provider))).await;
    assert_eq!(page["stake"], provider.stake);
    assert_eq!(page["jobs_completed"], provider.jobs_completed);
    assert_eq!(page["failures"], provider.failures);
    assert_eq!(page["slashes"].as_array().unwrap().len(), 1);
    assert_eq!(
        page["slashes"][0]["reported_by"],
        story.scheduler.pubkey().to_string()
    );
    assert_eq!(
        page["slashes"][0]["slashed_to"],
        config.insurance_pool.to_string()
    );
    assert_eq!(page["nodes"].as_array().unwrap().len(), 2);
    // The reliability record, from the provider's history: three
    // assignments, one lost with its node, one completed, one that failed by
    // its own fault (not held against the provider).
    let record = &page["reliability"];
    assert_eq!(record["assignments"], 3);
    assert_eq!(record["completed"], provider.jobs_completed);
    assert_eq!(
        record["provider_failures"], provider.failures,
        "the story's only slash is the lost node's"
    );
    assert_eq!(record["job_faults"], 1);
    assert_eq!(record["failures_by_cause"]["node_lost"], 1);
    assert_eq!(record["failures_by_cause"]["job_fatal"], 1);
    assert_eq!(record["open"], 0);
    assert_eq!(record["completed_share"], 0.5);
    assert!(
        record["seconds_in_service"].as_u64().unwrap() >= 900,
        "the clock was moved 300 s on node 0 and 600 s on node 1: {record}"
    );
    let seconds = record["seconds_in_service"].as_f64().unwrap();
    assert!(
        (record["failures_per_100_hours"].as_f64().unwrap() - 360_000.0 / seconds).abs() < 1e-9,
        "one failure in its hours in service: {record}"
    );
    let node_record = |node: &Pubkey| {
        page["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["key"] == node.to_string())
            .expect("the node's row")["reliability"]
            .clone()
    };
    assert_eq!(node_record(&story.nodes[0])["completed_share"], 0.0);
    assert_eq!(
        node_record(&story.nodes[1])["completed_share"],
        1.0,
        "the job's fatal error is not held against node 1"
    );
    assert_eq!(node_record(&story.nodes[1])["job_faults"], 1);
    let (status, html_page) = html(&story.url(&format!("/provider/{}", story.provider))).await;
    assert_eq!(status, StatusCode::OK);
    let shown = &html_page[html_page.find("id=\"reliability\"").expect("the record")..];
    assert!(
        shown.contains("<span class=\"assignments\">3</span>"),
        "{shown}"
    );
    assert!(
        shown.contains("<dd class=\"completed-share\">50.0%"),
        "{shown}"
    );
    let table = &html_page[html_page.find("id=\"nodes\"").expect("the nodes")..];
    assert!(table.contains("share completed"), "{table}");
    assert!(
        table.contains("100.0%") && table.contains("0.0%"),
        "{table}"
    );
    let (_, by_wallet) =
        json(&story.url(&format!("/provider/{}", story.provider_owner.pubkey()))).await;
    assert_eq!(
        by_wallet["key"],
        story.provider.to_string(),
        "a provider is found by its owner's wallet"
    );

    let node = client.node(&story.nodes[0]).await.unwrap().unwrap();
    let (_, page) = json(&story.url(&format!("/node/{}", story.nodes[0]))).await;
    assert_eq!(page["operator"], story.operators[0].pubkey().to_string());
    assert_eq!(page["price_per_gpu_hour"], node.price_per_gpu_hour);
    assert_eq!(page["hardware"]["gpu_model"], "rtx-6000");
    assert_eq!(page["readiness"], 80);
    assert_eq!(page["reliability"], node_record(&story.nodes[0]));
    assert_eq!(page["reliability"]["provider_failures"], 1);

    let (_, page) = json(&story.url("/program")).await;
    assert_eq!(page["admin"], config.admin.to_string());
    assert_eq!(page["scheduler"], config.scheduler.to_string());
    assert_eq!(page["insurance_pool"], config.insurance_pool.to_string());
    assert_eq!(page["commission_bps"], config.params.commission_bps);
    assert_eq!(page["slash_amount"], config.params.slash_amount);
    assert_eq!(page["program_id"], mcjs_client::PROGRAM_ID.to_string());

    // Search finds every kind of address.
    for (address, path) in [
        (
            story.recovered.to_string(),
            format!("/job/{}", story.recovered),
        ),
        (
            story.provider.to_string(),
            format!("/provider/{}", story.provider),
        ),
        (
            story.provider_owner.pubkey().to_string(),
            format!("/provider/{}", story.provider_owner.pubkey()),
        ),
        (
            story.nodes[1].to_string(),
            format!("/node/{}", story.nodes[1]),
        ),
        (mcjs_client::PROGRAM_ID.to_string(), "/program".to_string()),
    ] {
        let (status, found) = json(&story.url(&format!("/search?q={address}"))).await;
        assert_eq!(status, StatusCode::OK, "{found}");
        assert_eq!(found["url"], path);
    }

    // Hostile and unknown addresses: 400 and 404 with a message, in both forms.
    let stranger = Keypair::new().pubkey();
    for (path, expected) in [
        ("/job/not-an-address".to_string(), StatusCode::BAD_REQUEST),
        (
            format!("/job/{}", "1".repeat(5_000)),
            StatusCode::BAD_REQUEST,
        ),
        ("/node/%3Cscript%3E".to_string(), StatusCode::BAD_REQUEST),
        ("/search?q=".to_string(), StatusCode::BAD_REQUEST),
        ("/live?watch=zz".to_string(), StatusCode::BAD_REQUEST),
        ("/?window_days=0".to_string(), StatusCode::BAD_REQUEST),
        ("/?window_days=%3Cb%3E".to_string(), StatusCode::BAD_REQUEST),
        (format!("/job/{stranger}"), StatusCode::NOT_FOUND),
        (format!("/provider/{stranger}"), StatusCode::NOT_FOUND),
        (format!("/node/{}", story.recovered), StatusCode::NOT_FOUND),
        (format!("/job/{}", story.nodes[0]), StatusCode::NOT_FOUND),
        (format!("/search?q={stranger}"), StatusCode::NOT_FOUND),
        // An address with a long history that is none of MCJS's: a page of
        // it is read, not the whole of it.
        (
            "/search?q=TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA".to_string(),
            StatusCode::NOT_FOUND,
        ),
        ("/no/such/page".to_string(), StatusCode::NOT_FOUND),
    ] {
        let (status, body) = json(&story.url(&path)).await;
        assert_eq!(status, expected, "{path}: {body}");
        assert!(
            !body["error"].as_str().unwrap().is_empty(),
            "{path}: {body}"
        );
        let (status, page) = html(&story.url(&path)).await;
        assert_eq!(status, expected, "{path}");
        assert!(page.contains("id=\"error-message\""), "{path}: {page}");
    }
    let (_, page) = html(&story.url("/search?q=%3Cimg%20src=x%20onerror=alert(1)%3E")).await;
    assert!(!page.contains("<img src=x"), "{page}");
    assert!(
        page.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{page}"
    );

    // HTML pages render, and the job page's badge says verified.
    let (status, page) = html(&story.url(&format!("/job/{}", story.recovered))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains(r#"id="audit-badge">verified<"#), "{page}");

    // Live updates: a stream of server-sent events.
    let mut live = reqwest::get(story.url(&format!("/live?watch={}", story.recovered)))
        .await
        .unwrap();
    assert_eq!(
        live.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), live.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&first).starts_with("data: "),
        "{first:?}"
    );
    drop(live);

    // At most MAX_LIVE_STREAMS live pages at once; one more is refused with
    // 503, and a place comes back when a page goes. Each page from its own
    // loopback address: one address holds only MAX_LIVE_STREAMS_PER_PEER.
    let mut open = Vec::new();
    let refused = loop {
        let i = open.len();
        let from = reqwest::Client::builder()
            .local_address(Some(std::net::IpAddr::from([
                127,
                0,
                3 + (i / 250) as u8,
                (i % 250) as u8 + 1,
            ])))
            .build()
            .unwrap();
        let response = from.get(story.url("/live")).send().await.unwrap();
        if response.status() != StatusCode::OK {
            break response.status();
        }
        open.push(response);
        assert!(
            open.len() <= mcjs_dashboard::MAX_LIVE_STREAMS,
            "more live pages than the cap"
        );
    };
    assert_eq!(refused, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        open.len() + 1 >= mcjs_dashboard::MAX_LIVE_STREAMS,
        "refused after only {} live pages",
        open.len()
    );
    drop(open);
    let again = async {
        loop {
            let r = reqwest::get(story.url("/live")).await.unwrap();
            if r.status() == StatusCode::OK {
                return r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    let again = tokio::time::timeout(std::time::Duration::from_secs(30), again)
        .await
        .expect("a live page is served again once the others are gone");
    drop(again);

    // Tampering with the job's commitment flips the badge, computed live.
    let account = client.account(&story.recovered).await.unwrap().unwrap();
    let mut data = account.data.clone();
    let at = data
        .windows(32)
        .position(|w| w == job.checkpoint_chain)
        .expect("the chain is in the account data");
    data[at] ^= 0xff;
    client
        .surfnet_set_account_data(&story.recovered, &data)
        .await
        .unwrap();
    let (_, page) = json(&story.url(&format!("/job/{}", story.recovered))).await;
    assert_eq!(page["audit"]["verified"], false);
    assert_eq!(page["audit"]["divergence_detail"]["kind"], "commitment");
    let (_, page) = html(&story.url(&format!("/job/{}", story.recovered))).await;
    assert!(page.contains(r#"id="audit-badge">not verified<"#), "{page}");
    assert!(page.contains("the Job account commits to chain"), "{page}");

    // A hostile string in a chain account is shown as text, never as markup.
    let mut node = client.node(&story.nodes[1]).await.unwrap().unwrap();
    let original = client
        .account(&story.nodes[1])
        .await
        .unwrap()
        .unwrap()
        .data
        .len();
    node.hardware.gpu_model = "<script>alert(1)</script>".into();
    let mut data = Vec::new();
    node.try_serialize(&mut data).unwrap();
    data.resize(data.len().max(original), 0);
    client
        .surfnet_set_account_data(&story.nodes[1], &data)
        .await
        .unwrap();
    for path in [
        format!("/node/{}", story.nodes[1]),
        "/".to_string(),
        format!("/provider/{}", story.provider),
    ] {
        let (status, page) = html(&story.url(&path)).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(!page.contains("<script>alert(1)"), "{path}: {page}");
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
            "{path}: {page}"
        );
    }

    // Nothing here wrote to the chain but the test's own tampering.
    assert_eq!(client.jobs(JobFilter::All).await.unwrap().len(), 3);
    assert!(
        client
            .provider(&pda::provider(&stranger))
            .await
            .unwrap()
            .is_none()
    );
    story.localnet.stop();
}
