//! Cross-cutting layers: request ids and logs, metrics, the shutdown gate, panics.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::{ApiError, ErrorCode};

use crate::metrics::{HTTP_DURATION, HTTP_REQUESTS};
use crate::state::AppState;

/// The route template (`/v1/instances/{id}`), never the raw path: paths carry phone
/// numbers and JIDs, which must not reach logs or metric labels.
pub fn route_of(req: &Request) -> String {
    req.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string())
}

/// While the pod drains after SIGTERM, every request but the health probes gets 503.
pub async fn shutdown_gate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if state.shutdown.is_cancelled() && path != "/healthz" && path != "/readyz" {
        return ApiError::shutting_down().into_response();
    }
    next.run(req).await
}

/// Counts and times each request by route template and status.
pub async fn track(req: Request, next: Next) -> Response {
    let route = route_of(&req);
    let method = req.method().as_str().to_owned();
    let start = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    metrics::counter!(HTTP_REQUESTS, "route" => route.clone(), "method" => method.clone(), "status" => status)
        .increment(1);
    metrics::histogram!(HTTP_DURATION, "route" => route, "method" => method).record(start.elapsed().as_secs_f64());
    res
}

/// A panic in a handler becomes a plain 500 `internal`, with no details.
pub fn panic_response(_err: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("handler panicked");
    ApiError::new(ErrorCode::Internal, "internal error").into_response()
}
