//! Every example spec in `examples/specs/` is checked against its expectation: the valid ones
//! validate, and each invalid one produces exactly the errors its `.expected.json` lists.

use std::path::{Path, PathBuf};

use mcjs_spec::JobSpec;
use serde::Deserialize;

/// 2030-01-01T00:00:00Z: the examples' deadlines are judged from here.
const NOW: i64 = 1_893_456_000;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p.to_string_lossy().ends_with(".expected.json")
        })
        .collect();
    files.sort();
    files
}

#[derive(Deserialize)]
struct Expected {
    errors: Vec<ExpectedError>,
}

#[derive(Deserialize)]
struct ExpectedError {
    path: String,
    message_contains: String,
}

#[test]
fn the_four_illustrative_specs_are_valid() {
    let files = json_files(&examples_dir());
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "bulk-inference.json",
            "footage-processing.json",
            "simulation-sweep.json",
            "training-a100.json"
        ]
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        match JobSpec::from_json_validated(&text, NOW) {
            Ok(spec) => assert_eq!(spec.version, 1),
            Err(errors) => panic!("{} should be valid:\n{errors}", file.display()),
        }
    }
}

#[test]
fn every_invalid_spec_produces_exactly_its_expected_errors() {
    let files = json_files(&examples_dir().join("invalid"));
    assert!(files.len() >= 10, "the invalid examples are missing");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let expected_file = file.with_extension("expected.json");
        let expected: Expected = serde_json::from_str(
            &std::fs::read_to_string(&expected_file).unwrap_or_else(|_| {
                panic!("{} has no {}", file.display(), expected_file.display())
            }),
        )
        .unwrap();
        let errors = match JobSpec::from_json_validated(&text, NOW) {
            Ok(_) => panic!("{} should be invalid", file.display()),
            Err(errors) => errors,
        };
        let actual: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errors.len(),
            expected.errors.len(),
            "{}: expected {} errors, got:\n{}",
            file.display(),
            expected.errors.len(),
            actual.join("\n")
        );
        for (got, want) in errors.iter().zip(&expected.errors) {
            assert!(
                got.path == want.path && got.message.contains(&want.message_contains),
                "{}: expected an error at {:?} containing {:?}, got {got}",
                file.display(),
                want.path,
                want.message_contains
            );
        }
    }
}

/// The example at the top of the crate's documentation (`src/lib.rs`), as written there.
#[test]
fn the_crate_documentations_example_runs() {
    let text = include_str!("../../../examples/specs/bulk-inference.json");
    let spec = mcjs_spec::JobSpec::from_json(text).unwrap();
    spec.validate(1_700_000_000).unwrap();
    assert_eq!(mcjs_spec::spec_hash(&spec).len(), 32);
}
