//! `{inst}/messages`: the paced send queue. POST validates, stores media, queues the
//! message (with its network id assigned and its `message.queued` event) and wakes the
//! instance's worker; `wait=true` then waits for the result.

use std::time::Duration;

use crate::message_in::{self as message, MediaSource, MessageIn};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use shared::db::instances::{self, InstanceState};
use shared::db::media::{self, MediaBody, MediaError, MediaWriter};
use shared::db::messages::{self, MessageRow, MessageStatus, NewMessage, Queued};
use shared::error::ErrorBody;
use shared::fetch::FetchError;
use shared::ids::{InstanceId, MediaId, MessageId};
use shared::message::{MediaRef, MessageType, Outbound};
use shared::{ApiError, ErrorCode};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use crate::semaphore::{Slot, SlotHeld};
use crate::state::AppState;

/// Body limit of `POST {inst}/messages` (media as base64).
pub const MESSAGES_BODY_LIMIT: usize = 140 * 1024 * 1024;
/// `wait=true`: default and ceiling of `timeout`.
const WAIT_DEFAULT: Duration = Duration::from_secs(30);
const WAIT_CEILING: Duration = Duration::from_secs(120);

/// The send route with its 140 MB limit and the large-body semaphore, which runs before
/// the body is read.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send))
        .layer(axum::middleware::from_fn(crate::semaphore::gate))
        .layer(axum::extract::DefaultBodyLimit::max(MESSAGES_BODY_LIMIT))
        .routes(routes!(get_message))
}

/// A message and its status.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MessageOut {
    pub id: MessageId,
    pub status: MessageStatus,
    /// The recipient's JID.
    pub to: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_message_id: Option<String>,
    /// The network's id, once sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wa_message_id: Option<String>,
    /// `<code>: <detail>`, when failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
}

impl From<&MessageRow> for MessageOut {
    fn from(r: &MessageRow) -> Self {
        let v = r.view();
        MessageOut {
            id: r.id.clone(),
            status: r.status,
            to: r.to_jid.clone(),
            kind: serde_json::from_value(serde_json::Value::String(r.kind.clone())).unwrap_or(MessageType::Text),
            client_message_id: r.client_message_id.clone(),
            wa_message_id: v.wa_message_id.map(str::to_owned),
            error: r.error.clone(),
            created_at: r.created_at,
            sent_at: r.sent_at,
            expires_at: r.expires_at,
        }
    }
}

/// Query of `POST {inst}/messages`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SendQuery {
    /// Wait for the result (sent or failed) up to `timeout`.
    pub wait: Option<bool>,
    /// How long to wait: `30s`, `90s`, `2m` (default 30s; longer waits stop at 2m).
    pub timeout: Option<String>,
}

/// Queue a message. Without `wait` the answer is 202 once it is stored. With
/// `wait=true`: 200 when sent in time, the failure's error when it fails, 202 (still
/// queued) when the timeout passes first.
#[utoipa::path(post, path = "/v1/instances/{id}/messages", tag = "messages",
    params(("id" = InstanceId, Path, description = "instance id"), SendQuery),
    request_body(content = MessageIn, description = "the message; up to 140 MB with media as base64"),
    responses(
        (status = 200, description = "sent (wait=true)", body = MessageOut),
        (status = 202, description = "queued", body = MessageOut),
        (status = 400, description = "`validation_failed` (also media.url not http(s) or internal), or with wait=true `invalid_number`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: client_message_id reused with other content; `instance_banned`; with wait=true `instance_not_connected`", body = ErrorBody),
        (status = 410, description = "`message_expired` (wait=true)", body = ErrorBody),
        (status = 408, description = "`request_timeout`: a body over 1 MB was not received within `large_body_read_timeout_ms`", body = ErrorBody),
        (status = 413, description = "`media_too_large`: body over 140 MB or media over its type's limit; `quota_exceeded`: the instance's media storage quota is used up", body = ErrorBody),
        (status = 422, description = "`media_fetch_failed`: media.url could not be downloaded", body = ErrorBody),
        (status = 503, description = "`rate_limited`: a body over 1 MB, or a `media.url` download, waited too long for one of the cluster's large-send slots (one per instance); or `shutting_down`", body = ErrorBody),
        (status = 502, description = "`worker_error` (wait=true)", body = ErrorBody),
        (status = 504, description = "`worker_timeout` (wait=true)", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn send(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ValidatedQuery(q): ValidatedQuery<SendQuery>,
    ValidatedJson(body): ValidatedJson<MessageIn>,
) -> Result<(StatusCode, Json<MessageOut>), ApiError> {
    let wait = match (q.wait.unwrap_or(false), q.timeout.as_deref()) {
        (false, _) => None,
        (true, None) => Some(WAIT_DEFAULT),
        (true, Some(t)) => Some(
            message::parse_duration(t)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| ApiError::validation("timeout must be a duration such as 30s, 90s or 2m"))?
                .min(WAIT_CEILING),
        ),
    };
    let row = queue(&state, &id, body, wait, held.is_some()).await?;
    match wait {
        None => Ok((StatusCode::ACCEPTED, Json((&row.0).into()))),
        Some(timeout) => wait_result(&state, &id, row, timeout).await,
    }
}

/// Validates and queues a message; with `wait` the result subscription is taken first.
/// `holds_slot`: the request already holds a large-body slot (its body was large), so a
/// `media.url` download takes no second one. Shared with the action-style send routes.
pub async fn queue(
    state: &AppState,
    id: &InstanceId,
    body: MessageIn,
    wait: Option<Duration>,
    holds_slot: bool,
) -> Result<(MessageRow, Option<async_nats::Subscriber>), ApiError> {
    let mut v = message::validate(body)?;
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
        let stored: MediaRef = serde_json::from_value(desc).map_err(ApiError::internal)?;
        let message = Outbound {
            content: v.message.content.clone().map_media(|()| stored),
            reply_to: v.message.reply_to.clone(),
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
    };
    queue_validated(state, id, &v, message, wait).await
}

/// Stores a message's media: decoded bytes as they are, a `media.url` downloaded a
/// chunk at a time straight into storage (under a large-body slot, at most its type's
/// limit, within the instance's media quota).
async fn store_media(
    state: &AppState,
    id: &InstanceId,
    kind: MessageType,
    src: MediaSource,
    holds_slot: bool,
) -> Result<(MediaId, serde_json::Value), ApiError> {
    let limit = kind.media_limit().expect("media types have limits") as u64;
    let quota = state.config.media_quota_bytes;
    let (url, mime_type, filename) = match src {
        MediaSource::Bytes { data, mime_type, filename } => {
            let stored = media::store(&state.db, id, &mime_type, filename.as_deref(), MediaBody::Data(&data), quota);
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
    let mut writer = MediaWriter::begin(&state.db, id, &mime, name.as_deref(), quota).await.map_err(media_error)?;
    let mut body = res.bytes_stream();
    let copied: Result<(), ApiError> = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|_| ApiError::new(ErrorCode::MediaFetchFailed, "media.url broke off"))?;
            if writer.size() + chunk.len() as u64 > limit {
                return Err(ApiError::new(ErrorCode::MediaTooLarge, "the media at media.url is over its size limit"));
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

fn fetch_error(e: FetchError) -> ApiError {
    match e {
        FetchError::Refused => ApiError::validation("media.url must not point to a private or local address"),
        FetchError::TooLarge => {
            ApiError::new(ErrorCode::MediaTooLarge, "the media at media.url is over its size limit")
        }
        FetchError::Failed(why) => {
            ApiError::new(ErrorCode::MediaFetchFailed, format!("media.url could not be downloaded ({why})"))
        }
    }
}

fn media_error(e: MediaError) -> ApiError {
    match e {
        MediaError::QuotaExceeded => {
            metrics::counter!(crate::metrics::MEDIA_QUOTA_REFUSED, "source" => "sent").increment(1);
            ApiError::new(
                ErrorCode::QuotaExceeded,
                "the instance's media storage quota is used up; media older than the retention frees its space",
            )
        }
        MediaError::Db(e) => e.into(),
    }
}

/// Queues a validated message whose media (if any) is stored.
async fn queue_validated(
    state: &AppState,
    id: &InstanceId,
    v: &message::Validated,
    message: Outbound,
    wait: Option<Duration>,
) -> Result<(MessageRow, Option<async_nats::Subscriber>), ApiError> {
    let hash = message::content_hash(v, message.content.media().map(|m| m.sha256.as_str()));
    let msg_id = MessageId::new();
    // Subscribe before the insert: a result published after it cannot be missed.
    let sub = match wait {
        Some(_) => {
            Some(state.nats.subscribe(state.subjects.message_result(&msg_id)).await.map_err(ApiError::internal)?)
        }
        None => None,
    };
    let network_id = message::new_network_id();
    let queued = state
        .enqueuer
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
        .await?;
    let row = match queued {
        Queued::New(row) => row,
        Queued::Existing(row) => {
            drop(sub);
            return replayed(state, row, &hash, wait).await;
        }
        Queued::Refused => {
            check_instance(state, id).await?;
            return Err(ApiError::internal("a message was refused for an instance that takes messages"));
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
    state: &AppState,
    row: MessageRow,
    hash: &str,
    wait: Option<Duration>,
) -> Result<(MessageRow, Option<async_nats::Subscriber>), ApiError> {
    if row.content_hash != hash {
        return Err(ApiError::new(ErrorCode::Conflict, "client_message_id was used for a different message"));
    }
    let sub = match wait {
        Some(_) => {
            Some(state.nats.subscribe(state.subjects.message_result(&row.id)).await.map_err(ApiError::internal)?)
        }
        None => None,
    };
    Ok((row, sub))
}

/// The instance takes messages: 404 when it does not exist, 409 when it is banned.
async fn check_instance(state: &AppState, id: &InstanceId) -> Result<(), ApiError> {
    match instances::get(&state.db, id).await? {
        None => Err(ApiError::instance_not_found()),
        Some(row) if row.state == InstanceState::Banned => {
            Err(ApiError::new(ErrorCode::InstanceBanned, "the number is banned; delete the instance"))
        }
        Some(_) => Ok(()),
    }
}

/// `wait=true`: the result if it comes in time (re-reading the row after the wait, so a
/// result published before the subscription is seen too), else 202.
async fn wait_result(
    state: &AppState,
    id: &InstanceId,
    (row, sub): (MessageRow, Option<async_nats::Subscriber>),
    timeout: Duration,
) -> Result<(StatusCode, Json<MessageOut>), ApiError> {
    if let Some(mut sub) = sub {
        if !row.status.is_final() {
            let _ = tokio::time::timeout(timeout, sub.next()).await;
        }
        let _ = sub.unsubscribe().await;
    }
    let row = messages::get(&state.db, id, &row.id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    match row.status {
        MessageStatus::Sent => Ok((StatusCode::OK, Json((&row).into()))),
        MessageStatus::Failed => Err(failure_error(row.error.as_deref().unwrap_or("worker_error: failed"))),
        MessageStatus::Queued | MessageStatus::InFlight => Ok((StatusCode::ACCEPTED, Json((&row).into()))),
    }
}

/// The error for a failed message's `<code>: <detail>`.
pub fn failure_error(error: &str) -> ApiError {
    let (code, detail) = error.split_once(": ").unwrap_or((error, ""));
    let code = ErrorCode::ALL.into_iter().find(|c| c.as_str() == code).unwrap_or(ErrorCode::WorkerError);
    // A message that failed for good is not retryable as it is, whatever its code.
    ApiError::new(code, format!("the message failed: {detail}")).with_retryable(false)
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

/// Read a message and its status.
#[utoipa::path(get, path = "/v1/instances/{id}/messages/{msg_id}", tag = "messages",
    params(("id" = InstanceId, Path, description = "instance id"), ("msg_id" = MessageId, Path, description = "message id")),
    responses(
        (status = 200, description = "the message", body = MessageOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found` or `not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_message(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(String, MessageId)>,
) -> Result<Json<MessageOut>, ApiError> {
    instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    let row = messages::get(&state.db, &id, &ids.1).await?.ok_or_else(|| ApiError::not_found("message"))?;
    Ok(Json((&row).into()))
}
