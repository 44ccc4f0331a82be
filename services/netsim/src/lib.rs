//! netsim: the simulated messaging network. Accounts (personal and business) and numbers
//! without one; QR codes that rotate and phone pairing codes; linking, logout and bans;
//! history sync on link; messages, receipts and calls; de-duplication by network message
//! id with a per-phone inbox and duplicate counter; fault injection.
//!
//! Workers connect over WebSocket (`/session`, protocol in `shared::simproto`); tests,
//! demos and load tests drive it through the control API (`/control/...`).

pub mod control;
pub mod model;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use shared::{ApiError, ErrorCode, Shutdown};
use tokio::net::TcpListener;

/// netsim's shared state.
#[derive(Clone)]
pub struct App {
    pub net: Arc<model::Net>,
    /// How often a shown QR code is replaced.
    pub qr_rotate: Duration,
}

/// The router: control API, session socket, health.
pub fn app(qr_rotate: Duration) -> Router {
    let state = App { net: Arc::new(model::Net::default()), qr_rotate };
    Router::new()
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }))
        .route("/session", get(session::upgrade))
        .merge(control::router())
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "no such route") })
        .layer(axum::extract::DefaultBodyLimit::max(1024 * 1024))
        .with_state(state)
}

/// Serves netsim on `listener` until `shutdown`.
pub async fn run(listener: TcpListener, qr_rotate: Duration, shutdown: Shutdown) -> anyhow::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "netsim listening");
    axum::serve(listener, app(qr_rotate)).with_graceful_shutdown(async move { shutdown.cancelled().await }).await?;
    Ok(())
}
