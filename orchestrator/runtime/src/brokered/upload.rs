//! A multipart upload through the gateway (the `ObjectStore` in
//! `brokered.rs` opens it): each part sent to its own presigned URL.

use std::fmt;
use std::sync::{Arc, Mutex};

use mcjs_protocol::store::StoreOp;
use object_store::{MultipartUpload, PutPayload, PutResult, UploadPart};

use super::{Broker, generic};

/// A multipart upload through the gateway: each part PUT to its own
/// presigned URL, the ETags kept in part order for the completion.
pub(super) struct Upload {
    pub(super) broker: Arc<Broker>,
    pub(super) path: String,
    pub(super) upload_id: String,
    pub(super) etags: Arc<Mutex<Vec<Option<String>>>>,
}

impl fmt::Debug for Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Upload({}, {})", self.path, self.upload_id)
    }
}

#[async_trait::async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let index = {
            let mut etags = self.etags.lock().expect("lock");
            etags.push(None);
            etags.len() - 1
        };
        let (broker, path, upload_id, etags) = (
            Arc::clone(&self.broker),
            self.path.clone(),
            self.upload_id.clone(),
            Arc::clone(&self.etags),
        );
        Box::pin(async move {
            let part = u16::try_from(index + 1)
                .ok()
                .filter(|p| *p <= 10_000)
                .ok_or_else(|| generic("an upload has at most 10000 parts"))?;
            let response = broker
                .transfer(
                    StoreOp::UploadPart {
                        path: path.clone(),
                        upload_id,
                        part,
                        size: Some(data.content_length() as u64),
                    },
                    Some(data),
                )
                .await?;
            let etag = response
                .headers()
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| {
                    generic(format!(
                        "store: part {part} of {path} came back without an ETag"
                    ))
                })?;
            etags.lock().expect("lock")[index] = Some(etag);
            Ok(())
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let etags: Option<Vec<String>> = self.etags.lock().expect("lock").iter().cloned().collect();
        let etags = etags.ok_or_else(|| generic("completing an upload with parts unfinished"))?;
        self.broker
            .ask_one(StoreOp::CompleteMultipart {
                path: self.path.clone(),
                upload_id: self.upload_id.clone(),
                etags,
            })
            .await?;
        Ok(PutResult {
            e_tag: None,
            version: None,
        })
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.broker
            .ask_one(StoreOp::AbortMultipart {
                path: self.path.clone(),
                upload_id: self.upload_id.clone(),
            })
            .await?;
        Ok(())
    }
}
