//! A chat's history from the local log, as the chat routes and the status route show it:
//! newest first, cursor-paged (cursors bound to their chat), media with signed URLs.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::log::{self, LogRow};
use shared::ids::{InstanceId, MessageId};
use utoipa::ToSchema;

use crate::page::{self, PageQuery};
use crate::{Core, Error, Result};

/// A message in the log (sent or received).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LogMessageOut {
    pub id: MessageId,
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    pub from_me: bool,
    /// A message type of `POST {inst}/messages`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The content as `POST {inst}/messages` takes it; `media` carries `id`, `mime_type`,
    /// `size` and a signed `url` (valid 1 h), or `expired: true`.
    pub content: serde_json::Value,
    /// Outgoing messages: `sent`, `delivered` or `read`.
    pub status: Option<shared::db::log::LogStatus>,
    /// `live`, `history` (synced at pairing) or `queue` (sent through `POST messages`).
    pub source: shared::db::log::Source,
    pub timestamp: DateTime<Utc>,
    /// Ids of the labels on this message (business accounts).
    pub labels: Vec<String>,
}

/// A page of a chat's messages.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessagePageOut {
    pub messages: Vec<LogMessageOut>,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// A history cursor: (time, id) of the page's last message, bound to its chat.
pub fn decode_message_cursor(c: &str, inst: &InstanceId, jid: &str) -> Result<(DateTime<Utc>, MessageId)> {
    let f = page::decode(c, &["m1", inst.as_str(), jid], 5)?;
    Ok((page::parse_ts(&f[3])?, MessageId::parse(&f[4]).map_err(|_| Error::invalid("invalid cursor"))?))
}

/// Adds a signed `url` to media the log holds.
pub fn with_media_url(core: &Core, mut content: serde_json::Value, now: DateTime<Utc>) -> serde_json::Value {
    if let Some(media) = content.get_mut("media").and_then(|m| m.as_object_mut()) {
        let expired = media.get("expired").and_then(|e| e.as_bool()).unwrap_or(false);
        if let (Some(id), false) = (media.get("id").and_then(|i| i.as_str()).map(str::to_string), expired) {
            if let Some(url) = core.media_urls.sign(&id, now) {
                media.insert("url".into(), serde_json::Value::String(url));
            }
        }
    }
    content
}

fn message_out(core: &Core, r: LogRow, now: DateTime<Utc>) -> LogMessageOut {
    LogMessageOut {
        content: with_media_url(core, r.content, now),
        id: r.id,
        wa_message_id: r.wa_message_id,
        chat_jid: r.chat_jid.into(),
        from_jid: r.from_jid.into(),
        from_me: r.from_me,
        kind: r.kind,
        status: r.status,
        source: r.source,
        timestamp: r.ts,
        labels: Vec::new(),
    }
}

/// A page of chat `jid`'s messages, newest first.
pub async fn page(core: &Core, id: &InstanceId, jid: &str, q: &PageQuery) -> Result<MessagePageOut> {
    let limit = page::limit(q.limit, 50, 200)?;
    let after = q.cursor.as_deref().map(|c| decode_message_cursor(c, id, jid)).transpose()?;
    let rows = log::messages(&core.db, id, jid, after.as_ref().map(|(t, m)| (*t, m)), i64::from(limit) + 1).await?;
    let (rows, next_cursor) =
        page::page(rows, limit, |r| page::encode(&["m1", id.as_str(), jid, &page::ts(r.ts), r.id.as_str()]));
    let wa_ids: Vec<String> = rows.iter().map(|r| r.wa_message_id.clone()).collect();
    let mut labels = shared::db::labels::for_messages(&core.db, id, jid, &wa_ids).await?;
    let now = Utc::now();
    let messages = rows
        .into_iter()
        .map(|r| {
            let on = labels.remove(&r.wa_message_id).unwrap_or_default();
            LogMessageOut { labels: on, ..message_out(core, r, now) }
        })
        .collect();
    Ok(MessagePageOut { messages, next_cursor })
}
