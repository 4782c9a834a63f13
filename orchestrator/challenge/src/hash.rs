//! Every hash the challenge defines, each with its own domain: the seeds, the commitment
//! leaf of a product row, the held leaf of a row under a pass key, the Merkle nodes and the
//! key chain of the held passes. A GPU backend must compute the same bytes; the pinned
//! values in the tests are what it is held to.

use sha2::{Digest as _, Sha256};

/// A sha256 digest.
pub type Digest = [u8; 32];

/// First byte of every commitment leaf's preimage.
const ROW_LEAF: u8 = 0x00;
/// First byte of every Merkle node's preimage.
const NODE: u8 = 0x01;
/// First byte of every held leaf's preimage.
const HELD_LEAF: u8 = 0x02;

const ROW_LEAF_TAG: &[u8] = b"mcjs-challenge/1/row";
const HELD_LEAF_TAG: &[u8] = b"mcjs-challenge/1/held";
const HELD_KEY_TAG: &[u8] = b"mcjs-challenge/1/held-key";
const SEED_TAG: &[u8] = b"mcjs-challenge/1/seed";

/// Values converted to little-endian bytes this many at a time before hashing.
const CHUNK: usize = 1024;

/// A leaf's domain byte, tag, key and index fill one sha256 block of their own (zero
/// padded), so a row's values start on a block boundary: a device hashing a row takes each
/// block straight from memory as 16 words, with no byte shifting (`gpu/kernels.cu`).
pub const LEAF_HEADER: usize = 64;

/// Where the index's eight bytes start in a commitment leaf's header.
pub const ROW_LEAF_INDEX_AT: usize = 1 + ROW_LEAF_TAG.len();
/// Where the index's eight bytes start in a held leaf's header.
pub const HELD_LEAF_INDEX_AT: usize = 1 + HELD_LEAF_TAG.len() + 32;

const _: () = assert!(ROW_LEAF_INDEX_AT + 8 <= LEAF_HEADER);
const _: () = assert!(HELD_LEAF_INDEX_AT + 8 <= LEAF_HEADER);

/// The header block of row `index`'s commitment leaf.
pub fn row_leaf_header(index: u64) -> [u8; LEAF_HEADER] {
    leaf_header(&[&[ROW_LEAF], ROW_LEAF_TAG, &index.to_le_bytes()])
}

/// The header block of row `index`'s held leaf under one pass's `key`.
pub fn held_leaf_header(key: &Digest, index: u64) -> [u8; LEAF_HEADER] {
    leaf_header(&[&[HELD_LEAF], HELD_LEAF_TAG, key, &index.to_le_bytes()])
}

/// The header block of a leaf: `parts` in order, then zeros.
fn leaf_header(parts: &[&[u8]]) -> [u8; LEAF_HEADER] {
    let mut header = [0u8; LEAF_HEADER];
    let mut at = 0;
    for part in parts {
        header[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    header
}

/// The challenge seed of one GPU: the slot hash the program drew, bound to the node and the
/// GPU's index on it, so that two nodes (or two GPUs of one node) never get the same
/// challenge and one answer cannot serve twice.
pub fn challenge_seed(slot_hash: &Digest, node: &[u8; 32], gpu_index: u8) -> Digest {
    let mut h = Sha256::new();
    h.update(SEED_TAG);
    h.update(slot_hash);
    h.update(node);
    h.update([gpu_index]);
    h.finalize().into()
}

/// The commitment leaf of product row `index`: a header block (domain, tag, index), then
/// its values as little-endian i32.
pub fn row_leaf(index: u64, row: &[i32]) -> Digest {
    let mut h = Sha256::new();
    h.update(row_leaf_header(index));
    let mut buf = [0u8; CHUNK * 4];
    for chunk in row.chunks(CHUNK) {
        for (out, v) in buf.chunks_exact_mut(4).zip(chunk) {
            out.copy_from_slice(&v.to_le_bytes());
        }
        h.update(&buf[..chunk.len() * 4]);
    }
    h.finalize().into()
}

/// What a node holds of a product entry: its low 16 bits. They are uniform (the entries'
/// spread is far wider than 2^16), so they cannot be packed smaller, where the whole i32
/// entry carries only about 22 bits of information and could.
pub fn held_value(entry: i32) -> u16 {
    entry as u16
}

/// The held leaf of row `index` under one pass's `key`: a header block (domain, tag, key,
/// index), then the row's held values as little-endian u16.
pub fn held_leaf(key: &Digest, index: u64, held: &[u16]) -> Digest {
    let mut h = Sha256::new();
    h.update(held_leaf_header(key, index));
    let mut buf = [0u8; CHUNK * 2];
    for chunk in held.chunks(CHUNK) {
        for (out, v) in buf.chunks_exact_mut(2).zip(chunk) {
            out.copy_from_slice(&v.to_le_bytes());
        }
        h.update(&buf[..chunk.len() * 2]);
    }
    h.finalize().into()
}

/// [`held_leaf`] of a full product row (what a checker has after the opening).
pub fn held_leaf_of_row(key: &Digest, index: u64, row: &[i32]) -> Digest {
    let held: Vec<u16> = row.iter().map(|&v| held_value(v)).collect();
    held_leaf(key, index, &held)
}

/// A Merkle node over two children.
pub fn node(left: &Digest, right: &Digest) -> Digest {
    let mut h = Sha256::new();
    h.update([NODE]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The key of the first held pass: the parameters, the held seed drawn after the commitment
/// landed, and the commitment itself.
pub fn first_held_key(params_digest: &Digest, held_seed: &Digest, commitment: &Digest) -> Digest {
    let mut h = Sha256::new();
    h.update(HELD_KEY_TAG);
    h.update(params_digest);
    h.update(held_seed);
    h.update(commitment);
    h.finalize().into()
}

/// The key after a pass: it needs that pass's root, so no pass can start before the one
/// before it has read every row. After the last pass this is the held digest.
pub fn next_held_key(key: &Digest, pass_root: &Digest) -> Digest {
    let mut h = Sha256::new();
    h.update(HELD_KEY_TAG);
    h.update(key);
    h.update(pass_root);
    h.finalize().into()
}

/// The keys of every pass (`keys[p]` keys pass `p`) and the held digest, from the roots.
pub fn held_keys(
    params_digest: &Digest,
    held_seed: &Digest,
    commitment: &Digest,
    roots: &[Digest],
) -> (Vec<Digest>, Digest) {
    let mut key = first_held_key(params_digest, held_seed, commitment);
    let mut keys = Vec::with_capacity(roots.len());
    for root in roots {
        keys.push(key);
        key = next_held_key(&key, root);
    }
    (keys, key)
}

/// sha256 over the concatenation of `parts`.
pub(crate) fn sha256(parts: &[&[u8]]) -> Digest {
    let mut h = Sha256::new();
    for part in parts {
        h.update(part);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_leaf_header_holds_its_index_where_the_kernels_write_it() {
        assert_eq!(row_leaf_header(0x0102)[ROW_LEAF_INDEX_AT..][..2], [2, 1]);
        assert_eq!(
            held_leaf_header(&[0; 32], 0x0102)[HELD_LEAF_INDEX_AT..][..2],
            [2, 1]
        );
    }

    #[test]
    fn a_leaf_is_its_header_block_then_its_values() {
        let row = [1i32, -2, 0x0102_0304];
        let mut preimage = vec![0u8; LEAF_HEADER];
        preimage[0] = ROW_LEAF;
        preimage[1..21].copy_from_slice(ROW_LEAF_TAG);
        preimage[21..29].copy_from_slice(&7u64.to_le_bytes());
        for v in row {
            preimage.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(row_leaf(7, &row), sha256(&[&preimage]));

        let key = [9u8; 32];
        let held = [0xbeefu16, 3];
        let mut preimage = vec![0u8; LEAF_HEADER];
        preimage[0] = HELD_LEAF;
        preimage[1..22].copy_from_slice(HELD_LEAF_TAG);
        preimage[22..54].copy_from_slice(&key);
        preimage[54..62].copy_from_slice(&7u64.to_le_bytes());
        for v in held {
            preimage.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(held_leaf(&key, 7, &held), sha256(&[&preimage]));
    }
}
