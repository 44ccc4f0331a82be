//! netsim: the simulated messaging network (accounts, pairing, messages, faults).
//!
//! This milestone provides the service shell: it listens where workers and tests will
//! reach it, answers `/healthz`, and answers every control route with 501
//! `not_implemented`. The simulation itself arrives with the worker/netsim issue.

use axum::routing::get;
use axum::Router;
use shared::{ApiError, Shutdown};
use tokio::net::TcpListener;

/// Serves netsim on `listener` until `shutdown`.
pub async fn run(listener: TcpListener, shutdown: Shutdown) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }))
        .nest("/control", Router::new().fallback(|| async { ApiError::not_implemented("the netsim control API") }))
        .fallback(|| async { ApiError::not_found("route") });
    tracing::info!(addr = %listener.local_addr()?, "netsim listening");
    axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await }).await?;
    Ok(())
}
