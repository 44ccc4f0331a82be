//! `{inst}/risk`: the instance's ban risk now, its score from 0 to 100 with each
//! signal's value and contribution and a recommendation in words (docs/ban-risk.md).
//! Computed on request from Postgres (`db::risk::signals`, `shared::risk::assess`).
//! `{inst}/queue/resume` resumes a queue a policy paused.

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::risk::{Contribution, Level, Policy, Signals, Thresholds};
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::InstanceAccess;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_risk)).routes(routes!(resume_queue))
}

/// An instance's ban risk.
#[derive(Debug, Serialize, ToSchema)]
pub struct RiskOut {
    /// 0-100.
    pub score: f64,
    pub level: Level,
    /// What to do, in words.
    pub recommendation: String,
    /// Every signal's part of the score, largest first.
    pub contributions: Vec<Contribution>,
    /// The counts the score is computed from.
    pub signals: Signals,
    /// The levels in force (`policy.thresholds`).
    pub thresholds: Thresholds,
    /// The policies in force: the deployment's, with the instance's `risk_policy` applied.
    pub policy: Policy,
    pub computed_at: DateTime<Utc>,
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
async fn get_risk(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<RiskOut>, ApiError> {
    let own = shared::db::instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?.risk_policy;
    let policy = state.config.risk_policy().with(own.as_ref().map(|p| &p.0));
    let signals = shared::db::risk::signals(&state.db, &id).await?;
    let a = shared::risk::assess(&signals, &policy.thresholds);
    Ok(Json(RiskOut {
        score: a.score,
        level: a.level,
        recommendation: a.recommendation,
        contributions: a.contributions,
        signals,
        thresholds: policy.thresholds,
        policy,
        computed_at: Utc::now(),
    }))
}

/// Resume a queue a policy paused (critical risk, a temporary ban); the next automatic
/// pause waits at least an hour (a new temporary ban pauses again at once).
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
async fn resume_queue(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<axum::http::StatusCode, ApiError> {
    if shared::db::risk::resume(&state.db, &id).await?.is_none() {
        return Err(ApiError::new(shared::ErrorCode::Conflict, "the queue is not paused"));
    }
    domain::instances::rules_changed(&state, &id).await;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
