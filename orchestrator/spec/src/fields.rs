//! String-shaped fields of a job spec whose format is checked when they are built: a value of
//! these types is always well-formed, so code that holds a `JobSpec` need not re-check them.
//! Each parses with `FromStr` (the error says how to fix the value), prints its canonical form
//! with `Display`, and serialises as that string.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::gpu::normalize_model;

/// Why a field's string was refused; the message says how to write it instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldError(pub String);

fn refuse<T>(msg: impl Into<String>) -> Result<T, FieldError> {
    Err(FieldError(msg.into()))
}

macro_rules! string_field {
    ($ty:ident, $pattern:expr, $description:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = <Cow<'de, str>>::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($ty))
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let pattern: Option<&str> = $pattern;
                match pattern {
                    Some(pattern) => json_schema!({
                        "type": "string",
                        "pattern": pattern,
                        "description": $description,
                    }),
                    None => json_schema!({
                        "type": "string",
                        "description": $description,
                    }),
                }
            }
        }
    };
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn parse_sha256_hex(s: &str, what: &str) -> Result<[u8; 32], FieldError> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return refuse(format!(
            "{what} {s:?} is not a sha256: write 64 lowercase hex digits (e.g. the first word of `sha256sum FILE`)"
        ));
    }
    if !is_lower_hex(s) {
        return refuse(format!(
            "{what} {s:?} has uppercase hex digits; write them in lowercase"
        ));
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).map_err(|e| FieldError(format!("{what} {s:?}: {e}")))?;
    Ok(out)
}

/// A sha256 digest, written as 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha256Digest(pub [u8; 32]);

impl FromStr for Sha256Digest {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_sha256_hex(s, "hash").map(Sha256Digest)
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

string_field!(
    Sha256Digest,
    Some("^[0-9a-f]{64}$"),
    "A sha256 digest: 64 lowercase hex digits."
);

/// A container image pinned by digest: `name@sha256:<64 hex>`. A tag may precede the digest
/// (`name:tag@sha256:..`) but only the digest decides what runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageRef {
    name: String,
    digest: Sha256Digest,
}

impl ImageRef {
    /// The repository (and tag, if written) before the '@'.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }
}

const IMAGE_HINT: &str = "pin the image by digest: write name@sha256:<64 lowercase hex digits>, e.g. \"ghcr.io/lab/trainer@sha256:0123…\" (`docker inspect --format '{{index .RepoDigests 0}}' IMAGE` prints it)";

impl FromStr for ImageRef {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((name, digest)) = s.rsplit_once('@') else {
            return refuse(format!("image {s:?} is not pinned by digest; {IMAGE_HINT}"));
        };
        let Some(hex) = digest.strip_prefix("sha256:") else {
            return refuse(format!(
                "image {s:?} has digest {digest:?}, which is not sha256; {IMAGE_HINT}"
            ));
        };
        let digest = parse_sha256_hex(hex, "image digest")?;
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && name.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'.' | b'_' | b'-' | b'/' | b':')
            })
            && !name.ends_with(['/', ':', '.', '-']);
        if !name_ok {
            return refuse(format!(
                "image name {name:?} is not a valid repository name: use lowercase letters, digits and . _ - / : (registry/path[:tag]); {IMAGE_HINT}"
            ));
        }
        Ok(ImageRef {
            name: name.to_string(),
            digest: Sha256Digest(digest),
        })
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@sha256:{}", self.name, self.digest)
    }
}

string_field!(
    ImageRef,
    Some("^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$"),
    "A container image pinned by digest: name@sha256:<64 lowercase hex digits>."
);

/// The schemes a job's data may come from or its output may go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UriScheme {
    File,
    S3,
    Https,
}

/// Where data lives: `file:///absolute/path`, `s3://bucket/key` or `https://host/path`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DataUri {
    text: String,
    scheme: UriScheme,
}

impl DataUri {
    pub fn scheme(&self) -> UriScheme {
        self.scheme
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn path_has_dot_segments(path: &str) -> bool {
    path.split('/').any(|seg| seg == ".." || seg == ".")
}

impl FromStr for DataUri {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return refuse(format!(
                "uri {s:?} contains whitespace or control characters; percent-encode them"
            ));
        }
        let scheme = if let Some(path) = s.strip_prefix("file://") {
            if !path.starts_with('/') || path.len() < 2 {
                return refuse(format!(
                    "uri {s:?} is not an absolute file uri; write file:///absolute/path (three slashes)"
                ));
            }
            if path_has_dot_segments(path) {
                return refuse(format!(
                    "uri {s:?} has '.' or '..' segments; write the resolved absolute path"
                ));
            }
            UriScheme::File
        } else if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            let bucket_ok = (3..=63).contains(&bucket.len())
                && bucket.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-'
                });
            if !bucket_ok {
                return refuse(format!(
                    "uri {s:?} has an invalid bucket {bucket:?}; s3 buckets are 3 to 63 lowercase letters, digits, '.' or '-'"
                ));
            }
            if key.is_empty() {
                return refuse(format!("uri {s:?} names no object; write s3://bucket/key"));
            }
            UriScheme::S3
        } else if let Some(rest) = s.strip_prefix("https://") {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            if host.is_empty() || host.starts_with(':') || host.contains('@') {
                return refuse(format!("uri {s:?} has no host; write https://host/path"));
            }
            UriScheme::Https
        } else if s.starts_with("http://") {
            return refuse(format!(
                "uri {s:?} uses plain http; use https:// so the transfer is authenticated"
            ));
        } else {
            return refuse(format!(
                "uri {s:?} has an unsupported scheme; use file://, s3:// or https://"
            ));
        };
        Ok(DataUri {
            text: s.to_string(),
            scheme,
        })
    }
}

impl fmt::Display for DataUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

string_field!(
    DataUri,
    Some("^(file:///|s3://|https://)[^\\s]+$"),
    "A URI: file:///absolute/path, s3://bucket/key or https://host/path."
);

/// A name for a data input: it becomes the input's directory, `/mcjs/data/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InputName(String);

impl InputName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for InputName {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (1..=64).contains(&s.len())
            && s.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && s.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            });
        if !ok {
            return refuse(format!(
                "name {s:?} is not valid: use 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
            ));
        }
        Ok(InputName(s.to_string()))
    }
}

impl fmt::Display for InputName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_field!(
    InputName,
    Some("^[a-z0-9][a-z0-9._-]{0,63}$"),
    "A data input's name; the input is mounted read-only at /mcjs/data/<name>."
);

/// A GPU model in normalised form (see [`crate::gpu::normalize_model`]), at most 32 bytes so
/// that it fits the on-chain requirement summary.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuModel(String);

pub const MAX_GPU_MODEL_BYTES: usize = 32;

impl GpuModel {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for GpuModel {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let normalized = normalize_model(s);
        if normalized.is_empty() {
            return refuse(
                "gpu model is empty; name a model such as \"a100\" or \"a100-sxm4-80gb\"",
            );
        }
        if !normalized
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        {
            return refuse(format!(
                "gpu model {s:?} normalises to {normalized:?}, which has characters other than letters, digits, '-' and '.'"
            ));
        }
        if normalized.len() > MAX_GPU_MODEL_BYTES {
            return refuse(format!(
                "gpu model {s:?} normalises to {} bytes; at most {MAX_GPU_MODEL_BYTES} fit on chain: shorten it (a prefix such as \"a100\" matches every A100)",
                normalized.len()
            ));
        }
        Ok(GpuModel(normalized))
    }
}

impl fmt::Display for GpuModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_field!(
    GpuModel,
    None,
    "An acceptable GPU model, normalised (lowercase, \"NVIDIA \"/\"Tesla \" dropped, spaces to '-'), at most 32 bytes. Matches a node's model when equal or when the model continues it after a '-': \"a100\" matches \"a100-sxm4-80gb\"."
);

/// A dotted numeric version: a driver ("535.104.05") or CUDA ("12.2") version. Compared by
/// component; printed exactly as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DottedVersion {
    text: String,
    components: Vec<u32>,
}

impl DottedVersion {
    pub fn components(&self) -> &[u32] {
        &self.components
    }

    /// Whether `self` is at least `other`, missing components counting as 0.
    pub fn at_least(&self, other: &DottedVersion) -> bool {
        let n = self.components.len().max(other.components.len());
        let get = |v: &[u32], i: usize| v.get(i).copied().unwrap_or(0);
        (0..n)
            .map(|i| get(&self.components, i).cmp(&get(&other.components, i)))
            .find(|o| o.is_ne())
            .is_none_or(|o| o.is_gt())
    }
}

impl FromStr for DottedVersion {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split('.').collect();
        let ok = (1..=4).contains(&parts.len())
            && parts
                .iter()
                .all(|p| (1..=6).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        if !ok {
            return refuse(format!(
                "version {s:?} is not understood; write 1 to 4 dot-separated numbers, e.g. \"535.104.05\" or \"12.2\""
            ));
        }
        let components = parts
            .iter()
            .map(|p| p.parse().expect("at most 6 digits"))
            .collect();
        Ok(DottedVersion {
            text: s.to_string(),
            components,
        })
    }
}

impl fmt::Display for DottedVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

string_field!(
    DottedVersion,
    Some("^[0-9]{1,6}(\\.[0-9]{1,6}){0,3}$"),
    "A dotted numeric version, e.g. \"535.104.05\" (driver) or \"12.2\" (CUDA)."
);

/// A path relative to the job's output directory: no leading '/', no '.' or '..' segments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelativePath(String);

impl RelativePath {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for RelativePath {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.len() > 1024 {
            return refuse(
                "artifact path must be 1 to 1024 bytes, relative to the output directory, e.g. \"model/final.safetensors\"",
            );
        }
        if s.starts_with('/') {
            return refuse(format!(
                "artifact path {s:?} is absolute; write it relative to output.dir"
            ));
        }
        if s.split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
            || s.contains(['\\', '\0'])
        {
            return refuse(format!(
                "artifact path {s:?} has an empty, '.' or '..' segment or a backslash; write a plain relative path such as \"model/final.safetensors\""
            ));
        }
        Ok(RelativePath(s.to_string()))
    }
}

impl fmt::Display for RelativePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_field!(
    RelativePath,
    None,
    "A path relative to the output directory, without '.' or '..' segments."
);

/// An absolute path inside the container.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerPath(String);

impl ContainerPath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `self` is `other` or lies inside it.
    pub fn is_within(&self, other: &str) -> bool {
        self.0 == other
            || self
                .0
                .strip_prefix(other)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

impl FromStr for ContainerPath {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some(rest) = s.strip_prefix('/') else {
            return refuse(format!(
                "container path {s:?} is not absolute; write it from '/', e.g. \"/mcjs/output\""
            ));
        };
        if rest.is_empty() || s.len() > 1024 {
            return refuse(format!(
                "container path {s:?} must name a directory below '/', e.g. \"/mcjs/output\""
            ));
        }
        if rest
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
            || s.contains(['\\', '\0'])
        {
            return refuse(format!(
                "container path {s:?} has an empty, '.' or '..' segment, a trailing '/' or a backslash; write it resolved, e.g. \"/mcjs/output\""
            ));
        }
        Ok(ContainerPath(s.to_string()))
    }
}

impl fmt::Display for ContainerPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_field!(
    ContainerPath,
    Some("^(/[^/]+)+$"),
    "An absolute directory path inside the container."
);

/// A point in time written in RFC 3339 with whole seconds; carried as unix seconds and printed
/// in UTC ("2025-07-01T18:00:00Z"), so every offset spelling of one instant hashes the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn unix(self) -> i64 {
        self.0
    }

    /// None outside the years RFC 3339 can write (0000 to 9999).
    pub fn from_unix(secs: i64) -> Option<Self> {
        let t = OffsetDateTime::from_unix_timestamp(secs).ok()?;
        (0..=9999).contains(&t.year()).then_some(Timestamp(secs))
    }
}

impl FromStr for Timestamp {
    type Err = FieldError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|e| {
            FieldError(format!(
                "time {s:?} is not RFC 3339 ({e}); write e.g. \"2025-07-01T18:00:00Z\" or \"2025-07-01T20:00:00+02:00\""
            ))
        })?;
        if t.nanosecond() != 0 {
            return refuse(format!(
                "time {s:?} has fractions of a second; write whole seconds"
            ));
        }
        Ok(Timestamp(t.unix_timestamp()))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = OffsetDateTime::from_unix_timestamp(self.0).map_err(|_| fmt::Error)?;
        let text = t.format(&Rfc3339).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

string_field!(
    Timestamp,
    None,
    "An RFC 3339 date-time with whole seconds, e.g. \"2025-07-01T18:00:00Z\"."
);

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn images_must_be_pinned_by_a_lowercase_sha256_digest() {
        let image: ImageRef = format!("ghcr.io/lab/trainer:1.2@sha256:{HEX}")
            .parse()
            .unwrap();
        assert_eq!(image.name(), "ghcr.io/lab/trainer:1.2");
        assert_eq!(
            image.to_string(),
            format!("ghcr.io/lab/trainer:1.2@sha256:{HEX}")
        );
        let unpinned = "ghcr.io/lab/trainer:latest"
            .parse::<ImageRef>()
            .unwrap_err()
            .0;
        assert!(unpinned.contains("not pinned by digest"), "{unpinned}");
        assert!(format!("lab/t@sha512:{HEX}").parse::<ImageRef>().is_err());
        assert!(
            format!("lab/t@sha256:{}", &HEX[1..])
                .parse::<ImageRef>()
                .is_err()
        );
        assert!(format!("Lab/T@sha256:{HEX}").parse::<ImageRef>().is_err());
        let upper = format!("lab/t@sha256:{}", HEX.to_uppercase())
            .parse::<ImageRef>()
            .unwrap_err()
            .0;
        assert!(upper.contains("lowercase"), "{upper}");
    }

    #[test]
    fn data_uris_accept_three_schemes_only() {
        assert_eq!(
            "file:///srv/data/a.tar"
                .parse::<DataUri>()
                .unwrap()
                .scheme(),
            UriScheme::File
        );
        assert_eq!(
            "s3://my-bucket/x/y.parquet"
                .parse::<DataUri>()
                .unwrap()
                .scheme(),
            UriScheme::S3
        );
        assert_eq!(
            "https://example.org/a.bin"
                .parse::<DataUri>()
                .unwrap()
                .scheme(),
            UriScheme::Https
        );
        for bad in [
            "http://example.org/a",
            "ftp://x/y",
            "file://relative/x",
            "file:///a/../b",
            "s3://b/",
            "s3://AB/x",
            "https:///x",
            "s3://bucket/a b",
            "",
        ] {
            assert!(bad.parse::<DataUri>().is_err(), "{bad:?} should be refused");
        }
        assert!(
            "http://x/y"
                .parse::<DataUri>()
                .unwrap_err()
                .0
                .contains("https")
        );
    }

    #[test]
    fn gpu_models_are_stored_normalised_and_limited_to_32_bytes() {
        assert_eq!(
            "NVIDIA A100-SXM4-80GB"
                .parse::<GpuModel>()
                .unwrap()
                .as_str(),
            "a100-sxm4-80gb"
        );
        assert!("a".repeat(33).parse::<GpuModel>().is_err());
        assert!("a".repeat(32).parse::<GpuModel>().is_ok());
        assert!("".parse::<GpuModel>().is_err());
        assert!("a100/80".parse::<GpuModel>().is_err());
    }

    #[test]
    fn dotted_versions_compare_by_component() {
        let v = |s: &str| s.parse::<DottedVersion>().unwrap();
        assert!(v("535.104.05").at_least(&v("535.104")));
        assert!(v("535.104.05").at_least(&v("535.104.5")));
        assert!(!v("470.82").at_least(&v("535")));
        assert!(v("12.10").at_least(&v("12.2")));
        assert_eq!(v("535.104.05").to_string(), "535.104.05");
        assert!("12.".parse::<DottedVersion>().is_err());
        assert!("v12".parse::<DottedVersion>().is_err());
    }

    #[test]
    fn timestamps_are_rfc3339_whole_seconds_printed_in_utc() {
        let t: Timestamp = "2025-07-01T20:00:00+02:00".parse().unwrap();
        assert_eq!(t.unix(), 1_751_392_800);
        assert_eq!(t.to_string(), "2025-07-01T18:00:00Z");
        assert!("2025-07-01T18:00:00.5Z".parse::<Timestamp>().is_err());
        assert!("2025-07-01 18:00".parse::<Timestamp>().is_err());
        assert!("tomorrow".parse::<Timestamp>().is_err());
    }

    #[test]
    fn paths_are_plain_and_resolved() {
        assert!("model/final.safetensors".parse::<RelativePath>().is_ok());
        for bad in ["/abs", "a/../b", "a//b", "./a", "", "a/"] {
            assert!(bad.parse::<RelativePath>().is_err(), "{bad:?}");
        }
        let dir: ContainerPath = "/mcjs/output".parse().unwrap();
        assert!(dir.is_within("/mcjs"));
        assert!(!dir.is_within("/mcjs/out"));
        for bad in ["/", "rel", "/a/", "/a/../b", "/a//b"] {
            assert!(bad.parse::<ContainerPath>().is_err(), "{bad:?}");
        }
    }
}
