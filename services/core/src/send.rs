//! Queuing a message, as every door does (`POST {inst}/messages`, the Evolution-style
//! `/message/send*` routes, channel posts, statuses, the attendant's replies):
//! validation, media stored first (bytes, or a `media.url` downloaded through the
//! guarded client under a large-body slot), the idempotency key, the insert with its
//! network id and event, and the worker's wake.

use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use shared::db::instances::{self, InstanceState};
use shared::db::media::{self, MediaBody, MediaError, MediaWriter};
use shared::db::messages::{self, MessageRow, NewMessage, Queued};
use shared::fetch::FetchError;
use shared::ids::{InstanceId, MediaId, MessageId};
use shared::message::{MediaRef, MessageType, Outbound};
use shared::ErrorCode;

use crate::accounts::quota::Daily;
use crate::message_in::{self as message, MediaSource, MessageIn};
use crate::slots::Slot;
use crate::{Caller, Core, Ctx, Error, Result};

pub use shared::db::messages::MessageOut;

/// Body limit of `POST {inst}/messages` (media as base64).
pub const MESSAGES_BODY_LIMIT: usize = 140 * 1024 * 1024;

/// A status post (`to` is `status@broadcast`): a text, image or video message to the
/// account's contacts, queued and paced as any send. `/v1`'s `POST {inst}/status` and
/// Evolution's `sendStatus` build theirs here.
pub fn status(
    kind: MessageType,
    text: Option<String>,
    media: Option<crate::message_in::MediaIn>,
    caption: Option<String>,
    client_message_id: Option<String>,
) -> MessageIn {
    let mut m = MessageIn::new(shared::jid::STATUS_JID.to_string(), kind);
    m.text = text;
    m.media = media;
    m.caption = caption;
    m.client_message_id = client_message_id;
    m
}

/// Validates and queues a message; with `wait` the result subscription is taken first.
/// `holds_slot`: the request already holds a large-body slot (its body was large), so a
/// `media.url` download takes no second one.
///
/// The one check of every door on where a message goes: a status (`status@broadcast`)
/// and a channel post (`<id>@newsletter`) are the owner's to send (403 for a restricted
/// key, whatever route it uses), and a channel post needs the account to own or
/// administer the channel and is one of the instance's 20 publications a day.
pub async fn queue(
    ctx: Ctx<'_>,
    body: MessageIn,
    wait: Option<Duration>,
    holds_slot: bool,
) -> Result<(MessageRow, Option<async_nats::Subscriber>)> {
    let (state, id) = (ctx.core, ctx.instance);
    let v = message::validate(body)?;
    let channel = v.to_jid.is_channel();
    let owner = matches!(ctx.caller, Caller::Admin | Caller::Owner);
    if (channel || v.to_jid.is_status()) && !owner {
        let what = if channel { "post to a channel" } else { "post a status" };
        return Err(Error::Forbidden(format!("only the instance's own token (or the admin) may {what}")));
    }
    if channel {
        crate::channels::check_publisher(ctx, v.to_jid.clone()).await?;
        let queued = queue_checked(state, id, v, wait, holds_slot);
        return crate::caps::capped_all(state, id, &[crate::channels::PUBLICATIONS], queued).await;
    }
    queue_checked(state, id, v, wait, holds_slot).await
}

/// Queues a validated message whose destination was checked.
async fn queue_checked(
    state: &Core,
    id: &InstanceId,
    mut v: message::Validated,
    wait: Option<Duration>,
    holds_slot: bool,
) -> Result<(MessageRow, Option<async_nats::Subscriber>)> {
    // A replay of bytes already sent is known by their hash: nothing is stored again.
    if let (Some(MediaSource::Bytes { data, .. }), Some(key)) = (&v.media, &v.client_message_id) {
        if let Some(row) = messages::by_client_id(&state.db, id, key).await? {
            let hash = message::content_hash(&v, Some(&media::sha256_hex(data)));
            return replayed(state, row, &hash, wait).await;
        }
    }
    if let Some(src) = v.media.take() {
        // Media is stored before the message: make sure there is an instance to own it.
        check_instance(state, id).await?;
        let (media_id, desc) = store_media(state, id, v.kind(), src, holds_slot).await?;
        let stored: MediaRef = serde_json::from_value(desc).map_err(Error::internal)?;
        let message = Outbound {
            content: v.message.content.clone().map_media(|()| stored),
            reply_to: v.message.reply_to.clone(),
            mentions: v.message.mentions.clone(),
        };
        let queued = queue_validated(state, id, &v, message, wait).await;
        // Media no message took (a replay, a conflict, a refusal) goes at once; a crash
        // here leaves it unclaimed, and it is collected within the hour.
        let keep = matches!(&queued, Ok((row, _)) if row.content["media"]["id"] == media_id.as_str());
        if !keep {
            let _ = media::delete(&state.db, id, &media_id).await;
        }
        return queued;
    }
    let message = Outbound {
        content: v.message.content.clone().map_media(|()| unreachable!("a media type always has its media")),
        reply_to: v.message.reply_to.clone(),
        mentions: v.message.mentions.clone(),
    };
    queue_validated(state, id, &v, message, wait).await
}

/// Stores media: decoded bytes as they are, a `media.url` downloaded a
/// chunk at a time straight into storage (under a large-body slot, at most its type's
/// limit, within the instance's media quota).
pub async fn store_media(
    state: &Core,
    id: &InstanceId,
    kind: MessageType,
    src: MediaSource,
    holds_slot: bool,
) -> Result<(MediaId, serde_json::Value)> {
    let limit = kind.media_limit().expect("media types have limits") as u64;
    let quota = media_quota(state, id).await?;
    let (url, mime_type, filename) = match src {
        MediaSource::Bytes { data, mime_type, filename } => {
            let stored = media::store(
                &state.media,
                id,
                media::Direction::Outbound,
                &mime_type,
                filename.as_deref(),
                MediaBody::Data(&data),
                quota,
            );
            return stored.await.map_err(media_error);
        }
        MediaSource::Url { url, mime_type, filename } => (url, mime_type, filename),
    };
    // A download is as large as a large body: it waits for a slot like one.
    let slot = if holds_slot { None } else { Some(Slot::large_body(state, id).await?) };
    let (res, ct) = state.fetcher.open(&url, limit).await.map_err(fetch_error)?;
    let mime = mime_type.or(ct).unwrap_or_else(|| default_mime(kind).to_string());
    let name = filename
        .or_else(|| url.path_segments().and_then(|mut s| s.next_back()).filter(|s| !s.is_empty()).map(str::to_owned));
    let mut writer = MediaWriter::begin(&state.media, id, media::Direction::Outbound, &mime, name.as_deref(), quota)
        .await
        .map_err(media_error)?;
    let mut body = res.bytes_stream();
    let copied: Result<()> = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|_| Error::refused(ErrorCode::MediaFetchFailed, "media.url broke off"))?;
            if writer.size() + chunk.len() as u64 > limit {
                return Err(Error::refused(ErrorCode::MediaTooLarge, "the media at media.url is over its size limit"));
            }
            writer.write(&chunk).await.map_err(media_error)?;
        }
        Ok(())
    }
    .await;
    let stored = match copied {
        Ok(()) => writer.finish().await.map_err(media_error),
        Err(e) => {
            writer.abort().await;
            Err(e)
        }
    };
    if let Some(slot) = slot {
        slot.release().await;
    }
    stored
}

/// The instance's media quota for a write now: the deployment's per instance, less what
/// its account's quota leaves (its usage plus the account's room).
async fn media_quota(state: &Core, id: &InstanceId) -> Result<u64> {
    let own = state.config.media.quota_bytes;
    match crate::accounts::quota::media_room(state, id).await? {
        None => Ok(own),
        Some(room) => {
            let used = media::usage(&state.db, id).await?.max(0) as u64;
            Ok(own.min(used.saturating_add(room)))
        }
    }
}

fn fetch_error(e: FetchError) -> Error {
    match e {
        FetchError::Refused => Error::invalid("media.url must not point to a private or local address"),
        FetchError::TooLarge => {
            Error::refused(ErrorCode::MediaTooLarge, "the media at media.url is over its size limit")
        }
        FetchError::Failed(why) => {
            Error::refused(ErrorCode::MediaFetchFailed, format!("media.url could not be downloaded ({why})"))
        }
    }
}

/// Media refused for the instance's storage quota (a counter, by where it came from).
pub const MEDIA_QUOTA_REFUSED: &str = "paceline_media_quota_refused_total";

pub(crate) fn media_error(e: MediaError) -> Error {
    match e {
        MediaError::QuotaExceeded => {
            metrics::counter!(MEDIA_QUOTA_REFUSED, "source" => "sent").increment(1);
            Error::refused(
                ErrorCode::QuotaExceeded,
                "the instance's media storage quota is used up; media older than the retention frees its space",
            )
        }
        MediaError::Db(e) => e.into(),
        // Nothing was accepted: the client tries again once the bucket answers.
        MediaError::Objects(e) => {
            tracing::warn!(error = %e, "storing media failed");
            Error::Busy { message: "the media store is unreachable; try again".into(), retry_after: 5 }
        }
        e @ (MediaError::NoBucket | MediaError::Gone) => Error::internal(e),
    }
}

/// Queues a validated message whose media (if any) is stored.
async fn queue_validated(
    state: &Core,
    id: &InstanceId,
    v: &message::Validated,
    message: Outbound,
    wait: Option<Duration>,
) -> Result<(MessageRow, Option<async_nats::Subscriber>)> {
    let hash = message::content_hash(v, message.content.media().map(|m| m.sha256.as_str()));
    let msg_id = MessageId::new();
    // Subscribe before the insert: a result published after it cannot be missed.
    let sub = match wait {
        Some(_) => Some(state.nats.subscribe(state.subjects.message_result(&msg_id)).await.map_err(Error::internal)?),
        None => None,
    };
    let network_id = message::new_network_id();
    // The account's messages a day: taken before the insert, given back unless a new
    // message came of it (a replay, a refusal, a failure).
    let daily = crate::accounts::quota::take_daily(state, id, Daily::Messages, 1).await?;
    let queued = state
        .enqueuer()
        .enqueue(NewMessage {
            id: msg_id.clone(),
            instance_id: id.clone(),
            to_jid: v.to_jid.clone(),
            message,
            client_message_id: v.client_message_id.clone(),
            content_hash: hash.clone(),
            wa_message_id: network_id,
            expires_at: Utc::now() + chrono::Duration::from_std(v.expires_after).expect("bounded"),
        })
        .await;
    match &queued {
        Ok(Queued::New(_)) => daily.keep(),
        _ => daily.give_back(state).await,
    }
    let row = match queued? {
        Queued::New(row) => row,
        Queued::Existing(row) => {
            drop(sub);
            return replayed(state, row, &hash, wait).await;
        }
        Queued::Refused => {
            check_instance(state, id).await?;
            return Err(Error::internal("a message was refused for an instance that takes messages"));
        }
    };
    if !state.wakes.due(id) {
        return Ok((row, sub));
    }
    if let Err(e) = state.nats.publish(state.subjects.instance_queue(id), bytes::Bytes::new()).await {
        // The worker also polls its queue.
        tracing::debug!(error = %e, "queue wake publish failed");
    }
    Ok((row, sub))
}

/// A message queued before under the same `client_message_id`: the same content is an
/// idempotent replay (waiting, if asked, on the original), other content 409 `conflict`.
async fn replayed(
    state: &Core,
    row: MessageRow,
    hash: &str,
    wait: Option<Duration>,
) -> Result<(MessageRow, Option<async_nats::Subscriber>)> {
    if row.content_hash != hash {
        return Err(Error::refused(ErrorCode::Conflict, "client_message_id was used for a different message"));
    }
    let sub = match wait {
        Some(_) => Some(state.nats.subscribe(state.subjects.message_result(&row.id)).await.map_err(Error::internal)?),
        None => None,
    };
    Ok((row, sub))
}

/// The instance takes messages: 404 when it does not exist, 409 when it is banned.
async fn check_instance(state: &Core, id: &InstanceId) -> Result<()> {
    match instances::get(&state.db, id).await? {
        None => Err(Error::InstanceNotFound),
        Some(row) if row.state == InstanceState::Banned => {
            Err(Error::refused(ErrorCode::InstanceBanned, "the number is banned; delete the instance"))
        }
        Some(_) => Ok(()),
    }
}

fn default_mime(kind: MessageType) -> &'static str {
    match kind {
        MessageType::Image => "image/jpeg",
        MessageType::Sticker => "image/webp",
        MessageType::Video => "video/mp4",
        MessageType::Audio => "audio/mpeg",
        MessageType::Voice => "audio/ogg",
        _ => "application/octet-stream",
    }
}
