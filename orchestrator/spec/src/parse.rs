//! Reads a job spec from JSON, collecting every structural error (unknown, missing and
//! wrongly typed fields, malformed values) with its JSON pointer instead of stopping at the
//! first one as serde would. A field that is present but wrong keeps its parent from being
//! built; an unknown field is reported but does not, so semantic checks can still run.

mod job;
mod request;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{SpecError, pointer_token};
use crate::spec::JobSpec;

/// Kinds that name interactive or latency-bound work, refused with a pointer to local
/// infrastructure rather than a bare "unknown kind".
const LATENCY_BOUND_KINDS: &[&str] = &[
    "interactive",
    "live",
    "live_tool",
    "realtime",
    "real_time",
    "control_loop",
    "serving",
    "online_inference",
    "streaming",
    "notebook",
    "service",
    "latency_bound",
];

pub(crate) const LOCAL_INFRASTRUCTURE: &str = "interactive or latency-bound work (a control loop, a live tool, anything that must answer in the moment) belongs on local infrastructure: MCJS runs queued, checkpointed batch work that can wait and be moved between nodes";

/// Reads JSON text: the spec when it could be built (only unknown fields may have been
/// wrong), beside every structural error found. Comments (`// …` to the end of a line,
/// `/* … */`) are allowed, as in the starting spec `mcjs spec init` writes: each is read
/// as blanks, so an error's line and column still point into the text as written.
pub(crate) fn parse_json(text: &str) -> (Option<JobSpec>, Vec<SpecError>) {
    let mut plain = Vec::with_capacity(text.len());
    // Reading from memory cannot fail (a stray `/` is left for the parser to
    // refuse). Each comment byte becomes a space, byte for byte: the line
    // breaks a block comment spans are put back, so lines count as written.
    let stripped = std::io::Read::read_to_end(
        &mut json_comments::CommentSettings::c_style().strip_comments(text.as_bytes()),
        &mut plain,
    );
    if stripped.is_ok() && plain.len() == text.len() {
        for (out, original) in plain.iter_mut().zip(text.bytes()) {
            if original == b'\n' {
                *out = b'\n';
            }
        }
    }
    let plain = String::from_utf8(plain).ok().filter(|_| stripped.is_ok());
    let text = plain.as_deref().unwrap_or(text);
    match serde_json::from_str::<StrictValue>(text) {
        Ok(StrictValue(value)) => parse_value(&value),
        Err(e) => (
            None,
            vec![SpecError::new(
                "",
                format!(
                    "not valid JSON: {e}; fix the syntax (keys quoted, no trailing commas, each key once)"
                ),
            )],
        ),
    }
}

/// Reads a JSON value, as [`parse_json`].
pub(crate) fn parse_value(value: &Value) -> (Option<JobSpec>, Vec<SpecError>) {
    let mut reader = Reader::default();
    let spec = reader.job_spec(value);
    (spec, reader.errors)
}

/// A JSON value read with duplicate object keys refused: with duplicates, two readers of the
/// same text can disagree on what it says, and a hashed spec must say one thing.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = StrictValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<StrictValue, E> {
        Ok(StrictValue(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }
    fn visit_none<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(StrictValue(Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            out.insert(key, value);
        }
        Ok(StrictValue(Value::Object(out)))
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", pointer_token(key))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The fields of one JSON object being read, with the names it may hold.
struct Fields<'v> {
    map: &'v Map<String, Value>,
    path: String,
}

impl<'v> Fields<'v> {
    /// A present, non-null field.
    fn get(&self, key: &str) -> Option<(&'v Value, String)> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some((v, child(&self.path, key))),
        }
    }
}

#[derive(Default)]
struct Reader {
    errors: Vec<SpecError>,
}

impl Reader {
    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(SpecError::new(path, message));
    }

    /// Opens an object, reporting every key outside `known`.
    fn object<'v>(
        &mut self,
        v: &'v Value,
        path: &str,
        what: &str,
        known: &[&str],
    ) -> Option<Fields<'v>> {
        let Value::Object(map) = v else {
            self.error(
                path,
                format!("expected {what} (a JSON object), found {}", describe(v)),
            );
            return None;
        };
        for key in map.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            let close = known
                .iter()
                .copied()
                .filter(|k| edit_distance(k, key) <= 2)
                .min_by_key(|k| edit_distance(k, key));
            let hint = match close {
                Some(k) => format!("did you mean \"{k}\"? "),
                None => String::new(),
            };
            self.error(
                &child(path, key),
                format!(
                    "unknown field \"{key}\" in {what}; {hint}the fields are: {}",
                    known.join(", ")
                ),
            );
        }
        Some(Fields {
            map,
            path: path.to_string(),
        })
    }

    fn required<'v>(
        &mut self,
        fields: &Fields<'v>,
        key: &str,
        hint: &str,
    ) -> Option<(&'v Value, String)> {
        let found = fields.get(key);
        if found.is_none() {
            self.error(
                &child(&fields.path, key),
                format!("missing required field \"{key}\": {hint}"),
            );
        }
        found
    }

    fn string(&mut self, v: &Value, path: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(
                    path,
                    format!("expected a string, found {}", describe(other)),
                );
                None
            }
        }
    }

    fn parsed<T>(&mut self, v: &Value, path: &str) -> Option<T>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        let s = self.string(v, path)?;
        match s.parse() {
            Ok(t) => Some(t),
            Err(e) => {
                self.error(path, e.to_string());
                None
            }
        }
    }

    fn uint<T: TryFrom<u64>>(&mut self, v: &Value, path: &str, max: u64) -> Option<T> {
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) if s.parse::<u64>().is_ok() => {
                self.error(
                    path,
                    format!(
                        "expected a whole number, found the string {s:?}; write it without quotes"
                    ),
                );
                return None;
            }
            _ => None,
        };
        match n.filter(|n| *n <= max).and_then(|n| T::try_from(n).ok()) {
            Some(t) => Some(t),
            None => {
                self.error(
                    path,
                    format!("expected a whole number from 0 to {max}, found {}", show(v)),
                );
                None
            }
        }
    }

    fn boolean(&mut self, v: &Value, path: &str) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            other => {
                self.error(
                    path,
                    format!("expected true or false, found {}", show(other)),
                );
                None
            }
        }
    }

    fn array<T>(
        &mut self,
        v: &Value,
        path: &str,
        mut item: impl FnMut(&mut Self, &Value, &str) -> Option<T>,
    ) -> Option<Vec<T>> {
        let Value::Array(items) = v else {
            self.error(path, format!("expected an array, found {}", describe(v)));
            return None;
        };
        let read: Vec<Option<T>> = items
            .iter()
            .enumerate()
            .map(|(i, v)| item(self, v, &format!("{path}/{i}")))
            .collect();
        read.into_iter().collect()
    }

    fn string_map(&mut self, v: &Value, path: &str) -> Option<BTreeMap<String, String>> {
        let Value::Object(map) = v else {
            self.error(
                path,
                format!("expected an object of strings, found {}", describe(v)),
            );
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, v) in map {
            match self.string(v, &child(path, k)) {
                Some(s) => {
                    out.insert(k.clone(), s);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Reads a string naming one of `choices`.
    fn choice<T: Copy>(
        &mut self,
        v: &Value,
        path: &str,
        what: &str,
        choices: &[(&str, T)],
    ) -> Option<T> {
        let s = self.string(v, path)?;
        match choices.iter().find(|(name, _)| *name == s) {
            Some((_, t)) => Some(*t),
            None => {
                let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                self.error(
                    path,
                    format!("unknown {what} \"{s}\"; use one of {}", names.join(", ")),
                );
                None
            }
        }
    }

    /// Absent or null: Some(None); present and well-formed: Some(Some(t)); malformed: None.
    fn optional<T>(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        read: impl FnOnce(&mut Self, &Value, &str) -> Option<T>,
    ) -> Option<Option<T>> {
        match f.get(key) {
            None => Some(None),
            Some((v, p)) => read(self, v, &p).map(Some),
        }
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string {s:?}"),
        other => describe(other).to_string(),
    }
}
