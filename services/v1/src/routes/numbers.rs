//! `POST {inst}/check-numbers`, the door to `domain::numbers`: which numbers have an account.
//! Known numbers are answered from Postgres; new ones go to the instance's session and count
//! against its quotas (10 a minute, sliding, and 200 a UTC day), kept in Redis across all API
//! pods.

use axum::extract::State;
use axum::Json;
use domain::numbers::NumberResult;
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{InstanceAccess, ValidatedJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(check_numbers))
}

/// Body of `POST {inst}/check-numbers`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckNumbersIn {
    /// 1 to 10 phone numbers with country code.
    #[schema(min_items = 1, max_items = 10, value_type = Vec<crate::schemas::PhoneNumber>)]
    pub numbers: Vec<String>,
}

/// Answers, in the order asked.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CheckNumbersOut {
    pub results: Vec<NumberResult>,
}

/// Which numbers have an account. Numbers this instance already checked are answered
/// without a lookup; new ones count against 10 a minute and 200 a UTC day.
#[utoipa::path(post, path = "/v1/instances/{id}/check-numbers", tag = "numbers",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = CheckNumbersIn,
    responses(
        (status = 200, description = "the answers", body = CheckNumbersOut),
        (status = 400, description = "`validation_failed`: 1 to 10 numbers with country code", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: new-lookup quota used up (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn check_numbers(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(b): ValidatedJson<CheckNumbersIn>,
) -> Result<Json<CheckNumbersOut>, ApiError> {
    let results = domain::numbers::check(access.ctx(&state), &b.numbers).await?;
    Ok(Json(CheckNumbersOut { results }))
}
