//! Pairing and session control: `{inst}/connect`, `/qr`, `/pairing-code`, `/logout`,
//! `/restart`. Connect only records that the session should run (Postgres) and wakes the
//! workers; the rest goes to the worker that runs the instance.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared::db::instances::{self};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::instances::InstanceOut;
use domain::numbers::normalize_phone;
use domain::pairing::{current_qr, logout_one, restart_one, start, PairingCodeIn, PairingCodeOut, QrOut};
use door::extract::{InstanceAccess, ValidatedJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(connect))
        .routes(routes!(qr))
        .routes(routes!(pairing_code))
        .routes(routes!(logout))
        .routes(routes!(restart))
}

/// Start the session on some worker (idempotent). A new or logged-out instance starts
/// pairing (`qr_pending`); a linked one reconnects.
#[utoipa::path(post, path = "/v1/instances/{id}/connect", tag = "pairing",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 202, description = "the session is starting", body = InstanceOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_banned`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn connect(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<(StatusCode, Json<InstanceOut>), ApiError> {
    start(&state, &id).await?;
    let row = instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    Ok((StatusCode::ACCEPTED, Json(row.into())))
}

/// The QR code to scan while `qr_pending`; it changes every 20 s.
#[utoipa::path(get, path = "/v1/instances/{id}/qr", tag = "pairing",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the QR code", body = QrOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_pairing` (retryable while the session is starting)", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn qr(State(state): State<AppState>, InstanceAccess { id, .. }: InstanceAccess) -> Result<Json<QrOut>, ApiError> {
    Ok(current_qr(&state, &id).await?.map(Json)?)
}

/// A phone pairing code, an alternative to scanning (only while `qr_pending`).
#[utoipa::path(post, path = "/v1/instances/{id}/pairing-code", tag = "pairing",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = PairingCodeIn,
    responses(
        (status = 200, description = "the code to enter on the phone", body = PairingCodeOut),
        (status = 400, description = "`validation_failed` or `invalid_number` (no account)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_pairing` (also when no session runs: retryable after a connect), or `instance_banned`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn pairing_code(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<PairingCodeIn>,
) -> Result<Json<PairingCodeOut>, ApiError> {
    let phone = normalize_phone(&body.phone)?;
    let pairing_code = domain::pairing::pairing_code(&state, &id, phone).await?;
    Ok(Json(PairingCodeOut { pairing_code }))
}

/// Unlink the device from the number; the instance becomes `logged_out`.
#[utoipa::path(post, path = "/v1/instances/{id}/logout", tag = "pairing",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "logged out", body = InstanceOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected` or `instance_banned`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn logout(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<InstanceOut>, ApiError> {
    logout_one(&state, &id).await?;
    let row = instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    Ok(Json(row.into()))
}

/// Close and reopen the session (starts it when no worker runs it).
#[utoipa::path(post, path = "/v1/instances/{id}/restart", tag = "pairing",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 202, description = "restarting", body = InstanceOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_banned`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn restart(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<(StatusCode, Json<InstanceOut>), ApiError> {
    restart_one(&state, &id).await?;
    let row = instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    Ok((StatusCode::ACCEPTED, Json(row.into())))
}
