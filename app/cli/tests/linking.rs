//! What a `mcjs` build carries: the one users and providers build
//! (`cargo build -p mcjs-cli`) links neither the cluster harness nor the
//! embedded local chain; `--features demo` links both.

use std::process::Command;

/// The normal (non-dev) dependencies of `mcjs-cli` under `features`, one
/// package a line.
fn dependencies(features: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-p", "mcjs-cli", "-e", "normal", "--prefix", "none"])
        .args(["--offline", "--locked", "--no-default-features"])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn links(tree: &str, package: &str) -> bool {
    tree.lines().any(|l| l.starts_with(&format!("{package} v")))
}

#[test]
fn a_plain_build_links_no_cluster_harness_and_no_local_chain() {
    let plain = dependencies(&[]);
    for package in ["mcjs-cluster", "mcjs-localnet", "surfpool-core"] {
        assert!(!links(&plain, package), "a plain build links {package}");
    }
    // What the user's commands need is there.
    for package in ["mcjs-client", "mcjs-runtime", "mcjs-agent"] {
        assert!(links(&plain, package), "a plain build lacks {package}");
    }
    let localnet = dependencies(&["--features", "localnet"]);
    assert!(links(&localnet, "surfpool-core") && !links(&localnet, "mcjs-cluster"));
    let demo = dependencies(&["--features", "demo"]);
    for package in ["mcjs-cluster", "mcjs-localnet", "surfpool-core"] {
        assert!(links(&demo, package), "the demo build lacks {package}");
    }
}
