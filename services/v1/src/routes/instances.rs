//! `/v1/instances`: create, list, get, patch, delete.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::instances::{InstanceCreatedOut, InstanceIn, InstanceListOut, InstanceOut, InstancePatch, ListQuery};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{Admin, Fleet, InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one, patch, delete))
        .routes(routes!(move_to_account))
        .routes(routes!(rotate_token))
}

/// Create an instance: the admin's (outside every account), or an account token's
/// (inside its account, within its instance quota). The answer carries its token, shown
/// only here.
#[utoipa::path(post, path = "/v1/instances", tag = "instances",
    request_body = InstanceIn,
    responses(
        (status = 201, description = "created", body = InstanceCreatedOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: neither the admin token nor an account token, a suspended account, or a field only the admin sets; `quota_exceeded`: the account holds its quota of instances", body = ErrorBody),
        (status = 409, description = "`conflict`: the name is taken", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn create(
    State(state): State<AppState>,
    Fleet { account }: Fleet,
    ValidatedJson(body): ValidatedJson<InstanceIn>,
) -> Result<(StatusCode, Json<InstanceCreatedOut>), ApiError> {
    Ok((StatusCode::CREATED, Json(domain::instances::create_from(&state, body, account.as_ref()).await?)))
}

/// List instances, oldest first, with filters and cursor pagination: every one for the
/// admin, the account's own for an account token.
#[utoipa::path(get, path = "/v1/instances", tag = "instances",
    params(ListQuery),
    responses(
        (status = 200, description = "a page", body = InstanceListOut),
        (status = 400, description = "`validation_failed`: bad filter, limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: neither the admin token nor an account token", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn list(
    State(state): State<AppState>,
    Fleet { account }: Fleet,
    ValidatedQuery(q): ValidatedQuery<ListQuery>,
) -> Result<Json<InstanceListOut>, ApiError> {
    Ok(Json(domain::instances::list(&state, q, account.as_ref()).await?))
}

/// Move an instance into an account, or (`null`) out of every account (admin). Its
/// tokens, keys and session are untouched; the target account's instance quota holds.
/// The usage it made in the account it leaves stays with that account through today.
#[utoipa::path(put, path = "/v1/instances/{id}/account", tag = "accounts",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = domain::accounts::MoveIn,
    responses(
        (status = 204, description = "moved"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token; `quota_exceeded`: the account holds its quota of instances", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such account", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn move_to_account(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<InstanceId>,
    ValidatedJson(body): ValidatedJson<domain::accounts::MoveIn>,
) -> Result<StatusCode, ApiError> {
    domain::accounts::move_instance(&state, &id, body.account_id.flatten().as_ref()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Read an instance, its state and its queue depth.
#[utoipa::path(get, path = "/v1/instances/{id}", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the instance", body = InstanceOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<InstanceOut>, ApiError> {
    Ok(Json(domain::instances::get(access.ctx(&state)).await?))
}

/// Edit an instance: rename, tags, IP restriction, pacing, settings. `proxy_url` and
/// `unsafe_pacing` need the admin token.
#[utoipa::path(patch, path = "/v1/instances/{id}", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = InstancePatch,
    responses(
        (status = 200, description = "the updated instance", body = InstanceOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance, or an admin-only field", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: the new name is taken", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn patch(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(p): ValidatedJson<InstancePatch>,
) -> Result<Json<InstanceOut>, ApiError> {
    Ok(Json(domain::instances::patch(access.ctx(&state), p).await?))
}

/// Delete an instance (the admin, or the instance's own token: interface.md names only
/// bulk operations and pairing links admin-only, and tells a banned instance's owner to
/// delete it). Its token stops working at once here, and on the other API pods as soon
/// as they are told (at most 5 s).
#[utoipa::path(delete, path = "/v1/instances/{id}", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 204, description = "deleted"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<StatusCode, ApiError> {
    domain::instances::delete_one(&state, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Give the instance a new token (a leaked one, or one made before tokens could be shown
/// again in Evolution's `fetchInstances`). The old token stops working at once here, and
/// on the other API pods as soon as they are told (at most 5 s); the new one is shown
/// only in this answer on `/v1`.
#[utoipa::path(post, path = "/v1/instances/{id}/token", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the new token", body = domain::instances::token::InstanceTokenOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or a restricted key", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn rotate_token(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<domain::instances::token::InstanceTokenOut>, ApiError> {
    Ok(Json(domain::instances::token::rotate(&state, &id).await?))
}
