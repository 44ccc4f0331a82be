//! Cross-cutting layers: request ids and logs, metrics, the shutdown gate, panics.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::{ApiError, ErrorCode};

use crate::metrics::{HTTP_DURATION, HTTP_REQUESTS};
use door::AppState;

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

/// The longest `X-Request-Id` taken.
pub const REQUEST_ID_MAX: usize = 200;

/// Refuses an `X-Request-Id` of more than [`REQUEST_ID_MAX`] characters or with anything
/// but printable ASCII (400 `validation_failed`): it is written into every log line of
/// the request, and a caller's bytes never reach a log unbounded.
pub async fn request_id_check(req: Request, next: Next) -> Response {
    let ok =
        req.headers().get_all(&crate::REQUEST_ID).iter().enumerate().all(|(i, v)| {
            i == 0 && v.len() <= REQUEST_ID_MAX && v.as_bytes().iter().all(|b| (b' '..=b'~').contains(b))
        });
    if !ok {
        return ApiError::validation(format!(
            "X-Request-Id must be one value of at most {REQUEST_ID_MAX} printable ASCII characters"
        ))
        .into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    async fn status(values: &[&[u8]]) -> u16 {
        let app = axum::Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(axum::middleware::from_fn(super::request_id_check));
        let mut req = axum::http::Request::builder().uri("/");
        for v in values {
            req = req.header("x-request-id", axum::http::HeaderValue::from_bytes(v).unwrap());
        }
        app.oneshot(req.body(Body::empty()).unwrap()).await.unwrap().status().as_u16()
    }

    #[tokio::test]
    async fn request_ids_are_bounded_printable_ascii() {
        assert_eq!(status(&[]).await, 200);
        assert_eq!(status(&[b""]).await, 200);
        assert_eq!(status(&[b"req-1 a/b"]).await, 200);
        assert_eq!(status(&[&[b'a'; 200]]).await, 200);
        assert_eq!(status(&[&[b'a'; 201]]).await, 400);
        assert_eq!(status(&[b"caf\xe9"]).await, 400);
        assert_eq!(status(&[b"a\tb"]).await, 400);
        assert_eq!(status(&[b"a", b"b"]).await, 400);
    }
}
