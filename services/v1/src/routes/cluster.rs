//! `GET /v1/cluster` (admin): the workers and the leases they hold, the instances by
//! state, the webhook backlog and the large-body slots (`domain::cluster`).

use axum::extract::State;
use axum::Json;
use domain::cluster::ClusterOut;
use shared::error::ErrorBody;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::Admin;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cluster))
}

/// The cluster now: live workers (heartbeat within the lease TTL) with how many instances
/// each holds, the instances whose session should run and no worker holds, instances by
/// state, the webhook backlog (pending, due, retrying, the oldest) and the large-body slots
/// in use. Read on request: one Redis round trip per 1,000 running instances.
#[utoipa::path(get, path = "/v1/cluster", tag = "operation",
    responses(
        (status = 200, description = "the cluster now", body = ClusterOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn cluster(State(state): State<AppState>, _admin: Admin) -> Result<Json<ClusterOut>, ApiError> {
    Ok(Json(domain::cluster::get(&state).await?))
}
