//! Reading logged messages back: a chat's page, the filtered search Evolution's
//! `findMessages` pages through, a message's network id, what a reply quotes, and which
//! network ids are already logged.

use super::*;

/// A logged message's chat and network id, by its `msg_` id.
pub async fn network_id(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &MessageId,
) -> Result<Option<(String, String)>, sqlx::Error> {
    sqlx::query_as("SELECT chat_jid, wa_message_id FROM log_messages WHERE instance_id = $1 AND id = $2")
        .bind(instance)
        .bind(id)
        .fetch_optional(db)
        .await
}

/// One of the account's own logged messages: its chat and network id, by its `msg_` id
/// (`None`: no such message, or someone else's).
pub async fn own_network_id(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &MessageId,
) -> Result<Option<(String, String)>, sqlx::Error> {
    sqlx::query_as("SELECT chat_jid, wa_message_id FROM log_messages WHERE instance_id = $1 AND id = $2 AND from_me")
        .bind(instance)
        .bind(id)
        .fetch_optional(db)
        .await
}

/// The message an outgoing one quotes or reacts to, as the log (or the queue) has it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Referenced {
    pub chat_jid: Jid,
    pub wa_message_id: String,
    pub from_me: bool,
    /// Who wrote it ('' when the account's number is not known yet).
    pub from_jid: String,
    pub content: Value,
}

/// The message `id` names for a message going to `chat_jid`: a `msg_` id of the log, or
/// of the queue (one of ours not sent yet; a failed one never reached the network), or
/// a network id in that chat.
pub async fn referenced(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    chat_jid: &str,
    id: &str,
) -> Result<Option<Referenced>, sqlx::Error> {
    sqlx::query_as(
        "SELECT chat_jid, wa_message_id, from_me, from_jid, content FROM ( \
           SELECT 0 AS pri, chat_jid, wa_message_id, from_me, from_jid, content FROM log_messages \
            WHERE instance_id = $1 AND (id = $3 OR (chat_jid = $2 AND wa_message_id = $3)) \
           UNION ALL \
           SELECT 1, m.to_jid, m.wa_message_id, TRUE, COALESCE(i.phone || '@' || $4, ''), m.content \
             FROM messages m JOIN instances i ON i.id = m.instance_id \
            WHERE m.instance_id = $1 AND m.id = $3 AND m.status IN ('queued', 'in_flight') \
         ) r ORDER BY pri LIMIT 1",
    )
    .bind(instance)
    .bind(chat_jid)
    .bind(id)
    .bind(crate::jid::USER_SERVER)
    .fetch_optional(db)
    .await
}

/// Where the account's own message with network id `wa_id` came from (`queue`: sent
/// through the API; `live` or `history`: typed on its phone), or `None` when the account
/// did not send it.
pub async fn own_message_source(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    wa_id: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT source FROM log_messages WHERE instance_id = $1 AND wa_message_id = $2 AND from_me \
         ORDER BY source = 'queue' DESC LIMIT 1",
    )
    .bind(instance)
    .bind(wa_id)
    .fetch_optional(db)
    .await
}

/// A page of a chat's messages, newest first, after `after` = (ts, id).
pub async fn messages(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    jid: &str,
    after: Option<(DateTime<Utc>, &MessageId)>,
    limit: i64,
) -> Result<Vec<LogRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {LOG_COLUMNS} FROM log_messages WHERE instance_id = $1 AND chat_jid = $2 \
         AND ($3::timestamptz IS NULL OR (ts, id) < ($3, $4)) ORDER BY ts DESC, id DESC LIMIT $5"
    ))
    .bind(instance)
    .bind(jid)
    .bind(after.map(|a| a.0))
    .bind(after.map(|a| a.1))
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Filters of [`find`]: each one present narrows the search.
#[derive(Debug, Default, Clone)]
pub struct Find {
    pub chat: Option<Jid>,
    pub wa_message_id: Option<String>,
    pub id: Option<MessageId>,
    pub from_me: Option<bool>,
    /// Our message types (`text`, `image`, ...).
    pub kinds: Option<Vec<String>>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// The instance's logged messages matching `f`, newest first: how many match in all, and
/// `limit` of them from `offset` (Evolution's `findMessages` pages by number).
pub async fn find(
    db: &PgPool,
    instance: &InstanceId,
    f: &Find,
    offset: i64,
    limit: i64,
) -> Result<(i64, Vec<LogRow>), sqlx::Error> {
    const WHERE: &str = "instance_id = $1 AND ($2::text IS NULL OR chat_jid = $2) \
        AND ($3::text IS NULL OR wa_message_id = $3) AND ($4::text IS NULL OR id = $4) \
        AND ($5::bool IS NULL OR from_me = $5) AND ($6::text[] IS NULL OR type = ANY($6)) \
        AND ($7::timestamptz IS NULL OR ts >= $7) AND ($8::timestamptz IS NULL OR ts <= $8)";
    type Q<'q, O> = sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>;
    fn filters<'q, O>(q: Q<'q, O>, instance: &'q InstanceId, f: &'q Find) -> Q<'q, O> {
        q.bind(instance)
            .bind(&f.chat)
            .bind(&f.wa_message_id)
            .bind(&f.id)
            .bind(f.from_me)
            .bind(&f.kinds)
            .bind(f.since)
            .bind(f.until)
    }
    let count = format!("SELECT count(*) FROM log_messages WHERE {WHERE}");
    let (total,): (i64,) = filters(sqlx::query_as(&count), instance, f).fetch_one(db).await?;
    let page =
        format!("SELECT {LOG_COLUMNS} FROM log_messages WHERE {WHERE} ORDER BY ts DESC, id DESC OFFSET $9 LIMIT $10");
    let rows = filters(sqlx::query_as(&page), instance, f).bind(offset).bind(limit).fetch_all(db).await?;
    Ok((total, rows))
}

/// Which of these (chat, network id) are already logged.
pub async fn known(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    keys: &[(&str, &str)],
) -> Result<std::collections::HashSet<(String, String)>, sqlx::Error> {
    let chats: Vec<&str> = keys.iter().map(|k| k.0).collect();
    let wa: Vec<&str> = keys.iter().map(|k| k.1).collect();
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT l.chat_jid, l.wa_message_id FROM log_messages l \
         JOIN UNNEST($2::text[], $3::text[]) AS v(c, w) ON l.chat_jid = v.c AND l.wa_message_id = v.w \
         WHERE l.instance_id = $1",
    )
    .bind(instance)
    .bind(&chats)
    .bind(&wa)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// A logged message's content now (received media's descriptor changes once downloaded).
pub async fn content_of(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &str,
) -> Result<Option<serde_json::Value>, sqlx::Error> {
    sqlx::query_scalar("SELECT content FROM log_messages WHERE instance_id = $1 AND id = $2")
        .bind(instance)
        .bind(id)
        .fetch_optional(db)
        .await
}
