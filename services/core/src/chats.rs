//! Chats from the local log, without asking the network; changes to a chat (archive,
//! pin, mute, read, delete) go to the network through the instance's worker first and
//! are recorded once it accepted them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::contract as wire;
use shared::db::log::{self, ChatChange, ChatRow};
use shared::jid::Jid;
use utoipa::ToSchema;

use crate::net::net;
use crate::{Ctx, Error, Result};

/// A chat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatOut {
    pub jid: String,
    pub name: Option<String>,
    pub last_message_at: DateTime<Utc>,
    pub unread_count: i32,
    pub archived: bool,
    pub pinned: bool,
    pub muted_until: Option<DateTime<Utc>>,
    /// Ids of the labels on this chat (business accounts).
    pub labels: Vec<String>,
    /// The party's hidden id (`<id>@lid`), when the network addressed it by one: `jid` is
    /// its phone-number JID once the session learned it, else the same LID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lid: Option<String>,
}

/// A page of chats.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatListOut {
    pub chats: Vec<ChatOut>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl From<ChatRow> for ChatOut {
    fn from(r: ChatRow) -> Self {
        ChatOut {
            jid: r.jid.into(),
            name: r.name,
            last_message_at: r.last_message_at,
            unread_count: r.unread_count,
            archived: r.archived,
            pinned: r.pinned,
            muted_until: r.muted_until,
            labels: Vec::new(),
            lid: r.lid,
        }
    }
}

/// Chats with their labels.
pub async fn with_labels(ctx: Ctx<'_>, rows: Vec<ChatRow>) -> Result<Vec<ChatOut>> {
    let jids: Vec<String> = rows.iter().map(|r| r.jid.to_string()).collect();
    let mut labels = shared::db::labels::for_chats(&ctx.core.db, ctx.instance, &jids).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let on = labels.remove(r.jid.as_str()).unwrap_or_default();
            ChatOut { labels: on, ..r.into() }
        })
        .collect())
}

/// One chat with its labels.
async fn one(ctx: Ctx<'_>, row: ChatRow) -> Result<ChatOut> {
    with_labels(ctx, vec![row]).await?.pop().ok_or_else(|| Error::internal("a chat went missing"))
}

/// The chat, which must be in the log.
async fn existing(ctx: Ctx<'_>, jid: Jid) -> Result<Jid> {
    log::chat(&ctx.core.db, ctx.instance, jid.as_str()).await?.ok_or(Error::NotFound("chat"))?;
    Ok(jid)
}

/// A chat of the log.
pub async fn get(ctx: Ctx<'_>, jid: Jid) -> Result<ChatOut> {
    let row = log::chat(&ctx.core.db, ctx.instance, jid.as_str()).await?.ok_or(Error::NotFound("chat"))?;
    one(ctx, row).await
}

/// Archives, pins, mutes or marks a chat read or unread (absent fields stay), on the
/// network first.
pub async fn change(ctx: Ctx<'_>, jid: Jid, change: ChatChange) -> Result<ChatOut> {
    let row = apply_row(ctx, jid, change).await?;
    one(ctx, row).await
}

/// [`change`] without reading the chat's labels back (for a door that does not show it).
pub async fn apply(ctx: Ctx<'_>, jid: Jid, change: ChatChange) -> Result<()> {
    apply_row(ctx, jid, change).await.map(drop)
}

async fn apply_row(ctx: Ctx<'_>, jid: Jid, change: ChatChange) -> Result<ChatRow> {
    let jid = existing(ctx, jid).await?;
    let ChatChange { archived, pinned, muted_until, read } = change.clone();
    if archived.is_some() || pinned.is_some() || muted_until.is_some() {
        let op = wire::ModifyChat { jid: jid.clone(), archived, pinned, muted_until };
        net(ctx.core, ctx.instance, op).await?;
    }
    if let Some(read) = read {
        net(ctx.core, ctx.instance, wire::ReadChat { jid: jid.clone(), read }).await?;
    }
    log::update_chat(&ctx.core.db, ctx.instance, jid.as_str(), &change).await?.ok_or(Error::NotFound("chat"))
}

/// Shows (`composing`) or clears the account's typing indicator in a chat.
pub async fn typing(ctx: Ctx<'_>, jid: Jid, composing: bool) -> Result<()> {
    net(ctx.core, ctx.instance, wire::ChatPresence { jid, composing }).await
}

/// Deletes a chat on the network, and its messages from the log.
pub async fn delete(ctx: Ctx<'_>, jid: Jid) -> Result<()> {
    let jid = existing(ctx, jid).await?;
    net(ctx.core, ctx.instance, wire::DeleteChat { jid: jid.clone() }).await?;
    log::delete_chat(&ctx.core.db, ctx.instance, jid.as_str()).await?;
    Ok(())
}
