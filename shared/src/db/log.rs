//! The local log: `log_messages` (every message an instance sent or received) and
//! `chats`. The worker that owns an instance writes both, fenced on its lease epoch, with
//! the events of each change in the same transaction; the API reads them (and writes the
//! chat settings it carried to the network).
//!
//! Writes are idempotent on the network id: a message that comes again (a reconnect, a
//! takeover, a repeated history sync) finds its row and adds nothing, not even an event.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::{PgConnection, PgExecutor, PgPool};

use crate::db::outbox;
use crate::ids::{InstanceId, MessageId};

mod media_downloads;
pub use media_downloads::{next_media_retry, pending_media, resolve_media, Fetched, PendingMedia};

/// A message from the network (received, sent from the phone, or synced history).
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    pub from_me: bool,
    pub kind: String,
    /// The content in the shape `POST {inst}/messages` takes (`text`, `media`, ...).
    pub content: Value,
    pub ts: DateTime<Utc>,
}

/// Where logged messages came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// As they happen: each new one is an event.
    Live,
    /// Synced at pairing: only the chats they touch are events.
    History,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Live => "live",
            Source::History => "history",
        }
    }
}

/// A chat row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChatRow {
    pub jid: String,
    pub name: Option<String>,
    pub last_message_at: DateTime<Utc>,
    pub unread_count: i32,
    pub archived: bool,
    pub pinned: bool,
    pub muted_until: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

impl ChatRow {
    /// The `chat.updated` event's data.
    pub fn event(&self, deleted: bool) -> Value {
        json!({
            "jid": self.jid, "unread_count": self.unread_count, "archived": self.archived, "pinned": self.pinned,
            "muted_until": self.muted_until, "last_message_at": self.last_message_at, "deleted": deleted,
        })
    }
}

const CHAT_COLUMNS: &str = "jid, name, last_message_at, unread_count, archived, pinned, muted_until, updated_at";

/// A logged message.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LogRow {
    pub id: MessageId,
    pub chat_jid: String,
    pub wa_message_id: String,
    pub ts: DateTime<Utc>,
    pub from_jid: String,
    pub from_me: bool,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub content: Value,
    pub status: Option<String>,
    pub source: String,
}

const LOG_COLUMNS: &str = "id, chat_jid, wa_message_id, ts, from_jid, from_me, type, content, status, source";

/// Locks the instance row for share while `epoch` owns it: the fence of every worker
/// write here. False: another worker took the instance over.
pub(crate) async fn fence(tx: &mut PgConnection, instance: &InstanceId, epoch: i64) -> Result<bool, sqlx::Error> {
    let owned: Option<i32> = sqlx::query_scalar("SELECT 1 FROM instances WHERE id = $1 AND owner_epoch = $2 FOR SHARE")
        .bind(instance)
        .bind(epoch)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(owned.is_some())
}

/// Records messages from the network, fenced. Returns how many were new (`None`: the
/// instance has a new owner and nothing was written). New live messages are
/// `message.received` events (`reaction.received` for reactions); every chat they touch
/// is a `chat.updated` event.
pub async fn record_received(
    pool: &PgPool,
    instance: &InstanceId,
    epoch: i64,
    msgs: &[Received],
    source: Source,
) -> Result<Option<usize>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    if !fence(&mut tx, instance, epoch).await? {
        return Ok(None);
    }
    if msgs.is_empty() {
        return Ok(Some(0));
    }
    let ids: Vec<MessageId> = msgs.iter().map(|_| MessageId::new()).collect();
    let chats: Vec<&str> = msgs.iter().map(|m| m.chat_jid.as_str()).collect();
    let wa: Vec<&str> = msgs.iter().map(|m| m.wa_message_id.as_str()).collect();
    let ts: Vec<DateTime<Utc>> = msgs.iter().map(|m| m.ts).collect();
    let from: Vec<&str> = msgs.iter().map(|m| m.from_jid.as_str()).collect();
    let from_me: Vec<bool> = msgs.iter().map(|m| m.from_me).collect();
    let kinds: Vec<&str> = msgs.iter().map(|m| m.kind.as_str()).collect();
    let contents: Vec<&Value> = msgs.iter().map(|m| &m.content).collect();
    let inserted: Vec<(MessageId,)> = sqlx::query_as(
        "INSERT INTO log_messages (instance_id, id, chat_jid, wa_message_id, ts, from_jid, from_me, type, content, status, source) \
         SELECT $1, v.id, v.chat, v.wa, v.ts, v.frm, v.me, v.kind, v.content, CASE WHEN v.me THEN 'sent' END, $10 \
         FROM UNNEST($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::bool[], $8::text[], $9::jsonb[]) \
             AS v(id, chat, wa, ts, frm, me, kind, content) \
         ON CONFLICT (instance_id, chat_jid, wa_message_id) DO NOTHING RETURNING id",
    )
    .bind(instance)
    .bind(&ids)
    .bind(&chats)
    .bind(&wa)
    .bind(&ts)
    .bind(&from)
    .bind(&from_me)
    .bind(&kinds)
    .bind(&contents)
    .bind(source.as_str())
    .fetch_all(&mut *tx)
    .await?;
    let new: std::collections::HashSet<&str> = inserted.iter().map(|r| r.0.as_str()).collect();
    let fresh: Vec<(&MessageId, &Received)> =
        ids.iter().zip(msgs).filter(|(id, _)| new.contains(id.as_str())).collect();
    // The media the new rows carry is theirs now: never collected.
    let media: Vec<&str> = fresh.iter().filter_map(|(_, m)| m.content.get("media")?.get("id")?.as_str()).collect();
    crate::db::media::claim(&mut *tx, instance, &media).await?;

    // Reactions and history do not count as unread; the account's own messages read
    // everything before them.
    let touched: Vec<Touch> = fresh
        .iter()
        .map(|(_, m)| Touch {
            instance,
            chat: &m.chat_jid,
            ts: m.ts,
            from_me: m.from_me,
            counts: source == Source::Live && m.kind != "reaction",
        })
        .collect();
    let rows: Vec<ChatRow> = touch_chats(&mut tx, &touched).await?.into_iter().map(|(_, c)| c).collect();
    if source == Source::Live {
        for (id, m) in &fresh {
            let (kind, data) = if m.kind == "reaction" {
                let data = json!({
                    "wa_message_id": m.content.get("reaction").and_then(|r| r.get("message_id")).cloned().unwrap_or(Value::Null),
                    "chat_jid": m.chat_jid, "from_jid": m.from_jid,
                    "emoji": m.content.get("reaction").and_then(|r| r.get("emoji")).cloned().unwrap_or(json!("")),
                    "timestamp": m.ts,
                });
                ("reaction.received", data)
            } else {
                let data = json!({
                    "message_id": id, "wa_message_id": m.wa_message_id, "chat_jid": m.chat_jid, "from_jid": m.from_jid,
                    "from_me": m.from_me, "type": m.kind, "content": m.content, "timestamp": m.ts,
                });
                // A contact's status comes in on the status chat, a channel's post on the channel's.
                let kind = if m.chat_jid == crate::jid::STATUS_JID {
                    "status.received"
                } else if crate::jid::server_of(&m.chat_jid) == crate::jid::NEWSLETTER_SERVER && !m.from_me {
                    "channel.post_received"
                } else {
                    "message.received"
                };
                (kind, data)
            };
            outbox::insert(&mut *tx, instance, kind, data).await?;
        }
    }
    for chat in &rows {
        outbox::insert(&mut *tx, instance, "chat.updated", chat.event(false)).await?;
    }
    tx.commit().await?;
    Ok(Some(fresh.len()))
}

/// A logged message as its chat sees it.
struct Touch<'a> {
    instance: &'a InstanceId,
    chat: &'a str,
    ts: DateTime<Utc>,
    from_me: bool,
    /// Whether it counts for unread (and, from the account, as reading the chat).
    counts: bool,
}

/// Creates or updates the chats of `touched` messages: the last message time, the read
/// point (the account's newest own message), and the unread count (incoming live
/// messages after the read point, whatever order they were logged in). Returns the rows.
async fn touch_chats(tx: &mut PgConnection, touched: &[Touch<'_>]) -> Result<Vec<(InstanceId, ChatRow)>, sqlx::Error> {
    if touched.is_empty() {
        return Ok(Vec::new());
    }
    let instances: Vec<&str> = touched.iter().map(|t| t.instance.as_str()).collect();
    let chats: Vec<&str> = touched.iter().map(|t| t.chat).collect();
    let ts: Vec<DateTime<Utc>> = touched.iter().map(|t| t.ts).collect();
    let me: Vec<bool> = touched.iter().map(|t| t.from_me).collect();
    let counts: Vec<bool> = touched.iter().map(|t| t.counts).collect();
    // New chats, then every touched chat locked in one order (instance, jid): callers
    // touching several chats, or several instances' chats, never deadlock each other.
    sqlx::query(
        "INSERT INTO chats (instance_id, jid, last_message_at) \
         SELECT i, j, max(t) FROM UNNEST($1::text[], $2::text[], $3::timestamptz[]) AS v(i, j, t) \
         GROUP BY i, j ORDER BY i, j ON CONFLICT (instance_id, jid) DO NOTHING",
    )
    .bind(&instances)
    .bind(&chats)
    .bind(&ts)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "SELECT 1 FROM chats c JOIN (SELECT DISTINCT i, j FROM UNNEST($1::text[], $2::text[]) AS v(i, j)) v \
         ON c.instance_id = v.i AND c.jid = v.j ORDER BY c.instance_id, c.jid FOR UPDATE OF c",
    )
    .bind(&instances)
    .bind(&chats)
    .execute(&mut *tx)
    .await?;
    let rows: Vec<ChatRowOf> = sqlx::query_as(&format!(
        "WITH m AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::bool[], $5::bool[]) \
                    AS m(i, j, t, me, counts)), \
         agg AS (SELECT i, j, max(t) AS l, max(t) FILTER (WHERE me AND counts) AS me_at FROM m GROUP BY i, j) \
         UPDATE chats c SET last_message_at = GREATEST(c.last_message_at, agg.l), \
             read_at = GREATEST(c.read_at, agg.me_at), \
             unread_count = CASE \
                 WHEN agg.me_at IS NOT NULL AND agg.me_at > COALESCE(c.read_at, '-infinity') THEN \
                     (SELECT count(*) FROM log_messages l WHERE l.instance_id = agg.i AND l.chat_jid = c.jid \
                        AND NOT l.from_me AND l.source = 'live' AND l.type <> 'reaction' AND l.ts > agg.me_at)::int \
                 ELSE c.unread_count + (SELECT count(*) FROM m WHERE m.i = agg.i AND m.j = agg.j AND NOT m.me \
                        AND m.counts AND m.t > COALESCE(c.read_at, '-infinity'))::int END, \
             updated_at = now() \
         FROM agg WHERE c.instance_id = agg.i AND c.jid = agg.j RETURNING c.instance_id, {}",
        CHAT_COLUMNS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ")
    ))
    .bind(&instances)
    .bind(&chats)
    .bind(&ts)
    .bind(&me)
    .bind(&counts)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(|r| (r.instance_id, r.chat)).collect())
}

/// A chat row with its instance (from [`touch_chats`] over several instances).
#[derive(sqlx::FromRow)]
struct ChatRowOf {
    instance_id: InstanceId,
    #[sqlx(flatten)]
    chat: ChatRow,
}

/// Logs messages the queue sent (in `messages::finish_many`'s transaction, already
/// fenced): same ids as the queued messages, `source = queue`; and touches their chats,
/// with a `chat.updated` event each.
pub async fn record_sent_many(
    tx: &mut PgConnection,
    sent: &[(&crate::db::messages::MessageRow, DateTime<Utc>)],
) -> Result<(), sqlx::Error> {
    if sent.is_empty() {
        return Ok(());
    }
    let instances: Vec<&str> = sent.iter().map(|(r, _)| r.instance_id.as_str()).collect();
    let phones: Vec<(InstanceId, Option<String>)> =
        sqlx::query_as("SELECT id, phone FROM instances WHERE id = ANY($1)")
            .bind(&instances)
            .fetch_all(&mut *tx)
            .await?;
    let phones: std::collections::HashMap<InstanceId, String> =
        phones.into_iter().map(|(i, p)| (i, p.map(|p| crate::jid::Jid::user(&p).into()).unwrap_or_default())).collect();
    let contents: Vec<Value> = sent
        .iter()
        .map(|(r, _)| {
            // The log keeps the type in its own column.
            let mut content = r.content.clone();
            if let Some(obj) = content.as_object_mut() {
                obj.remove("type");
            }
            content
        })
        .collect();
    let inserted: Vec<(MessageId,)> = sqlx::query_as(
        "INSERT INTO log_messages (instance_id, id, chat_jid, wa_message_id, ts, from_jid, from_me, type, content, status, source) \
         SELECT v.i, v.id, v.chat, v.wa, v.ts, v.frm, TRUE, v.kind, v.content, 'sent', 'queue' \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::jsonb[]) \
             AS v(i, id, chat, wa, ts, frm, kind, content) \
         ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(&instances)
    .bind(sent.iter().map(|(r, _)| r.id.as_str()).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| r.to_jid.as_str()).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| r.wa_message_id.as_str()).collect::<Vec<_>>())
    .bind(sent.iter().map(|(_, at)| *at).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| phones.get(&r.instance_id).map_or("", String::as_str)).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| r.kind.as_str()).collect::<Vec<_>>())
    .bind(&contents)
    .fetch_all(&mut *tx)
    .await?;
    let new: std::collections::HashSet<&str> = inserted.iter().map(|r| r.0.as_str()).collect();
    let touched: Vec<Touch> = sent
        .iter()
        .filter(|(r, _)| new.contains(r.id.as_str()) && r.kind != "reaction")
        .map(|(r, at)| Touch { instance: &r.instance_id, chat: &r.to_jid, ts: *at, from_me: true, counts: true })
        .collect();
    let chats = touch_chats(tx, &touched).await?;
    outbox::insert_many(&mut *tx, chats.iter().map(|(i, c)| (i, "chat.updated", c.event(false))).collect()).await
}

/// A receipt for a message the account sent: it reached the recipient's phone, or was
/// read (played, for voice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Receipt {
    Delivered,
    Read,
}

impl Receipt {
    /// The log's `status` it moves a sent message to.
    pub fn as_str(self) -> &'static str {
        match self {
            Receipt::Delivered => "delivered",
            Receipt::Read => "read",
        }
    }

    /// A receipt named as the networks name it (`delivered`, `read`), if it is one.
    pub fn parse(s: &str) -> Option<Receipt> {
        match s {
            "delivered" => Some(Receipt::Delivered),
            "read" => Some(Receipt::Read),
            _ => None,
        }
    }
}

/// A receipt (`delivered` or `read`) for a message an instance sent, under the epoch
/// its worker holds.
#[derive(Debug, Clone)]
pub struct ReceiptIn {
    pub instance: InstanceId,
    pub epoch: i64,
    pub wa_message_id: String,
    pub receipt: Receipt,
    pub at: DateTime<Utc>,
}

/// Receipts for messages the instances sent, in one transaction, each fenced on its own
/// instance's epoch. Statuses only move forward; a receipt that changes nothing is not an
/// event. Two receipts for one message are applied in their order (in rounds), so each
/// step is its own event. Returns, in input order, whether each changed its message.
pub async fn apply_receipts(pool: &PgPool, items: &[ReceiptIn]) -> Result<Vec<bool>, sqlx::Error> {
    let mut changed = vec![false; items.len()];
    let mut tx = pool.begin().await?;
    // Rounds: a message's second receipt waits for the next round.
    let mut left: Vec<usize> = (0..items.len()).collect();
    while !left.is_empty() {
        let mut seen = std::collections::HashSet::new();
        let (round, later): (Vec<usize>, Vec<usize>) =
            left.iter().partition(|&&k| seen.insert((&items[k].instance, &items[k].wa_message_id)));
        let pick = |f: &dyn Fn(&ReceiptIn) -> String| round.iter().map(|&k| f(&items[k])).collect::<Vec<_>>();
        let rows: Vec<(InstanceId, MessageId, String, String, String)> = sqlx::query_as(
            "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[]) \
                        AS r(r_instance, r_epoch, r_wa, r_status)), \
             owner AS (SELECT i.id AS o_id FROM instances i JOIN (SELECT DISTINCT r_instance, r_epoch FROM r) e \
                       ON i.id = e.r_instance AND i.owner_epoch = e.r_epoch ORDER BY i.id FOR SHARE OF i) \
             UPDATE log_messages SET status = r_status FROM r \
             WHERE instance_id = r_instance AND instance_id IN (SELECT o_id FROM owner) AND wa_message_id = r_wa \
               AND from_me AND COALESCE(array_position(ARRAY['sent', 'delivered', 'read'], status), 0) \
                   < array_position(ARRAY['sent', 'delivered', 'read'], r_status) \
             RETURNING instance_id, id, chat_jid, source, wa_message_id",
        )
        .bind(pick(&|r| r.instance.to_string()))
        .bind(round.iter().map(|&k| items[k].epoch).collect::<Vec<_>>())
        .bind(pick(&|r| r.wa_message_id.clone()))
        .bind(pick(&|r| r.receipt.as_str().to_string()))
        .fetch_all(&mut *tx)
        .await?;
        let index: std::collections::HashMap<(&InstanceId, &str), usize> =
            round.iter().map(|&k| ((&items[k].instance, items[k].wa_message_id.as_str()), k)).collect();
        let mut events = Vec::with_capacity(rows.len());
        for (instance, id, chat, source, wa) in &rows {
            let Some(&k) = index.get(&(instance, wa.as_str())) else { continue };
            changed[k] = true;
            let (status, at) = (items[k].receipt.as_str(), items[k].at);
            let data = json!({
                "message_id": (source == "queue").then_some(id), "wa_message_id": wa, "chat_jid": chat,
                "status": status, "at": at,
            });
            events.push((instance, format!("message.{status}"), data));
        }
        outbox::insert_many(&mut *tx, events.iter().map(|(i, t, d)| (*i, t.as_str(), d.clone())).collect()).await?;
        left = later;
    }
    tx.commit().await?;
    Ok(changed)
}

// ---- the API's side ----

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

/// The message an outgoing one quotes or reacts to, as the log (or the queue) has it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Referenced {
    pub chat_jid: String,
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
    pub chat: Option<String>,
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
        outbox::insert(&mut *tx, instance, "chat.updated", r.event(false)).await?;
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
    outbox::insert(&mut *tx, instance, "chat.updated", r.event(true)).await?;
    tx.commit().await?;
    Ok(true)
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
