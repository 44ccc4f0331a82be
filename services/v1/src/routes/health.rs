//! `/healthz` (process alive) and `/readyz` (Postgres, Redis and NATS reachable).
//! Public when the API listens on loopback only; the admin token is needed otherwise.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::Principal;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz))
}

/// Health answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthOut {
    /// `ok`, `ready` or `unready`.
    pub status: String,
    /// Per dependency: `ok` or `down` (readiness only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checks: Option<Checks>,
}

/// Readiness of each dependency.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Checks {
    pub postgres: String,
    pub redis: String,
    pub nats: String,
    /// The media bucket (`media_store.bucket` set): `ok` or `down`. Reported only: while
    /// it is down, sends with media are refused (503) and received media is fetched again
    /// later, and everything else goes on, so it does not make the pod unready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_store: Option<String>,
}

async fn guard(state: &AppState, req: Request) -> Result<(), ApiError> {
    if state.health_public {
        return Ok(());
    }
    let (mut parts, _) = req.into_parts();
    Ok(Principal::from_request_parts(&mut parts, state).await?.require_admin()?)
}

/// Process alive.
#[utoipa::path(get, path = "/healthz", tag = "operation",
    responses(
        (status = 200, description = "alive", body = HealthOut),
        (status = 401, description = "`unauthorized` (not on loopback, no admin token)", body = ErrorBody),
        (status = 403, description = "`forbidden` (not on loopback, not the admin token)", body = ErrorBody),
    ),
    security((), ("admin" = [])))]
async fn healthz(State(state): State<AppState>, req: Request) -> Result<Json<HealthOut>, ApiError> {
    guard(&state, req).await?;
    Ok(Json(HealthOut { status: "ok".into(), checks: None }))
}

/// Ready to serve: Postgres, Redis and NATS answer and the server is not draining.
#[utoipa::path(get, path = "/readyz", tag = "operation",
    responses(
        (status = 200, description = "ready", body = HealthOut),
        (status = 401, description = "`unauthorized` (not on loopback, no admin token)", body = ErrorBody),
        (status = 403, description = "`forbidden` (not on loopback, not the admin token)", body = ErrorBody),
        (status = 503, description = "a dependency is down (`status: unready`), or `shutting_down`", body = HealthOut),
    ),
    security((), ("admin" = [])))]
async fn readyz(State(state): State<AppState>, req: Request) -> Result<(StatusCode, Json<HealthOut>), ApiError> {
    guard(&state, req).await?;
    if state.shutdown.is_cancelled() {
        return Err(ApiError::shutting_down());
    }
    let (pg, redis, nats, bucket) = tokio::join!(
        async { sqlx::query("SELECT 1").execute(&state.db).await.is_ok() },
        shared::kv::is_ready(&state.redis),
        shared::bus::is_ready(&state.nats),
        async {
            let probe = tokio::time::timeout(shared::health::CHECK_TIMEOUT, state.media.reachable());
            state.media.objects().is_some().then_some(probe.await.is_ok_and(|r| r.is_ok()))
        },
    );
    let word = |ok: bool| if ok { "ok" } else { "down" }.to_string();
    let ready = pg && redis && nats;
    let body = HealthOut {
        status: if ready { "ready" } else { "unready" }.into(),
        checks: Some(Checks {
            postgres: word(pg),
            redis: word(redis),
            nats: word(nats),
            media_store: bucket.map(word),
        }),
    };
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    Ok((status, Json(body)))
}
