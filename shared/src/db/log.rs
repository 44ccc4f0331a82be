//! The local log: `log_messages` (every message an instance sent or received) and
//! `chats`. The worker that owns an instance writes both, fenced on its lease epoch, with
//! the events of each change in the same transaction; the API reads them (and writes the
//! chat settings it carried to the network).
//!
//! Writes are idempotent on the network id: a message that comes again (a reconnect, a
//! takeover, a repeated history sync) finds its row and adds nothing, not even an event.
//!
//! By concept: `messages` (what the worker logs: received and sent messages and the
//! chats they touch), `receipts` (delivered and read), `chats` (the chat rows, read and
//! changed), `history` (reading logged messages back), and `media_downloads` (received
//! media still to fetch).
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor, PgPool};

use crate::db::outbox;
use crate::events::{
    ChatUpdatedEventData, Event, MediaUpdatedEventData, ReactionEventData, ReceiptEventData, ReceivedMessageEventData,
};
use crate::ids::{InstanceId, MessageId};
use crate::jid::Jid;
use crate::message::MessageType;

mod chats;
mod history;
mod lids;
mod media_downloads;
mod messages;
mod receipts;

pub use chats::*;
pub use history::*;
pub use media_downloads::{next_media_retry, pending_media, resolve_media, Fetched, PendingMedia};
pub use messages::*;
pub use receipts::*;

/// A message from the network (received, sent from the phone, or synced history).
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub wa_message_id: String,
    /// As the network gave them (a hidden id, `status@broadcast`; the sender is empty
    /// when the account's own number is not known yet).
    pub chat_jid: String,
    pub from_jid: String,
    /// The chat's and the sender's hidden ids (`<id>@lid`), when the network addressed
    /// them by one: their JIDs above are then their numbers', when the network told them
    /// (or the instance learned them before), else the same LIDs.
    pub chat_lid: Option<String>,
    pub from_lid: Option<String>,
    pub from_me: bool,
    pub kind: String,
    /// The content in the shape `POST {inst}/messages` takes (`text`, `media`, ...).
    pub content: Value,
    pub ts: DateTime<Utc>,
}

/// Where a message of the local log came from.
// Stored as its name (`log_messages.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = LogSource))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Source {
    /// Received as it happened: each new one is an event.
    Live,
    /// Synced at pairing: only the chats they touch are events.
    History,
    /// Sent through paceline's queue.
    Queue,
}

/// A logged message.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LogRow {
    pub id: MessageId,
    pub chat_jid: Jid,
    pub wa_message_id: String,
    pub ts: DateTime<Utc>,
    pub from_jid: Jid,
    pub from_me: bool,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub content: Value,
    pub status: Option<LogStatus>,
    pub source: Source,
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
