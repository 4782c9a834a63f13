//! `mcjs hal` run as a process.

mod common;
use common::fake_k80_nvml;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn mcjs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args(args)
        .env_remove("MCJS_NVML_LIB")
        .env_remove("MCJS_CHECKPOINT_DIR")
        .output()
        .expect("mcjs runs")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not json ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn probe_prints_the_profile_as_json_with_gpus_storage_and_score() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("checkpoints");
    std::fs::create_dir(&ck).unwrap();
    let lib = fake_k80_nvml(dir.path());
    let out = mcjs(&[
        "hal",
        "probe",
        "--checkpoint-dir",
        ck.to_str().unwrap(),
        "--sample-size",
        "8MiB",
        "--nvml-lib",
        lib.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = stdout_json(&out);
    let gpus = p["identity"]["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert!(
        gpus.iter().all(|g| g["model"] == "k80"
            && g["compute_capability"] == 37
            && g["vram_mib"] == 12288)
    );
    assert_eq!(
        p["platform"]["gpu_drivers"][0]["driver_version"],
        "470.256.02"
    );
    let write = &p["measurements"]["storage"]["write"];
    assert_eq!(write["bytes_per_sample"], 2 << 20);
    assert!(write["mean_mibps"].as_f64().unwrap() > 0.0);
    let score = p["readiness"]["score"].as_u64().unwrap();
    assert!(score <= 100);
    assert_eq!(
        std::fs::read_dir(&ck).unwrap().count(),
        0,
        "probe files left behind"
    );

    let human = mcjs(&[
        "hal",
        "probe",
        "--no-storage",
        "--nvml-lib",
        lib.to_str().unwrap(),
    ]);
    assert_eq!(human.status.code(), Some(0));
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("k80 [Tesla K80] 12288 MiB, compute 3.7"),
        "{text}"
    );
    assert!(text.contains("storage      not measured"));
}

#[test]
fn probe_without_nvml_reports_no_gpus_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libnvidia-ml.so.1");
    let out = mcjs(&[
        "hal",
        "probe",
        "--no-storage",
        "--nvml-lib",
        missing.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let p = stdout_json(&out);
    assert_eq!(p["identity"]["gpus"], serde_json::json!([]));
    let notes: Vec<&str> = p["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("cannot load the nvml library")),
        "{notes:?}"
    );
}

#[test]
fn check_answers_with_exit_codes_from_a_saved_profile() {
    let dir = tempfile::tempdir().unwrap();
    let out = mcjs(&[
        "hal",
        "probe",
        "--checkpoint-dir",
        dir.path().to_str().unwrap(),
        "--sample-size",
        "4MiB",
        "--samples",
        "2",
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let mut profile = stdout_json(&out);
    // Pin the measurement so the answer does not depend on this machine's disk.
    let storage = &mut profile["measurements"]["storage"];
    storage["free_bytes"] = (100u64 << 30).into();
    storage["write"]["samples_mibps"] = serde_json::json!([190.0, 210.0]);
    storage["write"]["mean_mibps"] = 200.0.into();
    storage["write"]["cov"] = 0.05.into();
    let saved = dir.path().join("profile.json");
    std::fs::write(&saved, serde_json::to_vec(&profile).unwrap()).unwrap();
    let saved = saved.to_str().unwrap();

    let yes = mcjs(&[
        "hal",
        "check",
        "--size",
        "10GiB",
        "--every",
        "15m",
        "--keep",
        "3",
        "--profile",
        saved,
    ]);
    assert_eq!(
        yes.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&yes.stdout)
    );
    assert!(String::from_utf8_lossy(&yes.stdout).starts_with("capable"));

    let no = mcjs(&[
        "hal",
        "check",
        "--size",
        "10GiB",
        "--every",
        "1m",
        "--profile",
        saved,
        "--output",
        "json",
    ]);
    assert_eq!(no.status.code(), Some(1));
    let answer = stdout_json(&no);
    assert_eq!(answer["capable"], false);
    assert_eq!(answer["required_write_mibps"], 854);
    assert!(
        answer["reasons"][0]
            .as_str()
            .unwrap()
            .contains("at least 854 MiB/s")
    );

    let full = mcjs(&[
        "hal",
        "check",
        "--size",
        "30GiB",
        "--every",
        "1h",
        "--keep",
        "3",
        "--profile",
        saved,
    ]);
    assert_eq!(full.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&full.stdout).contains("free space"));
}

#[test]
fn check_probes_the_node_when_no_profile_is_given() {
    let dir = tempfile::tempdir().unwrap();
    // No disk here writes a petabyte in a fifth of a minute.
    let out = mcjs(&[
        "hal",
        "check",
        "--size",
        "1PiB",
        "--every",
        "1m",
        "--checkpoint-dir",
        dir.path().to_str().unwrap(),
        "--sample-size",
        "4MiB",
        "--samples",
        "2",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("not capable"));
}

#[test]
fn bad_input_is_a_usage_error_with_a_hint() {
    let out = mcjs(&["hal", "check", "--size", "ten", "--every", "15m"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GiB"));

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = mcjs(&[
        "hal",
        "probe",
        "--checkpoint-dir",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist or is not a directory"));

    let out = mcjs(&[
        "hal",
        "check",
        "--size",
        "1GiB",
        "--every",
        "15m",
        "--keep",
        "0",
        "--profile",
        "/nonexistent.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read profile"));
}

#[test]
fn openapi_prints_the_committed_document() {
    let out = mcjs(&["hal", "openapi"]);
    assert_eq!(out.status.code(), Some(0));
    let committed = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../orchestrator/hal/openapi.json"),
    )
    .unwrap();
    assert_eq!(out.stdout, committed);
}

#[test]
fn serve_answers_over_http_until_stopped() {
    use std::io::{BufRead, BufReader, Read, Write};

    let mut child = Command::new(env!("CARGO_BIN_EXE_mcjs"))
        .args(["hal", "serve", "--listen", "127.0.0.1:0", "--no-storage"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    assert!(
        line.starts_with("serving the HAL API on http://127.0.0.1:"),
        "{line}"
    );

    let get = |path: &str| {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        write!(stream, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let health = get("/healthz");
    assert!(health.starts_with("HTTP/1.0 200"), "{health}");
    assert!(health.ends_with("{\"status\":\"ok\"}"));
    let capability = get("/v1/capability?size=1GiB&every=15m");
    assert!(
        capability.contains("\"capable\":false") && capability.contains("not measured"),
        "{capability}"
    );
    let bad = get("/v1/capability?size=huge&every=15m");
    assert!(
        bad.starts_with("HTTP/1.0 400") && bad.contains("\"error\":\"size:"),
        "{bad}"
    );

    child.kill().unwrap();
    child.wait().unwrap();
}
