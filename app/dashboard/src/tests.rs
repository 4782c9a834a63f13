//! The pages rendered from fixed data: what each shows and how.

use super::*;

#[test]
fn the_error_page_renders() {
    let env = templates();
    let html = env
        .get_template("error.html")
        .and_then(|t| {
            t.render(context! { title => "Bad Request", status => 400, message => "<b>", watch => None::<&str> })
        })
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(html.contains("&lt;b&gt;"), "{html}");
}

/// A closed job whose second interval was proven wrong: the job page
/// lists both checks, their answers and what the wrong one cost.
#[test]
fn the_job_page_lists_verified_intervals() {
    use mcjs::events::{VerificationAttested, VerificationOpened, VerificationResolved};
    use mcjs::state::{VerificationOutcome, VerificationState};
    use mcjs_client::Pubkey;
    use mcjs_client::history::{HistoryEntry, McjsEvent};
    let key = |n: u8| Pubkey::new_from_array([n; 32]);
    let (job, provider, verifier, referee) = (key(1), key(2), key(3), key(4));
    let entry = |slot, event| HistoryEntry {
        signature: format!("sig{slot}"),
        slot,
        block_time: None,
        signers: vec![key(9)],
        event,
    };
    let opened = |interval, to_step| VerificationOpened {
        job,
        verification: key(10 + interval as u8),
        interval,
        provider,
        from_step: (interval > 1).then_some(64),
        to_step,
        claimed_hash: [5; 32],
        verifier_node: verifier,
        referee_node: referee,
        draw_slot: 1,
        at: 0,
    };
    let answer = |interval, node, hash, state| VerificationAttested {
        job,
        verification: key(10 + interval as u8),
        interval,
        node,
        answer: mcjs::instructions::CheckerStep::Reveal {
            answer: mcjs::state::CheckAnswer::Reproduced {
                hash,
                possession: [7; 32],
            },
            salt: [0; 32],
        },
        state,
        at: 0,
    };
    let resolved = |interval, outcome, slashed, refund| VerificationResolved {
        job,
        verification: key(10 + interval as u8),
        interval,
        outcome,
        slashed_provider: (slashed > 0).then_some(provider),
        slashed,
        fees: 0,
        refund,
        rolled_back: slashed > 0,
        restore_point: None,
        by: key(9),
        at: 0,
    };
    let confirmed = VerificationOutcome::Confirmed;
    let wrong = VerificationOutcome::ProviderWrong;
    let history = vec![
        entry(1, McjsEvent::VerificationOpened(opened(1, 64))),
        entry(
            2,
            McjsEvent::VerificationAttested(answer(
                1,
                verifier,
                [5; 32],
                VerificationState::Decided { outcome: confirmed },
            )),
        ),
        entry(
            3,
            McjsEvent::VerificationResolved(resolved(1, confirmed, 0, 0)),
        ),
        entry(4, McjsEvent::VerificationOpened(opened(2, 128))),
        entry(
            5,
            McjsEvent::VerificationAttested(answer(
                2,
                verifier,
                [6; 32],
                VerificationState::Revealing,
            )),
        ),
        entry(
            6,
            McjsEvent::VerificationAttested(answer(
                2,
                referee,
                [6; 32],
                VerificationState::Decided { outcome: wrong },
            )),
        ),
        entry(
            7,
            McjsEvent::VerificationResolved(resolved(2, wrong, 5_000_000, 3_000_000)),
        ),
    ];
    let view = data::job_view(&job, None, &history);
    assert_eq!(view.verifications.len(), 2);
    assert_eq!(
        view.bond_flow.refund, 3_000_000,
        "the wrong segment went back to the owner"
    );
    let html = templates()
        .get_template("job.html")
        .and_then(|t| {
            t.render(context! {
                page => Value::from_serialize(&view),
                title => "Job",
                watch => None::<&str>,
                extra => Value::UNDEFINED,
            })
        })
        .unwrap_or_else(|e| panic!("{e:#}"));
    let table = &html[html.find("id=\"verifications\"").expect("the table")..];
    assert!(table.contains("confirmed"), "{table}");
    assert!(table.contains("proven wrong"), "{table}");
    assert!(table.contains("differs, differs"), "{table}");
    assert!(table.contains("step 64"), "{table}");
}

/// The node page shows the record computed from the node's history:
/// a lost job and a completed one in 4 hours holding jobs: 25 failures
/// per 100 hours, half of them completed.
#[test]
fn the_node_page_shows_its_reliability_record_or_no_history() {
    use mcjs::events::{FailureReported, JobAssigned, JobCompleted};
    use mcjs::state::FailureCause;
    use mcjs_client::Pubkey;
    use mcjs_client::history::{HistoryEntry, McjsEvent};
    use mcjs_ledger::reliability::{Reliability, node_reliability};
    let key = |n: u8| Pubkey::new_from_array([n; 32]);
    let node = key(2);
    let entry = |slot, event| HistoryEntry {
        signature: format!("sig{slot}"),
        slot,
        block_time: None,
        signers: vec![key(9)],
        event,
    };
    let assigned = |job, at| JobAssigned {
        job: key(job),
        node,
        provider: key(3),
        generation: 1,
        rate_per_hour: 1,
        by: key(9),
        at,
    };
    let history = vec![
        entry(1, McjsEvent::JobAssigned(assigned(1, 0))),
        entry(
            2,
            McjsEvent::FailureReported(FailureReported {
                job: key(1),
                node,
                provider: key(3),
                failed_generation: 1,
                cause: FailureCause::NodeLost,
                slashed: 5,
                slashed_to: key(6),
                restarts_used: 1,
                job_failed: false,
                refund: 0,
                by: key(9),
                at: 7_200,
            }),
        ),
        entry(3, McjsEvent::JobAssigned(assigned(4, 7_200))),
        entry(
            4,
            McjsEvent::JobCompleted(JobCompleted {
                job: key(4),
                node,
                generation: 1,
                output_hash: [1; 32],
                refund: 0,
                by: key(8),
                at: 14_400,
            }),
        ),
    ];
    let page = |reliability: Reliability| data::NodeView {
        key: node.to_string(),
        provider: key(3).to_string(),
        index: 0,
        operator: key(5).to_string(),
        hardware: data::Hardware {
            gpu_model: "a100-sxm4-80gb".into(),
            gpu_count: 1,
            vram_per_gpu_mib: 81_920,
            compute_capability: 80,
            cpu_cores: 16,
            ram_mib: 65_536,
            disk_gib: 500,
            checkpoint_write_mibps: 1_000,
        },
        readiness: 90,
        price_per_gpu_hour: 1,
        status: "available",
        status_since: 0,
        current_job: None,
        failures: 2,
        service_secs: 36_000,
        hardware_proof: data::hardware_proof(&mcjs::state::ChallengeRecord {
            proven: Some(mcjs::state::ProvenHardware {
                gpu_count: 1,
                vram_per_gpu_mib: 81_920,
                held_kib_per_gpu: 70_000_000,
                memory_shift: 0,
                commit_secs: 9,
                held_secs: 6,
                at: 1_800,
                attestation: None,
            }),
            last: Some(mcjs::state::ChallengeResult::Passed),
            ..Default::default()
        }),
        held_kib_per_gpu: Some(70_000_000),
        reliability,
    };
    let render = |view: data::NodeView| {
        templates()
            .get_template("node.html")
            .and_then(|t| {
                t.render(context! {
                    page => Value::from_serialize(&view),
                    title => "Node",
                    watch => None::<&str>,
                    extra => Value::UNDEFINED,
                })
            })
            .unwrap_or_else(|e| panic!("{e:#}"))
    };
    let html = render(page(node_reliability(&node, &history, 20_000)));
    assert!(
        html.contains("2 provider failures in 10.0 h holding jobs"),
        "the program's own record: {html}"
    );
    assert!(
        html.contains("proven by a hardware challenge at 1800 (70000000 KiB held per GPU)"),
        "the hardware proof: {html}"
    );
    let failed = mcjs::state::ChallengeRecord {
        last: Some(mcjs::state::ChallengeResult::Failed(
            mcjs::state::ChallengeFailure::Late,
        )),
        ..Default::default()
    };
    assert_eq!(
        data::hardware_proof(&failed),
        "failed its hardware challenge (Late): the lowest class"
    );
    let record = &html[html.find("id=\"reliability\"").expect("the record")..];
    assert!(
        record.contains("<span class=\"assignments\">2</span>"),
        "{record}"
    );
    assert!(record.contains("node_lost 1"), "{record}");
    assert!(
        record.contains("<span class=\"hours\">4.0</span>"),
        "{record}"
    );
    assert!(
        record.contains("<dd class=\"failure-rate\">25.00</dd>"),
        "{record}"
    );
    assert!(record.contains("50.0%"), "{record}");

    let html = render(page(node_reliability(&node, &[], 20_000)));
    let record = &html[html.find("id=\"reliability\"").expect("the record")..];
    assert!(record.contains("No history"), "{record}");
    assert!(!record.contains('%'), "no share without history: {record}");
}

/// The overview's completion rate: the figure, the counts, and which
/// side of the 80% line it is on; "no job has ended" with no rate.
#[test]
fn the_overview_shows_the_completion_rate_against_its_line() {
    use mcjs_ledger::completion::{CompletionRate, JobEnd};
    const DAY: i64 = 86_400;
    let now = 1_800_000_000;
    let overview = |ends: &[(JobEnd, i64)]| data::Overview {
        program_id: "program".into(),
        chain_time: now,
        jobs_total: ends.len(),
        jobs_by_state: vec![],
        queue_length: 0,
        providers_total: 0,
        nodes_total: 0,
        nodes_by_status: vec![],
        commission_collected: 0,
        treasury: "treasury".into(),
        slashes: vec![],
        slashed_total: 0,
        insurance_pool: "pool".into(),
        insurance_pool_balance: 0,
        jobs: vec![],
        providers: vec![],
        nodes: vec![],
        timeline: chart::jobs_by_state(&[], now),
        completion: CompletionRate::over(ends, now, 60 * DAY),
    };
    let render = |o: &data::Overview| {
        templates()
            .get_template("overview.html")
            .and_then(|t| {
                t.render(context! {
                    page => Value::from_serialize(o),
                    title => "Overview",
                    watch => None::<&str>,
                    extra => context! {
                        chart => "",
                        colours => Vec::<(&str, &str)>::new(),
                        completion_chart => Value::from_safe_string(chart::completion_svg(&o.completion)),
                        window_days => 60,
                    },
                })
            })
            .unwrap_or_else(|e| panic!("{e:#}"))
    };
    let ended = [
        (JobEnd::Completed, now - DAY),
        (JobEnd::Failed, now - DAY),
        (JobEnd::Cancelled, now - DAY),
        (JobEnd::Expired, now - 2 * DAY),
        (JobEnd::Failed, now - 90 * DAY),
    ];
    let html = render(&overview(&ended));
    let card = &html[html.find("id=\"completion\"").expect("the card")..];
    assert!(card.contains("last 60 days"), "{card}");
    assert!(
        card.contains("<strong id=\"completion-rate\">50.0%</strong>"),
        "{card}"
    );
    assert!(card.contains("below the 80% line"), "{card}");
    assert!(card.contains("data-end=\"failed\">1<"), "{card}");
    assert!(card.contains("data-end=\"cancelled\">1<"), "{card}");
    assert!(card.contains("data-end=\"expired\">1<"), "{card}");
    assert!(
        card.contains("80% line</text>"),
        "the line is drawn: {card}"
    );

    let html = render(&overview(&[
        (JobEnd::Completed, now),
        (JobEnd::Completed, now),
    ]));
    assert!(html.contains("at or above the 80% line"), "{html}");

    let html = render(&overview(&[(JobEnd::Cancelled, now)]));
    let card = &html[html.find("id=\"completion\"").expect("the card")..];
    assert!(card.contains("No job has ended"), "{card}");
    assert!(
        !card.contains("class=\"rate\""),
        "no bar without a rate: {card}"
    );
}

#[test]
fn the_completion_window_is_whole_days_within_bounds() {
    assert_eq!(data::parse_window_days(None).unwrap(), 60);
    assert_eq!(data::parse_window_days(Some("7")).unwrap(), 7);
    for bad in ["0", "-1", "3651", "1.5", "", "<script>", &"9".repeat(100)] {
        assert!(
            matches!(
                data::parse_window_days(Some(bad)),
                Err(DashError::BadRequest(_))
            ),
            "{bad}"
        );
    }
}

#[test]
fn json_is_served_only_when_asked_for() {
    let mut headers = HeaderMap::new();
    assert!(!wants_json(&headers));
    headers.insert(
        header::ACCEPT,
        "text/html,application/xhtml+xml".parse().unwrap(),
    );
    assert!(!wants_json(&headers));
    headers.insert(header::ACCEPT, "application/json".parse().unwrap());
    assert!(wants_json(&headers));
}

#[test]
fn every_template_parses_and_escapes() {
    let env = templates();
    let html = env
        .render_str("{{ x }}", context! { x => "<script>\"&'" })
        .unwrap();
    assert_eq!(html, "&lt;script&gt;&quot;&amp;&#x27;");
}

#[test]
fn a_hostile_address_is_a_bad_request_not_a_panic() {
    for text in ["", "x", "0OIl", &"1".repeat(10_000), "<script>", "é"] {
        assert!(matches!(
            parse_address(text, "job"),
            Err(DashError::BadRequest(_))
        ));
    }
    assert!(parse_address("11111111111111111111111111111111", "job").is_ok());
}
