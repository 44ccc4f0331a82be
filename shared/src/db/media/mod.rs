//! The `media` table and its bytes: media sent with messages and media received,
//! readable by any pod. A row's bytes are in Postgres (`media_chunks`, 1 MiB each) or, with
//! its `object_key` set, in the deployment's S3-compatible bucket ([`objects`]); the
//! [`Store`] writes new bytes to the configured one and reads either. Bytes are written
//! and read a piece at a time, so neither an upload nor a download holds a whole file in
//! memory.
//!
//! A row is `claimed` once a queued message or a logged message refers to it; unclaimed
//! rows (an idempotent replay, a failed insert, a crash between storing and queueing)
//! are collected after [`UNCLAIMED_GRACE`]. Each instance's stored bytes are counted in
//! `media_usage` (kept by a trigger), against which writes check the instance's quota.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::{PgExecutor, PgPool};

use crate::config::section::{MediaBackend, MediaStore as Settings};
use crate::ids::{InstanceId, MediaId};

pub mod migrate;
pub mod objects;
mod read;
pub mod retention;
mod write;

pub use objects::{Objects, ObjectsError};
pub use read::{base64_stream, presentation, Base64Pieces, Hole, MediaRow, Pieces, Readable};
pub use write::{sha256_hex, store, write_chunks, MediaWriter};

/// Bytes per stored chunk.
pub const CHUNK: usize = 1024 * 1024;
/// How long an unclaimed row lives before it is collected.
pub const UNCLAIMED_GRACE: Duration = Duration::from_secs(3600);

/// Why media was not stored.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// Storing it would take the instance past its media quota.
    #[error("the instance's media storage quota is used up")]
    QuotaExceeded,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// The bucket failed (unreachable, refused): a passing failure, tried again later.
    #[error(transparent)]
    Objects(#[from] ObjectsError),
    /// The media's bytes went while they were read (moved to the bucket, expired): read
    /// its row again.
    #[error("the media's bytes went while they were read")]
    Gone,
    /// The media's bytes are in a bucket and this deployment has none configured.
    #[error("the media is in object storage and media_store.bucket is not set")]
    NoBucket,
}

/// Where media bytes go and come from: Postgres always (the rows, and the bytes of media
/// stored there), and the deployment's bucket when one is configured. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pub db: PgPool,
    objects: Option<Arc<Objects>>,
    /// New bytes go to the bucket.
    to_objects: bool,
}

impl Store {
    /// Bytes in Postgres only.
    pub fn postgres(db: PgPool) -> Store {
        Store { db, objects: None, to_objects: false }
    }

    /// The store the settings describe: the bucket, when one is named, is read from
    /// whichever backend new media goes to, so media stored before a switch stays
    /// readable.
    pub fn new(db: PgPool, settings: &Settings) -> Result<Store, String> {
        let objects = match settings.bucket.as_deref() {
            Some(b) if !b.is_empty() => Some(Arc::new(Objects::new(settings)?)),
            _ => None,
        };
        Ok(Store { db, to_objects: settings.backend == MediaBackend::S3, objects })
    }

    /// The bucket, if one is configured.
    pub fn objects(&self) -> Option<&Arc<Objects>> {
        self.objects.as_ref()
    }

    /// The bucket new bytes go to (none: Postgres).
    fn target(&self) -> Option<&Arc<Objects>> {
        self.objects.as_ref().filter(|_| self.to_objects)
    }

    /// The bucket a row's bytes are in.
    fn holding<'a>(&'a self, key: &'a Option<String>) -> Result<Option<(&'a Objects, &'a str)>, MediaError> {
        match key {
            None => Ok(None),
            Some(k) => Ok(Some((self.objects.as_deref().ok_or(MediaError::NoBucket)?, k.as_str()))),
        }
    }

    /// Whether the bucket new media goes to answers (`Ok` with none).
    pub async fn reachable(&self) -> Result<(), MediaError> {
        match self.target() {
            Some(o) => Ok(o.reachable().await?),
            None => Ok(()),
        }
    }
}

/// Which way media went: its retention is the direction's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received from the network.
    Inbound,
    /// Sent by a tenant (and pictures set).
    Outbound,
}

/// What is stored of a piece of media.
#[derive(Debug, Clone, Copy)]
pub enum MediaBody<'a> {
    /// The bytes.
    Data(&'a [u8]),
    /// The network no longer had it: `expired`, served as 410 `media_unavailable`.
    Expired,
    /// Not downloaded yet (a passing failure): `remote` says where to fetch it again, and
    /// the instance's worker retries it after `retry_in` (`db::log::resolve_media`).
    Pending { remote: &'a Value, retry_in: Duration },
}

/// The `media` descriptor messages carry: `id`, `mime_type`, `filename`, `size`,
/// `sha256`, plus `expired: true` or `pending: true` when there are no bytes.
pub fn descriptor(id: &MediaId, mime_type: &str, filename: Option<&str>, stored: Option<(u64, &str)>) -> Value {
    let (size, sha) = stored.unwrap_or((0, ""));
    serde_json::json!({ "id": id, "mime_type": mime_type, "filename": filename, "size": size, "sha256": sha })
}

/// Bytes an instance has stored.
pub async fn usage(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<i64, sqlx::Error> {
    let used: Option<i64> = sqlx::query_scalar("SELECT bytes FROM media_usage WHERE instance_id = $1")
        .bind(instance)
        .fetch_optional(db)
        .await?;
    Ok(used.unwrap_or(0))
}

/// Bytes stored by every instance together.
pub async fn total_usage(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COALESCE(sum(bytes), 0)::bigint FROM media_usage").fetch_one(db).await
}

/// Marks media as referred to by a message, so it is never collected.
pub async fn claim(db: impl PgExecutor<'_>, instance: &InstanceId, ids: &[&str]) -> Result<(), sqlx::Error> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query("UPDATE media SET claimed = true WHERE instance_id = $1 AND id = ANY($2) AND NOT claimed")
        .bind(instance)
        .bind(ids)
        .execute(db)
        .await
        .map(drop)
}

/// Removes one media row and its bytes.
pub async fn delete(db: impl PgExecutor<'_>, instance: &InstanceId, id: &MediaId) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM media WHERE id = $1 AND instance_id = $2")
        .bind(id)
        .bind(instance)
        .execute(db)
        .await
        .map(drop)
}

/// Collects up to `limit` unclaimed rows older than [`UNCLAIMED_GRACE`], with their
/// bytes; how many went.
pub async fn collect_unclaimed(db: impl PgExecutor<'_>, limit: i64) -> Result<u64, sqlx::Error> {
    let r = sqlx::query(
        "DELETE FROM media WHERE id IN (SELECT id FROM media WHERE NOT claimed AND created_at < now() - $1 * interval '1 second' \
         ORDER BY created_at LIMIT $2)",
    )
    .bind(UNCLAIMED_GRACE.as_secs() as i64)
    .bind(limit)
    .execute(db)
    .await?;
    Ok(r.rows_affected())
}

/// A stored medium's row, as reading it whole and moving it need it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredRow {
    pub id: MediaId,
    pub instance_id: InstanceId,
    pub mime_type: String,
    pub filename: Option<String>,
    pub size: i64,
    pub sha256: String,
    /// Its object in the bucket (none: its bytes are Postgres's chunks).
    pub object_key: Option<String>,
}

/// The columns of a [`StoredRow`].
const STORED_COLUMNS: &str = "id, instance_id, mime_type, filename, size, sha256, object_key";

/// What serving needs to know of a media row before its bytes.
#[derive(Debug, Clone)]
pub enum Meta {
    /// The bytes are stored: in the bucket under `object_key`, or in Postgres.
    Stored {
        mime_type: String,
        filename: Option<String>,
        size: u64,
        object_key: Option<String>,
    },
    Expired,
    Pending,
}

/// The row's state for serving (by id alone: the signed URL is the credential).
pub async fn meta(db: impl PgExecutor<'_>, id: &MediaId) -> Result<Option<Meta>, sqlx::Error> {
    let row: Option<MetaRow> =
        sqlx::query_as(&format!("SELECT {META_COLUMNS} FROM media WHERE id = $1")).bind(id).fetch_optional(db).await?;
    Ok(row.map(meta_from))
}

const META_COLUMNS: &str = "mime_type, filename, size, expired, remote IS NOT NULL, object_key";
/// [`META_COLUMNS`] of a media row.
type MetaRow = (String, Option<String>, i64, bool, bool, Option<String>);

fn meta_from((mime_type, filename, size, expired, pending, object_key): MetaRow) -> Meta {
    match (expired, pending) {
        (true, _) => Meta::Expired,
        (false, true) => Meta::Pending,
        (false, false) => Meta::Stored { mime_type, filename, size: size.max(0) as u64, object_key },
    }
}

/// The serving state of media `id` when instance `instance` holds it (`None` otherwise).
pub async fn meta_of(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &MediaId,
) -> Result<Option<Meta>, sqlx::Error> {
    let row: Option<MetaRow> =
        sqlx::query_as(&format!("SELECT {META_COLUMNS} FROM media WHERE id = $1 AND instance_id = $2"))
            .bind(id)
            .bind(instance)
            .fetch_optional(db)
            .await?;
    Ok(row.map(meta_from))
}

/// What one pass of [`delete_queued_objects`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ObjectDeletions {
    pub deleted: u64,
    pub failed: u64,
}

/// Deletes up to `limit` objects queued for deletion from the bucket, oldest first;
/// one that fails goes to the back of the queue and is tried again. Without a bucket
/// configured nothing is done (the queue waits for one).
pub async fn delete_queued_objects(store: &Store, limit: i64) -> Result<ObjectDeletions, MediaError> {
    let Some(objects) = store.objects() else { return Ok(ObjectDeletions::default()) };
    let mut tx = store.db.begin().await?;
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT key FROM media_object_deletions ORDER BY queued_at LIMIT $1 FOR UPDATE SKIP LOCKED")
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
    if keys.is_empty() {
        return Ok(ObjectDeletions::default());
    }
    let failed = objects.delete(&keys).await;
    let done: Vec<&str> = keys.iter().filter(|k| !failed.contains(k)).map(String::as_str).collect();
    sqlx::query("DELETE FROM media_object_deletions WHERE key = ANY($1)").bind(&done).execute(&mut *tx).await?;
    sqlx::query("UPDATE media_object_deletions SET attempts = attempts + 1, queued_at = now() WHERE key = ANY($1)")
        .bind(&failed)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(ObjectDeletions { deleted: done.len() as u64, failed: failed.len() as u64 })
}

/// Queues an object no row refers to for deletion from the bucket.
pub async fn queue_deletion(db: impl PgExecutor<'_>, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO media_object_deletions (key) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(key)
        .execute(db)
        .await
        .map(drop)
}

/// Objects waiting to be deleted from the bucket.
pub async fn queued_object_deletions(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM media_object_deletions").fetch_one(db).await
}
