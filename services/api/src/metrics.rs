//! The API's metrics, named in one place and described at start-up.

pub const HTTP_REQUESTS: &str = "paceline_http_requests_total";
pub const HTTP_DURATION: &str = "paceline_http_request_duration_seconds";
pub const SEMAPHORE_HOLDERS: &str = "paceline_semaphore_holders";
pub const SEMAPHORE_WAITERS: &str = "paceline_semaphore_waiters";
pub const MEDIA_QUOTA_REFUSED: &str = "paceline_media_quota_refused_total";
pub const EVENT_STREAMS: &str = "paceline_event_streams";
pub const EVENT_STREAMS_REFUSED: &str = "paceline_event_streams_refused_total";
pub use crate::mcp::TOOL_CALLS as MCP_TOOL_CALLS;

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

/// Serves `GET /metrics` on `listener` until `shutdown`: the process's recorder, whatever
/// roles it runs (the binary serves it for each).
pub async fn serve_metrics(listener: tokio::net::TcpListener, shutdown: shared::Shutdown) -> std::io::Result<()> {
    use axum::routing::get;
    let handle = shared::telemetry::prometheus();
    let app = axum::Router::new().route("/metrics", get(move || async move { handle.render() }));
    axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await }).await
}
