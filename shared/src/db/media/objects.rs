//! Media bytes in an S3-compatible bucket (AWS S3, MinIO, Cloudflare R2, Ceph RGW), through
//! `object_store` (Apache Arrow's, the `aws` backend): uploads stream as multipart once
//! past one part, reads stream a piece at a time (and by range), and a presigned URL can
//! stand for the bytes. Credentials come from the standard AWS environment (static keys,
//! a web identity token as on EKS, or the instance's metadata service).
//!
//! Keys are `<prefix>media/<instance id>/<media id>`: ids only, never a phone number.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::signer::Signer;
use object_store::{Attribute, Attributes, ClientOptions, ObjectStore, RetryConfig};

use crate::config::section::MediaStore as Settings;
use crate::ids::{InstanceId, MediaId};

/// Bytes of one part of a multipart upload (S3's smallest but the last); an upload of at
/// most this many bytes is one `PUT`.
pub const PART: usize = 5 * 1024 * 1024;
/// Parts of one upload in flight at once: what one upload holds is about this many parts.
const PARTS_IN_FLIGHT: usize = 2;
/// Bytes read from the bucket per request.
pub const READ_PIECE: u64 = 4 * 1024 * 1024;

/// Why the bucket did not do what was asked. Its text names neither keys' owners nor
/// credentials: `object_store`'s errors carry the key (ids only) and the status.
#[derive(Debug, thiserror::Error)]
#[error("object storage: {0}")]
pub struct ObjectsError(#[from] object_store::Error);

impl ObjectsError {
    /// The object is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self.0, object_store::Error::NotFound { .. })
    }
}

/// The deployment's bucket.
#[derive(Debug)]
pub struct Objects {
    s3: Arc<AmazonS3>,
    prefix: String,
    presigned_ttl: Duration,
}

impl Objects {
    /// The bucket the settings name; an error says which setting is wrong.
    pub fn new(settings: &Settings) -> Result<Objects, String> {
        let bucket = settings.bucket.as_deref().filter(|b| !b.is_empty()).ok_or("media_store.bucket is not set")?;
        let options = ClientOptions::new()
            .with_timeout(settings.timeout)
            .with_connect_timeout(Duration::from_secs(5).min(settings.timeout));
        let retry = RetryConfig { max_retries: 2, retry_timeout: settings.timeout * 2, ..Default::default() };
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_region(&settings.region)
            .with_client_options(options)
            .with_retry(retry)
            .with_virtual_hosted_style_request(!settings.path_style);
        if let Some(endpoint) = settings.endpoint.as_deref() {
            let mut url = url::Url::parse(endpoint).map_err(|_| "media_store.endpoint is not a URL")?;
            if !settings.path_style {
                // A virtual-hosted endpoint of object_store's names the bucket's own host.
                let host = url.host_str().ok_or("media_store.endpoint has no host")?.to_string();
                url.set_host(Some(&format!("{bucket}.{host}"))).map_err(|_| "media_store.endpoint's host")?;
            }
            b = b.with_endpoint(url.as_str().trim_end_matches('/')).with_allow_http(url.scheme() == "http");
        }
        let s3 = b.build().map_err(|e| format!("media_store: {e}"))?;
        Ok(Objects { s3: Arc::new(s3), prefix: settings.prefix.clone(), presigned_ttl: settings.presigned_ttl })
    }

    /// A new key for an upload of an instance's media: each upload its own (a random
    /// suffix), so an upload that loses a race (another pod resolved the row, a migration
    /// ran twice) queues for deletion only its own object, never the one a row refers to.
    pub fn key(&self, instance: &InstanceId, id: &MediaId) -> String {
        format!("{}media/{instance}/{id}/{:016x}", self.prefix, rand::random::<u64>())
    }

    fn dyn_store(&self) -> Arc<dyn ObjectStore> {
        self.s3.clone()
    }

    /// An upload to `key`, typed as served: one `PUT` up to [`PART`] bytes, multipart
    /// past it, holding about [`PARTS_IN_FLIGHT`] parts.
    pub fn upload(&self, key: &str, content_type: &str, disposition: &str) -> Upload {
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, content_type.to_string().into());
        attributes.insert(Attribute::ContentDisposition, disposition.to_string().into());
        let w = BufWriter::with_capacity(self.dyn_store(), Path::from(key), PART)
            .with_max_concurrency(PARTS_IN_FLIGHT)
            .with_attributes(attributes);
        Upload(Box::new(w))
    }

    /// The object's bytes in `range` (whole: `0..size`), a piece at a time: one ranged
    /// request per [`READ_PIECE`], each within the request timeout however slowly the
    /// reader takes them, and no more than one piece held.
    pub fn read(&self, key: &str, range: Range<u64>) -> BoxStream<'static, Result<Bytes, ObjectsError>> {
        let (s3, path) = (self.s3.clone(), Path::from(key));
        futures::stream::try_unfold(range.start, move |at| {
            let (s3, path) = (s3.clone(), path.clone());
            async move {
                if at >= range.end {
                    return Ok(None);
                }
                let to = (at + READ_PIECE).min(range.end);
                let piece = s3.get_range(&path, at..to).await?;
                Ok(Some((piece, to)))
            }
        })
        .boxed()
    }

    /// The object's size as the bucket reports it.
    pub async fn size(&self, key: &str) -> Result<u64, ObjectsError> {
        Ok(self.head(key).await?.1)
    }

    /// The object's `ETag` (as the bucket gives it) and size.
    pub async fn head(&self, key: &str) -> Result<(Option<String>, u64), ObjectsError> {
        let meta = self.s3.head(&Path::from(key)).await?;
        Ok((meta.e_tag, meta.size))
    }

    /// Deletes objects (a missing one counts as deleted); the keys that failed. A key
    /// counts as deleted only when the bucket said so for it: a request that failed as a
    /// whole (one error for up to 1,000 keys) leaves every key it carried failed.
    pub async fn delete(&self, keys: &[String]) -> Vec<String> {
        let paths = futures::stream::iter(keys.iter().map(|k| Ok(Path::from(k.as_str())))).boxed();
        let results: Vec<_> = self.s3.delete_stream(paths).collect().await;
        let mut done = std::collections::HashSet::new();
        for r in results {
            match r {
                Ok(path) => {
                    done.insert(path.to_string());
                }
                Err(object_store::Error::NotFound { path, .. }) => {
                    done.insert(path);
                }
                Err(e) => tracing::warn!(error = %e, "deleting media objects failed; they are tried again"),
            }
        }
        keys.iter().filter(|k| !done.contains(k.as_str())).cloned().collect()
    }

    /// A URL of the object valid for the configured time, at most `within`, when
    /// redirects are on.
    pub async fn presigned(&self, key: &str, within: Duration) -> Result<Option<url::Url>, ObjectsError> {
        if self.presigned_ttl.is_zero() {
            return Ok(None);
        }
        let ttl = self.presigned_ttl.min(within).max(Duration::from_secs(1));
        Ok(Some(self.s3.signed_url(http::Method::GET, &Path::from(key), ttl).await?))
    }

    /// Whether the bucket answers: a key that is not there is fine.
    pub async fn reachable(&self) -> Result<(), ObjectsError> {
        match self.s3.head(&Path::from(format!("{}media/.probe", self.prefix))).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// One object being uploaded.
pub struct Upload(Box<BufWriter>);

impl Upload {
    pub async fn put(&mut self, bytes: Bytes) -> Result<(), ObjectsError> {
        Ok(self.0.put(bytes).await?)
    }

    /// Completes the upload: the object is there once this returns.
    pub async fn finish(mut self) -> Result<(), ObjectsError> {
        use tokio::io::AsyncWriteExt;
        self.0
            .shutdown()
            .await
            .map_err(|e| ObjectsError(object_store::Error::Generic { store: "S3", source: e.into() }))
    }

    /// Gives the upload up (a multipart upload's parts are dropped).
    pub async fn abort(mut self) {
        if let Err(e) = self.0.abort().await {
            tracing::debug!(error = %e, "aborting a media upload failed");
        }
    }
}
