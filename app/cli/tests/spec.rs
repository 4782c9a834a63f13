//! `mcjs spec` run as a user runs it: the built binary, real files, exit codes.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs")
}

fn mcjs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args(args)
        .output()
        .expect("mcjs runs")
}

fn path(rel: &str) -> String {
    examples().join(rel).to_string_lossy().into_owned()
}

const NOW: &str = "2030-01-01T00:00:00Z";

#[test]
fn validate_exits_0_when_every_file_is_valid() {
    let files = [
        "training-a100.json",
        "bulk-inference.json",
        "footage-processing.json",
        "simulation-sweep.json",
    ];
    let mut args = vec!["spec", "validate", "--now", NOW];
    let paths: Vec<String> = files.iter().map(|f| path(f)).collect();
    args.extend(paths.iter().map(String::as_str));
    let out = mcjs(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches(": valid (sha256 ").count(), 4, "{stdout}");
}

#[test]
fn validate_exits_1_and_lists_every_error_of_every_file() {
    let out = mcjs(&[
        "spec",
        "validate",
        "--now",
        NOW,
        &path("bulk-inference.json"),
        &path("invalid/structural-errors.json"),
        &path("invalid/zero-gpus-with-vram.json"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("structural-errors.json: invalid, 9 errors"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  /work/comand: unknown field \"comand\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("zero-gpus-with-vram.json: invalid, 2 errors"),
        "{stdout}"
    );
    assert!(stdout.contains("bulk-inference.json: valid"), "{stdout}");
}

#[test]
fn validate_exits_2_when_a_file_cannot_be_read() {
    let out = mcjs(&[
        "spec",
        "validate",
        "--now",
        NOW,
        &path("bulk-inference.json"),
        &path("invalid/structural-errors.json"),
        "/nonexistent/spec.json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("/nonexistent/spec.json: unreadable"),
        "{stdout}"
    );
}

#[test]
fn validate_reports_json_with_paths_and_messages() {
    let out = mcjs(&[
        "--output",
        "json",
        "spec",
        "validate",
        "--now",
        NOW,
        &path("invalid/semantic-mix.json"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("json output");
    let file = &report["files"][0];
    assert_eq!(file["status"], "invalid");
    let errors = file["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 9);
    assert_eq!(errors[0]["path"], "/work/env/1BAD");
    assert!(errors[0]["message"].as_str().unwrap().contains("not valid"));
}

#[test]
fn deadlines_are_judged_against_now() {
    let file = path("training-a100.json"); // deadline 2031-06-30, limit 5d
    assert_eq!(
        mcjs(&["spec", "validate", "--now", "2031-06-24T00:00:00Z", &file])
            .status
            .code(),
        Some(0)
    );
    let late = mcjs(&["spec", "validate", "--now", "2031-06-26T00:00:00Z", &file]);
    assert_eq!(late.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&late.stdout).contains("/request/deadline"));
}

#[test]
fn hash_prints_the_sha256_of_the_canonical_form() {
    let file = path("bulk-inference.json");
    let out = mcjs(&["spec", "hash", "--canonical", &file]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let (hash, canonical) = stdout.trim_end().split_once('\n').unwrap();
    assert_eq!(hash, hex::encode(Sha256::digest(canonical.as_bytes())));
    // Reformatting the file does not change the hash.
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let reformatted =
        std::env::temp_dir().join(format!("mcjs-spec-hash-{}.json", std::process::id()));
    std::fs::write(&reformatted, serde_json::to_string(&value).unwrap()).unwrap();
    let again = mcjs(&["spec", "hash", reformatted.to_str().unwrap()]);
    std::fs::remove_file(&reformatted).unwrap();
    assert_eq!(String::from_utf8(again.stdout).unwrap().trim(), hash);
}

#[test]
fn hash_as_json_and_of_an_invalid_spec() {
    let out = mcjs(&[
        "--output",
        "json",
        "spec",
        "hash",
        &path("simulation-sweep.json"),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["sha256"].as_str().unwrap().len(), 64);
    let bad = mcjs(&[
        "spec",
        "hash",
        &path("invalid/unpinned-image-and-bad-hashes.json"),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("not pinned by digest"));
    assert_eq!(
        mcjs(&["spec", "hash", "/nonexistent/spec.json"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn schema_prints_the_committed_schema() {
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../orchestrator/spec/schema/job-spec.v1.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    for args in [
        &["spec", "schema"][..],
        &["--output", "json", "spec", "schema"][..],
    ] {
        let out = mcjs(args);
        assert_eq!(out.status.code(), Some(0));
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(printed, committed);
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(mcjs(&["spec", "validate"]).status.code(), Some(2));
    assert_eq!(
        mcjs(&[
            "spec",
            "validate",
            "--now",
            "yesterday",
            &path("bulk-inference.json")
        ])
        .status
        .code(),
        Some(2)
    );
}
