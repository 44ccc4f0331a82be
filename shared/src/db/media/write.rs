//! Storing media: a piece at a time into Postgres's chunks or the bucket's object.

use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::PgExecutor;

use super::objects::Upload;
use super::{delete, descriptor, presentation, Direction, MediaBody, MediaError, Store, CHUNK};
use crate::ids::{InstanceId, MediaId};

/// Where a writer's bytes go.
enum Sink {
    /// Postgres: a chunk is gathered, then inserted.
    Chunks { buf: Vec<u8>, seq: i32 },
    /// The bucket: one upload, multipart past its first part.
    Object(Upload),
}

/// Writes one piece of media a piece at a time. `begin` inserts its row (unclaimed, no
/// bytes yet, naming its object when it goes to the bucket), `write` adds bytes, `finish`
/// records the size and hash and gives the descriptor. A writer dropped unfinished leaves
/// an unclaimed row, collected later (its object, if any, with it); `abort` removes it at
/// once.
pub struct MediaWriter {
    store: Store,
    id: MediaId,
    instance: InstanceId,
    mime_type: String,
    filename: Option<String>,
    sink: Sink,
    /// The object's key, when the bytes go to the bucket.
    key: Option<String>,
    size: u64,
    hasher: Sha256,
    /// Bytes the instance may still store (its quota less its usage at `begin`).
    room: u64,
}

impl MediaWriter {
    pub async fn begin(
        store: &Store,
        instance: &InstanceId,
        direction: Direction,
        mime_type: &str,
        filename: Option<&str>,
        quota: u64,
    ) -> Result<MediaWriter, MediaError> {
        let used = super::usage(&store.db, instance).await?;
        let id = MediaId::new();
        let (sink, key) = match store.target() {
            Some(objects) => {
                let key = objects.key(instance, &id);
                let (content_type, disposition) = presentation(mime_type, filename);
                (Sink::Object(objects.upload(&key, &content_type, &disposition)), Some(key))
            }
            None => (Sink::Chunks { buf: Vec::with_capacity(CHUNK), seq: 0 }, None),
        };
        sqlx::query(
            "INSERT INTO media (id, instance_id, mime_type, filename, size, sha256, claimed, object_key, inbound) \
             VALUES ($1, $2, $3, $4, 0, '', false, $5, $6)",
        )
        .bind(&id)
        .bind(instance)
        .bind(mime_type)
        .bind(filename)
        .bind(&key)
        .bind(direction == Direction::Inbound)
        .execute(&store.db)
        .await?;
        Ok(MediaWriter {
            store: store.clone(),
            id,
            instance: instance.clone(),
            mime_type: mime_type.to_string(),
            filename: filename.map(str::to_string),
            sink,
            key,
            size: 0,
            hasher: Sha256::new(),
            room: quota.saturating_sub(used.max(0) as u64),
        })
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Adds bytes; a full chunk (or part) goes to the store at once.
    pub async fn write(&mut self, mut bytes: &[u8]) -> Result<(), MediaError> {
        if self.size + bytes.len() as u64 > self.room {
            return Err(MediaError::QuotaExceeded);
        }
        self.size += bytes.len() as u64;
        self.hasher.update(bytes);
        match &mut self.sink {
            // A piece at a time: no more than a part is copied at once.
            Sink::Object(upload) => {
                for piece in bytes.chunks(super::objects::PART) {
                    upload.put(Bytes::copy_from_slice(piece)).await?;
                }
            }
            Sink::Chunks { buf, seq } => {
                while !bytes.is_empty() {
                    let take = (CHUNK - buf.len()).min(bytes.len());
                    buf.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if buf.len() == CHUNK {
                        insert_chunk(&self.store.db, &self.id, *seq, buf).await?;
                        *seq += 1;
                        buf.clear();
                    }
                }
            }
        }
        Ok(())
    }

    /// Stores the rest, records size and hash; the media's id and descriptor.
    pub async fn finish(self) -> Result<(MediaId, Value), MediaError> {
        let MediaWriter { store, id, instance, mime_type, filename, sink, size, hasher, key, .. } = self;
        let stored = match sink {
            Sink::Chunks { buf, seq } if !buf.is_empty() => {
                insert_chunk(&store.db, &id, seq, &buf).await.map_err(MediaError::from)
            }
            Sink::Chunks { .. } => Ok(()),
            Sink::Object(upload) => upload.finish().await.map_err(MediaError::from),
        };
        if let Err(e) = stored {
            discard(&store, &instance, &id).await;
            return Err(e);
        }
        let sha = hex::encode(hasher.finalize());
        let kept = sqlx::query("UPDATE media SET size = $2, sha256 = $3 WHERE id = $1")
            .bind(&id)
            .bind(size as i64)
            .bind(&sha)
            .execute(&store.db)
            .await?
            .rows_affected();
        if kept == 0 {
            // The row went while its bytes streamed (its instance deleted, or collected):
            // the object the upload just completed is nobody's.
            if let Some(key) = &key {
                super::queue_deletion(&store.db, key).await?;
            }
            return Err(MediaError::Db(sqlx::Error::RowNotFound));
        }
        let desc = descriptor(&id, &mime_type, filename.as_deref(), Some((size, &sha)));
        Ok((id, desc))
    }

    /// Removes what was written.
    pub async fn abort(self) {
        if let Sink::Object(upload) = self.sink {
            upload.abort().await;
        }
        discard(&self.store, &self.instance, &self.id).await;
    }
}

/// Removes a row whose bytes did not all arrive (its object, if any, is queued for
/// deletion by trigger).
async fn discard(store: &Store, instance: &InstanceId, id: &MediaId) {
    if let Err(e) = delete(&store.db, instance, id).await {
        tracing::warn!(error = %e, "removing an unfinished media upload failed; it is collected later");
    }
}

async fn insert_chunk(db: impl PgExecutor<'_>, id: &MediaId, seq: i32, data: &[u8]) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO media_chunks (media_id, seq, data) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(seq)
        .bind(data)
        .execute(db)
        .await
        .map(drop)
}

/// The hex SHA-256 of bytes, as descriptors carry it.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

impl Store {
    /// Uploads the bytes of media `id` of `instance` (whose row has none yet) when new
    /// media goes to the bucket: the key for the caller to record with the row. `None`:
    /// new media goes to Postgres, with [`write_chunks`] in the caller's transaction.
    pub async fn upload_whole(
        &self,
        instance: &InstanceId,
        id: &MediaId,
        mime_type: &str,
        filename: Option<&str>,
        data: &[u8],
    ) -> Result<Option<String>, MediaError> {
        let Some(objects) = self.target() else { return Ok(None) };
        let key = objects.key(instance, id);
        let (content_type, disposition) = presentation(mime_type, filename);
        let mut upload = objects.upload(&key, &content_type, &disposition);
        for piece in data.chunks(CHUNK) {
            if let Err(e) = upload.put(Bytes::copy_from_slice(piece)).await {
                upload.abort().await;
                return Err(e.into());
            }
        }
        upload.finish().await?;
        Ok(Some(key))
    }
}

/// Writes `data` as the chunks of media `id` (which has none yet), in the caller's
/// transaction.
pub async fn write_chunks(tx: &mut sqlx::PgConnection, id: &MediaId, data: &[u8]) -> Result<(), sqlx::Error> {
    for (seq, chunk) in data.chunks(CHUNK).enumerate() {
        insert_chunk(&mut *tx, id, seq as i32, chunk).await?;
    }
    Ok(())
}

/// Stores media for `instance` (unclaimed until a message refers to it) and returns its
/// id and descriptor. Bytes over the instance's `quota` are refused.
pub async fn store(
    store: &Store,
    instance: &InstanceId,
    direction: Direction,
    mime_type: &str,
    filename: Option<&str>,
    body: MediaBody<'_>,
    quota: u64,
) -> Result<(MediaId, Value), MediaError> {
    let (remote, retry_ms) = match body {
        MediaBody::Data(d) => {
            let mut w = MediaWriter::begin(store, instance, direction, mime_type, filename, quota).await?;
            if let Err(e) = w.write(d).await {
                w.abort().await;
                return Err(e);
            }
            return w.finish().await;
        }
        MediaBody::Expired => (None, None),
        MediaBody::Pending { remote, retry_in } => (Some(remote), Some(retry_in.as_millis() as i64)),
    };
    let id = MediaId::new();
    sqlx::query(
        "INSERT INTO media (id, instance_id, mime_type, filename, size, sha256, expired, remote, fetch_after, claimed, \
                            inbound) \
         VALUES ($1, $2, $3, $4, 0, '', $5, $6, now() + $7 * interval '1 millisecond', false, $8)",
    )
    .bind(&id)
    .bind(instance)
    .bind(mime_type)
    .bind(filename)
    .bind(matches!(body, MediaBody::Expired))
    .bind(remote)
    .bind(retry_ms)
    .bind(direction == Direction::Inbound)
    .execute(&store.db)
    .await?;
    let mut desc = descriptor(&id, mime_type, filename, None);
    let flag = if remote.is_some() { "pending" } else { "expired" };
    desc[flag] = Value::Bool(true);
    Ok((id, desc))
}
