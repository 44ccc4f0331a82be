//! `{inst}/risk`: the instance's ban risk now, its score from 0 to 100 with each
//! signal's value and contribution and a recommendation in words (README, "Ban risk").
//! Computed on request from Postgres (`db::risk::signals`, `shared::risk::assess`).

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::risk::{Contribution, Level, Signals, Thresholds};
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::InstanceAccess;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_risk))
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
    /// The deployment's levels.
    pub thresholds: Thresholds,
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
    let signals = shared::db::risk::signals(&state.db, &id).await?;
    let thresholds = state.config.risk_thresholds();
    let a = shared::risk::assess(&signals, &thresholds);
    Ok(Json(RiskOut {
        score: a.score,
        level: a.level,
        recommendation: a.recommendation,
        contributions: a.contributions,
        signals,
        thresholds,
        computed_at: Utc::now(),
    }))
}
