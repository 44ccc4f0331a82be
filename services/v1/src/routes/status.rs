//! `{inst}/status`: posting a status (text, image or video) goes through the paced send
//! queue like any message, to `status@broadcast`, and reaches the account's contacts;
//! the statuses contacts posted are read from the local log (the `status@broadcast`
//! chat), newest first.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::jid::STATUS_JID;
use shared::message::MessageType;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::history::{self, MessagePageOut};
use domain::message_in::MediaIn;
use domain::page::PageQuery;
use domain::send::{queue, MessageOut, MESSAGES_BODY_LIMIT};
use door::extract::{InstanceAccess, ValidatedJson, ValidatedQuery};
use door::gate::SlotHeld;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(post))
        .layer(axum::middleware::from_fn(door::gate::gate))
        .layer(axum::extract::DefaultBodyLimit::max(MESSAGES_BODY_LIMIT))
        .routes(routes!(list))
}

/// What a status may be.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusType {
    Text,
    Image,
    Video,
}

/// Body of `POST {inst}/status`: `text` for a text status, `media` (and an optional
/// `caption`) for an image or video, with the limits of `POST {inst}/messages`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusIn {
    #[serde(rename = "type")]
    pub kind: StatusType,
    pub text: Option<String>,
    pub media: Option<MediaIn>,
    pub caption: Option<String>,
    /// Idempotency key, at most 128 characters.
    #[schema(min_length = 1, max_length = 128)]
    pub client_message_id: Option<String>,
}

/// Post a status through the send queue: paced like any send, with a message record
/// (`to` is `status@broadcast`).
#[utoipa::path(post, path = "/v1/instances/{id}/status", tag = "status",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = StatusIn,
    responses(
        (status = 202, description = "queued", body = MessageOut),
        (status = 400, description = "`validation_failed` (the fields a type needs, media that does not decode)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 408, description = "`request_timeout`: a body over 1 MB was not received within `large_body.read_timeout_ms`", body = ErrorBody),
        (status = 409, description = "`conflict`: client_message_id reused with other content; `instance_banned`", body = ErrorBody),
        (status = 413, description = "`media_too_large`, or `quota_exceeded`", body = ErrorBody),
        (status = 422, description = "`media_fetch_failed`: media.url could not be downloaded", body = ErrorBody),
        (status = 503, description = "`rate_limited`: a body over 1 MB, or a `media.url` download, waited too long for a large-send slot", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn post(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ValidatedJson(body): ValidatedJson<StatusIn>,
) -> Result<(StatusCode, Json<MessageOut>), ApiError> {
    let kind = match body.kind {
        StatusType::Text => MessageType::Text,
        StatusType::Image => MessageType::Image,
        StatusType::Video => MessageType::Video,
    };
    let message = domain::send::status(kind, body.text, body.media, body.caption, body.client_message_id);
    let (row, _) = queue(state.ctx(&id, principal.caller()), message, None, held.is_some()).await?;
    Ok((StatusCode::ACCEPTED, Json((&row).into())))
}

/// The statuses the account's contacts posted (and its own, sent from its phone), newest
/// first, from the local log.
#[utoipa::path(get, path = "/v1/instances/{id}/status", tag = "status",
    params(("id" = InstanceId, Path, description = "instance id"), PageQuery),
    responses(
        (status = 200, description = "a page of statuses, newest first", body = MessagePageOut),
        (status = 400, description = "`validation_failed`: bad limit, or a cursor that is not this list's", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<MessagePageOut>, ApiError> {
    let page = history::page(&state, &id, STATUS_JID, &q).await?;
    Ok(Json(page))
}
