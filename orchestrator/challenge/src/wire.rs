//! How the opening's bulk travels in JSON: each row's values, the Merkle siblings and the
//! held roots, the digests, and the attestation evidence, as base64 text (the standard
//! alphabet, padded) of their bytes: the values little-endian, digests concatenated. JSON
//! numbers would take about 2.5 times the packed size; this takes 4/3 of it. Used through
//! `#[serde(with = "...")]`; a length that is not a whole number of items is refused.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

use crate::hash::Digest;

fn decode<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
    STANDARD
        .decode(text.as_bytes())
        .map_err(|e| D::Error::custom(format!("not base64: {e}")))
}

/// Bytes as base64.
pub mod bytes {
    use super::*;

    pub fn serialize<S: Serializer>(value: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        decode(deserializer)
    }
}

/// A list of byte strings (a certificate chain), each as base64.
pub mod byte_lists {
    use super::*;

    pub fn serialize<S: Serializer>(value: &[Vec<u8>], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(value.iter().map(|v| STANDARD.encode(v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Vec<u8>>, D::Error> {
        Vec::<String>::deserialize(deserializer)?
            .iter()
            .map(|text| {
                STANDARD
                    .decode(text.as_bytes())
                    .map_err(|e| D::Error::custom(format!("not base64: {e}")))
            })
            .collect()
    }
}

/// One digest as base64 (44 characters).
pub mod digest {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Digest, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Digest, D::Error> {
        let bytes = decode(deserializer)?;
        let len = bytes.len();
        bytes
            .try_into()
            .map_err(|_| D::Error::custom(format!("a digest is 32 bytes, not {len}")))
    }
}

/// Digests, concatenated, as base64.
pub mod digests {
    use super::*;

    pub fn serialize<S: Serializer>(value: &[Digest], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(value.concat()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<Digest>, D::Error> {
        let bytes = decode(deserializer)?;
        if bytes.len() % 32 != 0 {
            return Err(D::Error::custom(format!(
                "{} bytes are not whole 32-byte digests",
                bytes.len()
            )));
        }
        Ok(bytes
            .chunks_exact(32)
            .map(|d| d.try_into().expect("32 bytes"))
            .collect())
    }
}

/// 32-bit values, little-endian, as base64.
pub mod values {
    use super::*;

    pub fn serialize<S: Serializer>(value: &[i32], serializer: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = value.iter().flat_map(|v| v.to_le_bytes()).collect();
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<i32>, D::Error> {
        let bytes = decode(deserializer)?;
        if bytes.len() % 4 != 0 {
            return Err(D::Error::custom(format!(
                "{} bytes are not whole 32-bit values",
                bytes.len()
            )));
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|v| i32::from_le_bytes(v.try_into().expect("4 bytes")))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use rand_chacha::ChaCha8Rng;
    use rand_chacha::rand_core::{RngCore, SeedableRng};

    use crate::attestation::GpuEvidence;
    use crate::{GpuOpening, MerkleProof, NodeOpening, OpenedRow, Opening};

    fn digests(rng: &mut ChaCha8Rng, n: usize) -> Vec<[u8; 32]> {
        (0..n)
            .map(|_| {
                let mut d = [0u8; 32];
                rng.fill_bytes(&mut d);
                d
            })
            .collect()
    }

    /// An opening shaped as a full-size one: `rows` rows of `width` values of a product's
    /// magnitude (a sum of `width` int8 products), proofs as deep as 1.9M rows' tree.
    fn opening(width: usize, rows: usize, evidence: bool) -> NodeOpening {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let rows = (0..rows)
            .map(|i| OpenedRow {
                index: i as u64 * 65_537,
                values: (0..width)
                    .map(|_| (rng.next_u32() as i32) >> 8)
                    .chain([i32::MIN, i32::MAX, -1, 0])
                    .collect(),
                proof: MerkleProof {
                    siblings: digests(&mut rng, 21),
                },
                pass: i as u32,
                held_proof: MerkleProof {
                    siblings: digests(&mut rng, 21),
                },
            })
            .collect();
        NodeOpening {
            gpus: vec![GpuOpening {
                commitment: [1; 32],
                held_digest: [2; 32],
                opening: Opening {
                    held_roots: digests(&mut rng, 64),
                    rows,
                },
                attestation: evidence.then(|| GpuEvidence {
                    report: (0..4117).map(|i| i as u8).collect(),
                    certificates: vec![vec![0x30; 700], vec![0x31; 650]],
                }),
            }],
        }
    }

    #[test]
    fn an_opening_reads_back_as_it_was_sent() {
        let sent = opening(64, 3, true);
        let text = serde_json::to_string(&sent).unwrap();
        let read: NodeOpening = serde_json::from_str(&text).unwrap();
        assert_eq!(read, sent);
    }

    /// A full-size opening (n = 32,768, 32 rows) as JSON: within 1.4 times its packed bytes
    /// (JSON numbers took about 2.5).
    #[test]
    fn a_full_opening_takes_a_third_more_than_its_bytes() {
        let sent = opening(32_768, 32, false);
        let packed = sent.gpus[0].opening.wire_bytes();
        let json = serde_json::to_vec(&sent).unwrap().len() as u64;
        let ratio = json as f64 / packed as f64;
        eprintln!("{json} B of JSON for {packed} B packed: {ratio:.3}");
        assert!(
            (1.3..1.4).contains(&ratio),
            "{json} B of JSON for {packed} B: {ratio:.3}"
        );
    }

    #[test]
    fn a_length_that_is_not_whole_items_or_not_base64_is_refused() {
        let text = serde_json::to_string(&opening(4, 1, true)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let with = |pointer: &str, replacement: serde_json::Value| {
            let mut changed = value.clone();
            *changed.pointer_mut(pointer).expect(pointer) = replacement;
            serde_json::from_value::<NodeOpening>(changed)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let row = "/gpus/0/opening/rows/0";
        for (pointer, bad, reason) in [
            (format!("{row}/values"), "AAAAAAA=", "whole 32-bit values"),
            (
                format!("{row}/proof/siblings"),
                "AAAA",
                "whole 32-byte digests",
            ),
            ("/gpus/0/commitment".into(), "AAAA", "a digest is 32 bytes"),
            (
                "/gpus/0/opening/held_roots".into(),
                "not base64!",
                "not base64",
            ),
            ("/gpus/0/attestation/report".into(), "%%%%", "not base64"),
        ] {
            let err = with(&pointer, bad.into()).unwrap_err();
            assert!(err.contains(reason), "{pointer}: {err}");
        }
        // Values as JSON numbers are not this encoding.
        assert!(with(&format!("{row}/values"), serde_json::json!([1, 2, 3])).is_err());
    }
}
