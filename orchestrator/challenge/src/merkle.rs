//! A binary Merkle tree over sha256 with domain-separated leaves and nodes.
//!
//! A level of odd length carries its last node up unchanged (never duplicated, which would
//! let two leaf lists share a root). The leaf count is part of the parameters, so a verifier
//! knows the tree's shape and a proof is only the siblings met on the way up.

use serde::{Deserialize, Serialize};

use crate::hash::{Digest, node};

/// Every level of a tree, leaves first.
#[derive(Debug, Clone)]
pub struct MerkleTree {
    levels: Vec<Vec<Digest>>,
}

/// The siblings from a leaf to the root, lowest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerkleProof {
    #[serde(with = "crate::wire::digests")]
    pub siblings: Vec<Digest>,
}

impl MerkleTree {
    /// # Panics
    /// On an empty leaf list: parameters always have rows.
    pub fn new(leaves: Vec<Digest>) -> Self {
        assert!(!leaves.is_empty(), "a Merkle tree needs a leaf");
        let mut levels = vec![leaves];
        while levels.last().is_some_and(|l| l.len() > 1) {
            let below = levels.last().expect("a level");
            let above = below
                .chunks(2)
                .map(|pair| match pair {
                    [left, right] => node(left, right),
                    [carried] => *carried,
                    _ => unreachable!("chunks of two"),
                })
                .collect();
            levels.push(above);
        }
        Self { levels }
    }

    pub fn root(&self) -> Digest {
        self.levels.last().expect("a level")[0]
    }

    pub fn leaf_count(&self) -> u64 {
        self.levels[0].len() as u64
    }

    /// The proof of leaf `index`.
    ///
    /// # Panics
    /// When `index` is not a leaf.
    pub fn proof(&self, index: u64) -> MerkleProof {
        let mut i = usize::try_from(index).expect("index fits in memory");
        assert!(i < self.levels[0].len(), "leaf {index} out of range");
        let mut siblings = Vec::new();
        for level in &self.levels[..self.levels.len() - 1] {
            let sibling = i ^ 1;
            if sibling < level.len() {
                siblings.push(level[sibling]);
            }
            i /= 2;
        }
        MerkleProof { siblings }
    }
}

/// Whether `proof` takes `leaf`, at `index` of a tree of `leaf_count` leaves, to `root`. A
/// proof with a sibling too many or too few is refused.
pub fn verify(
    root: &Digest,
    leaf_count: u64,
    index: u64,
    leaf: &Digest,
    proof: &MerkleProof,
) -> bool {
    if index >= leaf_count {
        return false;
    }
    let mut siblings = proof.siblings.iter();
    let (mut i, mut count, mut hash) = (index, leaf_count, *leaf);
    while count > 1 {
        if i % 2 == 1 {
            let Some(left) = siblings.next() else {
                return false;
            };
            hash = node(left, &hash);
        } else if i + 1 < count {
            let Some(right) = siblings.next() else {
                return false;
            };
            hash = node(&hash, right);
        }
        i /= 2;
        count = count.div_ceil(2);
    }
    siblings.next().is_none() && hash == *root
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::sha256;

    fn leaves(n: u64) -> Vec<Digest> {
        (0..n).map(|i| sha256(&[&i.to_le_bytes()])).collect()
    }

    #[test]
    fn every_leaf_of_every_shape_proves_against_the_root() {
        for n in 1..=33u64 {
            let tree = MerkleTree::new(leaves(n));
            for i in 0..n {
                let proof = tree.proof(i);
                assert!(
                    verify(&tree.root(), n, i, &leaves(n)[i as usize], &proof),
                    "leaf {i} of {n}"
                );
            }
        }
    }

    #[test]
    fn a_tampered_or_misplaced_proof_is_refused() {
        let n = 13;
        let all = leaves(n);
        let tree = MerkleTree::new(all.clone());
        let root = tree.root();
        let proof = tree.proof(6);
        assert!(verify(&root, n, 6, &all[6], &proof));

        let mut flipped = proof.clone();
        flipped.siblings[1][0] ^= 1;
        assert!(!verify(&root, n, 6, &all[6], &flipped), "a flipped sibling");
        assert!(!verify(&root, n, 7, &all[6], &proof), "another index");
        assert!(
            !verify(&root, 7, 6, &all[6], &proof),
            "a tree of another depth"
        );
        assert!(
            !verify(&root, n, n, &all[6], &proof),
            "an index past the end"
        );
        assert!(!verify(&root, n, 6, &all[5], &proof), "another leaf");
        let mut longer = proof.clone();
        longer.siblings.push([0; 32]);
        assert!(!verify(&root, n, 6, &all[6], &longer), "a sibling too many");
        let mut shorter = proof;
        shorter.siblings.pop();
        assert!(!verify(&root, n, 6, &all[6], &shorter), "a sibling too few");
    }

    #[test]
    fn a_carried_node_is_not_a_duplicated_one() {
        // With duplication, [a, b, c] and [a, b, c, c] would share a root.
        let three = leaves(3);
        let mut four = three.clone();
        four.push(three[2]);
        assert_ne!(MerkleTree::new(three).root(), MerkleTree::new(four).root());
    }
}
