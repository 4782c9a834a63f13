//! No input panics the reader, the validator or what is computed from an accepted spec.

use mcjs_spec::units::{ByteSize, HumanDuration, Usdc};
use mcjs_spec::{JobSpec, canonical_json, spec_hash};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value, json};

const EXAMPLES: [&str; 4] = [
    include_str!("../../../examples/specs/training-a100.json"),
    include_str!("../../../examples/specs/bulk-inference.json"),
    include_str!("../../../examples/specs/footage-processing.json"),
    include_str!("../../../examples/specs/simulation-sweep.json"),
];

/// Strings near the formats the spec reads, so mutations reach deep checks, plus anything.
fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,25}(\\.[0-9]{0,12})?(B|KB|GiB|TiB|PiB|G|gb|)",
        "([0-9]{1,20}[dhms]){0,4}",
        "-?[0-9]{0,22}(\\.[0-9]{0,9})?",
        "[a-z0-9./:-]{0,20}@sha256:[0-9a-fA-F]{0,66}",
        "(file|s3|https|http)://[a-zA-Z0-9./~ -]{0,20}",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2}|\\.[0-9]{1,3}Z)",
        "(training|interactive|control_loop|fixed|until_done|SIGUSR1|SIGKILL|MCJS_X|model)",
        any::<String>(),
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (0u64..300).prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        tricky_string().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        "(version|work|data|request|output|checkpoint|kind|mode|limit|gpu_count|env)".prop_map(String::from),
                        any::<String>()
                    ],
                    inner
                ),
                0..8
            )
            .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                pointers(
                    v,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(Index, Value),
    Remove(Index),
    Insert(Index, String, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), json_value()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => any::<Index>().prop_map(Mutation::Remove),
        1 => (any::<Index>(), "[a-z_]{1,12}", json_value()).prop_map(|(i, k, v)| Mutation::Insert(i, k, v)),
    ]
}

fn apply(value: &mut Value, m: &Mutation) {
    let mut all = Vec::new();
    pointers(value, String::new(), &mut all);
    match m {
        Mutation::Replace(i, v) => {
            if let Some(target) = value.pointer_mut(i.get(all.as_slice()).as_str()) {
                *target = v.clone();
            }
        }
        Mutation::Remove(i) => {
            let pointer = i.get(all.as_slice()).clone();
            if let Some((parent, key)) = pointer.rsplit_once('/')
                && let Some(target) = value.pointer_mut(parent)
            {
                let key = key.replace("~1", "/").replace("~0", "~");
                match target {
                    Value::Object(map) => {
                        map.remove(&key);
                    }
                    Value::Array(items) => {
                        if let Ok(n) = key.parse::<usize>()
                            && n < items.len()
                        {
                            items.remove(n);
                        }
                    }
                    _ => {}
                }
            }
        }
        Mutation::Insert(i, k, v) => {
            if let Some(Value::Object(map)) = value.pointer_mut(i.get(all.as_slice()).as_str()) {
                map.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Everything a caller may do with a spec; none of it may panic.
fn exercise(text: &str, now: i64) {
    let _ = JobSpec::from_json_validated(text, now);
    if let Ok(spec) = JobSpec::from_json(text) {
        let _ = spec.validate(now);
        let _ = spec.requirement_summary();
        let _ = spec.terms();
        let _ = spec.hardware_request();
        let canonical = canonical_json(&spec);
        let reread = JobSpec::from_json(&canonical).expect("a canonical form reads back");
        assert_eq!(reread, spec);
        assert_eq!(spec_hash(&reread), spec_hash(&spec));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn arbitrary_json_never_panics(value in json_value(), now in any::<i64>()) {
        exercise(&value.to_string(), now);
    }

    #[test]
    fn mutated_examples_never_panic(
        which in 0..EXAMPLES.len(),
        mutations in prop::collection::vec(mutation(), 1..4),
        now in prop_oneof![Just(1_893_456_000i64), any::<i64>()],
    ) {
        let mut value: Value = serde_json::from_str(EXAMPLES[which]).unwrap();
        for m in &mutations {
            apply(&mut value, m);
        }
        exercise(&value.to_string(), now);
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        exercise(&text, 0);
    }

    #[test]
    fn units_round_trip_through_display(n in any::<u64>()) {
        prop_assert_eq!(ByteSize(n).to_string().parse::<ByteSize>().unwrap(), ByteSize(n));
        prop_assert_eq!(HumanDuration(n).to_string().parse::<HumanDuration>().unwrap(), HumanDuration(n));
        prop_assert_eq!(Usdc(n).to_string().parse::<Usdc>().unwrap(), Usdc(n));
    }

    #[test]
    fn unit_parsers_never_panic(s in tricky_string()) {
        let _ = s.parse::<ByteSize>();
        let _ = s.parse::<HumanDuration>();
        let _ = s.parse::<Usdc>();
        let _ = s.parse::<mcjs_spec::gpu::ComputeCapability>();
        let _ = s.parse::<mcjs_spec::fields::Timestamp>();
        let _ = mcjs_spec::gpu::model_matches(&s, "a100-sxm4-80gb");
    }
}
