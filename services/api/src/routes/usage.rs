//! `GET {inst}/usage`: what an instance used, per UTC day and in total, from Postgres
//! (`db::usage`). Messages, media and deliveries are rolled up by the dispatchers every
//! `usage_rollup_interval_ms` (10 s by default); lookups count as they happen; API
//! requests reach Postgres within a second.

use axum::extract::State;
use axum::Json;
use chrono::{Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use shared::db::usage::{self, Counts};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, ValidatedQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
}

/// The longest span asked at once (days, both ends included).
const MAX_DAYS: i64 = 93;
/// The span when none is asked.
const DEFAULT_DAYS: i64 = 30;

/// The days asked (UTC).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// First day, `YYYY-MM-DD` (default: 29 days before `to`).
    #[param(value_type = Option<String>, format = Date)]
    pub from: Option<NaiveDate>,
    /// Last day, `YYYY-MM-DD` (default: today); at most 93 days after `from`.
    #[param(value_type = Option<String>, format = Date)]
    pub to: Option<NaiveDate>,
}

/// One day's usage.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageDay {
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    #[serde(flatten)]
    pub counts: Counts,
}

/// Usage per day (every day of the span, oldest first) and in total.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageOut {
    #[schema(value_type = String, format = Date)]
    pub from: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to: NaiveDate,
    pub days: Vec<UsageDay>,
    pub totals: Counts,
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
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<UsageQuery>,
) -> Result<Json<UsageOut>, ApiError> {
    let today = Utc::now().date_naive();
    // Dates far from now are refused before any arithmetic on them.
    let sane = |d: NaiveDate| (today - Duration::days(365 * 100)..=today + Duration::days(365 * 100)).contains(&d);
    if !q.from.is_none_or(sane) || !q.to.is_none_or(sane) {
        return Err(ApiError::validation("from and to must be within a hundred years of today"));
    }
    let to = q.to.unwrap_or(today);
    let from = q.from.unwrap_or(to - Duration::days(DEFAULT_DAYS - 1));
    if from > to {
        return Err(ApiError::validation("from must not be after to"));
    }
    if (to - from).num_days() + 1 > MAX_DAYS {
        return Err(ApiError::validation(format!("at most {MAX_DAYS} days at once")));
    }
    let rows = usage::days(&state.db, &id, from, to).await?;
    let mut totals = Counts::default();
    let mut days = Vec::new();
    let mut day = from;
    while day <= to {
        let counts = rows.iter().find(|r| r.day == day).map(|r| r.counts.clone()).unwrap_or_default();
        totals.add(&counts);
        days.push(UsageDay { date: day, counts });
        day += Duration::days(1);
    }
    Ok(Json(UsageOut { from, to, days, totals }))
}
