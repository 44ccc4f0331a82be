//! `GET|PUT {inst}/media/retention` and `GET|PUT /v1/accounts/{account_id}/media/retention`:
//! how long received and sent media are kept (`domain::media_retention`). The admin sets
//! them; the instance's owner or the account reads them.

use axum::extract::{Path, State};
use axum::Json;
use domain::media_retention::{RetentionIn, RetentionOut};
use shared::db::webhooks::Owner;
use shared::error::ErrorBody;
use shared::ids::{AccountId, InstanceId};
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{AccountAccess, Admin, InstanceAccess, ValidatedJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_instance, put_instance)).routes(routes!(get_account, put_account))
}

/// How long the instance's received and sent media are kept: its own days (if set) and
/// what applies (its own, else its account's, else the deployment's).
#[utoipa::path(get, path = "/v1/instances/{id}/media/retention", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the instance's retention", body = RetentionOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_instance(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<RetentionOut>, ApiError> {
    Ok(Json(domain::media_retention::get(&state, &Owner::Instance(access.id)).await?))
}

/// Set how long the instance's received and sent media are kept (admin); `null`
/// inherits from its account, then the deployment. Media already stored is kept by the
/// new days from the collector's next pass.
#[utoipa::path(put, path = "/v1/instances/{id}/media/retention", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = RetentionIn,
    responses(
        (status = 200, description = "the instance's retention", body = RetentionOut),
        (status = 400, description = "`validation_failed`: days out of range (inbound 1-3650, outbound 8-3650)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn put_instance(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<InstanceId>,
    ValidatedJson(body): ValidatedJson<RetentionIn>,
) -> Result<Json<RetentionOut>, ApiError> {
    Ok(Json(domain::media_retention::set(&state, &Owner::Instance(id), body).await?))
}

/// How long the account's instances keep received and sent media, unless an instance
/// says otherwise.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/media/retention", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 200, description = "the account's retention", body = RetentionOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn get_account(State(state): State<AppState>, access: AccountAccess) -> Result<Json<RetentionOut>, ApiError> {
    Ok(Json(domain::media_retention::get(&state, &Owner::Account(access.id)).await?))
}

/// Set how long the account's instances keep received and sent media (admin); `null`
/// inherits the deployment's.
#[utoipa::path(put, path = "/v1/accounts/{account_id}/media/retention", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id")),
    request_body = RetentionIn,
    responses(
        (status = 200, description = "the account's retention", body = RetentionOut),
        (status = 400, description = "`validation_failed`: days out of range (inbound 1-3650, outbound 8-3650)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn put_account(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<AccountId>,
    ValidatedJson(body): ValidatedJson<RetentionIn>,
) -> Result<Json<RetentionOut>, ApiError> {
    Ok(Json(domain::media_retention::set(&state, &Owner::Account(id), body).await?))
}
