//! Session control as more than one route asks for it: start (connect), the current QR
//! code, restart and logout, and the phone numbers pairing and lookups accept.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::bus::RpcRequest;
use shared::db::instances::{self, InstanceState};
use shared::ids::InstanceId;
use shared::{ApiError, ErrorCode};
use utoipa::ToSchema;

use crate::state::AppState;

/// The QR code to show while `qr_pending`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QrOut {
    /// The QR payload (what the code encodes).
    pub code: String,
    /// The QR code as a PNG `data:` URL.
    pub base64: String,
    /// When the network replaces it (every 20 s).
    pub expires_at: DateTime<Utc>,
}

/// Marks the instance to run and wakes the workers.
pub async fn start(state: &AppState, id: &InstanceId) -> Result<InstanceState, ApiError> {
    let st = instances::request_run(&state.db, id).await?.ok_or_else(ApiError::instance_not_found)?;
    if st == InstanceState::Banned {
        return Err(ApiError::new(ErrorCode::InstanceBanned, "the number is banned; delete the instance"));
    }
    if let Err(e) = state.nats.publish(state.subjects.workers_wake(), "connect".into()).await {
        // Workers also find it on their next scan.
        tracing::warn!(error = %e, "wake publish failed");
    }
    Ok(st)
}

/// The current QR code, if the instance is showing one.
/// How often [`wait_qr`] looks for the first QR code.
const QR_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The QR code on show, waiting up to `connect_qr_wait_ms` for the first one after
/// pairing started; `None` when there is none (already linked, or none came in time).
pub async fn wait_qr(state: &AppState, id: &InstanceId) -> Result<Option<QrOut>, ApiError> {
    let deadline = tokio::time::Instant::now() + state.config.connect_qr_wait;
    loop {
        match current_qr(state, id).await? {
            Ok(qr) => return Ok(Some(qr)),
            Err(e) if e.retryable && tokio::time::Instant::now() < deadline => tokio::time::sleep(QR_POLL).await,
            Err(_) => return Ok(None),
        }
    }
}

pub async fn current_qr(state: &AppState, id: &InstanceId) -> Result<Result<QrOut, ApiError>, ApiError> {
    let (st, desired, code, expires) = instances::qr(&state.db, id).await?.ok_or_else(ApiError::instance_not_found)?;
    let st = InstanceState::parse(&st).unwrap_or(InstanceState::Disconnected);
    match (st, code, expires) {
        (InstanceState::QrPending, Some(code), Some(expires_at)) if expires_at > Utc::now() => {
            let base64 = crate::qr::png_data_url(&code).map_err(ApiError::internal)?;
            Ok(Ok(QrOut { code, base64, expires_at }))
        }
        (st, _, _) => {
            // A QR is about to appear while a session is starting; not once connected.
            let soon = desired
                && matches!(st, InstanceState::Disconnected | InstanceState::Connecting | InstanceState::QrPending);
            Ok(Err(ApiError::new(
                ErrorCode::InstanceNotPairing,
                format!("the instance is {}, not showing a QR code", st.as_str()),
            )
            .with_retryable(soon)))
        }
    }
}

/// A phone pairing code for `phone` (normalized) from the running session.
pub async fn pairing_code(state: &AppState, id: &InstanceId, phone: String) -> Result<String, ApiError> {
    // No session runs: the instance is not in qr_pending, which is what the spec's
    // `instance_not_pairing` says (retryable: connect, then ask again).
    let v =
        domain::net::call(state, id, RpcRequest::PairingCode { phone }).await.map_err(ApiError::from).map_err(|e| {
            match e.code {
                ErrorCode::InstanceNotConnected => ApiError::new(
                    ErrorCode::InstanceNotPairing,
                    format!("no pairing code outside qr_pending: {}", e.message),
                )
                .with_retryable(true),
                _ => e,
            }
        })?;
    let code = v["pairing_code"].as_str().ok_or_else(|| ApiError::internal("pairing code reply without a code"))?;
    Ok(code.to_string())
}

/// Restarts the instance's session, or starts it when no worker runs it.
pub async fn restart_one(state: &AppState, id: &InstanceId) -> Result<(), ApiError> {
    match domain::net::call(state, id, RpcRequest::Restart).await.map_err(ApiError::from) {
        Ok(_) => Ok(()),
        Err(e) if e.code == ErrorCode::InstanceNotConnected => start(state, id).await.map(drop),
        Err(e) => Err(e),
    }
}

/// Logs the instance out (its worker unlinks the device).
pub async fn logout_one(state: &AppState, id: &InstanceId) -> Result<(), ApiError> {
    Ok(domain::net::call(state, id, RpcRequest::Logout).await.map(drop)?)
}
