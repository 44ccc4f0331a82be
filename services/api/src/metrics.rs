//! The API's metrics, named in one place and described at start-up.

pub const HTTP_REQUESTS: &str = "paceline_http_requests_total";
pub const HTTP_DURATION: &str = "paceline_http_request_duration_seconds";
pub use crate::mcp::TOOL_CALLS as MCP_TOOL_CALLS;
pub use domain::send::MEDIA_QUOTA_REFUSED;
pub use domain::slots::{HOLDERS as SEMAPHORE_HOLDERS, WAITERS as SEMAPHORE_WAITERS};
pub use v1::routes::events::{EVENT_STREAMS, EVENT_STREAMS_REFUSED};

/// Installs the process's recorder (if not yet) and describes the API's metrics.
pub fn describe() {
    shared::telemetry::prometheus();
    metrics::describe_counter!(HTTP_REQUESTS, "HTTP requests answered, by route template, method and status");
    metrics::describe_gauge!(SEMAPHORE_HOLDERS, "large-body send slots held by this pod");
    metrics::describe_gauge!(SEMAPHORE_WAITERS, "large-body sends of this pod waiting for a slot");
    metrics::describe_counter!(
        MEDIA_QUOTA_REFUSED,
        "media refused because its instance's media quota was used up, by source (sent, received)"
    );
    metrics::describe_gauge!(EVENT_STREAMS, "event streams (SSE) open on this pod");
    metrics::describe_counter!(EVENT_STREAMS_REFUSED, "event streams refused, by limit (instance, pod)");
    metrics::describe_counter!(MCP_TOOL_CALLS, "MCP tool calls, by tool and result (ok, or the error code)");
    metrics::describe_histogram!(
        HTTP_DURATION,
        metrics::Unit::Seconds,
        "HTTP request latency by route template and method"
    );
}

/// Serves the metrics listener until `shutdown`: `GET /metrics` (the process's recorder,
/// whatever roles it runs), and the probes kubelet calls without a token: `GET /healthz`
/// (200 while the process runs) and `GET /readyz` (200 once every one of `roles` has
/// started and its backends answer; 503 before, and from the start of shutdown, so an
/// API pod leaves its Service while it drains). It serves until `until`, which the binary
/// cancels once its roles have stopped, so probes and metrics answer through the drain.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    roles: Vec<&'static str>,
    shutdown: shared::Shutdown,
    until: shared::Shutdown,
) -> std::io::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let handle = shared::telemetry::prometheus();
    tokio::spawn(shared::health::watch(roles.clone(), std::time::Duration::from_secs(5), until.clone()));
    let stopping = shutdown.clone();
    let readyz = move || {
        let (roles, stopping) = (roles.clone(), stopping.clone());
        async move {
            let states = shared::health::readiness(&roles).await;
            let ready = !stopping.is_cancelled() && states.iter().all(|(_, s)| *s == Some(true));
            let checks: serde_json::Map<String, serde_json::Value> = states
                .into_iter()
                .map(|(role, s)| (role.to_string(), s.map_or("starting", |ok| if ok { "ok" } else { "down" }).into()))
                .collect();
            let status = if stopping.is_cancelled() {
                "shutting_down"
            } else if ready {
                "ready"
            } else {
                "unready"
            };
            let code = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
            (code, axum::Json(serde_json::json!({ "status": status, "checks": checks })))
        }
    };
    let app = axum::Router::new()
        .route("/metrics", get(move || async move { handle.render() }))
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }))
        .route("/readyz", get(readyz));
    axum::serve(listener, app).with_graceful_shutdown(async move { until.cancelled().await }).await
}
