//! GPU model names and compute capabilities, in the one form every MCJS component compares:
//! the spec's allow-list, the HAL's node profile, the scheduler and the on-chain account.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Normalises a GPU model name: lowercase, strip a leading "nvidia " then a leading "tesla ",
/// collapse each run of spaces and underscores to one '-'.
///
/// "NVIDIA A100-SXM4-80GB" -> "a100-sxm4-80gb", "Tesla K80" -> "k80",
/// "NVIDIA GeForce RTX 4090" -> "geforce-rtx-4090".
pub fn normalize_model(name: &str) -> String {
    let lower = name.trim().to_lowercase();
    let mut rest = lower.as_str();
    if let Some(stripped) = rest.strip_prefix("nvidia ") {
        rest = stripped.trim_start();
    }
    if let Some(stripped) = rest.strip_prefix("tesla ") {
        rest = stripped.trim_start();
    }
    let mut out = String::with_capacity(rest.len());
    let mut in_separator_run = false;
    for c in rest.chars() {
        if c == ' ' || c == '_' {
            if !in_separator_run {
                out.push('-');
            }
            in_separator_run = true;
        } else {
            out.push(c);
            in_separator_run = false;
        }
    }
    out
}

/// Whether `name` is already in the form [`normalize_model`] gives, and not empty: the form
/// the chain stores and the scheduler compares without normalising again.
pub fn is_normalized(name: &str) -> bool {
    !name.is_empty() && normalize_model(name) == name
}

/// Whether a node's GPU `model` satisfies one allow-list entry `allowed`: after normalising
/// both, equal, or the model extends the entry at a '-' boundary. "a100" matches
/// "a100-sxm4-80gb"; "a100-80gb" does not (the boundary rule never skips a middle segment),
/// and "a10" does not match "a100-pcie".
pub fn model_matches(allowed: &str, model: &str) -> bool {
    normalized_model_matches(&normalize_model(allowed), &normalize_model(model))
}

/// [`model_matches`] for names that are already normalised: no allocation, for callers that
/// compare the same names many times (the scheduler, once per hardware class and job shape).
pub fn normalized_model_matches(allowed: &str, model: &str) -> bool {
    !allowed.is_empty()
        && model
            .strip_prefix(allowed)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// Whether an allow-list of normalised entries admits a normalised model: an empty list
/// admits any model, otherwise one entry must match.
pub fn allow_list_admits<S: AsRef<str>>(allow_list: &[S], model: &str) -> bool {
    allow_list.is_empty()
        || allow_list
            .iter()
            .any(|entry| normalized_model_matches(entry.as_ref(), model))
}

/// A CUDA compute capability "major.minor", carried as the sm number major*10+minor
/// (3.7 -> 37, 8.0 -> 80, 9.0 -> 90). Minor versions stop at 9, so the sm form is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    major: u8,
    minor: u8,
}

/// Why a compute capability was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "compute capability {0:?} is not understood; write major.minor with a one-digit minor, e.g. \"8.0\" or \"8.6\""
)]
pub struct ComputeCapabilityError(pub String);

impl ComputeCapability {
    pub const fn new(major: u8, minor: u8) -> Option<Self> {
        if minor > 9 || major > 99 {
            None
        } else {
            Some(Self { major, minor })
        }
    }

    /// From the sm number: 80 -> 8.0, 37 -> 3.7. None above 999 (major 99 minor 9).
    pub const fn from_sm(sm: u16) -> Option<Self> {
        if sm > 999 {
            return None;
        }
        Self::new((sm / 10) as u8, (sm % 10) as u8)
    }

    pub const fn sm(self) -> u16 {
        self.major as u16 * 10 + self.minor as u16
    }

    pub const fn major(self) -> u8 {
        self.major
    }

    pub const fn minor(self) -> u8 {
        self.minor
    }
}

impl FromStr for ComputeCapability {
    type Err = ComputeCapabilityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ComputeCapabilityError(s.to_string());
        let (major, minor) = s.split_once('.').ok_or_else(bad)?;
        let digits =
            |p: &str| !p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(major) || !digits(minor) || minor.len() != 1 {
            return Err(bad());
        }
        Self::new(
            major.parse().map_err(|_| bad())?,
            minor.parse().map_err(|_| bad())?,
        )
        .ok_or_else(bad)
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for ComputeCapability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeCapability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for ComputeCapability {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("ComputeCapability")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^[0-9]{1,2}\\.[0-9]$",
            "description": "CUDA compute capability major.minor, e.g. \"8.0\" (A100), \"8.6\", \"9.0\" (H100).",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_normalise_to_the_shared_form() {
        assert_eq!(normalize_model("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
        assert_eq!(normalize_model("Tesla K80"), "k80");
        assert_eq!(
            normalize_model("NVIDIA Tesla V100-SXM2-32GB"),
            "v100-sxm2-32gb"
        );
        assert_eq!(
            normalize_model("NVIDIA GeForce RTX 4090"),
            "geforce-rtx-4090"
        );
        assert_eq!(normalize_model("nvidia  rtx_a6000"), "rtx-a6000");
        assert_eq!(normalize_model("  H100 __ PCIe "), "h100-pcie");
        assert_eq!(normalize_model("a100"), "a100");
    }

    #[test]
    fn allow_list_entries_match_whole_segments_only() {
        assert!(model_matches("a100", "NVIDIA A100-SXM4-80GB"));
        assert!(model_matches("A100-SXM4-80GB", "a100-sxm4-80gb"));
        assert!(!model_matches("a100-80gb", "a100-sxm4-80gb"));
        assert!(!model_matches("a10", "a100-pcie"));
        assert!(model_matches("a10", "NVIDIA A10"));
        assert!(!model_matches("a100-sxm4-80gb", "a100"));
        assert!(model_matches("Tesla K80", "k80"));
        assert!(!model_matches("", "k80"));
    }

    /// Inputs on which earlier copies of these rules disagreed, or could.
    #[test]
    fn tricky_model_names_normalise_one_way() {
        let table = [
            ("nvidia  rtx_a6000", "rtx-a6000"),
            ("NVIDIA  RTX_A6000", "rtx-a6000"),
            ("Tesla  K80", "k80"),
            ("NVIDIA Tesla  V100", "v100"),
            ("nvidia", "nvidia"),
            ("nvidia ", "nvidia"),
            ("NVIDIA_A100", "nvidia-a100"),
            ("tesla nvidia k80", "nvidia-k80"),
            ("  H100 __ PCIe ", "h100-pcie"),
            ("a100__sxm4  80gb", "a100-sxm4-80gb"),
            ("A100-SXM4-80GB", "a100-sxm4-80gb"),
            ("", ""),
        ];
        for (raw, expected) in table {
            assert_eq!(normalize_model(raw), expected, "{raw:?}");
            assert!(
                expected.is_empty() || is_normalized(expected),
                "{expected:?}"
            );
        }
        for not_normal in ["NVIDIA  RTX_A6000", "rtx_a6000", "A100", " k80", ""] {
            assert!(!is_normalized(not_normal), "{not_normal:?}");
        }
    }

    #[test]
    fn allow_lists_admit_by_whole_segments_and_empty_admits_all() {
        let list = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(allow_list_admits::<String>(&[], "k80"));
        assert!(allow_list_admits(&list(&["a100"]), "a100-sxm4-80gb"));
        assert!(allow_list_admits(
            &list(&["h100", "a100"]),
            "a100-pcie-40gb"
        ));
        assert!(!allow_list_admits(&list(&["a100-80gb"]), "a100-sxm4-80gb"));
        assert!(!allow_list_admits(&list(&["a10"]), "a100-sxm4-80gb"));
        assert!(!allow_list_admits(&list(&[""]), "k80"));
        assert!(!allow_list_admits(&list(&[""]), ""));
        for (allowed, model) in [("a100", "NVIDIA A100-SXM4-80GB"), ("a10", "a100-pcie")] {
            assert_eq!(
                model_matches(allowed, model),
                normalized_model_matches(&normalize_model(allowed), &normalize_model(model))
            );
        }
    }

    #[test]
    fn compute_capability_converts_to_and_from_sm() {
        let cc: ComputeCapability = "8.0".parse().unwrap();
        assert_eq!(cc.sm(), 80);
        assert_eq!("3.7".parse::<ComputeCapability>().unwrap().sm(), 37);
        assert_eq!("9.0".parse::<ComputeCapability>().unwrap().sm(), 90);
        assert_eq!("12.0".parse::<ComputeCapability>().unwrap().sm(), 120);
        assert_eq!(ComputeCapability::from_sm(86).unwrap().to_string(), "8.6");
        assert_eq!(ComputeCapability::from_sm(1000), None);
        for sm in 0..=999 {
            let cc = ComputeCapability::from_sm(sm).unwrap();
            assert_eq!(
                cc.to_string().parse::<ComputeCapability>().unwrap().sm(),
                sm
            );
        }
    }

    #[test]
    fn compute_capability_refuses_malformed_input() {
        for bad in [
            "8", "8.", ".0", "8.10", "8.0.1", "-8.0", "sm80", "80", "123.0", "8,0", "",
        ] {
            assert!(
                bad.parse::<ComputeCapability>().is_err(),
                "{bad:?} should be refused"
            );
        }
    }
}
