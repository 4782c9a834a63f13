//! One object written to the store without ever being half visible: small
//! objects in one `put`, larger ones as a multipart upload driven here, part
//! by part, completed only once every part is stored and aborted on any
//! failure.
//!
//! Not object_store's `BufWriter`: once its `shutdown` has started (the
//! final `put`, or the multipart completion) it holds only that future, and
//! `abort` (or a write) then panics with "Already shut down"; its
//! `WriteMultipart::finish` also returns on a failed part without aborting
//! the upload, and replaces a failed completion's error by the abort's. Here
//! `finish` and `abort` take the upload by value, so nothing can be called
//! after either, and every failure is an [`UploadError`].

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{MultipartUpload, ObjectStore, PutPayload, PutPayloadMut};
use std::sync::Arc;
use tokio::task::JoinSet;

/// The size of every part but the last, and the most a single `put` takes:
/// object_store's `BufWriter` default (S3 wants at least 5 MiB a part).
pub const PART_SIZE: usize = 10 << 20;
/// Parts in flight at once.
const PARTS_IN_FLIGHT: usize = 8;
/// S3 takes at most 10,000 parts an upload; parts are sized for this many,
/// leaving room for a file that grows while it is read.
const PARTS_PLANNED: u64 = 9_000;

/// The part size for an object of about `size` bytes: [`PART_SIZE`], or,
/// for an object over 87 GiB, the whole MiB that keeps it within
/// [`PARTS_PLANNED`] parts (a 96 GiB checkpoint file: 11 MiB parts).
pub fn part_size_for(size: u64) -> usize {
    let needed = size.div_ceil(PARTS_PLANNED).next_multiple_of(1 << 20);
    usize::try_from(needed).unwrap_or(usize::MAX).max(PART_SIZE)
}

/// Which request of an upload failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadStage {
    /// The single `put` of an object smaller than a part.
    Put,
    /// Starting the multipart upload.
    Create,
    /// Storing part `n` (from 1; 0 if its task was lost).
    Part(usize),
    /// Completing the multipart upload.
    Complete,
}

impl std::fmt::Display for UploadStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Put => f.write_str("writing it"),
            Self::Create => f.write_str("starting its multipart upload"),
            Self::Part(0) => f.write_str("storing a part of its multipart upload"),
            Self::Part(n) => write!(f, "storing part {n} of its multipart upload"),
            Self::Complete => f.write_str("completing its multipart upload"),
        }
    }
}

/// A failed upload. Nothing was left under its path: a single `put` that
/// failed wrote nothing, a multipart upload is only visible once completed,
/// and it was aborted (a failed abort is logged; the store's lifecycle rule
/// for incomplete multipart uploads removes its parts).
#[derive(Debug, thiserror::Error)]
#[error(
    "store: cannot upload {path} ({stage}): {source}; nothing was stored under that \
     name, and uploading it again once the store answers is safe"
)]
pub struct UploadError {
    pub path: String,
    pub stage: UploadStage,
    #[source]
    pub source: object_store::Error,
}

struct Multipart {
    upload: Box<dyn MultipartUpload>,
    parts: JoinSet<(usize, object_store::Result<()>)>,
    started: usize,
}

/// One object being written: [`ObjectUpload::put`] its bytes in order, then
/// [`ObjectUpload::finish`] it, or [`ObjectUpload::abort`] it.
pub struct ObjectUpload {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    part_size: usize,
    buffer: PutPayloadMut,
    multipart: Option<Multipart>,
    /// Failed (and cleaned up) at this stage: nothing more is sent.
    failed: Option<UploadStage>,
}

impl ObjectUpload {
    pub fn new(store: Arc<dyn ObjectStore>, path: ObjectPath) -> Self {
        Self::sized(store, path, 0)
    }

    /// An upload of an object of about `size` bytes: parts of
    /// [`part_size_for`]`(size)`.
    pub fn sized(store: Arc<dyn ObjectStore>, path: ObjectPath, size: u64) -> Self {
        Self {
            store,
            path,
            part_size: part_size_for(size),
            buffer: PutPayloadMut::new(),
            multipart: None,
            failed: None,
        }
    }

    /// Refuses to go on after a failure: the upload is gone.
    fn check(&self) -> Result<(), UploadError> {
        match self.failed {
            None => Ok(()),
            Some(stage) => Err(self.error(
                stage,
                object_store::Error::Generic {
                    store: "upload",
                    source: "this upload failed already".into(),
                },
            )),
        }
    }

    fn error(&self, stage: UploadStage, source: object_store::Error) -> UploadError {
        UploadError {
            path: self.path.to_string(),
            stage,
            source,
        }
    }

    /// Appends `bytes`. Every full part is sent as it fills, at most
    /// `PARTS_IN_FLIGHT` at a time (this waits for one to finish beyond
    /// that). On an error the upload is already aborted.
    pub async fn put(&mut self, bytes: impl Into<Bytes>) -> Result<(), UploadError> {
        self.check()?;
        let mut bytes = bytes.into();
        while !bytes.is_empty() {
            let room = self.part_size - self.buffer.content_length();
            if bytes.len() < room {
                self.buffer.push(bytes);
                return Ok(());
            }
            self.buffer.push(bytes.split_to(room));
            let part = std::mem::take(&mut self.buffer).freeze();
            if let Err(e) = self.send_part(part).await {
                self.failed = Some(e.stage);
                self.cleanup().await;
                return Err(e);
            }
        }
        Ok(())
    }

    async fn send_part(&mut self, part: PutPayload) -> Result<(), UploadError> {
        if self.multipart.is_none() {
            let upload = self
                .store
                .put_multipart(&self.path)
                .await
                .map_err(|e| self.error(UploadStage::Create, e))?;
            self.multipart = Some(Multipart {
                upload,
                parts: JoinSet::new(),
                started: 0,
            });
        }
        let m = self.multipart.as_mut().expect("started above");
        m.started += 1;
        let (n, sent) = (m.started, m.upload.put_part(part));
        m.parts.spawn(async move { (n, sent.await) });
        while self.in_flight() >= PARTS_IN_FLIGHT {
            self.next_part().await?;
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.multipart.as_ref().map_or(0, |m| m.parts.len())
    }

    /// Waits for one part in flight.
    async fn next_part(&mut self) -> Result<(), UploadError> {
        let m = self.multipart.as_mut().expect("parts are in flight");
        match m.parts.join_next().await {
            None | Some(Ok((_, Ok(())))) => Ok(()),
            Some(Ok((n, Err(e)))) => Err(self.error(UploadStage::Part(n), e)),
            Some(Err(join)) => Err(self.error(
                UploadStage::Part(0),
                object_store::Error::Generic {
                    store: "upload",
                    source: Box::new(join),
                },
            )),
        }
    }

    /// Stores what is left and makes the object visible under its path. On
    /// an error nothing is visible there and the upload is aborted.
    pub async fn finish(mut self) -> Result<(), UploadError> {
        self.check()?;
        let rest = std::mem::take(&mut self.buffer).freeze();
        if self.multipart.is_none() {
            // Smaller than a part: one request, atomic on every store.
            let stored = self.store.put(&self.path, rest).await;
            return stored
                .map(drop)
                .map_err(|e| self.error(UploadStage::Put, e));
        }
        let stored = async {
            if rest.content_length() > 0 {
                self.send_part(rest).await?;
            }
            while self.in_flight() > 0 {
                self.next_part().await?;
            }
            let m = self.multipart.as_mut().expect("multipart");
            match m.upload.complete().await {
                Ok(_) => Ok(()),
                Err(e) => Err(self.error(UploadStage::Complete, e)),
            }
        }
        .await;
        if stored.is_err() {
            self.cleanup().await;
        }
        stored
    }

    /// Gives the upload up: parts in flight are cancelled and a multipart
    /// upload is aborted (a failure only logged).
    pub async fn abort(mut self) {
        self.cleanup().await;
    }

    async fn cleanup(&mut self) {
        self.buffer = PutPayloadMut::new();
        let Some(mut m) = self.multipart.take() else {
            return;
        };
        m.parts.shutdown().await;
        if let Err(e) = m.upload.abort().await {
            tracing::warn!(path = %self.path, error = %e, "cannot abort the failed multipart upload; its parts stay in the store (never visible as an object) until its lifecycle rule removes them");
        }
    }
}
