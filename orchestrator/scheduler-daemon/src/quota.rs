//! What one wallet may keep in the store: its own space (`users/<wallet>/`)
//! and the specs it publishes, bounded in total, not only in rate. Pure: the
//! gateway lists what the wallet stores and asks [`Pending::admit`] before it
//! signs a write.
//!
//! A wallet costs nothing to make, so these bounds are per wallet and do not
//! cap the store as a whole; the gateway's rate limits (per key, per address,
//! and the owners' shared budget) bound how fast fresh wallets can arrive.
//!
//! What a listing cannot see yet is counted here:
//! - a signed PUT, from its grant until its URL expires (after that it was
//!   either sent, and is listed, or is worthless);
//! - the parts of an open multipart upload, until it is completed (then the
//!   object is listed) or aborted. An upload this process did not open (a
//!   restarted scheduler) is refused: the client starts it again.
//!
//! Each transfer's size is signed into its URL as its `Content-Length`, so
//! no more than the declared bytes can be sent on it.

use std::collections::{BTreeMap, HashMap};

use mcjs_client::Pubkey;
use mcjs_protocol::store::StoreOp;

/// The bounds on one wallet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalletQuota {
    /// Bytes stored under `users/<wallet>/`, with pending transfers.
    pub bytes: u64,
    /// Objects stored there, with pending PUTs.
    pub objects: u64,
    /// Multipart uploads open at once.
    pub open_uploads: usize,
    /// Specs the wallet has published.
    pub specs: u64,
}

impl WalletQuota {
    /// 1 TiB in at most 10,000 objects, 8 uploads at once, 1,000 specs.
    pub const STANDARD: WalletQuota = WalletQuota {
        bytes: 1 << 40,
        objects: 10_000,
        open_uploads: 8,
        specs: 1_000,
    };
}

/// Bytes and objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub objects: u64,
}

/// What a wallet stores now, as listed: totals, and each object's size by
/// path (a granted PUT whose object is listed at its size has been sent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    pub usage: Usage,
    pub sizes: HashMap<String, u64>,
}

impl Stored {
    pub fn add(&mut self, path: String, size: u64) {
        self.usage.bytes = self.usage.bytes.saturating_add(size);
        self.usage.objects += 1;
        self.sizes.insert(path, size);
    }
}

/// Why a write was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuotaRefusal {
    #[error("{path}: an owner's upload declares its size (a client of this version of MCJS does)")]
    Undeclared { path: String },
    #[error(
        "wallet {wallet} would store {would} bytes, over its quota of {quota}; delete data it no longer needs"
    )]
    Bytes {
        wallet: String,
        would: u64,
        quota: u64,
    },
    #[error(
        "wallet {wallet} would store {would} objects, over its quota of {quota}; delete data it no longer needs"
    )]
    Objects {
        wallet: String,
        would: u64,
        quota: u64,
    },
    #[error("wallet {wallet} has {open} uploads open, the most one wallet may; finish one first")]
    Uploads { wallet: String, open: usize },
    #[error(
        "upload {upload_id} of {path} is unknown to this scheduler (restarted?); start the upload again"
    )]
    UnknownUpload { upload_id: String, path: String },
}

#[derive(Debug)]
struct Upload {
    owner: Pubkey,
    path: String,
    parts: BTreeMap<u16, u64>,
    touched_ms: i64,
}

/// Transfers granted and not yet visible in a listing.
#[derive(Debug, Default)]
pub struct Pending {
    /// Per wallet: (path, size, when the URL expires, ms).
    puts: HashMap<Pubkey, Vec<(String, u64, i64)>>,
    uploads: HashMap<String, Upload>,
}

/// An upload untouched this long is forgotten (its parts no longer
/// counted); a store's lifecycle rule should abort it (docs/store.md).
pub const UPLOAD_IDLE_MS: i64 = 24 * 3600 * 1000;

impl Pending {
    /// Forgets PUTs whose URL expired, and `owner`'s PUTs whose object is
    /// listed at the granted size (sent: the listing counts it now; or an
    /// overwrite of an object of that size, which changes nothing).
    fn forget_old(&mut self, owner: &Pubkey, stored: &Stored, now_ms: i64) {
        if let Some(puts) = self.puts.get_mut(owner) {
            puts.retain(|(path, size, _)| stored.sizes.get(path) != Some(size));
        }
        self.puts.retain(|_, puts| {
            puts.retain(|(_, _, expires)| *expires > now_ms);
            !puts.is_empty()
        });
        self.uploads
            .retain(|_, u| now_ms - u.touched_ms < UPLOAD_IDLE_MS);
    }

    /// Bytes and objects of `owner` granted and not yet listed.
    fn pending(&self, owner: &Pubkey) -> Usage {
        let puts = self.puts.get(owner).map(Vec::as_slice).unwrap_or(&[]);
        let parts: u64 = self
            .uploads
            .values()
            .filter(|u| u.owner == *owner)
            .flat_map(|u| u.parts.values())
            .sum();
        Usage {
            bytes: puts.iter().map(|(_, b, _)| b).sum::<u64>() + parts,
            objects: puts.len() as u64,
        }
    }

    fn open_uploads(&self, owner: &Pubkey) -> usize {
        self.uploads.values().filter(|u| u.owner == *owner).count()
    }

    /// Admits the writes among `ops` that an owner makes into its own space,
    /// given what it stores now, and records them as pending; refuses them
    /// all, recording nothing, when any would take the wallet over `quota`.
    /// `grant_expires_ms` is when a signed PUT's URL expires.
    pub fn admit(
        &mut self,
        owner: &Pubkey,
        stored: &Stored,
        ops: &[&StoreOp],
        quota: &WalletQuota,
        now_ms: i64,
        grant_expires_ms: i64,
    ) -> Result<(), QuotaRefusal> {
        self.forget_old(owner, stored, now_ms);
        let stored = stored.usage;
        let wallet = owner.to_string();
        let pending = self.pending(owner);
        let (mut bytes, mut objects) = (0u64, 0u64);
        let mut creates = 0usize;
        // Parts granted again in this request replace what was granted.
        let mut replaced = 0u64;
        for op in ops {
            match op {
                StoreOp::Put { path, size } => {
                    let size =
                        size.ok_or_else(|| QuotaRefusal::Undeclared { path: path.clone() })?;
                    bytes = bytes.saturating_add(size);
                    objects += 1;
                }
                StoreOp::UploadPart {
                    path,
                    upload_id,
                    part,
                    size,
                } => {
                    let size =
                        size.ok_or_else(|| QuotaRefusal::Undeclared { path: path.clone() })?;
                    let upload = self
                        .uploads
                        .get(upload_id)
                        .filter(|u| u.owner == *owner && u.path == *path)
                        .ok_or_else(|| QuotaRefusal::UnknownUpload {
                            upload_id: upload_id.clone(),
                            path: path.clone(),
                        })?;
                    replaced += upload.parts.get(part).copied().unwrap_or(0);
                    bytes = bytes.saturating_add(size);
                }
                StoreOp::CreateMultipart { .. } => creates += 1,
                _ => {}
            }
        }
        let open = self.open_uploads(owner);
        if creates > 0 && open + creates > quota.open_uploads {
            return Err(QuotaRefusal::Uploads { wallet, open });
        }
        let would_bytes = stored
            .bytes
            .saturating_add(pending.bytes)
            .saturating_sub(replaced)
            .saturating_add(bytes);
        if would_bytes > quota.bytes {
            return Err(QuotaRefusal::Bytes {
                wallet,
                would: would_bytes,
                quota: quota.bytes,
            });
        }
        let would_objects = stored.objects + pending.objects + objects;
        if objects > 0 && would_objects > quota.objects {
            return Err(QuotaRefusal::Objects {
                wallet,
                would: would_objects,
                quota: quota.objects,
            });
        }
        for op in ops {
            match op {
                StoreOp::Put {
                    path,
                    size: Some(size),
                } => self.puts.entry(*owner).or_default().push((
                    path.clone(),
                    *size,
                    grant_expires_ms,
                )),
                StoreOp::UploadPart {
                    upload_id,
                    part,
                    size: Some(size),
                    ..
                } => {
                    if let Some(u) = self.uploads.get_mut(upload_id) {
                        u.parts.insert(*part, *size);
                        u.touched_ms = now_ms;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// An upload was opened for `owner` at `path`.
    pub fn opened(&mut self, owner: Pubkey, path: String, upload_id: String, now_ms: i64) {
        self.uploads.insert(
            upload_id,
            Upload {
                owner,
                path,
                parts: BTreeMap::new(),
                touched_ms: now_ms,
            },
        );
    }

    /// An upload was completed (its object is listed now) or aborted.
    pub fn closed(&mut self, upload_id: &str) {
        self.uploads.remove(upload_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: WalletQuota = WalletQuota {
        bytes: 1_000,
        objects: 3,
        open_uploads: 1,
        specs: 2,
    };

    fn put(size: Option<u64>) -> StoreOp {
        StoreOp::Put {
            path: "users/w/data/a".into(),
            size,
        }
    }

    fn part(upload_id: &str, part: u16, size: u64) -> StoreOp {
        StoreOp::UploadPart {
            path: "users/w/data/big".into(),
            upload_id: upload_id.into(),
            part,
            size: Some(size),
        }
    }

    #[test]
    fn signed_puts_count_until_their_urls_expire_and_a_refusal_records_nothing() {
        let (mut p, w) = (Pending::default(), Pubkey::new_unique());
        let mut stored = Stored::default();
        stored.add("users/w/data/old".into(), 500);
        p.admit(&w, &stored, &[&put(Some(300))], &Q, 0, 300_000)
            .expect("800 of 1,000");
        // Not listed yet: the grant still counts.
        let over = p
            .admit(&w, &stored, &[&put(Some(300))], &Q, 1_000, 301_000)
            .unwrap_err();
        assert!(
            matches!(over, QuotaRefusal::Bytes { would: 1_100, .. }),
            "{over}"
        );
        assert_eq!(p.pending(&w).bytes, 300, "the refusal recorded nothing");
        // Listed at its granted size: sent, counted once.
        let mut listed = stored.clone();
        listed.add("users/w/data/a".into(), 300);
        p.admit(&w, &listed, &[&put(Some(200))], &Q, 2_000, 302_000)
            .expect("1,000 of 1,000");
        // That grant's URL expired: sent (listed) or worthless.
        let mut two = Stored::default();
        two.add("users/w/data/x".into(), 1);
        two.add("users/w/data/y".into(), 1);
        p.admit(&w, &two, &[&put(Some(1))], &Q, 302_001, 600_000)
            .expect("three objects");
        let objects = p
            .admit(&w, &two, &[&put(Some(1))], &Q, 302_002, 600_000)
            .unwrap_err();
        assert!(
            matches!(objects, QuotaRefusal::Objects { would: 4, .. }),
            "{objects}"
        );
        // Another wallet is not affected.
        p.admit(
            &Pubkey::new_unique(),
            &Stored::default(),
            &[&put(Some(1_000))],
            &Q,
            0,
            1,
        )
        .expect("its own quota");
    }

    #[test]
    fn an_owner_upload_must_declare_its_size() {
        let (mut p, w) = (Pending::default(), Pubkey::new_unique());
        let e = p
            .admit(&w, &Stored::default(), &[&put(None)], &Q, 0, 1)
            .unwrap_err();
        assert!(matches!(e, QuotaRefusal::Undeclared { .. }));
    }

    #[test]
    fn parts_of_open_uploads_count_until_completed_and_a_part_sent_again_replaces_itself() {
        let (mut p, w) = (Pending::default(), Pubkey::new_unique());
        let create = StoreOp::CreateMultipart {
            path: "users/w/data/big".into(),
        };
        p.admit(&w, &Stored::default(), &[&create], &Q, 0, 1)
            .unwrap();
        p.opened(w, "users/w/data/big".into(), "u1".into(), 0);
        assert!(matches!(
            p.admit(&w, &Stored::default(), &[&create], &Q, 0, 1),
            Err(QuotaRefusal::Uploads { open: 1, .. })
        ));
        p.admit(&w, &Stored::default(), &[&part("u1", 1, 600)], &Q, 0, 1)
            .unwrap();
        // Part 1 again (a retry): 600 replaced, not added.
        p.admit(&w, &Stored::default(), &[&part("u1", 1, 600)], &Q, 0, 1)
            .expect("a retried part replaces itself");
        assert!(matches!(
            p.admit(&w, &Stored::default(), &[&part("u1", 2, 600)], &Q, 0, 1),
            Err(QuotaRefusal::Bytes { would: 1_200, .. })
        ));
        // Another wallet cannot send parts of this upload, nor anyone of an
        // upload this scheduler never opened.
        let stranger = Pubkey::new_unique();
        assert!(matches!(
            p.admit(
                &stranger,
                &Stored::default(),
                &[&part("u1", 3, 1)],
                &Q,
                0,
                1
            ),
            Err(QuotaRefusal::UnknownUpload { .. })
        ));
        assert!(matches!(
            p.admit(&w, &Stored::default(), &[&part("u9", 1, 1)], &Q, 0, 1),
            Err(QuotaRefusal::UnknownUpload { .. })
        ));
        p.closed("u1");
        assert_eq!(p.pending(&w), Usage::default());
        // An upload left idle for a day is forgotten.
        p.opened(w, "users/w/data/big".into(), "u2".into(), 0);
        p.admit(&w, &Stored::default(), &[&part("u2", 1, 900)], &Q, 0, 1)
            .unwrap();
        p.admit(
            &w,
            &Stored::default(),
            &[&put(Some(900))],
            &Q,
            UPLOAD_IDLE_MS,
            UPLOAD_IDLE_MS + 1,
        )
        .expect("the idle upload no longer counts");
    }
}
