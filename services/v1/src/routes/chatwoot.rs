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

use domain::chatwoot::account::{self as account_cw, AccountChatwootOut};
use domain::chatwoot::{self, hook, ChatwootIn, ChatwootOut};
use door::extract::{AccountAccess, InstanceAccess, Path, ValidatedJson};
use door::AppState;
use shared::ids::AccountId;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_one, put, patch, delete))
        .routes(routes!(get_account, put_account, patch_account, delete_account))
        .routes(routes!(webhook))
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

/// The account's Chatwoot settings: each of its instances without settings of its own
/// has an inbox made from them.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/chatwoot", tag = "chatwoot",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 200, description = "the settings", body = AccountChatwootOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, or no settings", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn get_account(
    State(state): State<AppState>,
    access: AccountAccess,
) -> Result<Json<AccountChatwootOut>, ApiError> {
    Ok(Json(account_cw::get(&state, &access.id).await?))
}

/// Set the account's Chatwoot settings: an inbox, named after each instance, is made at
/// once for every instance of the account without settings of its own (and for instances
/// that join the account later). `inbox_id` and `inbox_name` are refused.
#[utoipa::path(put, path = "/v1/accounts/{account_id}/chatwoot", tag = "chatwoot",
    params(("account_id" = AccountId, Path, description = "account id")),
    request_body = ChatwootIn,
    responses(
        (status = 200, description = "the settings as stored", body = AccountChatwootOut),
        (status = 400, description = "`validation_failed`: a bad field, an inbox named, a URL that is not public, or no token", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's, or only the admin sets `allow_private_targets`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn put_account(
    State(state): State<AppState>,
    access: AccountAccess,
    ValidatedJson(body): ValidatedJson<ChatwootIn>,
) -> Result<Json<AccountChatwootOut>, ApiError> {
    Ok(Json(account_cw::put(&state, &access.id, access.principal.is_admin(), body).await?))
}

/// Change part of the account's Chatwoot settings: a JSON merge patch.
#[utoipa::path(patch, path = "/v1/accounts/{account_id}/chatwoot", tag = "chatwoot",
    params(("account_id" = AccountId, Path, description = "account id")),
    request_body = Object,
    responses(
        (status = 200, description = "the settings as stored", body = AccountChatwootOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, or no settings", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn patch_account(
    State(state): State<AppState>,
    access: AccountAccess,
    ValidatedJson(body): ValidatedJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<Json<AccountChatwootOut>, ApiError> {
    let admin = access.principal.is_admin();
    Ok(Json(account_cw::patch(&state, &access.id, admin, &serde_json::Value::Object(body)).await?))
}

/// Remove the account's Chatwoot settings and the inboxes made from them (instances'
/// own settings stay; nothing in Chatwoot is deleted).
#[utoipa::path(delete, path = "/v1/accounts/{account_id}/chatwoot", tag = "chatwoot",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, or no settings", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn delete_account(State(state): State<AppState>, access: AccountAccess) -> Result<StatusCode, ApiError> {
    account_cw::delete(&state, &access.id).await?;
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
