//! The Chatwoot bridge's rows (migration 0039): each instance's inbox settings (the
//! access token and the webhook secret sealed), the jobs the `chatwoot` role does in
//! order per instance, and what it made in Chatwoot (a chat's contact and conversation,
//! a message's copy), so nothing is made twice.
//!
//! A job is claimed like a webhook delivery: `locked_by` + a fresh `claim_id`, and every
//! outcome is written only under that claim. An instance's jobs are done one at a time:
//! only the head of its queue is ever claimed (its setup first, then an import, which
//! queues older messages, then by when what caused the job happened), and only once it has been queued for [`SETTLE_MS`], so a job for an
//! earlier event still being written (by another bridge pod) is not passed over.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use crate::ids::InstanceId;

mod accounts;
pub use accounts::*;

/// How long a job waits after it is queued before it may be claimed.
pub const SETTLE_MS: u64 = 1_000;

/// An instance's inbox as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboxRow {
    pub instance_id: InstanceId,
    pub config: serde_json::Value,
    pub token_sealed: Vec<u8>,
    pub inbox_id: Option<i64>,
    pub hook_sealed: Vec<u8>,
    pub private_origin: Option<String>,
    pub generation: i64,
    pub last_error: Option<String>,
    /// The account whose settings it was made from (none: the instance's own).
    pub from_account: Option<String>,
    pub updated_at: DateTime<Utc>,
}

const INBOX: &str = "SELECT instance_id, config, token_sealed, inbox_id, hook_sealed, private_origin, generation, \
     last_error, from_account, updated_at FROM chatwoot_inboxes";

/// Whether any instance or account has Chatwoot settings: the bridge reads the event
/// stream only while one does.
pub async fn in_use(db: impl PgExecutor<'_>) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM chatwoot_inboxes) OR EXISTS (SELECT 1 FROM chatwoot_accounts)")
        .fetch_one(db)
        .await
}

pub async fn get(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Option<InboxRow>, sqlx::Error> {
    sqlx::query_as(&format!("{INBOX} WHERE instance_id = $1")).bind(id).fetch_optional(db).await
}

/// The inbox whose webhook secret hashes to `hash`.
pub async fn by_hook(db: impl PgExecutor<'_>, hash: &str) -> Result<Option<InboxRow>, sqlx::Error> {
    sqlx::query_as(&format!("{INBOX} WHERE hook_hash = $1")).bind(hash).fetch_optional(db).await
}

/// The inboxes of these instances.
pub async fn many(db: impl PgExecutor<'_>, ids: &[String]) -> Result<Vec<InboxRow>, sqlx::Error> {
    sqlx::query_as(&format!("{INBOX} WHERE instance_id = ANY($1)")).bind(ids).fetch_all(db).await
}

/// What `put` stores.
pub struct Put<'a> {
    pub config: &'a serde_json::Value,
    pub token_sealed: &'a [u8],
    pub inbox_id: Option<i64>,
    /// The webhook secret's hash and sealed copy, used when the inbox is new (an inbox
    /// keeps its webhook URL).
    pub hook: (&'a str, &'a [u8]),
    pub private_origin: Option<&'a str>,
    /// The Chatwoot account or inbox changed: what was mapped belongs to the old one.
    pub moved: bool,
    /// Contacts or history are to be imported.
    pub import: bool,
    /// Made from this account's settings (none: the instance's own).
    pub from_account: Option<&'a str>,
}

/// Creates or replaces an existing instance's inbox; false when there is no instance, or
/// (for an inbox made from its account's settings) when it has settings of its own.
/// Without an inbox id, a `setup` job makes one (in the same transaction).
pub async fn put(db: &PgPool, id: &InstanceId, p: Put<'_>) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let row: Option<(i64,)> = sqlx::query_as(
        "INSERT INTO chatwoot_inboxes (instance_id, config, token_sealed, inbox_id, hook_hash, hook_sealed, private_origin, from_account) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $9 WHERE EXISTS (SELECT 1 FROM instances WHERE id = $1) \
         ON CONFLICT (instance_id) DO UPDATE SET config = EXCLUDED.config, token_sealed = EXCLUDED.token_sealed, \
             inbox_id = EXCLUDED.inbox_id, private_origin = EXCLUDED.private_origin, last_error = NULL, \
             from_account = EXCLUDED.from_account, \
             generation = chatwoot_inboxes.generation + CASE WHEN $8 THEN 1 ELSE 0 END, updated_at = now() \
         WHERE EXCLUDED.from_account IS NULL OR chatwoot_inboxes.from_account IS NOT NULL \
         RETURNING generation",
    )
    .bind(id)
    .bind(p.config)
    .bind(p.token_sealed)
    .bind(p.inbox_id)
    .bind(p.hook.0)
    .bind(p.hook.1)
    .bind(p.private_origin)
    .bind(p.moved)
    .bind(p.from_account)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((generation,)) = row else {
        return Ok(false);
    };
    if p.moved {
        // Received messages not yet in Chatwoot go to the new inbox; what belonged to the
        // old one's conversations (agents' messages, notes, resolutions) and its setup
        // are dropped with it.
        sqlx::query(
            "UPDATE chatwoot_jobs SET payload = jsonb_set(payload, '{generation}', to_jsonb($2::bigint)) \
             WHERE instance_id = $1 AND state = 'pending' AND kind = 'inbound'",
        )
        .bind(id)
        .bind(generation)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM chatwoot_jobs WHERE instance_id = $1 AND state = 'pending' AND kind <> 'inbound'")
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    if p.import {
        // Once per inbox (generation): a later PUT asking again imports nothing twice.
        enqueue(
            &mut *tx,
            id,
            Kind::Import,
            &format!("import-{generation}"),
            &serde_json::json!({ "generation": generation }),
            None,
        )
        .await?;
    }
    if p.inbox_id.is_none() {
        // Queued again if an earlier setup of this generation failed (a wrong token,
        // fixed now).
        sqlx::query(
            "INSERT INTO chatwoot_jobs (instance_id, kind, key, payload) VALUES ($1, 'setup', $2, $3) \
             ON CONFLICT (instance_id, kind, key) DO UPDATE SET state = 'pending', attempts = 0, \
                 next_attempt_at = now(), first_try_at = NULL, last_error = NULL, updated_at = now() \
             WHERE chatwoot_jobs.state <> 'pending'",
        )
        .bind(id)
        .bind(format!("inbox-{generation}"))
        .bind(serde_json::json!({ "generation": generation }))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Removes the inbox and everything the bridge kept for it.
pub async fn delete(db: &PgPool, id: &InstanceId) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let gone = sqlx::query("DELETE FROM chatwoot_inboxes WHERE instance_id = $1").bind(id).execute(&mut *tx).await?;
    forget(&mut tx, std::slice::from_ref(id)).await?;
    tx.commit().await?;
    Ok(gone.rows_affected() == 1)
}

/// Records the inbox the bridge made, if the settings are still of that generation.
pub async fn set_inbox(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    generation: i64,
    inbox: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE chatwoot_inboxes SET inbox_id = $3 WHERE instance_id = $1 AND generation = $2")
        .bind(id)
        .bind(generation)
        .bind(inbox)
        .execute(db)
        .await?;
    Ok(())
}

/// Records (or clears) the bridge's last failure talking to Chatwoot.
pub async fn set_error(db: impl PgExecutor<'_>, id: &InstanceId, error: Option<&str>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE chatwoot_inboxes SET last_error = $2 WHERE instance_id = $1 AND last_error IS DISTINCT FROM $2",
    )
    .bind(id)
    .bind(error)
    .execute(db)
    .await?;
    Ok(())
}

/// A chat's contact and conversation.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChatRow {
    pub contact_id: i64,
    pub conversation_id: Option<i64>,
}

pub async fn chat(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    jid: &str,
    generation: i64,
) -> Result<Option<ChatRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT contact_id, conversation_id FROM chatwoot_chats WHERE instance_id = $1 AND chat_jid = $2 AND generation = $3",
    )
    .bind(id)
    .bind(jid)
    .bind(generation)
    .fetch_optional(db)
    .await
}

pub async fn save_chat(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    jid: &str,
    generation: i64,
    chat: &ChatRow,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO chatwoot_chats (instance_id, chat_jid, generation, contact_id, conversation_id) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (instance_id, chat_jid) DO UPDATE SET \
             generation = EXCLUDED.generation, contact_id = EXCLUDED.contact_id, conversation_id = EXCLUDED.conversation_id",
    )
    .bind(id)
    .bind(jid)
    .bind(generation)
    .bind(chat.contact_id)
    .bind(chat.conversation_id)
    .execute(db)
    .await?;
    Ok(())
}

/// Moves a chat's row to the key its local log moved it to (a chat under a hidden id,
/// merged into its number's).
pub async fn move_chat(db: impl PgExecutor<'_>, id: &InstanceId, from: &str, to: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE chatwoot_chats SET chat_jid = $3 WHERE instance_id = $1 AND chat_jid = $2          AND NOT EXISTS (SELECT 1 FROM chatwoot_chats WHERE instance_id = $1 AND chat_jid = $3)",
    )
    .bind(id)
    .bind(from)
    .bind(to)
    .execute(db)
    .await?;
    Ok(())
}

/// The chat a conversation is of.
pub async fn chat_of_conversation(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    conversation: i64,
    generation: i64,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT chat_jid FROM chatwoot_chats WHERE instance_id = $1 AND conversation_id = $2 AND generation = $3",
    )
    .bind(id)
    .bind(conversation)
    .bind(generation)
    .fetch_optional(db)
    .await
}

/// Forgets a conversation (resolved in Chatwoot): the chat's next message opens another.
pub async fn forget_conversation(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    conversation: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE chatwoot_chats SET conversation_id = NULL WHERE instance_id = $1 AND conversation_id = $2")
        .bind(id)
        .bind(conversation)
        .execute(db)
        .await?;
    Ok(())
}

/// A message's copy in Chatwoot: (conversation, message).
pub async fn message(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    key: &str,
    generation: i64,
) -> Result<Option<(i64, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT conversation_id, cw_message_id FROM chatwoot_messages \
         WHERE instance_id = $1 AND message_key = $2 AND generation = $3",
    )
    .bind(id)
    .bind(key)
    .bind(generation)
    .fetch_optional(db)
    .await
}

/// Our key of a Chatwoot message (the message of ours it is a copy of, or came from).
pub async fn key_of(db: impl PgExecutor<'_>, id: &InstanceId, cw_message: i64) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT message_key FROM chatwoot_messages WHERE instance_id = $1 AND cw_message_id = $2 LIMIT 1",
    )
    .bind(id)
    .bind(cw_message)
    .fetch_optional(db)
    .await
}

pub async fn save_message(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    key: &str,
    generation: i64,
    conversation: i64,
    cw_message: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO chatwoot_messages (instance_id, message_key, generation, conversation_id, cw_message_id) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (instance_id, message_key) DO UPDATE SET \
             generation = EXCLUDED.generation, conversation_id = EXCLUDED.conversation_id, \
             cw_message_id = EXCLUDED.cw_message_id",
    )
    .bind(id)
    .bind(key)
    .bind(generation)
    .bind(conversation)
    .bind(cw_message)
    .execute(db)
    .await?;
    Ok(())
}

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type, serde::Serialize, serde::Deserialize)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Setup,
    Inbound,
    Outbound,
    Status,
    Resolved,
    Import,
    Contact,
}

/// Queues a piece of work once: false when a job with its key was queued before.
/// `event_at`: when what caused it happened (default now), which orders it.
pub async fn enqueue(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    kind: Kind,
    key: &str,
    payload: &serde_json::Value,
    event_at: Option<DateTime<Utc>>,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "INSERT INTO chatwoot_jobs (instance_id, kind, key, payload, event_at) \
         VALUES ($1, $2, $3, $4, coalesce($5, now())) ON CONFLICT (instance_id, kind, key) DO NOTHING",
    )
    .bind(id)
    .bind(kind)
    .bind(key)
    .bind(payload)
    .bind(event_at)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// A claimed job.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Job {
    pub seq: i64,
    pub instance_id: InstanceId,
    pub kind: Kind,
    pub key: String,
    pub payload: serde_json::Value,
    pub attempts: i32,
    /// Its first try (this one, when it is the first).
    pub first_try_at: DateTime<Utc>,
    pub claim_id: String,
}

/// Claims up to `limit` due jobs, each the head of its instance's queue (its setup first,
/// then an import, then the earliest event), settled, and none of an instance whose head
/// is held.
pub async fn claim(db: impl PgExecutor<'_>, pod: &str, lock_ms: u64, limit: i64) -> Result<Vec<Job>, sqlx::Error> {
    sqlx::query_as(
        "UPDATE chatwoot_jobs j SET locked_by = $1, locked_until = now() + $2 * interval '1 millisecond', \
             claim_id = gen_random_uuid()::text, attempts = j.attempts + 1, \
             first_try_at = coalesce(j.first_try_at, now()), updated_at = now() \
         FROM (SELECT h.seq FROM (SELECT DISTINCT ON (instance_id) seq, next_attempt_at, locked_until, created_at \
                                  FROM chatwoot_jobs WHERE state = 'pending' \
                                  ORDER BY instance_id, kind <> 'setup', kind <> 'import', event_at, seq) h \
               WHERE h.next_attempt_at <= now() AND (h.locked_until IS NULL OR h.locked_until < now()) \
                 AND h.created_at <= now() - $4 * interval '1 millisecond' \
               ORDER BY h.next_attempt_at LIMIT $3) d \
         WHERE j.seq = d.seq AND j.state = 'pending' AND (j.locked_until IS NULL OR j.locked_until < now()) \
         RETURNING j.seq, j.instance_id, j.kind, j.key, j.payload, j.attempts, j.first_try_at, j.claim_id",
    )
    .bind(pod)
    .bind(lock_ms as f64)
    .bind(limit)
    .bind(SETTLE_MS as f64)
    .fetch_all(db)
    .await
}

/// How a job ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    Done,
    /// Try again at this time.
    Retry {
        at: DateTime<Utc>,
        error: String,
    },
    /// Given up on.
    Failed {
        error: String,
    },
}

/// Writes a job's outcome under its claim; false when the claim was lost (another pod
/// holds the job now).
pub async fn finish(db: impl PgExecutor<'_>, pod: &str, job: &Job, outcome: &Outcome) -> Result<bool, sqlx::Error> {
    let (state, at, error) = match outcome {
        Outcome::Done => ("done", None, None),
        Outcome::Retry { at, error } => ("pending", Some(*at), Some(error.as_str())),
        Outcome::Failed { error } => ("failed", None, Some(error.as_str())),
    };
    let r = sqlx::query(
        "UPDATE chatwoot_jobs SET state = $4, next_attempt_at = coalesce($5, next_attempt_at), last_error = $6, \
             locked_by = NULL, locked_until = NULL, updated_at = now() \
         WHERE seq = $1 AND locked_by = $2 AND claim_id = $3 AND state = 'pending'",
    )
    .bind(job.seq)
    .bind(pod)
    .bind(&job.claim_id)
    .bind(state)
    .bind(at)
    .bind(error)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Hands back the claims of a pod that stops. The try stays counted: it may have acted,
/// so the next one looks for what it made first.
pub async fn release(db: impl PgExecutor<'_>, pod: &str) -> Result<u64, sqlx::Error> {
    let r = sqlx::query(
        "UPDATE chatwoot_jobs SET locked_by = NULL, locked_until = NULL WHERE locked_by = $1 AND state = 'pending'",
    )
    .bind(pod)
    .execute(db)
    .await?;
    Ok(r.rows_affected())
}

/// Jobs waiting, and the age in seconds of the oldest.
pub async fn backlog(db: impl PgExecutor<'_>) -> Result<(i64, f64), sqlx::Error> {
    sqlx::query_as(
        "SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at))::float8, 0) \
         FROM chatwoot_jobs WHERE state = 'pending'",
    )
    .fetch_one(db)
    .await
}

/// Deletes finished jobs last changed before `before`.
pub async fn prune(db: impl PgExecutor<'_>, before: DateTime<Utc>) -> Result<u64, sqlx::Error> {
    let r = sqlx::query("DELETE FROM chatwoot_jobs WHERE state <> 'pending' AND updated_at < $1")
        .bind(before)
        .execute(db)
        .await?;
    Ok(r.rows_affected())
}

/// An instance's jobs by state: (pending, failed).
pub async fn counts(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'failed') \
         FROM chatwoot_jobs WHERE instance_id = $1",
    )
    .bind(id)
    .fetch_one(db)
    .await
}

/// The instance's logged chats (people and groups), for an import: at most `limit`, the
/// most recently active first.
pub async fn import_chats(db: impl PgExecutor<'_>, id: &InstanceId, limit: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT jid FROM chats WHERE instance_id = $1 ORDER BY last_message_at DESC LIMIT $2")
        .bind(id)
        .bind(limit)
        .fetch_all(db)
        .await
}

/// The instance's logged messages since `since`, for an import: at most `limit`, the
/// newest kept when there are more, oldest first; not reactions (they went live as
/// replies) nor agents' messages sent from Chatwoot (they are there already).
pub async fn import_messages(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    since: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<crate::db::log::LogRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT * FROM (SELECT l.id, l.chat_jid, l.wa_message_id, l.ts, l.from_jid, l.from_me, l.type, l.content, \
                 l.status, l.source \
             FROM log_messages l LEFT JOIN messages q ON q.instance_id = l.instance_id AND q.id = l.id \
             WHERE l.instance_id = $1 AND l.ts >= $2 AND l.type <> 'reaction' \
               AND (q.client_message_id IS NULL OR q.client_message_id NOT LIKE 'chatwoot-%') \
             ORDER BY l.ts DESC LIMIT $3) m ORDER BY ts",
    )
    .bind(id)
    .bind(since)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Deletes what the bridge kept for these instances' inboxes (their jobs and maps).
pub(crate) async fn forget(db: &mut sqlx::PgConnection, ids: &[InstanceId]) -> Result<(), sqlx::Error> {
    if ids.is_empty() {
        return Ok(());
    }
    for table in ["chatwoot_jobs", "chatwoot_chats", "chatwoot_messages"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE instance_id = ANY($1)"))
            .bind(ids.iter().map(|i| i.as_str()).collect::<Vec<_>>())
            .execute(&mut *db)
            .await?;
    }
    Ok(())
}
