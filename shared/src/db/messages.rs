//! The `messages` table: the send queue and its log (media is `db::media`). Worker writes are
//! fenced on the instance's lease epoch (the instance row is share-locked for the
//! statement, so a takeover's claim cannot slip between the check and the commit) and
//! each status change writes its outbox event in the same transaction.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgExecutor, PgPool};

use crate::db::outbox;
use crate::events::Event;
use crate::ids::{InstanceId, MessageId};
use crate::jid::Jid;
use crate::message::MessageType;

pub mod listing;

/// Where a queued message is: `queued`, `in_flight` (an attempt started; a new owner
/// sends it again under the same network id), then `sent` or `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum MessageStatus {
    Queued,
    InFlight,
    Sent,
    Failed,
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Queued => "queued",
            MessageStatus::InFlight => "in_flight",
            MessageStatus::Sent => "sent",
            MessageStatus::Failed => "failed",
        }
    }

    /// Sent or failed: nothing more happens to it.
    pub fn is_final(self) -> bool {
        matches!(self, MessageStatus::Sent | MessageStatus::Failed)
    }
}

/// A row of `messages`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MessageRow {
    pub id: MessageId,
    pub instance_id: InstanceId,
    pub seq: i64,
    pub status: MessageStatus,
    pub to_jid: Jid,
    #[sqlx(rename = "type")]
    pub kind: MessageType,
    /// The content as stored; [`MessageRow::outbound`] reads it typed.
    pub content: serde_json::Value,
    pub client_message_id: Option<String>,
    pub content_hash: String,
    pub wa_message_id: String,
    /// A failed message's code (the error table's) and detail.
    pub error_code: Option<String>,
    pub error_detail: Option<String>,
    pub attempts: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, instance_id, seq, status, to_jid, type, content, client_message_id, content_hash, \
    wa_message_id, error_code, error_detail, attempts, created_at, updated_at, sent_at, expires_at";

/// A message and its status, as events and the API show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageOut {
    pub id: MessageId,
    pub status: MessageStatus,
    /// The recipient's JID.
    pub to: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client_message_id: Option<String>,
    /// The network's id, once sent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub wa_message_id: Option<String>,
    /// `<code>: <detail>`, when failed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sent_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
}

impl MessageRow {
    /// The content typed, as the queue sends it. Read per row rather than as a
    /// `Json<Content>` column: a row that no longer reads fails only its own message (the
    /// worker fails it `validation_failed`), never the batch it was fetched in.
    pub fn outbound(&self) -> Result<crate::message::Outbound, serde_json::Error> {
        crate::message::Outbound::from_row(self.kind, &self.content)
    }

    /// `<code>: <detail>` of a failed message, as events and the API show it.
    pub fn error(&self) -> Option<String> {
        self.error_code.as_ref().map(|code| format!("{code}: {}", self.error_detail.as_deref().unwrap_or_default()))
    }

    /// The message as events and the API show it: `wa_message_id` shows once it is sent
    /// (it is assigned before).
    pub fn view(&self) -> MessageOut {
        MessageOut {
            id: self.id.clone(),
            status: self.status,
            to: self.to_jid.to_string(),
            kind: self.kind,
            client_message_id: self.client_message_id.clone(),
            wa_message_id: (self.status == MessageStatus::Sent).then(|| self.wa_message_id.clone()),
            error: self.error(),
            created_at: self.created_at,
            sent_at: self.sent_at,
            expires_at: self.expires_at,
        }
    }
}

impl From<&MessageRow> for MessageOut {
    fn from(r: &MessageRow) -> MessageOut {
        r.view()
    }
}

/// A message to queue.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub id: MessageId,
    pub instance_id: InstanceId,
    pub to_jid: Jid,
    /// What it says (stored as the `content` jsonb; its type also in the `type` column).
    pub message: crate::message::Outbound,
    pub client_message_id: Option<String>,
    pub content_hash: String,
    pub wa_message_id: String,
    pub expires_at: DateTime<Utc>,
}

/// The result of queueing.
#[derive(Debug)]
pub enum Queued {
    New(MessageRow),
    /// A message with the same `client_message_id` existed already.
    Existing(MessageRow),
    /// The instance does not exist or is banned: nothing was written.
    Refused,
}

/// Queues messages with their `message.queued` events in one statement (one round trip,
/// one commit, atomic), each only for an instance that exists and is not banned; a
/// `client_message_id` already used yields that message instead. Results are in input
/// order.
pub async fn enqueue(pool: &PgPool, batch: &[NewMessage]) -> Result<Vec<Queued>, sqlx::Error> {
    let now = Utc::now();
    let mut event_ids = Vec::with_capacity(batch.len());
    let mut events = Vec::with_capacity(batch.len());
    for m in batch {
        let view = MessageOut {
            id: m.id.clone(),
            status: MessageStatus::Queued,
            to: m.to_jid.to_string(),
            kind: m.message.content.kind(),
            client_message_id: m.client_message_id.clone(),
            wa_message_id: None,
            error: None,
            created_at: now,
            sent_at: None,
            expires_at: m.expires_at,
        };
        let (event_id, event) = outbox::envelope(&m.instance_id, &Event::MessageQueued(view), now);
        events.push(event);
        event_ids.push(event_id);
    }
    let col = |f: fn(&NewMessage) -> String| batch.iter().map(f).collect::<Vec<String>>();
    let rows: Vec<MessageRow> = sqlx::query_as(&format!(
        "WITH input AS ( \
           SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::text[], $7::text[], \
                                $8::text[], $9::timestamptz[], $10::text[], $11::jsonb[]) \
             AS t(id, instance_id, to_jid, type, content, client_message_id, content_hash, wa_message_id, expires_at, \
                  event_id, event)), \
         ins AS ( \
           INSERT INTO messages (id, instance_id, to_jid, type, content, client_message_id, content_hash, wa_message_id, \
                                 expires_at, created_at, updated_at) \
           SELECT t.id, t.instance_id, t.to_jid, t.type, t.content, t.client_message_id, t.content_hash, t.wa_message_id, \
                  t.expires_at, $12, $12 \
           FROM input t JOIN instances i ON i.id = t.instance_id AND i.state <> 'banned' \
           ON CONFLICT ON CONSTRAINT messages_client_id_key DO NOTHING RETURNING {COLUMNS}), \
         ev AS ( \
           INSERT INTO outbox (id, instance_id, type, payload, created_at) \
           SELECT t.event_id, ins.instance_id, 'message.queued', t.event, $12 FROM ins JOIN input t ON t.id = ins.id), \
         claimed AS ( \
           UPDATE media SET claimed = true \
           WHERE id IN (SELECT content->'media'->>'id' FROM ins WHERE content ? 'media') AND NOT claimed) \
         SELECT {COLUMNS} FROM ins"
    ))
    .bind(col(|m| m.id.to_string()))
    .bind(col(|m| m.instance_id.to_string()))
    .bind(col(|m| m.to_jid.to_string()))
    .bind(col(|m| m.message.content.kind().as_str().to_string()))
    .bind(batch.iter().map(|m| serde_json::to_value(&m.message).expect("content serializes")).collect::<Vec<_>>())
    .bind(batch.iter().map(|m| m.client_message_id.clone()).collect::<Vec<_>>())
    .bind(col(|m| m.content_hash.clone()))
    .bind(col(|m| m.wa_message_id.clone()))
    .bind(batch.iter().map(|m| m.expires_at).collect::<Vec<_>>())
    .bind(event_ids.iter().map(ToString::to_string).collect::<Vec<_>>())
    .bind(events)
    .bind(now)
    .fetch_all(pool)
    .await?;
    let mut inserted: std::collections::HashMap<MessageId, MessageRow> =
        rows.into_iter().map(|r| (r.id.clone(), r)).collect();
    let mut out = Vec::with_capacity(batch.len());
    for m in batch {
        if let Some(row) = inserted.remove(&m.id) {
            out.push(Queued::New(row));
            continue;
        }
        let existing = match &m.client_message_id {
            Some(key) => by_client_id(pool, &m.instance_id, key).await?,
            None => None,
        };
        out.push(existing.map_or(Queued::Refused, Queued::Existing));
    }
    Ok(out)
}

/// The message an instance queued under `client_message_id`, if any.
pub async fn by_client_id(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    key: &str,
) -> Result<Option<MessageRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM messages WHERE instance_id = $1 AND client_message_id = $2"))
        .bind(instance)
        .bind(key)
        .fetch_optional(db)
        .await
}

pub async fn get(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &MessageId,
) -> Result<Option<MessageRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM messages WHERE instance_id = $1 AND id = $2"))
        .bind(instance)
        .bind(id)
        .fetch_optional(db)
        .await
}

/// The head of an instance's queue: its oldest unfinished message.
pub async fn head(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    hold_first_contacts: bool,
) -> Result<Option<MessageRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM messages m WHERE instance_id = $1 AND status IN ('queued', 'in_flight') \
           AND {} ORDER BY seq LIMIT 1",
        eligible("$1", "$2")
    ))
    .bind(instance)
    .bind(hold_first_contacts)
    .fetch_optional(db)
    .await
}

/// Whether message `m` of `instance` may be the head. With `hold` (holding first
/// contacts, docs/ban-risk.md), the queue's head skips queued messages to chats that
/// never wrote to the account: those wait while replies go. One in flight is finished,
/// and an expired one is still found (to fail it). Every message of one chat is held or
/// not alike, so each chat keeps its order.
fn eligible(instance: &str, hold: &str) -> String {
    format!(
        "(NOT {hold} OR m.status = 'in_flight' OR m.expires_at <= now() \
         OR EXISTS (SELECT 1 FROM log_messages l WHERE l.instance_id = {instance} AND l.chat_jid = m.to_jid \
                    AND NOT l.from_me))"
    )
}

/// Unfinished messages of an instance (queue depth).
pub async fn depth(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM messages WHERE instance_id = $1 AND status IN ('queued', 'in_flight')")
        .bind(instance)
        .fetch_one(db)
        .await
}

/// The instances among `ids` with a queued message (the worker's sweep for wake-ups
/// that NATS lost; one index probe per instance, one statement for all).
pub async fn queued_among(db: impl PgExecutor<'_>, ids: &[InstanceId]) -> Result<Vec<InstanceId>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT i FROM unnest($1::text[]) AS i WHERE EXISTS \
         (SELECT 1 FROM messages WHERE instance_id = i AND status IN ('queued', 'in_flight'))",
    )
    .bind(ids)
    .fetch_all(db)
    .await
}

/// Per instance among `ids`: (unfinished messages, age in seconds of the oldest).
pub async fn queue_stats(
    db: impl PgExecutor<'_>,
    ids: &[InstanceId],
) -> Result<Vec<(InstanceId, i64, f64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT instance_id, count(*), EXTRACT(EPOCH FROM now() - min(created_at))::float8 FROM messages \
         WHERE instance_id = ANY($1) AND status IN ('queued', 'in_flight') GROUP BY instance_id",
    )
    .bind(ids)
    .fetch_all(db)
    .await
}

/// The head of the queue taken for sending in one statement: `-> in_flight` (another
/// attempt, if it already was), fenced. `None`: the queue is empty or the instance has a
/// new owner (tell them apart with [`head`]).
pub async fn start_head(
    db: &PgPool,
    instance: &InstanceId,
    epoch: i64,
    hold_first_contacts: bool,
) -> Result<Option<MessageRow>, sqlx::Error> {
    let mut heads = start_heads(db, &[(instance.clone(), epoch, hold_first_contacts)]).await?;
    Ok(match heads.pop() {
        Some(Start::Started(m)) => Some(*m),
        _ => None,
    })
}

/// What taking a queue's head found.
#[derive(Debug)]
pub enum Start {
    /// Taken in flight.
    Started(Box<MessageRow>),
    /// The epoch still owns the instance, and nothing was eligible to go.
    Empty,
    /// The instance has a new owner: nothing was taken.
    Fenced,
}

/// [`start_head`] for many instances in one statement: `(instance, lease epoch, hold
/// first contacts)` each, answered in order. The owners' rows are share-locked in id
/// order, so concurrent batches never deadlock. Each instance appears once (one actor
/// sends for it); a repeat is answered `Empty`. A job that got nothing is told `Empty`
/// from `Fenced` by its epoch afterwards: epochs only grow, so one that owns the
/// instance then owned it during the statement.
pub async fn start_heads(db: &PgPool, jobs: &[(InstanceId, i64, bool)]) -> Result<Vec<Start>, sqlx::Error> {
    let rows: Vec<MessageRow> = sqlx::query_as(&format!(
        "WITH input AS (SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bool[]) AS t(instance_id, epoch, hold)), \
         owner AS (SELECT i.id, t.hold FROM instances i JOIN input t ON t.instance_id = i.id AND i.owner_epoch = t.epoch \
                   ORDER BY i.id FOR SHARE OF i), \
         heads AS (SELECT h.id FROM owner o CROSS JOIN LATERAL ( \
                     SELECT m.id FROM messages m WHERE m.instance_id = o.id AND m.status IN ('queued', 'in_flight') \
                       AND {} ORDER BY m.seq LIMIT 1) h) \
         UPDATE messages SET status = 'in_flight', attempts = attempts + 1, updated_at = now() \
         WHERE id IN (SELECT id FROM heads) AND status IN ('queued', 'in_flight') RETURNING {COLUMNS}",
        eligible("o.id", "o.hold")
    ))
    .bind(jobs.iter().map(|j| j.0.to_string()).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.1).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.2).collect::<Vec<_>>())
    .fetch_all(db)
    .await?;
    let mut by_instance: std::collections::HashMap<InstanceId, MessageRow> =
        rows.into_iter().map(|r| (r.instance_id.clone(), r)).collect();
    let without: Vec<&(InstanceId, i64, bool)> = jobs.iter().filter(|j| !by_instance.contains_key(&j.0)).collect();
    let owned: std::collections::HashSet<InstanceId> = if without.is_empty() {
        Default::default()
    } else {
        sqlx::query_scalar(
            "SELECT i.id FROM instances i JOIN UNNEST($1::text[], $2::bigint[]) AS t(id, epoch) \
               ON t.id = i.id AND i.owner_epoch = t.epoch",
        )
        .bind(without.iter().map(|j| j.0.to_string()).collect::<Vec<_>>())
        .bind(without.iter().map(|j| j.1).collect::<Vec<_>>())
        .fetch_all(db)
        .await?
        .into_iter()
        .collect()
    };
    Ok(jobs
        .iter()
        .map(|j| match by_instance.remove(&j.0) {
            Some(m) => Start::Started(Box::new(m)),
            None if owned.contains(&j.0) => Start::Empty,
            None => Start::Fenced,
        })
        .collect())
}

/// The network refused message `id`'s send for its rate (it is tried again later):
/// noted on the message, fenced, for the ban-risk signal. False: the instance has a new
/// owner.
pub async fn note_rate_limited(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    epoch: i64,
    id: &MessageId,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "UPDATE messages SET rate_limited_at = now(), updated_at = now() \
         WHERE id = $1 AND instance_id = $2 AND status = 'in_flight' \
           AND EXISTS (SELECT 1 FROM instances WHERE id = $2 AND owner_epoch = $3)",
    )
    .bind(id)
    .bind(instance)
    .bind(epoch)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// How a message ended.
pub enum Outcome<'a> {
    Sent,
    /// With the error table's `code` and what happened.
    Failed {
        code: &'a str,
        detail: &'a str,
    },
}

/// One message's end, for [`finish_many`].
pub struct Finishing<'a> {
    pub id: &'a MessageId,
    pub instance: &'a InstanceId,
    pub epoch: i64,
    pub outcome: Outcome<'a>,
}

/// `-> sent | failed` for several messages in one transaction (a worker batches its
/// instances' outcomes): each fenced on its own instance's epoch, with its
/// `message.sent` / `message.failed` event, and the sent ones logged. Results are in
/// input order; `None`: the instance has a new owner (or the message already ended).
pub async fn finish_many(pool: &PgPool, items: &[Finishing<'_>]) -> Result<Vec<Option<MessageRow>>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let status = |o: &Outcome| match o {
        Outcome::Sent => "sent",
        Outcome::Failed { .. } => "failed",
    };
    // Instance rows are share-locked in id order (the fence), so batches never deadlock.
    let rows: Vec<MessageRow> = sqlx::query_as(&format!(
        "WITH f AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) \
                    AS f(f_id, f_instance, f_epoch, f_status, f_code, f_detail)), \
         owner AS (SELECT i.id AS o_id FROM instances i JOIN (SELECT DISTINCT f_instance, f_epoch FROM f) e \
                   ON i.id = e.f_instance AND i.owner_epoch = e.f_epoch ORDER BY i.id FOR SHARE OF i) \
         UPDATE messages SET status = f_status, error_code = f_code, error_detail = f_detail, \
             error = f_code || ': ' || f_detail, updated_at = now(), \
             sent_at = CASE WHEN f_status = 'sent' THEN now() ELSE sent_at END \
         FROM f WHERE id = f_id AND instance_id = f_instance AND instance_id IN (SELECT o_id FROM owner) \
             AND status IN ('queued', 'in_flight') RETURNING {}",
        COLUMNS.split(", ").map(|c| format!("messages.{}", c.trim())).collect::<Vec<_>>().join(", ")
    ))
    .bind(items.iter().map(|f| f.id.as_str()).collect::<Vec<_>>())
    .bind(items.iter().map(|f| f.instance.as_str()).collect::<Vec<_>>())
    .bind(items.iter().map(|f| f.epoch).collect::<Vec<_>>())
    .bind(items.iter().map(|f| status(&f.outcome)).collect::<Vec<_>>())
    .bind(
        items
            .iter()
            .map(|f| match f.outcome {
                Outcome::Sent => None,
                Outcome::Failed { code, .. } => Some(code),
            })
            .collect::<Vec<_>>(),
    )
    .bind(
        items
            .iter()
            .map(|f| match f.outcome {
                Outcome::Sent => None,
                Outcome::Failed { detail, .. } => Some(detail),
            })
            .collect::<Vec<_>>(),
    )
    .fetch_all(&mut *tx)
    .await?;
    let events = rows
        .iter()
        .map(|r| {
            let event = if r.status == MessageStatus::Sent { Event::MessageSent } else { Event::MessageFailed };
            (&r.instance_id, event(r.view()))
        })
        .collect();
    outbox::insert_many(&mut *tx, events).await?;
    let sent: Vec<(&MessageRow, chrono::DateTime<Utc>)> = rows
        .iter()
        .filter(|r| r.status == MessageStatus::Sent)
        .map(|r| (r, r.sent_at.unwrap_or_else(Utc::now)))
        .collect();
    crate::db::log::record_sent_many(&mut tx, &sent).await?;
    tx.commit().await?;
    let mut by_id: std::collections::HashMap<MessageId, MessageRow> =
        rows.into_iter().map(|r| (r.id.clone(), r)).collect();
    Ok(items.iter().map(|f| by_id.remove(f.id)).collect())
}

/// Fails queued messages of instances no worker runs: those past their expiry
/// (`message_expired`), and all of an instance that logged out or is banned
/// (`instance_not_connected`: they could only go after pairing again). Running instances
/// expire their own, in order. Each of the two kinds is found by an index
/// (`messages_expiry_idx`, `messages_queue_idx`), so a sweep costs what it fails, not a
/// scan of every queued message; but the second probes every logged-out or banned
/// instance, so it runs only when `unpaired` is set (the worker: every 30th sweep).
/// Returns the failed rows (at most `2 * limit`).
pub async fn fail_idle(pool: &PgPool, limit: i64, unpaired: bool) -> Result<Vec<MessageRow>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let rows: Vec<MessageRow> = sqlx::query_as(&format!(
        "WITH expired AS ( \
           SELECT m.id, 'message_expired' AS code, 'not sent before expires_after' AS detail \
           FROM messages m JOIN instances i ON i.id = m.instance_id \
           WHERE m.status = 'queued' AND m.expires_at <= now() \
             AND NOT i.desired AND i.state NOT IN ('logged_out', 'banned') \
           ORDER BY m.expires_at LIMIT $1 FOR UPDATE OF m SKIP LOCKED), \
         unpaired AS ( \
           SELECT m.id, 'instance_not_connected' AS code, \
                  'the number is ' || replace(i.state, '_', ' ') || '; pair it again' AS detail \
           FROM instances i CROSS JOIN LATERAL ( \
             SELECT id FROM messages WHERE instance_id = i.id AND status = 'queued' \
             ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED) m \
           WHERE $2 AND NOT i.desired AND i.state IN ('logged_out', 'banned') LIMIT $1), \
         doomed AS (SELECT * FROM expired UNION ALL SELECT * FROM unpaired) \
         UPDATE messages SET status = 'failed', error_code = doomed.code, error_detail = doomed.detail, \
             error = doomed.code || ': ' || doomed.detail, updated_at = now() \
         FROM doomed WHERE messages.id = doomed.id RETURNING {}",
        COLUMNS.split(", ").map(|c| format!("messages.{c}")).collect::<Vec<_>>().join(", ")
    ))
    .bind(limit)
    .bind(unpaired)
    .fetch_all(&mut *tx)
    .await?;
    for r in &rows {
        outbox::insert(&mut *tx, &r.instance_id, &Event::MessageFailed(r.view())).await?;
    }
    tx.commit().await?;
    Ok(rows)
}
