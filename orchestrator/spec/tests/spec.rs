//! Reading, validating, hashing and summarising whole specs.

use mcjs_spec::{JobSpec, canonical_json, spec_hash};
use serde_json::{Value, json};

const NOW: i64 = 1_893_456_000; // 2030-01-01T00:00:00Z

fn example(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../examples/specs/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn example_value(name: &str) -> Value {
    serde_json::from_str(&example(name)).unwrap()
}

fn hash_of(value: &Value) -> [u8; 32] {
    spec_hash(&JobSpec::from_value(value).unwrap())
}

/// Comments are read as blanks: the same spec, the same hash, a `//` inside a string (every
/// URI has one) kept, and an error after a comment still pointing at its line.
#[test]
fn comments_change_nothing_and_a_uri_keeps_its_slashes() {
    let text = example("bulk-inference.json");
    let spec = JobSpec::from_json(&text).unwrap();
    let commented = format!(
        "// what to run\n/* several\n   lines */\n{}",
        text.replacen(
            "\"version\": 1,",
            "\"version\": 1, // the spec's version\n  /* the work */",
            1
        )
    );
    let read = JobSpec::from_json(&commented).unwrap();
    assert_eq!(spec_hash(&read), spec_hash(&spec));
    assert!(canonical_json(&read).contains("https://huggingface.co/openai"));
    let broken = commented.replacen("\"gpu_count\": 1", "\"gpu_count\": 1,,", 1);
    let line = broken
        .lines()
        .position(|l| l.contains("gpu_count"))
        .unwrap()
        + 1;
    let errors = JobSpec::from_json(&broken).unwrap_err().to_string();
    assert!(errors.contains(&format!("line {line}")), "{errors}");
}

#[test]
fn key_order_and_whitespace_do_not_change_the_hash() {
    let text = example("training-a100.json");
    let spec = JobSpec::from_json(&text).unwrap();
    // serde_json's Map is sorted, so compact re-serialisation reorders every key.
    let reordered = serde_json::to_string(&example_value("training-a100.json")).unwrap();
    assert_ne!(reordered, text);
    let respaced = text.replace(": ", " :\n\t ");
    assert_eq!(
        spec_hash(&JobSpec::from_json(&reordered).unwrap()),
        spec_hash(&spec)
    );
    assert_eq!(
        spec_hash(&JobSpec::from_json(&respaced).unwrap()),
        spec_hash(&spec)
    );
}

#[test]
fn equivalent_spellings_and_materialised_defaults_hash_the_same() {
    let original = example_value("bulk-inference.json");
    let mut spelled = original.clone();
    spelled["request"]["duration"]["limit"] = json!("1d12h");
    spelled["request"]["max_price_per_gpu_hour"] = json!("0.450000");
    spelled["request"]["hardware"]["min_vram_per_gpu"] = json!("20480MiB");
    spelled["request"]["hardware"]["gpu_models"][2] = json!("NVIDIA GeForce RTX 4090");
    spelled["work"]["env"] = json!({});
    spelled["checkpoint"]["keep"] = json!(2);
    spelled["checkpoint"]["signal"] = json!("SIGUSR1");
    spelled["output"]["dir"] = json!("/mcjs/output");
    assert_eq!(hash_of(&spelled), hash_of(&original));
}

#[test]
fn any_change_of_meaning_changes_the_hash() {
    let original = example_value("bulk-inference.json");
    let base = hash_of(&original);
    let changes: [(&str, Value); 6] = [
        ("/request/hardware/gpu_count", json!(2)),
        ("/request/max_price_per_gpu_hour", json!("0.46")),
        ("/checkpoint/restart_budget", json!(11)),
        ("/work/queue_tolerant", json!(true)), // unchanged: must hash the same
        ("/output/return_partial", json!(false)),
        ("/data/0/size", json!("2TiB")),
    ];
    for (pointer, value) in changes {
        let mut changed = original.clone();
        *changed.pointer_mut(pointer).unwrap() = value;
        if pointer == "/work/queue_tolerant" {
            assert_eq!(hash_of(&changed), base);
        } else {
            assert_ne!(
                hash_of(&changed),
                base,
                "changing {pointer} must change the hash"
            );
        }
    }
}

#[test]
fn canonical_form_is_sorted_compact_and_reads_back_to_the_same_spec() {
    let spec = JobSpec::from_json(&example("footage-processing.json")).unwrap();
    let canonical = canonical_json(&spec);
    assert!(canonical.starts_with("{\"checkpoint\":{\"interval\":\"20m\",\"keep\":3,"));
    assert!(!canonical.contains('\n'));
    assert_eq!(JobSpec::from_json(&canonical).unwrap(), spec);
    assert_eq!(
        canonical_json(&JobSpec::from_json(&canonical).unwrap()),
        canonical
    );
}

#[test]
fn serde_deserialize_accepts_exactly_what_from_json_accepts() {
    let text = example("simulation-sweep.json");
    assert_eq!(
        serde_json::from_str::<JobSpec>(&text).unwrap(),
        JobSpec::from_json(&text).unwrap()
    );
    let mut bad = example_value("simulation-sweep.json");
    bad["request"]["hardware"]["gpu_count"] = json!(0);
    let message = serde_json::from_value::<JobSpec>(bad)
        .unwrap_err()
        .to_string();
    assert!(message.contains("/request/hardware/gpu_count"), "{message}");
}

#[test]
fn requirement_summary_mirrors_the_on_chain_account() {
    let spec = JobSpec::from_json(&example("training-a100.json")).unwrap();
    let summary = spec.requirement_summary();
    assert_eq!(summary.gpu_count, 4);
    assert_eq!(summary.min_vram_mib, 81_920);
    assert_eq!(summary.min_compute_capability, 80);
    assert_eq!(summary.gpu_models, ["a100-sxm4-80gb", "a100-pcie-80gb"]);
    // 96 GiB = 98_304 MiB every 1_800 s: ceil(98_304 * 5 / 1_800) = ceil(273.07) = 274.
    assert_eq!(summary.min_checkpoint_write_mibps, 274);
}

#[test]
fn attested_hardware_is_asked_for_explicitly_and_carried_to_the_chain() {
    let spec = JobSpec::from_json(&example("training-a100.json")).unwrap();
    assert!(!spec.request.hardware.attested, "off unless asked");
    assert!(!spec.requirement_summary().attested);
    assert!(
        !canonical_json(&spec).contains("attested"),
        "false is left out"
    );

    let mut value = example_value("training-a100.json");
    value["request"]["hardware"]["attested"] = json!(true);
    let spec = JobSpec::from_value(&value).unwrap();
    assert!(spec.requirement_summary().attested);
    assert!(spec.hardware_request().attested);
    assert!(canonical_json(&spec).contains("\"attested\":true"));

    value["request"]["hardware"]["attested"] = json!("yes");
    let message = JobSpec::from_value(&value).unwrap_err().to_string();
    assert!(message.contains("/request/hardware/attested"), "{message}");
}

#[test]
fn terms_carry_time_money_and_restarts() {
    let spec = JobSpec::from_json(&example("training-a100.json")).unwrap();
    let terms = spec.terms();
    assert_eq!(terms.checkpoint_interval_secs, 1_800);
    assert_eq!(terms.max_duration_secs, 5 * 86_400);
    assert_eq!(terms.deadline_unix, Some(1_940_544_000)); // 2031-06-30T00:00:00Z
    assert_eq!(terms.max_price_per_gpu_hour, 1_800_000);
    assert_eq!(terms.restart_budget, 8);
    assert_eq!(terms.target_epochs, Some(3));
    let sweep = JobSpec::from_json(&example("simulation-sweep.json")).unwrap();
    // "+02:00" is normalised: 12:00 at +02:00 is 10:00Z.
    assert_eq!(sweep.terms().deadline_unix, Some(1_947_232_800));
    assert!(canonical_json(&sweep).contains("\"deadline\":\"2031-09-15T10:00:00Z\""));
}

#[test]
fn hardware_request_exposes_everything_the_scheduler_matches() {
    let spec = JobSpec::from_json(&example("footage-processing.json")).unwrap();
    let hw = spec.hardware_request();
    assert_eq!(hw.cpu_cores, 24);
    assert_eq!(hw.ram_mib, 65_536);
    assert_eq!(hw.disk_gib, 14 * 1024);
    assert_eq!(hw.min_driver_version.unwrap().components(), [470, 82]);
    assert_eq!(hw.min_cuda_version.unwrap().to_string(), "11.4");
    assert_eq!(hw.checkpoint_disk_bytes, 4 * 64 * 1024 * 1024);
}

#[test]
fn a_deadline_must_leave_room_for_the_whole_duration() {
    let mut value = example_value("bulk-inference.json"); // until done, limit 36h
    value["request"]["deadline"] = json!("2030-01-02T12:00:00Z"); // exactly 36h after NOW
    let spec = JobSpec::from_value(&value).unwrap();
    assert!(spec.validate(NOW).is_ok());
    let errors = spec.validate(NOW + 1).unwrap_err();
    assert!(
        errors.contains("/request/deadline", "could never finish in time"),
        "{errors}"
    );
    let errors = spec.validate(NOW + 36 * 3600).unwrap_err();
    assert!(
        errors.contains("/request/deadline", "in the past"),
        "{errors}"
    );
}

#[test]
fn structural_and_semantic_errors_come_together() {
    let mut value = example_value("bulk-inference.json");
    value["work"]["colour"] = json!("blue"); // unknown: reported, but the spec is still read
    value["checkpoint"]["interval"] = json!("2d"); // longer than the 36h limit
    value["request"]["deadline"] = json!("2029-01-01T00:00:00Z");
    let errors = JobSpec::from_json_validated(&value.to_string(), NOW).unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/work/colour", "/checkpoint/interval", "/request/deadline"],
        "{errors}"
    );
}

#[test]
fn the_checkpoint_disk_rule_counts_kept_checkpoints_plus_one() {
    let mut value = example_value("bulk-inference.json");
    value["request"]["hardware"]["disk"] = json!("30GiB");
    value["data"] = json!([]);
    value["checkpoint"]["max_size"] = json!("10GiB");
    value["checkpoint"]["keep"] = json!(2);
    assert!(
        JobSpec::from_value(&value).is_ok(),
        "3 × 10GiB fit in 30GiB"
    );
    value["checkpoint"]["keep"] = json!(3);
    let errors = JobSpec::from_value(&value).unwrap_err();
    assert!(
        errors.contains("/request/hardware/disk", "cannot hold 4 checkpoints"),
        "{errors}"
    );
}

#[test]
fn gpu_model_limits_are_enforced_for_the_chain() {
    let mut value = example_value("bulk-inference.json");
    value["request"]["hardware"]["gpu_models"] = json!(["x".repeat(33)]);
    let errors = JobSpec::from_value(&value).unwrap_err();
    assert!(
        errors.contains("/request/hardware/gpu_models/0", "at most 32 fit on chain"),
        "{errors}"
    );
    value["request"]["hardware"]["gpu_models"] = json!(["a100", "NVIDIA A100"]);
    let errors = JobSpec::from_value(&value).unwrap_err();
    assert!(
        errors.contains("/request/hardware/gpu_models/1", "listed twice"),
        "{errors}"
    );
}

#[test]
fn pointers_escape_slashes_and_tildes_in_keys() {
    let mut value = example_value("bulk-inference.json");
    value["work"]["env"] = json!({"A/B~C": "x"});
    let errors = JobSpec::from_value(&value).unwrap_err();
    assert!(
        errors.contains("/work/env/A~1B~0C", "not valid"),
        "{errors}"
    );
}

#[test]
fn a_document_that_is_not_an_object_gets_one_clear_error() {
    for text in ["[]", "42", "\"spec\"", "null"] {
        let errors = JobSpec::from_json(text).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(errors.contains("", "expected the job spec"), "{errors}");
    }
}

#[test]
fn verification_needs_a_bitwise_deterministic_job_and_a_rate_in_range() {
    let mut v = example_value("training-a100.json");
    let before = hash_of(&v);
    // Off by default, and an explicit "none" is the same spec.
    v["work"]["determinism"] = json!("none");
    assert_eq!(hash_of(&v), before);

    v["verification"] = json!({"sample_rate": 0.1});
    let errors = JobSpec::from_value(&v).unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("/verification") && e.to_string().contains("bitwise")),
        "{errors}"
    );

    v["work"]["determinism"] = json!("bitwise");
    // A check run must reach the attested step as the paid run did, without
    // being told: a verified job's checkpoint steps are fixed by its spec.
    let errors = JobSpec::from_value(&v).unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("/checkpoint/every_steps")),
        "{errors}"
    );
    for (bad, why) in [
        (json!(0), "every_steps is 0"),
        (json!("200"), "without quotes"),
        (json!(-5), "whole number"),
    ] {
        v["checkpoint"]["every_steps"] = bad.clone();
        let errors = JobSpec::from_value(&v).unwrap_err();
        assert!(errors.to_string().contains(why), "{bad}: {errors}");
    }
    v["checkpoint"]["every_steps"] = json!(200);
    let spec = JobSpec::from_value(&v).unwrap();
    assert_eq!(spec.checkpoint.every_steps, Some(200));
    assert!(
        canonical_json(&spec).contains(r#""every_steps":200"#),
        "{}",
        canonical_json(&spec)
    );
    assert_eq!(spec.verification.unwrap().sample_rate.ppm(), 100_000);
    let canonical = canonical_json(&spec);
    assert!(
        canonical.contains(r#""verification":{"sample_rate":0.1}"#),
        "{canonical}"
    );
    assert!(
        canonical.contains(r#""determinism":"bitwise""#),
        "{canonical}"
    );
    assert_eq!(
        JobSpec::from_json(&canonical).unwrap(),
        spec,
        "the canonical form reads back"
    );
    assert_ne!(hash_of(&v), before, "verification changes what was agreed");

    for (bad, why) in [
        (json!(0), "out of range"),
        (json!(1.5), "out of range"),
        (json!(-0.1), "out of range"),
        (json!("0.1"), "expected a number"),
        (json!(0.0000001), "out of range"),
        (json!(0.1234567), "6 decimal places"),
    ] {
        v["verification"] = json!({"sample_rate": bad});
        let errors = JobSpec::from_value(&v).unwrap_err();
        assert!(errors.to_string().contains(why), "{bad}: {errors}");
    }
    v["verification"] = json!({"sample_rate": 1, "who": "me"});
    assert!(
        JobSpec::from_value(&v).is_err(),
        "unknown fields are refused"
    );
    v["work"]["determinism"] = json!("mostly");
    assert!(
        JobSpec::from_value(&v)
            .unwrap_err()
            .to_string()
            .contains("determinism")
    );
}

/// `output.logs_cap` is what one run keeps of what the job prints: left out
/// of the canonical form when absent (every spec before it hashes as it
/// did), a change of meaning when given, and bounded.
#[test]
fn a_logs_cap_is_optional_bounded_and_hashed_when_given() {
    let original = example_value("training-a100.json");
    let base = hash_of(&original);
    let spec = JobSpec::from_value(&original).unwrap();
    assert_eq!(spec.output.logs_cap, None);
    assert!(!canonical_json(&spec).contains("logs_cap"));

    let mut capped = original.clone();
    capped["output"]["logs_cap"] = json!("256MiB");
    let spec = JobSpec::from_value(&capped).unwrap();
    assert_eq!(spec.output.logs_cap.map(|c| c.0), Some(256 << 20));
    assert_ne!(hash_of(&capped), base);

    for bad in ["512KiB", "2GiB"] {
        capped["output"]["logs_cap"] = json!(bad);
        let errors = JobSpec::from_value(&capped).unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.to_string().contains("/output/logs_cap")),
            "{bad}: {errors}"
        );
    }
}
