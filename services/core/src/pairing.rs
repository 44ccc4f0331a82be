//! Session control: start (connect), the current QR code, a phone pairing code, restart
//! and logout. Each acts on an instance by id (the doors have checked who may).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::bus::RpcRequest;
use shared::db::instances::{self, InstanceState};
use shared::ids::InstanceId;
use shared::ErrorCode;
use utoipa::ToSchema;

use crate::{Core, Error, Result};

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

/// Body of `POST {inst}/pairing-code`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PairingCodeIn {
    /// The number to link, with country code, digits only.
    #[schema(pattern = r"^\+?[0-9]{7,15}$")]
    pub phone: String,
}

/// A phone pairing code: enter it on the phone under "Link with phone number".
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PairingCodeOut {
    pub pairing_code: String,
}

/// Body of `POST {inst}/pairing-links`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkIn {
    /// How long the link works: a duration such as `30m`, `1h` or `7d` (1 minute to 7
    /// days; default 1 hour).
    #[schema(pattern = r"^[0-9]+[smhd]?([0-9]+[smhd])*$", example = "1h")]
    pub expires_in: Option<String>,
}

/// A new link.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LinkOut {
    /// The page to send the customer to (it carries the link's token).
    pub url: String,
    pub expires_at: DateTime<Utc>,
}

/// Marks the instance to run and wakes the workers.
pub async fn start(core: &Core, id: &InstanceId) -> Result<InstanceState> {
    let st = instances::request_run(&core.db, id).await?.ok_or(Error::InstanceNotFound)?;
    if st == InstanceState::Banned {
        return Err(Error::refused(ErrorCode::InstanceBanned, "the number is banned; delete the instance"));
    }
    if let Err(e) = core.nats.publish(core.subjects.workers_wake(), "connect".into()).await {
        // Workers also find it on their next scan.
        tracing::warn!(error = %e, "wake publish failed");
    }
    Ok(st)
}

/// The current QR code, if the instance is showing one.
/// How often [`wait_qr`] looks for the first QR code.
const QR_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The QR code on show, waiting up to `api.connect_qr_wait_ms` for the first one after
/// pairing started; `None` when there is none (already linked, or none came in time).
pub async fn wait_qr(core: &Core, id: &InstanceId) -> Result<Option<QrOut>> {
    let deadline = tokio::time::Instant::now() + core.config.api.connect_qr_wait;
    loop {
        match current_qr(core, id).await? {
            Ok(qr) => return Ok(Some(qr)),
            Err(Error::Refused { retryable: true, .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(QR_POLL).await
            }
            Err(_) => return Ok(None),
        }
    }
}

/// The QR code on show, or why there is none (`instance_not_pairing`, retryable while a
/// session is starting).
pub async fn current_qr(core: &Core, id: &InstanceId) -> Result<Result<QrOut>> {
    let (st, desired, code, expires) = instances::qr(&core.db, id).await?.ok_or(Error::InstanceNotFound)?;
    let st = InstanceState::parse(&st).unwrap_or(InstanceState::Disconnected);
    match (st, code, expires) {
        (InstanceState::QrPending, Some(code), Some(expires_at)) if expires_at > Utc::now() => {
            let base64 = crate::qr::png_data_url(&code).map_err(Error::internal)?;
            Ok(Ok(QrOut { code, base64, expires_at }))
        }
        (st, _, _) => {
            // A QR is about to appear while a session is starting; not once connected.
            let soon = desired
                && matches!(st, InstanceState::Disconnected | InstanceState::Connecting | InstanceState::QrPending);
            Ok(Err(Error::Refused {
                code: ErrorCode::InstanceNotPairing,
                message: format!("the instance is {}, not showing a QR code", st.as_str()),
                retryable: soon,
            }))
        }
    }
}

/// A phone pairing code for `phone` (normalized) from the running session.
pub async fn pairing_code(core: &Core, id: &InstanceId, phone: String) -> Result<String> {
    // No session runs: the instance is not in qr_pending, which is what the spec's
    // `instance_not_pairing` says (retryable: connect, then ask again).
    let v = crate::net::call(core, id, RpcRequest::PairingCode { phone }).await.map_err(|e| match e {
        Error::Refused { code: ErrorCode::InstanceNotConnected, message, .. } => Error::Refused {
            code: ErrorCode::InstanceNotPairing,
            message: format!("no pairing code outside qr_pending: {message}"),
            retryable: true,
        },
        e => e,
    })?;
    let code = v["pairing_code"].as_str().ok_or_else(|| Error::internal("pairing code reply without a code"))?;
    Ok(code.to_string())
}

/// Restarts the instance's session, or starts it when no worker runs it.
pub async fn restart_one(core: &Core, id: &InstanceId) -> Result<()> {
    match crate::net::call(core, id, RpcRequest::Restart).await {
        Ok(_) => Ok(()),
        Err(Error::Refused { code: ErrorCode::InstanceNotConnected, .. }) => start(core, id).await.map(drop),
        Err(e) => Err(e),
    }
}

/// Logs the instance out (its worker unlinks the device).
pub async fn logout_one(core: &Core, id: &InstanceId) -> Result<()> {
    crate::net::call(core, id, RpcRequest::Logout).await.map(drop)
}
