//! `{inst}/api-keys`: restricted API keys a tenant hands to third parties. A key is
//! `read_only` or `send_only` (what each reaches is `routes::access`), may expire, and
//! obeys its instance's IP allow-list and its own. The token is shown once and stored as
//! its SHA-256. Only the instance token and the admin create, list and revoke keys; a
//! revoked key is refused at once on this pod and, told over NATS, on the others (within
//! the token cache's 5 s in any case).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::keys::{KeyCreatedOut, KeyIn, KeyListOut};
use domain::page::PageQuery;
use shared::error::ErrorBody;
use shared::ids::{InstanceId, KeyId};
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_keys, create_key)).routes(routes!(revoke_key))
}

/// Create a restricted key; its token is in this answer only.
#[utoipa::path(post, path = "/v1/instances/{id}/api-keys", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = KeyIn,
    responses(
        (status = 201, description = "the key and its token", body = KeyCreatedOut),
        (status = 400, description = "`validation_failed`: the name, an `expires_at` not in the future, an allow-list entry, or the instance's 100 keys", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or a key (no key creates keys)", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create_key(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(b): ValidatedJson<KeyIn>,
) -> Result<(StatusCode, Json<KeyCreatedOut>), ApiError> {
    Ok((StatusCode::CREATED, Json(domain::keys::create(access.ctx(&state), b).await?)))
}

/// The instance's keys, oldest first, without their tokens.
#[utoipa::path(get, path = "/v1/instances/{id}/api-keys", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id"), PageQuery),
    responses(
        (status = 200, description = "a page of keys", body = KeyListOut),
        (status = 400, description = "`validation_failed`: bad limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or a key", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list_keys(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<KeyListOut>, ApiError> {
    Ok(Json(domain::keys::list(access.ctx(&state), &q).await?))
}

/// Revoke a key: refused at once here, and on every API pod within 5 s.
#[utoipa::path(delete, path = "/v1/instances/{id}/api-keys/{key_id}", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id"), ("key_id" = KeyId, Path, description = "key id")),
    responses(
        (status = 204, description = "revoked"),
        (status = 400, description = "`validation_failed`: a key id not of its form", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or a key", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such key", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn revoke_key(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, KeyId)>,
) -> Result<StatusCode, ApiError> {
    domain::keys::revoke(access.ctx(&state), &ids.1).await?;
    Ok(StatusCode::NO_CONTENT)
}
