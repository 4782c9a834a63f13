//! The program's Anchor IDL on chain: written by `publish_idl`
//! (programs/mcjs/src/instructions/publish_idl.rs) into Anchor's IDL
//! account, where anchorpy's `fetch_idl`, Anchor's `legacy-idl fetch` and
//! explorers read it, as Anchor keeps it: the IDL's JSON (compact),
//! zlib-compressed.
//!
//! Writes go one after another, each confirmed before the next (the
//! account grows by at most 10 KiB an instruction, so a later write may
//! need the earlier ones' growth); the account is read back at the end and
//! compared byte for byte. Publishing an IDL the chain already holds sends
//! nothing.

use std::io::{Read as _, Write as _};

use mcjs::instructions::{IDL_DISCRIMINATOR, IDL_HEADER, MAX_IDL_LEN};

use super::*;

/// The IDL as the chain keeps it: `json` re-serialised compact, then
/// zlib-compressed. Refused when `json` is not JSON or compresses past
/// [`MAX_IDL_LEN`].
pub fn compress_idl(json: &[u8]) -> Result<(usize, Vec<u8>), String> {
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("the IDL is not JSON: {e}"))?;
    let compact = serde_json::to_vec(&value).expect("a JSON value serialises");
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&compact).expect("writes to a Vec");
    let compressed = encoder.finish().expect("writes to a Vec");
    if compressed.len() > MAX_IDL_LEN as usize {
        return Err(format!(
            "the IDL compresses to {} bytes; the program keeps at most {MAX_IDL_LEN}",
            compressed.len()
        ));
    }
    Ok((compact.len(), compressed))
}

/// The IDL's JSON from compressed bytes as the chain keeps them.
pub fn decompress_idl(compressed: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(compressed).read_to_end(&mut json)?;
    Ok(json)
}

/// The IDL bytes written into one transaction: what the packet holds beside
/// the instruction's accounts, its arguments and the compute-unit limit.
pub fn idl_chunk_len(authority: &Pubkey) -> usize {
    super::deploy::room_in_packet(
        crate::ix::publish_idl(authority, 0, 0, Vec::new()),
        authority,
    )
}

impl ChainClient {
    /// The published IDL: its authority and its compressed bytes as far as
    /// the account's length field covers them (empty while a new IDL is
    /// being written); `None` when nothing was ever published.
    pub async fn published_idl(&self) -> Result<Option<(Pubkey, Vec<u8>)>, ChainError> {
        let key = crate::ix::idl_address();
        let Some(account) = self.account(&key).await? else {
            return Ok(None);
        };
        let data = &account.data;
        if account.owner != mcjs::ID || data.len() < IDL_HEADER || data[..8] != IDL_DISCRIMINATOR {
            return Ok(None);
        }
        let authority = Pubkey::try_from(&data[8..40]).expect("32 bytes");
        let len = u32::from_le_bytes(data[40..44].try_into().expect("4 bytes")) as usize;
        let Some(bytes) = data.get(IDL_HEADER..IDL_HEADER + len) else {
            return Ok(None);
        };
        Ok(Some((authority, bytes.to_vec())))
    }

    /// Publishes `compressed` ([`compress_idl`]) as the program's IDL,
    /// signed and paid by `authority` (the program's upgrade authority; the
    /// Config's admin for the native build): the write transactions sent,
    /// none when the chain holds it already. `progress` hears of each write
    /// confirmed (done, of all).
    pub async fn publish_idl(
        &self,
        authority: &Keypair,
        compressed: &[u8],
        progress: super::WriteProgress<'_>,
    ) -> Result<usize, ChainError> {
        let wanted = Some((authority.pubkey(), compressed.to_vec()));
        if self.published_idl().await? == wanted {
            return Ok(0);
        }
        let total = compressed.len() as u32;
        let chunk = idl_chunk_len(&authority.pubkey());
        let all = compressed.len().div_ceil(chunk);
        let mut writes = 0;
        for (i, bytes) in compressed.chunks(chunk).enumerate() {
            let write = crate::ix::publish_idl(
                &authority.pubkey(),
                (i * chunk) as u32,
                total,
                bytes.to_vec(),
            );
            self.send(&[write], &[authority]).await?;
            writes += 1;
            progress(writes, all);
        }
        if self.published_idl().await? != wanted {
            return Err(ChainError::Transaction {
                message: format!(
                    "the IDL account {} does not hold the IDL after {writes} writes: publish it again",
                    crate::ix::idl_address()
                ),
                logs: Vec::new(),
            });
        }
        Ok(writes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_idl_write_fills_a_packet_and_no_more() {
        let authority = Pubkey::new_unique();
        let len = idl_chunk_len(&authority);
        let write = crate::ix::publish_idl(&authority, 0, 1, vec![7; len]);
        let tx = Transaction::new_with_payer(
            &crate::compute::with_unit_limit(&[write]),
            Some(&authority),
        );
        let size = bincode::serialized_size(&tx).unwrap() as usize;
        assert!(size <= super::super::deploy::PACKET_BYTES, "{size} bytes");
        assert!(
            size + 2 > super::super::deploy::PACKET_BYTES,
            "{size} bytes leave room"
        );
        assert!(len > 700, "{len} bytes a write");
    }

    #[test]
    fn the_idl_round_trips_through_its_compressed_form_and_bad_json_is_refused() {
        let json = br#"{ "address": "x",   "instructions": [ 1, 2, 3 ] }"#;
        let (compact, compressed) = compress_idl(json).unwrap();
        assert_eq!(compact, br#"{"address":"x","instructions":[1,2,3]}"#.len());
        assert_eq!(
            decompress_idl(&compressed).unwrap(),
            br#"{"address":"x","instructions":[1,2,3]}"#
        );
        assert!(compress_idl(b"{ not json").is_err());
    }
}
