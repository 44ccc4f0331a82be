//! The AI attendant's rows: each instance's configuration (its secret sealed), the chats
//! paused for a human, and the answered messages. A reply is recorded once per received
//! message, with its `attendant.replied` event and its usage in the same transaction.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::ids::InstanceId;

/// An instance's attendant as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AttendantRow {
    pub config: serde_json::Value,
    pub secret: Option<Vec<u8>>,
    pub allow_private: bool,
    /// The origin of the provider URL `allow_private` was given for.
    pub private_origin: Option<String>,
    pub updated_at: DateTime<Utc>,
}

pub async fn get(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Option<AttendantRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT config, secret, allow_private, private_origin, updated_at FROM attendants WHERE instance_id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await
}

/// Creates or replaces the attendant of an existing instance; false when there is none.
/// `private_origin`: the provider origin private addresses are allowed for (none: not
/// allowed).
pub async fn put(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    config: &serde_json::Value,
    secret: Option<&[u8]>,
    private_origin: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "INSERT INTO attendants (instance_id, config, secret, allow_private, private_origin) \
         SELECT $1, $2, $3, $4 IS NOT NULL, $4 WHERE EXISTS (SELECT 1 FROM instances WHERE id = $1) \
         ON CONFLICT (instance_id) DO UPDATE SET config = EXCLUDED.config, secret = EXCLUDED.secret, \
             allow_private = EXCLUDED.allow_private, private_origin = EXCLUDED.private_origin, updated_at = now()",
    )
    .bind(id)
    .bind(config)
    .bind(secret)
    .bind(private_origin)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn delete(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<bool, sqlx::Error> {
    let r = sqlx::query("DELETE FROM attendants WHERE instance_id = $1").bind(id).execute(db).await?;
    Ok(r.rows_affected() == 1)
}

/// A chat the attendant leaves to a human until `until`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Pause {
    pub chat_jid: crate::jid::Jid,
    pub until: DateTime<Utc>,
    pub reason: String,
}

/// Pauses the attendant in a chat until `until` (a later pause extends it). Returns
/// whether the chat was not paused before (a new handoff).
pub async fn pause(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    chat: &str,
    until: DateTime<Utc>,
    reason: &str,
) -> Result<bool, sqlx::Error> {
    // `xmax = 0` tells an insert from an update; a lapsed pause counts as new.
    let (was_new,): (bool,) = sqlx::query_as(
        "WITH old AS (SELECT until FROM attendant_pauses WHERE instance_id = $1 AND chat_jid = $2) \
         INSERT INTO attendant_pauses (instance_id, chat_jid, until, reason) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (instance_id, chat_jid) DO UPDATE SET until = GREATEST(attendant_pauses.until, EXCLUDED.until), \
             reason = EXCLUDED.reason \
         RETURNING NOT EXISTS (SELECT 1 FROM old WHERE old.until > now())",
    )
    .bind(id)
    .bind(chat)
    .bind(until)
    .bind(reason)
    .fetch_one(db)
    .await?;
    Ok(was_new)
}

/// Resumes the attendant in a chat; false when it was not paused there.
pub async fn resume(db: impl PgExecutor<'_>, id: &InstanceId, chat: &str) -> Result<bool, sqlx::Error> {
    let r = sqlx::query("DELETE FROM attendant_pauses WHERE instance_id = $1 AND chat_jid = $2 AND until > now()")
        .bind(id)
        .bind(chat)
        .execute(db)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// The chats paused now.
pub async fn pauses(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Vec<Pause>, sqlx::Error> {
    sqlx::query_as(
        "SELECT chat_jid, until, reason FROM attendant_pauses WHERE instance_id = $1 AND until > now() \
         ORDER BY until DESC LIMIT 1000",
    )
    .bind(id)
    .fetch_all(db)
    .await
}

/// Until when the chat is paused, if it is.
pub async fn paused_until(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    chat: &str,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar("SELECT until FROM attendant_pauses WHERE instance_id = $1 AND chat_jid = $2 AND until > now()")
        .bind(id)
        .bind(chat)
        .fetch_optional(db)
        .await
}

/// Replies sent in a chat since `since`.
pub async fn replies_since(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    chat: &str,
    since: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FROM attendant_replies WHERE instance_id = $1 AND chat_jid = $2 AND created_at >= $3",
    )
    .bind(id)
    .bind(chat)
    .bind(since)
    .fetch_one(db)
    .await
}

/// The instance's replies, and the tokens they took, since `since` (its budget).
pub async fn spent_since(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    since: DateTime<Utc>,
) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "SELECT count(*), COALESCE(sum(tokens), 0)::bigint FROM attendant_replies \
         WHERE instance_id = $1 AND created_at >= $2",
    )
    .bind(id)
    .bind(since)
    .fetch_one(db)
    .await
}

/// Which of `messages` (queued `msg_` ids) are the attendant's replies.
pub async fn replies_among(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    messages: &[&str],
) -> Result<Vec<String>, sqlx::Error> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    // (Recent ones only: the chat's last messages, read through the time index.)
    sqlx::query_scalar(
        "SELECT message_id FROM attendant_replies \
         WHERE instance_id = $1 AND created_at >= now() - interval '7 days' AND message_id = ANY($2)",
    )
    .bind(id)
    .bind(messages)
    .fetch_all(db)
    .await
}

/// Whether the received message `inbound` was answered already.
pub async fn answered(db: impl PgExecutor<'_>, id: &InstanceId, inbound: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM attendant_replies WHERE instance_id = $1 AND inbound_id = $2)")
        .bind(id)
        .bind(inbound)
        .fetch_one(db)
        .await
}

/// A reply queued for a received message.
pub struct Reply<'a> {
    pub inbound_id: &'a str,
    pub chat_jid: &'a str,
    pub message_id: &'a str,
    pub tokens: i64,
    /// The `attendant.replied` event's data.
    pub event: crate::events::AttendantRepliedEventData,
}

/// Records a reply once: the row, its `attendant.replied` event and the day's usage, in
/// one transaction. False when the message was answered already (nothing written).
pub async fn record_reply(db: &sqlx::PgPool, id: &InstanceId, r: Reply<'_>) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO attendant_replies (instance_id, inbound_id, chat_jid, message_id, tokens) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(r.inbound_id)
    .bind(r.chat_jid)
    .bind(r.message_id)
    .bind(r.tokens)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !inserted {
        return Ok(false);
    }
    crate::db::outbox::insert(&mut *tx, id, &crate::events::Event::AttendantReplied(r.event)).await?;
    sqlx::query(
        "INSERT INTO usage_daily (instance_id, day, attendant_replies, attendant_tokens) \
         VALUES ($1, (now() AT TIME ZONE 'UTC')::date, 1, $2) \
         ON CONFLICT (instance_id, day) DO UPDATE SET attendant_replies = usage_daily.attendant_replies + 1, \
             attendant_tokens = usage_daily.attendant_tokens + EXCLUDED.attendant_tokens",
    )
    .bind(id)
    .bind(r.tokens)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// The stored transcriptions of these received messages: message id -> text.
pub async fn transcripts(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    messages: &[String],
) -> Result<std::collections::HashMap<String, String>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT message_id, text FROM attendant_transcripts WHERE instance_id = $1 AND message_id = ANY($2)",
    )
    .bind(id)
    .bind(messages)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Keeps a message's transcription (the first one made wins).
pub async fn save_transcript(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    message: &str,
    text: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO attendant_transcripts (instance_id, message_id, text) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(message)
    .bind(text)
    .execute(db)
    .await
    .map(drop)
}
