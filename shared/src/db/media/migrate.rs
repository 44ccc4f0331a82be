//! Moving media stored in Postgres into the bucket (`paceline media migrate --to s3`): a
//! row at a time, its chunks streamed into its object, the copy verified (size and
//! SHA-256 as it streamed, then the object's size as the bucket reports it) before the
//! row points at the object and its chunks are deleted, in one transaction. Resumable:
//! what is left is every row still without an object, and a copy cut short is copied
//! again over the same key.

use bytes::Bytes;
use futures::TryStreamExt;
use sha2::{Digest, Sha256};

use super::{presentation, MediaError, Store, StoredRow, STORED_COLUMNS};
use crate::ids::MediaId;

/// Media still in Postgres: how many rows and bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    pub media: u64,
    pub bytes: u64,
}

/// How one row's move ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moved {
    /// In the bucket now; Postgres freed.
    Done,
    /// The row went or gave its bytes back meanwhile: nothing to move.
    Gone,
    /// The copy did not match (what it says); the row stays in Postgres.
    Mismatch(String),
}

/// Rows whose bytes are in Postgres and finished (a writer still filling one has no hash
/// yet).
const PENDING: &str = "object_key IS NULL AND NOT expired AND remote IS NULL AND sha256 <> ''";

/// What is left to move.
pub async fn left(store: &Store) -> Result<Left, sqlx::Error> {
    let (media, bytes): (i64, i64) =
        sqlx::query_as(&format!("SELECT count(*), COALESCE(sum(size), 0)::bigint FROM media WHERE {PENDING}"))
            .fetch_one(&store.db)
            .await?;
    Ok(Left { media: media as u64, bytes: bytes as u64 })
}

/// The next `limit` rows to move after `after` (by id).
pub async fn next(store: &Store, after: Option<&MediaId>, limit: i64) -> Result<Vec<StoredRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {STORED_COLUMNS} FROM media WHERE {PENDING} AND ($1::text IS NULL OR id > $1) ORDER BY id LIMIT $2"
    ))
    .bind(after)
    .bind(limit)
    .fetch_all(&store.db)
    .await
}

/// Copies one row's bytes into the bucket, verifies the copy, then points the row at it
/// and frees its chunks.
pub async fn move_one(store: &Store, row: &StoredRow) -> Result<Moved, MediaError> {
    let objects = store.objects().ok_or(MediaError::NoBucket)?;
    let key = objects.key(&row.instance_id, &row.id);
    let (content_type, disposition) = presentation(&row.mime_type, row.filename.as_deref());
    let mut upload = objects.upload(&key, &content_type, &disposition);
    let mut pieces = store.read(&row.id, &None, row.size.max(0) as u64, None).await?;
    let (mut size, mut hasher) = (0u64, Sha256::new());
    let copied: Result<(), MediaError> = async {
        while let Some(p) = pieces.try_next().await? {
            size += p.len() as u64;
            hasher.update(&p);
            upload.put(Bytes::clone(&p)).await?;
        }
        Ok(())
    }
    .await;
    if let Err(e) = copied {
        upload.abort().await;
        return Err(e);
    }
    let sha = hex::encode(hasher.finalize());
    if size != row.size.max(0) as u64 || (!row.sha256.is_empty() && sha != row.sha256) {
        upload.abort().await;
        return Ok(Moved::Mismatch(format!("read {size} bytes whose hash differs from the row's, or its size")));
    }
    upload.finish().await?;
    let in_bucket = objects.size(&key).await?;
    let mut tx = store.db.begin().await?;
    if in_bucket != size {
        super::queue_deletion(&mut *tx, &key).await?;
        tx.commit().await?;
        return Ok(Moved::Mismatch(format!("the bucket holds {in_bucket} bytes of {size}")));
    }
    let pointed = sqlx::query(&format!(
        "UPDATE media SET object_key = $2 WHERE id = $1 AND {PENDING} AND size = $3 AND sha256 = $4"
    ))
    .bind(&row.id)
    .bind(&key)
    .bind(row.size)
    .bind(&row.sha256)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if pointed == 0 {
        // Collected, expired or changed meanwhile: the copy is nobody's.
        super::queue_deletion(&mut *tx, &key).await?;
        tx.commit().await?;
        return Ok(Moved::Gone);
    }
    sqlx::query("DELETE FROM media_chunks WHERE media_id = $1").bind(&row.id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Moved::Done)
}
