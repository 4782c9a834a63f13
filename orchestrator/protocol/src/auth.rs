//! Signed agent requests: who said it, that it is fresh, that it is new.
//!
//! Anyone can reach the scheduler's port, and a heartbeat is evidence that
//! can slash a provider, so every agent request travels in a
//! [`SignedRequest`]: the exact JSON body, the signer's public key and an
//! ed25519 signature over
//!
//! ```text
//! "mcjs-agent-v1\n" ‖ <request path> ‖ "\n" ‖ <body bytes>
//! ```
//!
//! The domain prefix keeps the signature from meaning anything as a Solana
//! transaction or another protocol's message; the path keeps a heartbeat from
//! being replayed at another endpoint. The body names the node, the agent's
//! clock ([`MAX_CLOCK_SKEW_MS`] window) and a sequence number that must grow
//! per node ([`check_sequence`]). The scheduler checks the signer against the
//! key the chain authorises for the node.
//!
//! Verification uses `ed25519-dalek` directly (the same crate Solana's keypair
//! signs with) so that this crate stays free of Solana types; signing is a
//! closure, so the agent signs with the keypair it already holds.

use ed25519_dalek::{Signature, VerifyingKey};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Domain separation for everything an agent signs for the scheduler.
pub const SIGNING_DOMAIN: &str = "mcjs-agent-v1\n";

/// How far an agent's clock may be from the scheduler's, either way. Wide
/// enough for hosts without good time sync, narrow enough that a captured
/// heartbeat cannot be replayed to a restarted scheduler for long.
pub const MAX_CLOCK_SKEW_MS: i64 = 120_000;

/// An agent request: the body exactly as signed, who signed it, the signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedRequest {
    /// The request's JSON, byte for byte as signed.
    pub body: String,
    /// Base58 ed25519 public key.
    pub signer: String,
    /// Base58 ed25519 signature over [`signing_bytes`].
    pub signature: String,
}

/// Why a request was refused. Nothing from a refused request is recorded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("unsigned request: agent requests must be signed (mcjs-agent-v1)")]
    Unsigned,
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("bad signature")]
    BadSignature,
    #[error("unknown node {0}")]
    UnknownNode(String),
    #[error("signer {signer} is not the key authorised for node {node}")]
    Foreign { node: String, signer: String },
    #[error(
        "stale request: sent {skew_ms} ms from the scheduler's clock (at most {MAX_CLOCK_SKEW_MS} ms either way)"
    )]
    Stale { skew_ms: i64 },
    #[error("replayed request: sequence {seq} is not above the last accepted {last}")]
    Replayed { seq: u64, last: u64 },
    #[error(
        "heartbeat for another scheduler session ({got:?}); ask for the current one and reconnect"
    )]
    OtherSession { got: String },
}

impl Refusal {
    /// The HTTP status: 401 when the request does not prove who sent it or
    /// when, 403 when it proves someone who may not speak for the node.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Malformed(_) => 400,
            Refusal::Unsigned | Refusal::BadSignature | Refusal::Stale { .. } => 401,
            Refusal::Replayed { .. } | Refusal::OtherSession { .. } => 401,
            Refusal::UnknownNode(_) | Refusal::Foreign { .. } => 403,
        }
    }

    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Unsigned => "unsigned",
            Refusal::Malformed(_) => "malformed",
            Refusal::BadSignature => "bad_signature",
            Refusal::UnknownNode(_) => "unknown_node",
            Refusal::Foreign { .. } => "foreign",
            Refusal::Stale { .. } => "stale",
            Refusal::Replayed { .. } => "replayed",
            Refusal::OtherSession { .. } => "other_session",
        }
    }

    pub const LABELS: [&'static str; 7] = [
        "unsigned",
        "malformed",
        "bad_signature",
        "unknown_node",
        "foreign",
        "stale",
        "replayed",
    ];
}

/// The bytes an agent signs for a request to `path` carrying `body`.
pub fn signing_bytes(path: &str, body: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(SIGNING_DOMAIN.len() + path.len() + 1 + body.len());
    out.extend_from_slice(SIGNING_DOMAIN.as_bytes());
    out.extend_from_slice(path.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(body.as_bytes());
    out
}

impl SignedRequest {
    /// Serialises `message` and signs it for `path` with `sign`, the signer's
    /// ed25519 signing function (for an agent, its wallet keypair).
    pub fn seal<T: Serialize>(
        path: &str,
        message: &T,
        signer: &[u8; 32],
        sign: impl FnOnce(&[u8]) -> [u8; 64],
    ) -> Self {
        let body = serde_json::to_string(message).expect("protocol messages serialise");
        let signature = sign(&signing_bytes(path, &body));
        Self {
            body,
            signer: bs58::encode(signer).into_string(),
            signature: bs58::encode(signature).into_string(),
        }
    }

    /// Reads a request off the wire; a bare message without a signature is
    /// [`Refusal::Unsigned`].
    pub fn parse(bytes: &[u8]) -> Result<Self, Refusal> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| Refusal::Malformed(e.to_string()))?;
        if value.get("signature").is_none() {
            return Err(Refusal::Unsigned);
        }
        serde_json::from_value(value).map_err(|e| Refusal::Malformed(e.to_string()))
    }

    /// The signer's public key (not yet verified).
    pub fn signer_key(&self) -> Result<[u8; 32], Refusal> {
        decode_fixed::<32>(&self.signer)
            .ok_or_else(|| Refusal::Malformed("`signer` is not a base58 ed25519 key".into()))
    }

    /// Checks the signature over the body for `path`, strictly (no weak
    /// keys, no malleable signatures).
    pub fn verify(&self, path: &str) -> Result<(), Refusal> {
        let key =
            VerifyingKey::from_bytes(&self.signer_key()?).map_err(|_| Refusal::BadSignature)?;
        let signature = decode_fixed::<64>(&self.signature).ok_or(Refusal::BadSignature)?;
        key.verify_strict(
            &signing_bytes(path, &self.body),
            &Signature::from_bytes(&signature),
        )
        .map_err(|_| Refusal::BadSignature)
    }

    /// The body as a message (call [`Self::verify`] before trusting it).
    pub fn message<T: DeserializeOwned>(&self) -> Result<T, Refusal> {
        serde_json::from_str(&self.body).map_err(|e| Refusal::Malformed(e.to_string()))
    }
}

fn decode_fixed<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = bs58::decode(text).into_vec().ok()?;
    bytes.try_into().ok()
}

/// A request sent at `sent_at_ms` (the agent's clock) is fresh at `now_ms`
/// (the scheduler's) when the two are at most [`MAX_CLOCK_SKEW_MS`] apart.
pub fn check_fresh(sent_at_ms: i64, now_ms: i64) -> Result<(), Refusal> {
    let skew_ms = sent_at_ms.saturating_sub(now_ms);
    if skew_ms.abs() > MAX_CLOCK_SKEW_MS {
        return Err(Refusal::Stale { skew_ms });
    }
    Ok(())
}

/// Sequence numbers grow strictly per node: a request whose sequence is not
/// above the last one accepted from its node is a replay.
pub fn check_sequence(seq: u64, last: Option<u64>) -> Result<(), Refusal> {
    match last {
        Some(last) if seq <= last => Err(Refusal::Replayed { seq, last }),
        _ => Ok(()),
    }
}

/// The agent's next sequence number: above the last one it used, and at
/// least its clock in microseconds, so a restarted agent (which forgot its
/// counter) still continues above everything it sent before.
pub fn next_sequence(last: Option<u64>, now_unix_ms: i64) -> u64 {
    let floor = u64::try_from(now_unix_ms)
        .unwrap_or(0)
        .saturating_mul(1_000);
    last.map_or(floor, |l| l.saturating_add(1).max(floor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn seal(k: &SigningKey, path: &str, msg: &serde_json::Value) -> SignedRequest {
        SignedRequest::seal(path, msg, &k.verifying_key().to_bytes(), |m| {
            k.sign(m).to_bytes()
        })
    }

    #[test]
    fn the_signed_bytes_are_domain_path_and_body() {
        assert_eq!(
            signing_bytes("/v1/heartbeat", "{\"a\":1}"),
            b"mcjs-agent-v1\n/v1/heartbeat\n{\"a\":1}".to_vec()
        );
    }

    #[test]
    fn a_sealed_request_verifies_and_any_change_breaks_it() {
        let k = key(7);
        let req = seal(
            &k,
            "/v1/heartbeat",
            &serde_json::json!({"node": "N", "seq": 1}),
        );
        req.verify("/v1/heartbeat").unwrap();
        let wire = serde_json::to_vec(&req).unwrap();
        assert_eq!(SignedRequest::parse(&wire).unwrap(), req);

        let mut body = req.clone();
        body.body = body.body.replace("\"N\"", "\"M\"");
        assert_eq!(body.verify("/v1/heartbeat"), Err(Refusal::BadSignature));
        assert_eq!(req.verify("/v1/other"), Err(Refusal::BadSignature));
        let mut other_signer = req.clone();
        other_signer.signer = bs58::encode(key(8).verifying_key().to_bytes()).into_string();
        assert_eq!(
            other_signer.verify("/v1/heartbeat"),
            Err(Refusal::BadSignature)
        );
        let mut garbage = req.clone();
        garbage.signature = "not-base58!".into();
        assert_eq!(garbage.verify("/v1/heartbeat"), Err(Refusal::BadSignature));
    }

    #[test]
    fn a_bare_message_is_unsigned_and_junk_is_malformed() {
        assert_eq!(
            SignedRequest::parse(br#"{"node":"N","jobs":[]}"#),
            Err(Refusal::Unsigned)
        );
        assert!(matches!(
            SignedRequest::parse(b"not json"),
            Err(Refusal::Malformed(_))
        ));
        assert!(matches!(
            SignedRequest::parse(br#"{"signature":"x"}"#),
            Err(Refusal::Malformed(_))
        ));
        assert_eq!(Refusal::Unsigned.status(), 401);
        assert_eq!(Refusal::BadSignature.status(), 401);
        assert_eq!(Refusal::Replayed { seq: 1, last: 1 }.status(), 401);
        assert_eq!(Refusal::UnknownNode("N".into()).status(), 403);
    }

    #[test]
    fn freshness_allows_the_documented_skew_either_way() {
        let now = 1_700_000_000_000;
        assert!(check_fresh(now - 30_000, now).is_ok());
        assert!(check_fresh(now + 30_000, now).is_ok());
        assert!(check_fresh(now + MAX_CLOCK_SKEW_MS, now).is_ok());
        assert_eq!(
            check_fresh(now - MAX_CLOCK_SKEW_MS - 1, now),
            Err(Refusal::Stale {
                skew_ms: -MAX_CLOCK_SKEW_MS - 1
            })
        );
        assert!(check_fresh(now + MAX_CLOCK_SKEW_MS + 1, now).is_err());
    }

    #[test]
    fn sequences_must_grow_and_survive_an_agent_restart() {
        assert!(check_sequence(5, None).is_ok());
        assert!(check_sequence(6, Some(5)).is_ok());
        assert!(check_sequence(5, Some(5)).is_err());
        assert!(check_sequence(4, Some(5)).is_err());
        let first = next_sequence(None, 1_000);
        assert_eq!(first, 1_000_000);
        assert_eq!(next_sequence(Some(first), 1_000), first + 1);
        // A restarted agent forgot its counter; a second later its clock is ahead of it.
        let sent_before_restart = next_sequence(Some(first + 500), 1_000);
        assert!(next_sequence(None, 2_000) > sent_before_restart);
    }
}
