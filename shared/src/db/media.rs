//! The `media` table and its bytes in `media_chunks`: media sent with messages and media
//! received, readable by any pod. Bytes are written and read a chunk at a time
//! ([`CHUNK`]), so neither an upload nor a download holds a whole file in memory.
//!
//! A row is `claimed` once a queued message or a logged message refers to it; unclaimed
//! rows (an idempotent replay, a failed insert, a crash between storing and queueing)
//! are collected after [`UNCLAIMED_GRACE`]. Each instance's stored bytes are counted in
//! `media_usage` (kept by a trigger), against which writes check the instance's quota.

use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::{PgExecutor, PgPool};

use crate::ids::{InstanceId, MediaId};

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

/// Writes one piece of media a chunk at a time. `begin` inserts its row (unclaimed, no
/// bytes yet), `write` adds bytes, `finish` records the size and hash and gives the
/// descriptor. A writer dropped unfinished leaves an unclaimed row, collected later;
/// `abort` removes it at once.
pub struct MediaWriter {
    pool: PgPool,
    id: MediaId,
    instance: InstanceId,
    mime_type: String,
    filename: Option<String>,
    buf: Vec<u8>,
    seq: i32,
    size: u64,
    hasher: Sha256,
    /// Bytes the instance may still store (its quota less its usage at `begin`).
    room: u64,
}

impl MediaWriter {
    pub async fn begin(
        pool: &PgPool,
        instance: &InstanceId,
        mime_type: &str,
        filename: Option<&str>,
        quota: u64,
    ) -> Result<MediaWriter, MediaError> {
        let used = usage(pool, instance).await?;
        let id = MediaId::new();
        sqlx::query(
            "INSERT INTO media (id, instance_id, mime_type, filename, size, sha256, claimed) \
             VALUES ($1, $2, $3, $4, 0, '', false)",
        )
        .bind(&id)
        .bind(instance)
        .bind(mime_type)
        .bind(filename)
        .execute(pool)
        .await?;
        Ok(MediaWriter {
            pool: pool.clone(),
            id,
            instance: instance.clone(),
            mime_type: mime_type.to_string(),
            filename: filename.map(str::to_string),
            buf: Vec::with_capacity(CHUNK),
            seq: 0,
            size: 0,
            hasher: Sha256::new(),
            room: quota.saturating_sub(used.max(0) as u64),
        })
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Adds bytes; a full chunk goes to Postgres at once.
    pub async fn write(&mut self, mut bytes: &[u8]) -> Result<(), MediaError> {
        if self.size + bytes.len() as u64 > self.room {
            return Err(MediaError::QuotaExceeded);
        }
        self.size += bytes.len() as u64;
        self.hasher.update(bytes);
        while !bytes.is_empty() {
            let take = (CHUNK - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buf.len() == CHUNK {
                self.flush().await?;
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), sqlx::Error> {
        if self.buf.is_empty() {
            return Ok(());
        }
        insert_chunk(&self.pool, &self.id, self.seq, &self.buf).await?;
        self.seq += 1;
        self.buf.clear();
        Ok(())
    }

    /// Stores the rest, records size and hash; the media's id and descriptor.
    pub async fn finish(mut self) -> Result<(MediaId, Value), MediaError> {
        self.flush().await?;
        let sha = hex::encode(std::mem::take(&mut self.hasher).finalize());
        sqlx::query("UPDATE media SET size = $2, sha256 = $3 WHERE id = $1")
            .bind(&self.id)
            .bind(self.size as i64)
            .bind(&sha)
            .execute(&self.pool)
            .await?;
        let desc = descriptor(&self.id, &self.mime_type, self.filename.as_deref(), Some((self.size, &sha)));
        Ok((self.id, desc))
    }

    /// Removes what was written.
    pub async fn abort(self) {
        if let Err(e) = delete(&self.pool, &self.instance, &self.id).await {
            tracing::warn!(error = %e, "removing an unfinished media upload failed; it is collected later");
        }
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

/// Writes `data` as the chunks of media `id` (which has none yet), in the caller's
/// transaction.
pub async fn write_chunks(tx: &mut sqlx::PgConnection, id: &MediaId, data: &[u8]) -> Result<(), sqlx::Error> {
    for (seq, chunk) in data.chunks(CHUNK).enumerate() {
        insert_chunk(&mut *tx, id, seq as i32, chunk).await?;
    }
    Ok(())
}

/// The hex SHA-256 of bytes, as descriptors carry it.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Stores media for `instance` (unclaimed until a message refers to it) and returns its
/// id and descriptor. Bytes over the instance's `quota` are refused.
pub async fn store(
    pool: &PgPool,
    instance: &InstanceId,
    mime_type: &str,
    filename: Option<&str>,
    body: MediaBody<'_>,
    quota: u64,
) -> Result<(MediaId, Value), MediaError> {
    let (remote, retry_ms) = match body {
        MediaBody::Data(d) => {
            let mut w = MediaWriter::begin(pool, instance, mime_type, filename, quota).await?;
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
        "INSERT INTO media (id, instance_id, mime_type, filename, size, sha256, expired, remote, fetch_after, claimed) \
         VALUES ($1, $2, $3, $4, 0, '', $5, $6, now() + $7 * interval '1 millisecond', false)",
    )
    .bind(&id)
    .bind(instance)
    .bind(mime_type)
    .bind(filename)
    .bind(matches!(body, MediaBody::Expired))
    .bind(remote)
    .bind(retry_ms)
    .execute(pool)
    .await?;
    let mut desc = descriptor(&id, mime_type, filename, None);
    let flag = if remote.is_some() { "pending" } else { "expired" };
    desc[flag] = Value::Bool(true);
    Ok((id, desc))
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

/// Drops the bytes of up to `limit` media rows stored before `cutoff`: the rows stay,
/// marked expired (served as 410 `media_unavailable`), and their instances' usage falls.
/// How many were expired.
pub async fn expire_before(db: &PgPool, cutoff: chrono::DateTime<chrono::Utc>, limit: i64) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let ids: Vec<MediaId> = sqlx::query_scalar(
        "UPDATE media SET expired = true, size = 0, remote = NULL, fetch_after = NULL \
         WHERE id IN (SELECT id FROM media WHERE NOT expired AND created_at < $1 ORDER BY created_at LIMIT $2 \
                      FOR UPDATE SKIP LOCKED) RETURNING id",
    )
    .bind(cutoff)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM media_chunks WHERE media_id = ANY($1)").bind(&ids).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(ids.len() as u64)
}

/// What serving needs to know of a media row before its bytes.
#[derive(Debug, Clone)]
pub enum Meta {
    Stored { mime_type: String, filename: Option<String>, size: u64 },
    Expired,
    Pending,
}

/// The row's state for serving (by id alone: the signed URL is the credential).
pub async fn meta(db: impl PgExecutor<'_>, id: &MediaId) -> Result<Option<Meta>, sqlx::Error> {
    let row: Option<MetaRow> =
        sqlx::query_as("SELECT mime_type, filename, size, expired, remote IS NOT NULL FROM media WHERE id = $1")
            .bind(id)
            .fetch_optional(db)
            .await?;
    Ok(row.map(meta_from))
}

/// `mime_type, filename, size, expired, remote IS NOT NULL` of a media row.
type MetaRow = (String, Option<String>, i64, bool, bool);

fn meta_from((mime_type, filename, size, expired, pending): MetaRow) -> Meta {
    match (expired, pending) {
        (true, _) => Meta::Expired,
        (false, true) => Meta::Pending,
        (false, false) => Meta::Stored { mime_type, filename, size: size.max(0) as u64 },
    }
}

/// Chunk `seq` of media `id`, if there is one.
pub async fn chunk(db: impl PgExecutor<'_>, id: &MediaId, seq: i32) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar("SELECT data FROM media_chunks WHERE media_id = $1 AND seq = $2")
        .bind(id)
        .bind(seq)
        .fetch_optional(db)
        .await
}

/// The bytes of media `id`, a chunk at a time, in order: a reader never holds more than
/// one chunk of them.
pub fn chunks(db: PgPool, id: MediaId) -> impl futures::Stream<Item = Result<Vec<u8>, sqlx::Error>> + Send {
    futures::stream::try_unfold(0i32, move |seq| {
        let (db, id) = (db.clone(), id.clone());
        async move { Ok(chunk(&db, &id, seq).await?.map(|c| (c, seq + 1))) }
    })
}

/// The serving state of media `id` when instance `instance` holds it (`None` otherwise).
pub async fn meta_of(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &MediaId,
) -> Result<Option<Meta>, sqlx::Error> {
    let row: Option<MetaRow> = sqlx::query_as(
        "SELECT mime_type, filename, size, expired, remote IS NOT NULL FROM media WHERE id = $1 AND instance_id = $2",
    )
    .bind(id)
    .bind(instance)
    .fetch_optional(db)
    .await?;
    Ok(row.map(meta_from))
}

/// Base64 (standard, padded) of bytes that come in pieces: each piece is encoded as far
/// as whole 3-byte groups go, the rest waits for the next, so the text equals the
/// encoding of all the bytes at once without holding them together.
#[derive(Debug, Default)]
pub struct Base64Pieces {
    carry: Vec<u8>,
}

impl Base64Pieces {
    /// Appends the text of `bytes` (after what was carried) to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        let engine = &base64::engine::general_purpose::STANDARD;
        while !self.carry.is_empty() && self.carry.len() < 3 && !bytes.is_empty() {
            self.carry.push(bytes[0]);
            bytes = &bytes[1..];
        }
        if self.carry.len() == 3 {
            append_encoded(engine, &self.carry, out);
            self.carry.clear();
        }
        let whole = bytes.len() / 3 * 3;
        append_encoded(engine, &bytes[..whole], out);
        self.carry.extend_from_slice(&bytes[whole..]);
    }

    /// The text of what is left, padded.
    pub fn finish(self, out: &mut Vec<u8>) {
        append_encoded(&base64::engine::general_purpose::STANDARD, &self.carry, out);
    }

    /// The length of the text of `n` bytes.
    pub fn encoded_len(n: u64) -> u64 {
        n.div_ceil(3) * 4
    }
}

/// A JSON text with a hole where media's base64 text goes: serialize the value with
/// [`Hole::marker`] as that string, then [`Hole::cut`] it there. The marker is random, so
/// nothing else in the text (a sender's caption) can be taken for it.
pub struct Hole {
    marker: String,
}

impl Default for Hole {
    fn default() -> Hole {
        Hole { marker: format!("pl-b64-{:032x}", rand::random::<u128>()) }
    }
}

impl Hole {
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// The text before the marker and after it, if it is there.
    pub fn cut(&self, mut json: Vec<u8>) -> Option<(Vec<u8>, Vec<u8>)> {
        let at = json.windows(self.marker.len()).position(|w| w == self.marker.as_bytes())?;
        let suffix = json.split_off(at + self.marker.len());
        json.truncate(at);
        Some((json, suffix))
    }
}

/// `prefix`, the base64 text of media `id`'s bytes, then `suffix`: the media read and
/// encoded a chunk at a time, so neither it nor its text is ever held whole. (An error
/// ends the stream.)
pub fn base64_stream(
    db: PgPool,
    id: MediaId,
    prefix: Vec<u8>,
    suffix: Vec<u8>,
) -> impl futures::Stream<Item = Result<bytes::Bytes, sqlx::Error>> + Send {
    use futures::TryStreamExt;
    let chunks = Box::pin(chunks(db, id));
    let start = (Some(prefix), chunks, Some(Base64Pieces::default()), suffix);
    futures::stream::unfold(start, |(prefix, mut chunks, mut pieces, suffix)| async move {
        if let Some(p) = prefix {
            return Some((Ok(bytes::Bytes::from(p)), (None, chunks, pieces, suffix)));
        }
        let encoder = pieces.as_mut()?;
        match chunks.try_next().await {
            Ok(Some(c)) => {
                let mut out = Vec::with_capacity(Base64Pieces::encoded_len(c.len() as u64 + 2) as usize);
                encoder.push(&c, &mut out);
                Some((Ok(out.into()), (None, chunks, pieces, suffix)))
            }
            Ok(None) => {
                let mut out = Vec::with_capacity(4 + suffix.len());
                pieces.take().expect("checked").finish(&mut out);
                out.extend_from_slice(&suffix);
                Some((Ok(out.into()), (None, chunks, None, Vec::new())))
            }
            Err(e) => Some((Err(e), (None, chunks, None, Vec::new()))),
        }
    })
}

fn append_encoded(engine: &impl base64::Engine, bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    let start = out.len();
    out.resize(start + Base64Pieces::encoded_len(bytes.len() as u64) as usize, 0);
    let n = engine.encode_slice(bytes, &mut out[start..]).expect("sized for the text");
    out.truncate(start + n);
}

/// Stored media with all its bytes (the worker uploads it whole to the network).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MediaRow {
    pub id: MediaId,
    pub instance_id: InstanceId,
    pub mime_type: String,
    pub filename: Option<String>,
    pub size: i64,
    pub sha256: String,
    pub data: Vec<u8>,
}

pub async fn get(db: impl PgExecutor<'_>, id: &MediaId) -> Result<Option<MediaRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT m.id, m.instance_id, m.mime_type, m.filename, m.size, m.sha256, \
                COALESCE((SELECT string_agg(c.data, ''::bytea ORDER BY c.seq) FROM media_chunks c WHERE c.media_id = m.id), \
                         ''::bytea) AS data \
         FROM media m WHERE m.id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Any split of any bytes encodes as the whole does (random lengths and cuts; the
    /// seed is printed so a failure can be repeated).
    #[test]
    fn base64_in_pieces_equals_base64_at_once() {
        use base64::Engine;
        let seed: u64 = std::env::var("PL_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        println!("seed {seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..500 {
            let data: Vec<u8> = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect();
            let mut pieces = Base64Pieces::default();
            let mut out = Vec::new();
            let mut rest = &data[..];
            while !rest.is_empty() {
                let n = rng.gen_range(0..=rest.len().min(9));
                pieces.push(&rest[..n], &mut out);
                rest = &rest[n..];
            }
            pieces.finish(&mut out);
            let want = base64::engine::general_purpose::STANDARD.encode(&data);
            assert_eq!(String::from_utf8(out).unwrap(), want, "seed {seed}");
            assert_eq!(Base64Pieces::encoded_len(data.len() as u64), want.len() as u64);
        }
    }
}
