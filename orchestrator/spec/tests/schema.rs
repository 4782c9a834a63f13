//! The committed JSON Schema must be the one the types generate.

use std::path::Path;

#[test]
fn committed_schema_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/job-spec.v1.schema.json");
    let generated = mcjs_spec::json_schema_string();
    if std::env::var_os("MCJS_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from the schema the types generate; regenerate it with\n  MCJS_UPDATE_SCHEMA=1 cargo test -p mcjs-spec --test schema\n(or `mcjs spec schema > orchestrator/spec/schema/job-spec.v1.schema.json`) and commit it",
        path.display()
    );
}

#[test]
fn schema_describes_every_top_level_declaration() {
    let schema = mcjs_spec::json_schema();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for field in ["version", "work", "data", "request", "output", "checkpoint"] {
        assert!(required.contains(&field), "{field} should be required");
    }
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["properties"]["version"]["const"], 1);
    let usdc = &schema["$defs"]["Usdc"];
    assert_eq!(usdc["type"], "string");
    assert!(usdc["pattern"].as_str().unwrap().contains("{1,6}"));
}
