//! Chats: their rows as the worker keeps them, read by the API, and the settings the API
//! carried to the network (archive, pin, mute, read) or a deletion, each with its
//! `chat.updated`.

use super::*;

/// A chat row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChatRow {
    pub jid: Jid,
    pub name: Option<String>,
    pub last_message_at: DateTime<Utc>,
    pub unread_count: i32,
    pub archived: bool,
    pub pinned: bool,
    pub muted_until: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// The party's hidden id, when the network addressed it by one (`jid` is its number's
    /// JID once known, else the same LID).
    pub lid: Option<String>,
}

impl ChatRow {
    /// Its `chat.updated` event.
    pub fn event(&self, deleted: bool) -> Event {
        Event::ChatUpdated(ChatUpdatedEventData {
            jid: self.jid.to_string(),
            unread_count: i64::from(self.unread_count),
            archived: self.archived,
            pinned: self.pinned,
            muted_until: self.muted_until,
            last_message_at: self.last_message_at,
            lid: self.lid.clone(),
            deleted,
        })
    }
}

pub(super) const CHAT_COLUMNS: &str =
    "jid, name, last_message_at, unread_count, archived, pinned, muted_until, updated_at, lid";

/// A page of chats, newest last message first, after `after` = (last_message_at, jid).
pub async fn chats(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    after: Option<(DateTime<Utc>, &str)>,
    limit: i64,
) -> Result<Vec<ChatRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {CHAT_COLUMNS} FROM chats WHERE instance_id = $1 \
         AND ($2::timestamptz IS NULL OR (last_message_at, jid) < ($2, $3)) \
         ORDER BY last_message_at DESC, jid DESC LIMIT $4"
    ))
    .bind(instance)
    .bind(after.map(|a| a.0))
    .bind(after.map(|a| a.1))
    .bind(limit)
    .fetch_all(db)
    .await
}

/// The instance's chats, newest activity first, `skip` of them left out (Evolution's
/// `findChats` window), or only `jid`'s.
pub async fn chats_window(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    jid: Option<&str>,
    skip: i64,
    take: i64,
) -> Result<Vec<ChatRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {CHAT_COLUMNS} FROM chats WHERE instance_id = $1 AND ($2::text IS NULL OR jid = $2) \
         ORDER BY last_message_at DESC, jid DESC OFFSET $3 LIMIT $4"
    ))
    .bind(instance)
    .bind(jid)
    .bind(skip)
    .bind(take)
    .fetch_all(db)
    .await
}

pub async fn chat(db: impl PgExecutor<'_>, instance: &InstanceId, jid: &str) -> Result<Option<ChatRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {CHAT_COLUMNS} FROM chats WHERE instance_id = $1 AND jid = $2"))
        .bind(instance)
        .bind(jid)
        .fetch_optional(db)
        .await
}

/// Chat settings the network accepted (absent fields stay), with their `chat.updated`.
#[derive(Debug, Default, Clone)]
pub struct ChatChange {
    pub archived: Option<bool>,
    pub pinned: Option<bool>,
    pub muted_until: Option<Option<DateTime<Utc>>>,
    /// Some(true): read (unread 0); Some(false): marked unread (at least 1).
    pub read: Option<bool>,
}

pub async fn update_chat(
    pool: &PgPool,
    instance: &InstanceId,
    jid: &str,
    c: &ChatChange,
) -> Result<Option<ChatRow>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let row: Option<ChatRow> = sqlx::query_as(&format!(
        "UPDATE chats SET archived = COALESCE($3, archived), pinned = COALESCE($4, pinned), \
             muted_until = CASE WHEN $5 THEN $6 ELSE muted_until END, \
             unread_count = CASE WHEN $7::bool IS NULL THEN unread_count WHEN $7 THEN 0 ELSE GREATEST(unread_count, 1) END, \
             read_at = CASE WHEN $7 THEN GREATEST(read_at, last_message_at) ELSE read_at END, \
             updated_at = now() \
         WHERE instance_id = $1 AND jid = $2 RETURNING {CHAT_COLUMNS}"
    ))
    .bind(instance)
    .bind(jid)
    .bind(c.archived)
    .bind(c.pinned)
    .bind(c.muted_until.is_some())
    .bind(c.muted_until.flatten())
    .bind(c.read)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(r) = &row {
        outbox::insert(&mut *tx, instance, &r.event(false)).await?;
    }
    tx.commit().await?;
    Ok(row)
}

/// Deletes a chat and its messages (the network deleted it), with `chat.updated`
/// (`deleted: true`). False when there was no such chat.
pub async fn delete_chat(pool: &PgPool, instance: &InstanceId, jid: &str) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let row: Option<ChatRow> =
        sqlx::query_as(&format!("DELETE FROM chats WHERE instance_id = $1 AND jid = $2 RETURNING {CHAT_COLUMNS}"))
            .bind(instance)
            .bind(jid)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(r) = row else { return Ok(false) };
    sqlx::query("DELETE FROM log_messages WHERE instance_id = $1 AND chat_jid = $2")
        .bind(instance)
        .bind(jid)
        .execute(&mut *tx)
        .await?;
    outbox::insert(&mut *tx, instance, &r.event(true)).await?;
    tx.commit().await?;
    Ok(true)
}
