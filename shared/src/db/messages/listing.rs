//! The queue as people read it (`GET {inst}/queue`): unfinished messages in queue order,
//! failed ones newest first, their counts and the recent sends pacing starts from.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::{MessageRow, COLUMNS};
use crate::ids::{InstanceId, MessageId};

/// Unfinished messages (queued or in flight) after queue position `after_seq`, in
/// order (`messages_queue_idx`).
pub async fn pending(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    after_seq: Option<i64>,
    limit: i64,
) -> Result<Vec<MessageRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM messages WHERE instance_id = $1 AND status IN ('queued', 'in_flight') \
           AND seq > $2 ORDER BY seq LIMIT $3"
    ))
    .bind(instance)
    .bind(after_seq.unwrap_or(i64::MIN))
    .bind(limit)
    .fetch_all(db)
    .await
}

/// How many unfinished messages are ahead of (or at) queue position `seq`: where a
/// later page starts in the queue.
pub async fn pending_through(db: impl PgExecutor<'_>, instance: &InstanceId, seq: i64) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FROM messages WHERE instance_id = $1 AND status IN ('queued', 'in_flight') AND seq <= $2",
    )
    .bind(instance)
    .bind(seq)
    .fetch_one(db)
    .await
}

/// Failed messages, the latest failure first, after `(updated_at, id)`
/// (`messages_done_idx`).
pub async fn failed(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    after: Option<(DateTime<Utc>, MessageId)>,
    limit: i64,
) -> Result<Vec<MessageRow>, sqlx::Error> {
    let (at, id) = after.unzip();
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM messages WHERE instance_id = $1 AND status = 'failed' \
           AND ($2::timestamptz IS NULL OR (updated_at, id) < ($2, $3)) \
         ORDER BY updated_at DESC, id DESC LIMIT $4"
    ))
    .bind(instance)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// An instance's queue in figures.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct Counts {
    pub queued: i64,
    pub in_flight: i64,
    /// Failed within the last 24 hours.
    pub failed_24h: i64,
    pub sent_1m: i64,
    pub sent_1h: i64,
}

/// The counts, in one statement (the unfinished from `messages_queue_idx`, the finished
/// of the last day from `messages_done_idx`).
pub async fn counts(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<Counts, sqlx::Error> {
    sqlx::query_as(
        "SELECT \
           (SELECT count(*) FROM messages WHERE instance_id = $1 AND status = 'queued') AS queued, \
           (SELECT count(*) FROM messages WHERE instance_id = $1 AND status = 'in_flight') AS in_flight, \
           count(*) FILTER (WHERE status = 'failed') AS failed_24h, \
           count(*) FILTER (WHERE status = 'sent' AND updated_at > now() - interval '1 minute') AS sent_1m, \
           count(*) FILTER (WHERE status = 'sent' AND updated_at > now() - interval '1 hour') AS sent_1h \
         FROM messages WHERE instance_id = $1 AND status IN ('sent', 'failed') \
           AND updated_at > now() - interval '1 day'",
    )
    .bind(instance)
    .fetch_one(db)
    .await
}

/// When the instance's last sends went, oldest first: those of the last minute (the
/// per-minute cap counts them) and at least the latest (the interval runs from it).
pub async fn recent_sends(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<Vec<DateTime<Utc>>, sqlx::Error> {
    let mut at: Vec<DateTime<Utc>> = sqlx::query_scalar(
        "SELECT sent_at FROM messages WHERE instance_id = $1 AND status = 'sent' AND sent_at IS NOT NULL \
           AND updated_at > now() - interval '1 day' \
           AND (updated_at > now() - interval '1 minute' OR updated_at = ( \
             SELECT max(updated_at) FROM messages WHERE instance_id = $1 AND status IN ('sent', 'failed') \
               AND updated_at > now() - interval '1 day')) \
         ORDER BY updated_at DESC LIMIT 1000",
    )
    .bind(instance)
    .fetch_all(db)
    .await?;
    at.sort();
    Ok(at)
}
