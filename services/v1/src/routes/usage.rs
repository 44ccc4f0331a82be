//! `GET {inst}/usage`: what an instance used, per UTC day and in total (`domain::usage`);
//! `GET {inst}/states`: its state changes (`domain::states`).

use axum::extract::State;
use axum::Json;
use domain::page::PageQuery;
use domain::states::StateHistoryOut;
use domain::usage::{UsageOut, UsageQuery};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{InstanceAccess, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage)).routes(routes!(get_states))
}

/// The instance's usage per UTC day: messages queued, sent, failed, expired and
/// received; media bytes sent and received; number lookups, new and cached; webhook
/// deliveries, succeeded and failed; API requests on its routes by token kind.
#[utoipa::path(get, path = "/v1/instances/{id}/usage", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id"), UsageQuery),
    responses(
        (status = 200, description = "usage per day and in total", body = UsageOut),
        (status = 400, description = "`validation_failed`: a date not `YYYY-MM-DD` or not within 100 years of today, `from` after `to`, or more than 93 days", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_usage(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<UsageQuery>,
) -> Result<Json<UsageOut>, ApiError> {
    Ok(Json(domain::usage::get(access.ctx(&state), &q).await?))
}

/// The instance's state changes, newest first (its `instance.state` events, kept as long
/// as events are: 7 days), each with the state before it and why, when that needed saying.
#[utoipa::path(get, path = "/v1/instances/{id}/states", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id"), PageQuery),
    responses(
        (status = 200, description = "a page of state changes, newest first", body = StateHistoryOut),
        (status = 400, description = "`validation_failed`: a limit outside 1-200 or a cursor of another list", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_states(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<StateHistoryOut>, ApiError> {
    Ok(Json(domain::states::history(access.ctx(&state), &q).await?))
}
