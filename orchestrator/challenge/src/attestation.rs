//! NVIDIA GPU attestation: what a card says about itself, signed by a key fused into it.
//!
//! Hopper and later GPUs hold an identity key whose certificate chains to NVIDIA's Device
//! Identity CA. Asked through NVML (`nvmlDeviceGetConfComputeGpuAttestationReport`, with a
//! nonce), the GPU returns an attestation report: the SPDM GET_MEASUREMENTS request carrying
//! the nonce, and the response (measurement blocks of its firmware, the driver and VBIOS
//! versions, its own nonce) signed with ECDSA P-384 over SHA-384 by the attestation key
//! whose certificate (`nvmlDeviceGetConfComputeGpuCertificate`) ends the chain.
//!
//! [`verify`] checks a GPU's evidence against the pinned root
//! (`attestation/nvidia-device-identity-ca.pem`) and a nonce drawn from the challenge
//! ([`attestation_nonce`]), and says what it proves.
//!
//! # What it proves, and what it does not
//!
//! - **Proves**: a genuine NVIDIA GPU of the chip the leaf names (GH100: H100, H200, GH200
//!   all share it) signed this report after the challenge seed existed, and its device id
//!   (unique per card). With the challenge's timing, that such a card was in the machine
//!   that answered.
//! - **Does not prove** the SKU or the memory: an H100 80 GB and an H200 141 GB attest the
//!   same chip. Memory is the held passes' to prove, as for every other card.
//! - **Does not prove** that the card did the challenge's work: the report is a separate
//!   answer, and a node could attest one card and compute elsewhere. The time bound still
//!   governs the class.
//! - **Not appraised here**: the measurements against NVIDIA's reference manifests (RIMs)
//!   and the certificates' revocation (OCSP), both of which need NVIDIA's services; nor
//!   whether the card runs in confidential-computing mode. The measurements are kept so an
//!   auditor can appraise them.
//! - **Absent** on cards before Hopper, and on Hopper where the driver does not offer it:
//!   evidence is optional, and a node without it is judged by the challenge alone.

use serde::{Deserialize, Serialize};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::time::ASN1Time;

use crate::hash::{Digest, sha256};

/// The NVIDIA Device Identity CA, root of every GPU identity chain (self-signed, P-384).
pub const NVIDIA_DEVICE_IDENTITY_ROOT_PEM: &str =
    include_str!("attestation/nvidia-device-identity-ca.pem");

const EVIDENCE_TAG: &[u8] = b"mcjs-challenge/1/attest-evidence";
const NONCE_TAG: &[u8] = b"mcjs-challenge/1/attest";
/// SPDM GET_MEASUREMENTS: the request's length (version, code, two params, nonce, slot).
const REQUEST_LEN: usize = 37;
const GET_MEASUREMENTS: u8 = 0xE0;
const MEASUREMENTS: u8 = 0x60;
/// ECDSA P-384 as r ‖ s.
const SIGNATURE_LEN: usize = 96;
/// The DMTF measurement specification, the only one the report's blocks may follow.
const DMTF: u8 = 1;
/// The longest chain accepted: NVIDIA's is five certificates.
const MAX_CHAIN: usize = 8;
/// SAN otherName of a GPU identity certificate: "NVIDIA:<chip>:<device id>".
const NVIDIA_DEVICE_NAME_OID: &str = "1.3.6.1.4.1.412.274.1";
/// Opaque data field ids of the response.
const OPAQUE_DRIVER_VERSION: u16 = 3;
const OPAQUE_VBIOS_VERSION: u16 = 6;

/// One GPU's evidence, as the node collects it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuEvidence {
    /// The attestation report: the SPDM request, then the signed response.
    #[serde(with = "crate::wire::bytes")]
    pub report: Vec<u8>,
    /// The certificate chain, DER, the attestation key's first and the root last.
    #[serde(with = "crate::wire::byte_lists")]
    pub certificates: Vec<Vec<u8>>,
}

/// What verified evidence says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attested {
    /// The chip, from the identity certificate (e.g. `GH100`).
    pub chip: String,
    /// The card's device id, unique per card (e.g. `48B02D92494BADF4`).
    pub device_id: String,
    pub driver_version: Option<String>,
    pub vbios_version: Option<String>,
    /// The measurement blocks, index and value, for an auditor to appraise.
    pub measurements: Vec<(u8, Vec<u8>)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttestationError {
    #[error("the evidence is malformed: {0}")]
    Malformed(String),
    #[error("the certificate chain does not end at NVIDIA's Device Identity CA")]
    UnknownRoot,
    #[error("certificate {0} of the chain is not signed by the next, or the next is no CA")]
    Chain(usize),
    #[error("certificate {0} of the chain is not valid at the time of the challenge")]
    Expired(usize),
    #[error("the report is not signed by the chain's attestation key")]
    Signature,
    #[error("the report answers another nonce: it was not made for this challenge")]
    Nonce,
}

fn malformed(what: impl Into<String>) -> AttestationError {
    AttestationError::Malformed(what.into())
}

/// The nonce a GPU's report must carry: drawn from its challenge seed, so the report was
/// made after the request, for this GPU of this node.
pub fn attestation_nonce(gpu_seed: &Digest) -> Digest {
    sha256(&[NONCE_TAG, gpu_seed])
}

/// What a record of attestation binds to: sha256 over each attested GPU's index, report and
/// certificate chain, in order, every piece length-prefixed, so that whoever holds the
/// evidence can tell it is what the checker verified.
pub fn evidence_digest(evidence: &[(usize, &GpuEvidence)]) -> Digest {
    use sha2::Digest as _;
    let len = |n: usize| (n as u64).to_le_bytes();
    let mut hasher = sha2::Sha256::new();
    hasher.update(EVIDENCE_TAG);
    hasher.update(len(evidence.len()));
    for (gpu, e) in evidence {
        hasher.update(len(*gpu));
        hasher.update(len(e.report.len()));
        hasher.update(&e.report);
        hasher.update(len(e.certificates.len()));
        for certificate in &e.certificates {
            hasher.update(len(certificate.len()));
            hasher.update(certificate);
        }
    }
    hasher.finalize().into()
}

/// Certificates from PEM text (NVML returns the chain so), in order.
pub fn certificates_from_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>, AttestationError> {
    let mut certificates = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| malformed(format!("PEM: {e}")))?;
        if block.label == "CERTIFICATE" {
            certificates.push(block.contents);
        }
    }
    Ok(certificates)
}

fn root_der() -> Vec<u8> {
    certificates_from_pem(NVIDIA_DEVICE_IDENTITY_ROOT_PEM.as_bytes())
        .ok()
        .and_then(|mut c| c.pop())
        .expect("the pinned root is one PEM certificate")
}

/// Checks `evidence` against NVIDIA's root, the time `now_unix` (the chain's clock at the
/// challenge) and the `nonce` it must answer.
pub fn verify(
    evidence: &GpuEvidence,
    nonce: &Digest,
    now_unix: i64,
) -> Result<Attested, AttestationError> {
    let chain = &evidence.certificates;
    if chain.len() < 2 || chain.len() > MAX_CHAIN {
        return Err(malformed(format!(
            "a chain of {} certificates (2 to {MAX_CHAIN})",
            chain.len()
        )));
    }
    if chain.last() != Some(&root_der()) {
        return Err(AttestationError::UnknownRoot);
    }
    let certs = chain
        .iter()
        .enumerate()
        .map(|(i, der)| match x509_parser::parse_x509_certificate(der) {
            Ok(([], cert)) => Ok(cert),
            _ => Err(malformed(format!(
                "certificate {i} is not one DER certificate"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let now = ASN1Time::from_timestamp(now_unix).map_err(|_| malformed("the time"))?;
    for (i, cert) in certs.iter().enumerate() {
        if !cert.validity().is_valid_at(now) {
            return Err(AttestationError::Expired(i));
        }
        let issuer = certs.get(i + 1).unwrap_or(cert);
        let issuer_is_ca = matches!(issuer.basic_constraints(), Ok(Some(bc)) if bc.value.ca);
        if !issuer_is_ca
            || cert.issuer().as_raw() != issuer.subject().as_raw()
            || cert.verify_signature(Some(issuer.public_key())).is_err()
        {
            return Err(AttestationError::Chain(i));
        }
    }

    let report = &evidence.report;
    let parsed = Report::parse(report)?;
    let leaf = &certs[0];
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::ECDSA_P384_SHA384_FIXED,
        leaf.public_key().subject_public_key.data.as_ref(),
    );
    let (signed, signature) = report.split_at(report.len() - SIGNATURE_LEN);
    key.verify(signed, signature)
        .map_err(|_| AttestationError::Signature)?;
    if parsed.request_nonce != *nonce {
        return Err(AttestationError::Nonce);
    }
    let (chip, device_id) = device_name(leaf)?;
    Ok(Attested {
        chip,
        device_id,
        driver_version: parsed.driver_version,
        vbios_version: parsed.vbios_version,
        measurements: parsed.measurements,
    })
}

/// The leaf's "NVIDIA:<chip>:<device id>".
fn device_name(leaf: &X509Certificate<'_>) -> Result<(String, String), AttestationError> {
    let san = leaf
        .subject_alternative_name()
        .ok()
        .flatten()
        .ok_or_else(|| malformed("the identity certificate names no device"))?;
    for name in &san.value.general_names {
        let GeneralName::OtherName(oid, value) = name else {
            continue;
        };
        if oid.to_id_string() != NVIDIA_DEVICE_NAME_OID {
            continue;
        }
        // [0] EXPLICIT { UTF8String }, or the UTF8String alone.
        let value = match value {
            [0xA0, len, rest @ ..] if usize::from(*len) == rest.len() => rest,
            other => other,
        };
        let [0x0C, len, text @ ..] = value else {
            break;
        };
        if usize::from(*len) != text.len() || *len >= 0x80 {
            break;
        }
        let text = std::str::from_utf8(text).map_err(|_| malformed("the device name"))?;
        let mut parts = text.split(':');
        if let (Some("NVIDIA"), Some(chip), Some(id), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
            && !chip.is_empty()
            && !id.is_empty()
        {
            return Ok((chip.to_string(), id.to_string()));
        }
        break;
    }
    Err(malformed("the identity certificate names no device"))
}

/// The fields of an attestation report the verifier uses.
struct Report {
    request_nonce: Digest,
    measurements: Vec<(u8, Vec<u8>)>,
    driver_version: Option<String>,
    vbios_version: Option<String>,
}

/// A reader that refuses to run past the end.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], AttestationError> {
        if self.0.len() < n {
            return Err(malformed(format!("the report ends inside {what}")));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, AttestationError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, AttestationError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u24(&mut self, what: &str) -> Result<usize, AttestationError> {
        let b = self.take(3, what)?;
        Ok(usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16)
    }
}

fn text(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[..end]).ok().map(str::to_string)
}

impl Report {
    fn parse(report: &[u8]) -> Result<Self, AttestationError> {
        let mut r = Bytes(report);
        let request = r.take(REQUEST_LEN, "the request")?;
        if request[1] != GET_MEASUREMENTS {
            return Err(malformed("the request is not GET_MEASUREMENTS"));
        }
        let request_nonce: Digest = request[4..36].try_into().expect("32 bytes");
        let header = r.take(4, "the response's header")?;
        if header[1] != MEASUREMENTS {
            return Err(malformed("the response is not MEASUREMENTS"));
        }
        let blocks = r.u8("the block count")?;
        let record_len = r.u24("the record length")?;
        let mut record = Bytes(r.take(record_len, "the measurement record")?);
        let mut measurements = Vec::with_capacity(usize::from(blocks));
        for _ in 0..blocks {
            let index = record.u8("a block's index")?;
            if record.u8("a block's specification")? != DMTF {
                return Err(malformed("a measurement block is not DMTF's"));
            }
            let size = usize::from(record.u16("a block's size")?);
            let mut block = Bytes(record.take(size, "a measurement block")?);
            let _value_type = block.u8("a measurement's type")?;
            let value_size = usize::from(block.u16("a measurement's size")?);
            let value = block.take(value_size, "a measurement")?;
            if !block.0.is_empty() {
                return Err(malformed("a measurement block longer than its value"));
            }
            measurements.push((index, value.to_vec()));
        }
        if !record.0.is_empty() {
            return Err(malformed(
                "the measurement record is longer than its blocks",
            ));
        }
        let _responder_nonce = r.take(32, "the responder's nonce")?;
        let opaque_len = usize::from(r.u16("the opaque data's length")?);
        let mut opaque = Bytes(r.take(opaque_len, "the opaque data")?);
        let (mut driver_version, mut vbios_version) = (None, None);
        while !opaque.0.is_empty() {
            let kind = opaque.u16("an opaque field's type")?;
            let size = usize::from(opaque.u16("an opaque field's size")?);
            let value = opaque.take(size, "an opaque field")?;
            match kind {
                OPAQUE_DRIVER_VERSION => driver_version = text(value),
                OPAQUE_VBIOS_VERSION => {
                    vbios_version = Some(value.iter().rev().map(|b| format!("{b:02x}")).collect())
                }
                _ => {}
            }
        }
        if r.0.len() != SIGNATURE_LEN {
            return Err(malformed(format!(
                "{} bytes after the opaque data where the signature's {SIGNATURE_LEN} are",
                r.0.len()
            )));
        }
        Ok(Self {
            request_nonce,
            measurements,
            driver_version,
            vbios_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GH100_REPORT: &str =
        include_str!("../tests/fixtures/nvidia/gh100-attestation-report.hex");
    const GH100_CHAIN: &str = include_str!("../tests/fixtures/nvidia/gh100-cert-chain.pem");
    const FORGED_REPORT: &str =
        include_str!("../tests/fixtures/nvidia/forged-attestation-report.hex");
    const FORGED_CHAIN: &str = include_str!("../tests/fixtures/nvidia/forged-cert-chain.pem");
    /// The nonce the GH100 sample answers, and the one the forged report answers.
    const GH100_NONCE: &str = "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb";
    const FORGED_NONCE: [u8; 32] = {
        let mut n = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            n[i] = i as u8;
            i += 1;
        }
        n
    };
    /// 2026-12-01, within every certificate's validity.
    const NOW: i64 = 1_796_083_200;

    fn hex(s: &str) -> Vec<u8> {
        let s = s.trim();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn gh100() -> (GpuEvidence, Digest) {
        let evidence = GpuEvidence {
            report: hex(GH100_REPORT),
            certificates: certificates_from_pem(GH100_CHAIN.as_bytes()).unwrap(),
        };
        (evidence, hex(GH100_NONCE).try_into().unwrap())
    }

    #[test]
    fn a_real_hopper_report_is_verified_and_names_its_chip_and_card() {
        let (evidence, nonce) = gh100();
        assert_eq!(evidence.certificates.len(), 5);
        let attested = verify(&evidence, &nonce, NOW).expect("NVIDIA's sample evidence");
        assert_eq!(attested.chip, "GH100");
        assert_eq!(attested.device_id, "48B02D92494BADF4");
        assert_eq!(attested.driver_version.as_deref(), Some("550.90.07"));
        assert_eq!(attested.measurements.len(), 64);
        assert_eq!(attested.measurements[0].0, 1);
        assert_eq!(attested.measurements[0].1.len(), 48, "SHA-384 measurements");
    }

    #[test]
    fn a_report_made_for_another_nonce_is_refused() {
        let (evidence, nonce) = gh100();
        let mut other = nonce;
        other[0] ^= 1;
        assert_eq!(verify(&evidence, &other, NOW), Err(AttestationError::Nonce));
        // Rewriting the request's nonce breaks the signature, which covers it.
        let mut rewritten = evidence.clone();
        rewritten.report[4] ^= 1;
        assert_eq!(
            verify(&rewritten, &other, NOW),
            Err(AttestationError::Signature)
        );
    }

    #[test]
    fn any_byte_changed_in_the_report_breaks_its_signature() {
        let (evidence, nonce) = gh100();
        let len = evidence.report.len();
        // The request, a measurement, the opaque data's driver version, the signature.
        for at in [0, 40, 200, len - 400, len - 1] {
            let mut tampered = evidence.clone();
            tampered.report[at] ^= 0x01;
            let got = verify(&tampered, &nonce, NOW);
            assert!(
                matches!(
                    got,
                    Err(AttestationError::Signature | AttestationError::Malformed(_))
                ),
                "byte {at}: {got:?}"
            );
        }
    }

    #[test]
    fn a_chain_of_our_own_with_nvidias_names_is_refused_at_the_root() {
        let forged = GpuEvidence {
            report: hex(FORGED_REPORT),
            certificates: certificates_from_pem(FORGED_CHAIN.as_bytes()).unwrap(),
        };
        assert_eq!(
            verify(&forged, &FORGED_NONCE, NOW),
            Err(AttestationError::UnknownRoot)
        );
        // With NVIDIA's root put at its end, the forged identity CA is not signed by it.
        let mut grafted = forged.clone();
        *grafted.certificates.last_mut().unwrap() = root_der();
        assert_eq!(
            verify(&grafted, &FORGED_NONCE, NOW),
            Err(AttestationError::Chain(1))
        );
        // A genuine chain with the forged report: the report is not the card's.
        let (genuine, _) = gh100();
        let mut swapped = forged;
        swapped.certificates = genuine.certificates;
        assert_eq!(
            verify(&swapped, &FORGED_NONCE, NOW),
            Err(AttestationError::Signature)
        );
    }

    #[test]
    fn a_chain_cut_short_reordered_or_out_of_date_is_refused() {
        let (evidence, nonce) = gh100();
        let mut short = evidence.clone();
        short.certificates.remove(1);
        assert_eq!(verify(&short, &nonce, NOW), Err(AttestationError::Chain(0)));
        let mut swapped = evidence.clone();
        swapped.certificates.swap(0, 1);
        assert!(matches!(
            verify(&swapped, &nonce, NOW),
            Err(AttestationError::Chain(0))
        ));
        // 2020: before the root's validity began (2021-11-05).
        assert!(matches!(
            verify(&evidence, &nonce, 1_600_000_000),
            Err(AttestationError::Expired(_))
        ));
        let lone = GpuEvidence {
            report: evidence.report.clone(),
            certificates: vec![root_der()],
        };
        assert!(matches!(
            verify(&lone, &nonce, NOW),
            Err(AttestationError::Malformed(_))
        ));
    }

    #[test]
    fn a_truncated_or_padded_report_is_malformed_not_a_panic() {
        let (evidence, nonce) = gh100();
        for len in [0, 10, 37, 41, 44, 500, evidence.report.len() - 97] {
            let mut cut = evidence.clone();
            cut.report.truncate(len);
            assert!(
                matches!(
                    verify(&cut, &nonce, NOW),
                    Err(AttestationError::Malformed(_))
                ),
                "cut to {len}"
            );
        }
        let mut padded = evidence;
        padded.report.push(0);
        assert!(matches!(
            verify(&padded, &nonce, NOW),
            Err(AttestationError::Malformed(_))
        ));
    }

    /// A node's opening: genuine evidence made for another nonce is a replay on any GPU;
    /// a GPU without evidence is not judged; evidence for a GPU never challenged is refused.
    #[test]
    fn a_nodes_gpus_are_attested_each_against_its_own_challenge() {
        let params = crate::tests::params();
        let (evidence, _) = gh100();
        let gpu = |attestation| crate::GpuOpening {
            commitment: [0; 32],
            held_digest: [0; 32],
            opening: crate::Opening {
                held_roots: vec![],
                rows: vec![],
            },
            attestation,
        };
        let opening = crate::NodeOpening {
            gpus: vec![gpu(Some(evidence.clone())), gpu(None), gpu(Some(evidence))],
        };
        let got = crate::attest_node(&[params.clone(), params], &opening, NOW);
        assert_eq!(got[0], Some(Err(AttestationError::Nonce)));
        assert_eq!(got[1], None);
        assert!(matches!(got[2], Some(Err(AttestationError::Malformed(_)))));
    }

    #[test]
    fn the_nonce_is_drawn_from_the_gpus_seed() {
        assert_ne!(attestation_nonce(&[1; 32]), attestation_nonce(&[2; 32]));
        assert_ne!(attestation_nonce(&[1; 32]), [1; 32]);
    }
}
