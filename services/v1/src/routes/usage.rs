//! `GET {inst}/usage`: what an instance used, per UTC day and in total (`domain::usage`).

use axum::extract::State;
use axum::Json;
use domain::usage::{UsageOut, UsageQuery};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{InstanceAccess, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
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
