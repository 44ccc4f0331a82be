//! `{inst}/risk`: the instance's ban risk now, its score from 0 to 100 with each
//! signal's value and contribution and a recommendation in words (docs/ban-risk.md).
//! `{inst}/queue` shows the queue with the time each message can go;
//! `{inst}/queue/pause` and `/resume` hold and release it (`domain::risk`,
//! `domain::queue`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::queue::{QueueOut, QueueQuery};
use domain::risk::RiskOut;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{InstanceAccess, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_risk))
        .routes(routes!(get_queue))
        .routes(routes!(pause_queue))
        .routes(routes!(resume_queue))
}

/// The instance's ban risk now.
#[utoipa::path(get, path = "/v1/instances/{id}/risk", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the risk, its signals and why", body = RiskOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_risk(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<RiskOut>, ApiError> {
    Ok(Json(domain::risk::assess(access.ctx(&state)).await?))
}

/// The send queue: counts and the rate, the pacing in force, why nothing leaves it (when
/// nothing does), and a page of messages: `list=pending` (queued and in flight, in the
/// order they go, each with the earliest time it can go under the pacing in force) or
/// `list=failed` (the latest failure first, with its reason).
#[utoipa::path(get, path = "/v1/instances/{id}/queue", tag = "messages",
    params(("id" = InstanceId, Path, description = "instance id"), QueueQuery),
    responses(
        (status = 200, description = "the queue and a page of its messages", body = QueueOut),
        (status = 400, description = "`validation_failed`: an unknown list, a limit outside 1-200, or a cursor of another list", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_queue(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<QueueQuery>,
) -> Result<Json<QueueOut>, ApiError> {
    Ok(Json(domain::queue::get(access.ctx(&state), &q).await?))
}

/// Pause the queue by hand: nothing is sent (messages wait, and expire as usual) until
/// `POST {inst}/queue/resume`; `instance.paused` with reason `manual`.
#[utoipa::path(post, path = "/v1/instances/{id}/queue/pause", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 204, description = "paused: nothing is sent until a resume"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: the queue is paused already", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn pause_queue(State(state): State<AppState>, access: InstanceAccess) -> Result<StatusCode, ApiError> {
    domain::risk::pause(access.ctx(&state)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Resume a paused queue (by hand or by a policy: critical risk, a temporary ban); the
/// next automatic pause waits at least an hour (a new temporary ban pauses again at once).
#[utoipa::path(post, path = "/v1/instances/{id}/queue/resume", tag = "instances",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 204, description = "resumed: the queue sends again"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: the queue is not paused", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn resume_queue(State(state): State<AppState>, access: InstanceAccess) -> Result<StatusCode, ApiError> {
    domain::risk::resume(access.ctx(&state)).await?;
    Ok(StatusCode::NO_CONTENT)
}
