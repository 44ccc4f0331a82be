//! `{inst}/chatwoot`: the instance's Chatwoot inbox (issue #37; contract.md "Chatwoot"),
//! and `/v1/chatwoot/webhook/{secret}`, where Chatwoot posts the inbox's events. The
//! access token is write-only (sealed, shown as `token_set`); Chatwoot's address must be
//! public unless the admin allows a private one for the instance. The bridge itself runs
//! in the `chatwoot` role, never in a request: the webhook only queues its work.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::chatwoot::{self, hook, ChatwootIn, ChatwootOut};
use door::extract::{InstanceAccess, Path, ValidatedJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_one, put, patch, delete)).routes(routes!(webhook))
}

/// The instance's Chatwoot inbox; its token shows only as set.
#[utoipa::path(get, path = "/v1/instances/{id}/chatwoot", tag = "chatwoot",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the inbox", body = ChatwootOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no inbox set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<ChatwootOut>, ApiError> {
    Ok(Json(chatwoot::get(&state, &id).await?))
}

/// Set the whole inbox (created or replaced). Without `inbox_id` the bridge creates an
/// API-channel inbox in Chatwoot, its webhook set to `webhook_url`.
#[utoipa::path(put, path = "/v1/instances/{id}/chatwoot", tag = "chatwoot",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = ChatwootIn,
    responses(
        (status = 200, description = "the inbox as stored", body = ChatwootOut),
        (status = 400, description = "`validation_failed`: a bad field, a URL that is not public, or no token", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: only the admin sets `allow_private_targets`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn put(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<ChatwootIn>,
) -> Result<Json<ChatwootOut>, ApiError> {
    Ok(Json(chatwoot::put(&state, &id, principal.is_admin(), body).await?))
}

/// Change part of the inbox: a JSON merge patch over what is stored.
#[utoipa::path(patch, path = "/v1/instances/{id}/chatwoot", tag = "chatwoot",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = Object,
    responses(
        (status = 200, description = "the inbox as stored", body = ChatwootOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: only the admin sets `allow_private_targets`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no inbox set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn patch(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<Json<ChatwootOut>, ApiError> {
    Ok(Json(chatwoot::patch(&state, &id, principal.is_admin(), &serde_json::Value::Object(body)).await?))
}

/// Remove the inbox: the bridge stops and forgets what it mapped (nothing in Chatwoot is
/// deleted).
#[utoipa::path(delete, path = "/v1/instances/{id}/chatwoot", tag = "chatwoot",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no inbox set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<StatusCode, ApiError> {
    chatwoot::delete(&state, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What the webhook did with an event.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatwootHookOut {
    /// `queued` (for the bridge), `repeated` (queued before) or `ignored`.
    pub result: String,
}

/// Chatwoot's webhook for the inbox: the path's secret (in `webhook_url`) is the only
/// credential. An agent's outgoing message is queued to be sent through the paced
/// queue, once however often Chatwoot posts it; other events are ignored.
#[utoipa::path(post, path = "/v1/chatwoot/webhook/{secret}", tag = "chatwoot",
    params(("secret" = String, Path, description = "the secret of the inbox's `webhook_url`")),
    request_body = Object,
    responses(
        (status = 200, description = "taken", body = ChatwootHookOut),
        (status = 400, description = "`validation_failed`: not a JSON object", body = ErrorBody),
        (status = 404, description = "`not_found`: no inbox has this secret", body = ErrorBody),
    ),
    security(()))]
async fn webhook(
    State(state): State<AppState>,
    Path(secret): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<ChatwootHookOut>, ApiError> {
    let result = match hook::receive(&state, &secret, &body).await? {
        hook::Received::Queued => "queued",
        hook::Received::Repeated => "repeated",
        hook::Received::Ignored => "ignored",
    };
    Ok(Json(ChatwootHookOut { result: result.into() }))
}
