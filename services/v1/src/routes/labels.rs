//! `{inst}/labels`: the door to `domain::labels`, a business account's labels
//! (interface.md 4.4). Changes go to the
//! network through the instance's worker first, then are recorded in the local log with
//! their `label.updated` (`db::labels::apply`, which announces a change once even when the
//! network echoes it back). Reads come from the log, so they work while disconnected.
//! A personal account gets 409 `business_account_required`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::labels::{self as core, LabelOut};
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ids::{InstanceId, MessageId};
use shared::jid::Jid;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{InstanceAccess, Path, ValidatedJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(edit, delete))
        .routes(routes!(label_chat, unlabel_chat))
        .routes(routes!(label_message, unlabel_message))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LabelListOut {
    pub labels: Vec<LabelOut>,
}

/// Body of `POST {inst}/labels`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelIn {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    /// 0-19; 0 when absent.
    #[schema(minimum = 0, maximum = 19)]
    #[serde(default)]
    pub color: i32,
}

/// Body of `PATCH {inst}/labels/{label_id}`: absent fields stay.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelPatch {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: Option<String>,
    #[schema(minimum = 0, maximum = 19)]
    pub color: Option<i32>,
}

/// The account's labels, from the local log.
#[utoipa::path(get, path = "/v1/instances/{id}/labels", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the labels", body = LabelListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`business_account_required`: a personal account; `instance_not_connected`: never paired", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<LabelListOut>, ApiError> {
    Ok(Json(LabelListOut { labels: core::list(access.ctx(&state)).await? }))
}

/// Create a label, on the network first.
#[utoipa::path(post, path = "/v1/instances/{id}/labels", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = LabelIn,
    responses(
        (status = 201, description = "the label", body = LabelOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(body): ValidatedJson<LabelIn>,
) -> Result<(StatusCode, Json<LabelOut>), ApiError> {
    Ok((StatusCode::CREATED, Json(core::create(access.ctx(&state), &body.name, body.color).await?)))
}

/// Rename or recolour a label, on the network first.
#[utoipa::path(patch, path = "/v1/instances/{id}/labels/{label_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id")),
    request_body = LabelPatch,
    responses(
        (status = 200, description = "the label as it is now", body = LabelOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn edit(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, String)>,
    ValidatedJson(p): ValidatedJson<LabelPatch>,
) -> Result<Json<LabelOut>, ApiError> {
    Ok(Json(core::edit(access.ctx(&state), ids.1, p.name.as_deref(), p.color).await?))
}

/// Delete a label (it comes off every chat and message), on the network first.
#[utoipa::path(delete, path = "/v1/instances/{id}/labels/{label_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id")),
    responses(
        (status = 204, description = "deleted"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, String)>,
) -> Result<StatusCode, ApiError> {
    core::delete(access.ctx(&state), ids.1).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Label a chat (a JID or a phone number), on the network first.
#[utoipa::path(put, path = "/v1/instances/{id}/labels/{label_id}/chats/{jid}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 204, description = "the chat has the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn label_chat(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, String, Jid)>,
) -> Result<StatusCode, ApiError> {
    core::set_chat(access.ctx(&state), ids.1, ids.2, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Take a label off a chat, on the network first.
#[utoipa::path(delete, path = "/v1/instances/{id}/labels/{label_id}/chats/{jid}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 204, description = "the chat does not have the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn unlabel_chat(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, String, Jid)>,
) -> Result<StatusCode, ApiError> {
    core::set_chat(access.ctx(&state), ids.1, ids.2, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Label a message of the local log (its `msg_` id), on the network first.
#[utoipa::path(put, path = "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("msg_id" = MessageId, Path, description = "a message of the local log")),
    responses(
        (status = 204, description = "the message has the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label or message", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn label_message(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, String, MessageId)>,
) -> Result<StatusCode, ApiError> {
    core::set_message(access.ctx(&state), ids.1, ids.2, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Take a label off a message of the local log, on the network first.
#[utoipa::path(delete, path = "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id"), ("label_id" = crate::schemas::LabelId, Path, description = "the label's id"),
        ("msg_id" = MessageId, Path, description = "a message of the local log")),
    responses(
        (status = 204, description = "the message does not have the label"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such label or message", body = ErrorBody),
        (status = 409, description = "`business_account_required`; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn unlabel_message(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, String, MessageId)>,
) -> Result<StatusCode, ApiError> {
    core::set_message(access.ctx(&state), ids.1, ids.2, false).await?;
    Ok(StatusCode::NO_CONTENT)
}
