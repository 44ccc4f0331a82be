//! `{inst}/messages`: the paced send queue. The routes exist (with their 140 MB body
//! limit and auth) but answer 501 `not_implemented` until the send-queue issue lands.

use axum::extract::State;
use shared::db::instances;
use shared::error::ErrorBody;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, ValidatedJson};
use crate::state::AppState;

/// Body limit of `POST {inst}/messages` (media as base64).
pub const MESSAGES_BODY_LIMIT: usize = 140 * 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send))
        .layer(axum::extract::DefaultBodyLimit::max(MESSAGES_BODY_LIMIT))
        .routes(routes!(get_message))
}

/// Queue a message (not implemented yet).
#[utoipa::path(post, path = "/v1/instances/{id}/messages", tag = "messages",
    params(("id" = String, Path, description = "instance id")),
    request_body(content = serde_json::Value, description = "the message; up to 140 MB"),
    responses(
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 413, description = "`media_too_large`: body over 140 MB", body = ErrorBody),
        (status = 501, description = "`not_implemented`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn send(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(_body): ValidatedJson<serde_json::Value>,
) -> Result<(), ApiError> {
    instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    Err(ApiError::not_implemented("the send queue"))
}

/// Read a message (not implemented yet).
#[utoipa::path(get, path = "/v1/instances/{id}/messages/{msg_id}", tag = "messages",
    params(("id" = String, Path, description = "instance id"), ("msg_id" = String, Path, description = "message id")),
    responses(
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 501, description = "`not_implemented`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_message(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<(), ApiError> {
    instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    Err(ApiError::not_implemented("reading messages"))
}
