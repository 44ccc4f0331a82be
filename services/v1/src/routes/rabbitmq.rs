//! `{inst}/rabbitmq` and `/v1/accounts/{account_id}/rabbitmq`: an instance's events, or
//! those of every instance of an account, streamed into RabbitMQ (issue #39). The
//! broker's address is write-only (sealed; shown without its credentials) and must be
//! public unless the admin allows a private one for the sink. The dispatcher role
//! publishes, never a request.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared::db::sinks::Owner;
use shared::db::webhooks::WebhookFormat;
use shared::error::ErrorBody;
use shared::ids::{AccountId, InstanceId};
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::sinks::{self, RabbitmqIn, RabbitmqOut, Shape};
use door::extract::{AccountAccess, InstanceAccess, ValidatedJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_one, put, delete)).routes(routes!(get_account, put_account, delete_account))
}

/// The instance's RabbitMQ sink: its settings and how publishing goes.
#[utoipa::path(get, path = "/v1/instances/{id}/rabbitmq", tag = "rabbitmq",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the sink", body = RabbitmqOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no sink set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<RabbitmqOut>, ApiError> {
    let sink = sinks::get(&state, &Owner::Instance(id)).await?.ok_or(domain::Error::NotFound("rabbitmq sink"))?;
    Ok(Json(sink))
}

/// Set the whole sink (created or replaced). A new sink publishes the events made from
/// now on; a replaced one goes on from where it was.
#[utoipa::path(put, path = "/v1/instances/{id}/rabbitmq", tag = "rabbitmq",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = RabbitmqIn,
    responses(
        (status = 200, description = "the sink as stored", body = RabbitmqOut),
        (status = 400, description = "`validation_failed`: a bad field, a broker that is not public, or no broker (none given, none stored, and none for the deployment)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: only the admin sets `allow_private_targets`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn put(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<RabbitmqIn>,
) -> Result<Json<RabbitmqOut>, ApiError> {
    let shape = Shape { format: WebhookFormat::Paceline, evolution_events: Vec::new() };
    Ok(Json(sinks::put(&state, &Owner::Instance(id), principal.is_admin(), body, shape).await?))
}

/// Remove the sink: nothing more is published (what the broker holds stays).
#[utoipa::path(delete, path = "/v1/instances/{id}/rabbitmq", tag = "rabbitmq",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no sink set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<StatusCode, ApiError> {
    if !sinks::delete(&state, &Owner::Instance(id)).await? {
        return Err(domain::Error::NotFound("rabbitmq sink").into());
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The account's RabbitMQ sink: one stream of every event of its instances (each event
/// the account's if its instance was in the account when it was made).
#[utoipa::path(get, path = "/v1/accounts/{account_id}/rabbitmq", tag = "rabbitmq",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 200, description = "the sink", body = RabbitmqOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, or no sink set", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn get_account(State(state): State<AppState>, access: AccountAccess) -> Result<Json<RabbitmqOut>, ApiError> {
    let sink = sinks::get(&state, &Owner::Account(access.id)).await?;
    Ok(Json(sink.ok_or(domain::Error::NotFound("rabbitmq sink"))?))
}

/// Set the account's whole sink (created or replaced): the events of every instance of
/// the account, routed `<account id>.<instance id>.<event type>`, in paceline's format.
/// A new sink publishes the events made from now on; a replaced one goes on from where
/// it was.
#[utoipa::path(put, path = "/v1/accounts/{account_id}/rabbitmq", tag = "rabbitmq",
    params(("account_id" = AccountId, Path, description = "account id")),
    request_body = RabbitmqIn,
    responses(
        (status = 200, description = "the sink as stored", body = RabbitmqOut),
        (status = 400, description = "`validation_failed`: a bad field, a broker that is not public, or no broker (none given, none stored, and none for the deployment)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's, or only the admin sets `allow_private_targets`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn put_account(
    State(state): State<AppState>,
    access: AccountAccess,
    ValidatedJson(body): ValidatedJson<RabbitmqIn>,
) -> Result<Json<RabbitmqOut>, ApiError> {
    let shape = Shape { format: WebhookFormat::Paceline, evolution_events: Vec::new() };
    let admin = access.principal.is_admin();
    Ok(Json(sinks::put(&state, &Owner::Account(access.id), admin, body, shape).await?))
}

/// Remove the account's sink: nothing more is published (what the broker holds stays).
#[utoipa::path(delete, path = "/v1/accounts/{account_id}/rabbitmq", tag = "rabbitmq",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, or no sink set", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn delete_account(State(state): State<AppState>, access: AccountAccess) -> Result<StatusCode, ApiError> {
    if !sinks::delete(&state, &Owner::Account(access.id)).await? {
        return Err(domain::Error::NotFound("rabbitmq sink").into());
    }
    Ok(StatusCode::NO_CONTENT)
}
