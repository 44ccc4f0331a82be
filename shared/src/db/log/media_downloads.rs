//! Received media whose download is still to be done: the rows the worker tries again,
//! each outcome recorded fenced, and when to look next.

use super::*;

/// Received media still to be downloaded (`db::media::MediaBody::Pending`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PendingMedia {
    pub id: crate::ids::MediaId,
    /// `{locator, mime_type, filename, chat_jid, wa_message_id}`.
    pub remote: Value,
    pub fetch_attempts: i32,
}

/// Pending media of `instance` whose retry is due, oldest due first.
pub async fn pending_media(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    limit: i64,
) -> Result<Vec<PendingMedia>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, remote, fetch_attempts FROM media \
         WHERE instance_id = $1 AND remote IS NOT NULL AND fetch_after <= now() ORDER BY fetch_after LIMIT $2",
    )
    .bind(instance)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// How a retried download went.
#[derive(Debug, Clone, Copy)]
pub enum Fetched<'a> {
    Data(&'a [u8]),
    /// The network no longer has it (or the retries were used up).
    Gone,
    /// Another passing failure: try again then.
    Later(std::time::Duration),
}

/// Records a retried download, fenced: with bytes (or for good without), the media row
/// stops being pending and the logged message's descriptor is updated, with a
/// `message.media_updated` event, in the same transaction. Returns false when another worker owns the instance now.
/// Bytes bound for the bucket are uploaded first; the bucket failing leaves the media
/// pending, fetched again after `bucket_retry`, without counting a failed try.
pub async fn resolve_media(
    store: &crate::db::media::Store,
    instance: &InstanceId,
    epoch: i64,
    media: &PendingMedia,
    fetched: Fetched<'_>,
    bucket_retry: std::time::Duration,
) -> Result<bool, sqlx::Error> {
    let r = &media.remote;
    let (mime, filename) = (r["mime_type"].as_str().unwrap_or("application/octet-stream"), r["filename"].as_str());
    let mut object_key = None;
    let mut bucket_down = false;
    if let Fetched::Data(d) = fetched {
        match store.upload_whole(instance, &media.id, mime, filename, d).await {
            Ok(key) => object_key = key,
            Err(e) => {
                tracing::warn!(error = %e, "storing received media failed; its download is tried again");
                bucket_down = true;
            }
        }
    }
    let mut tx = store.db.begin().await?;
    if !fence(&mut tx, instance, epoch).await? {
        drop(tx);
        if let Some(key) = &object_key {
            crate::db::media::queue_deletion(&store.db, key).await?;
        }
        return Ok(false);
    }
    // Not stored now: tried again later. A bucket that did not take bytes the network
    // gave is not a failed try of the download, so its tries stay as they were.
    let later = match (bucket_down, fetched) {
        (true, _) => Some((bucket_retry, 0i32)),
        (false, Fetched::Later(after)) => Some((after, 1)),
        _ => None,
    };
    if let Some((after, tries)) = later {
        sqlx::query(
            "UPDATE media SET fetch_attempts = fetch_attempts + $4, fetch_after = now() + $3 * interval '1 millisecond' \
             WHERE id = $1 AND instance_id = $2 AND remote IS NOT NULL",
        )
        .bind(&media.id)
        .bind(instance)
        .bind(after.as_millis() as i64)
        .bind(tries)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        return Ok(true);
    }
    // The bytes, or (gone for good) none.
    let body = if let Fetched::Data(d) = fetched { Some(d) } else { None };
    let sha = body.map(crate::db::media::sha256_hex);
    let stored = body.zip(sha.as_deref()).map(|(d, sha)| (d.len() as u64, sha));
    let mut desc = crate::db::media::descriptor(&media.id, mime, filename, stored);
    if body.is_none() {
        desc["expired"] = Value::Bool(true);
    }
    let still_pending = sqlx::query(
        "UPDATE media SET size = $3, sha256 = $4, expired = $5, remote = NULL, fetch_after = NULL, object_key = $6 \
         WHERE id = $1 AND instance_id = $2 AND remote IS NOT NULL",
    )
    .bind(&media.id)
    .bind(instance)
    .bind(stored.map_or(0, |(n, _)| n as i64))
    .bind(sha.as_deref().unwrap_or_default())
    .bind(body.is_none())
    .bind(&object_key)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    match (still_pending, body, &object_key) {
        (true, Some(data), None) => crate::db::media::write_chunks(&mut tx, &media.id, data).await?,
        // Resolved meanwhile (by an earlier owner): the object uploaded here is nobody's.
        (false, _, Some(key)) => crate::db::media::queue_deletion(&mut *tx, key).await?,
        _ => {}
    }
    let updated: Option<(MessageId, String, String)> = sqlx::query_as(
        "UPDATE log_messages SET content = jsonb_set(content, '{media}', $4) \
         WHERE instance_id = $1 AND chat_jid = $2 AND wa_message_id = $3 AND content->'media'->>'id' = $5 \
         RETURNING id, chat_jid, wa_message_id",
    )
    .bind(instance)
    .bind(r["chat_jid"].as_str().unwrap_or_default())
    .bind(r["wa_message_id"].as_str().unwrap_or_default())
    .bind(&desc)
    .bind(media.id.to_string())
    .fetch_optional(&mut *tx)
    .await?;
    // Who got `message.received` with `pending: true` learns the outcome.
    if let Some((message_id, chat_jid, wa_message_id)) = updated {
        let data = MediaUpdatedEventData { message_id, wa_message_id, chat_jid, media: desc };
        outbox::insert(&mut *tx, instance, &Event::MediaUpdated(data)).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// How long until the next pending media of `instance` is due (zero if one is), if it
/// has any. Measured on Postgres's clock, the one `pending_media` decides by.
pub async fn next_media_retry(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
) -> Result<Option<std::time::Duration>, sqlx::Error> {
    let ms: Option<i64> = sqlx::query_scalar(
        // GREATEST skips NULLs: no pending media must stay NULL, not become 0.
        "SELECT CASE WHEN min(fetch_after) IS NULL THEN NULL \
                ELSE GREATEST(0, (EXTRACT(EPOCH FROM min(fetch_after) - now()) * 1000)::bigint) END \
         FROM media WHERE instance_id = $1 AND remote IS NOT NULL",
    )
    .bind(instance)
    .fetch_one(db)
    .await?;
    Ok(ms.map(|ms| std::time::Duration::from_millis(ms as u64)))
}
