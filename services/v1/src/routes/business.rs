//! `{inst}/business/profile`: the account's own business profile, read through the
//! running session. A personal account gets 409 `business_account_required`.

use axum::extract::State;
use axum::Json;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::business::BusinessProfileOut;
use door::extract::InstanceAccess;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(business_profile))
}

/// The account's business profile.
#[utoipa::path(get, path = "/v1/instances/{id}/business/profile", tag = "labels",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the business profile", body = BusinessProfileOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`business_account_required`: a personal account; `instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn business_profile(
    State(state): State<AppState>,
    access: InstanceAccess,
) -> Result<Json<BusinessProfileOut>, ApiError> {
    Ok(Json(domain::business::profile(access.ctx(&state)).await?))
}
