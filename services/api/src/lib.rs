//! paceline's stateless HTTP API: the server that mounts every HTTP door (`/v1` from
//! `paceline-v1`, Evolution's routes from `paceline-evolution`), MCP over them, and the
//! one OpenAPI description of it all. Any pod answers any request: state lives in
//! Postgres, live-session operations go to the owning worker over NATS.
//!
//! `run(config, listener, shutdown)` is the whole service; the `paceline` binary and the
//! tests start it the same way.

pub mod mcp;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod routes;

use std::future::IntoFuture;
use std::net::SocketAddr;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request};
use axum::Router;
use shared::{Config, Shutdown};
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

pub use door::{access, AppState};
use utoipa_axum::router::OpenApiRouter;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Connects to the backends and serves until `shutdown`, then drains.
pub async fn run(mut config: Config, listener: TcpListener, shutdown: Shutdown) -> anyhow::Result<()> {
    // The address actually bound (port 0 picks one): signed media URLs point at it.
    config.listen_addr = listener.local_addr()?;
    let state = AppState::connect(config, shutdown).await?;
    serve(state, listener).await
}

/// The router with every layer. `/mcp` tools call [`routes_only`] (the same routes with
/// the inner layers), so a tool call is logged and counted once, as its `/mcp` request.
pub fn app(state: AppState) -> Router {
    let api = routes_only(state.clone());
    let mcp = mcp::Endpoint::new(state.clone(), api.clone());
    let trace = TraceLayer::new_for_http()
        .make_span_with(|req: &Request<_>| {
            let request_id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
            let route = req.extensions().get::<axum::extract::MatchedPath>().map_or("unmatched", |p| p.as_str());
            tracing::info_span!("request", method = %req.method(), route, request_id)
        })
        .on_request(())
        .on_response(DefaultOnResponse::new().level(Level::INFO));
    let cors = cors(&state.config.api.cors_allowed_origins);
    let app = api
        .layer(axum::Extension(mcp))
        .layer(axum::middleware::from_fn_with_state(state, middleware::shutdown_gate))
        .layer(axum::middleware::from_fn(middleware::track))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(trace)
                .layer(PropagateRequestIdLayer::new(REQUEST_ID)),
        )
        .layer(axum::middleware::from_fn(middleware::request_id_check));
    match cors {
        Some(cors) => app.layer(cors),
        None => app,
    }
}

/// Browsers' cross-origin calls from `origins` (`api.cors_allowed_origins`; `*` for any),
/// answered before anything else (a preflight carries no token); none when empty.
/// Credentials are never allowed: tokens travel in headers.
fn cors(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{header, HeaderName, HeaderValue, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("apikey"),
                HeaderName::from_static("x-api-key"),
                HeaderName::from_static("idempotency-key"),
                HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([header::RETRY_AFTER, HeaderName::from_static("x-request-id"), header::LOCATION])
            .max_age(std::time::Duration::from_secs(3600)),
    )
}

/// Every route with the layers each request needs (state, body limit, panics), and none
/// of the per-connection ones.
pub fn routes_only(state: AppState) -> Router {
    let (router, _) = all().split_for_parts();
    router
        .merge(routes::openapi::docs())
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::Extension(state.clone()))
        .layer(DefaultBodyLimit::max(door::BODY_LIMIT))
        .layer(CatchPanicLayer::custom(middleware::panic_response))
        .with_state(state)
}

/// Every door's routes, with the description: `/v1`, Evolution's, and the server's own
/// (the description, MCP). No door mounts another; they meet here.
pub fn all() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(v1::router())
        .merge(evolution::router())
        .merge(routes::mcp::router())
        .merge(routes::openapi::router())
}

/// Serves `state` on `listener`. On shutdown: answers 503 `shutting_down` for
/// `api.drain_ms`, then stops accepting and gives in-flight requests `api.shutdown_timeout_ms`.
pub async fn serve(state: AppState, listener: TcpListener) -> anyhow::Result<()> {
    metrics::describe();
    let drain = state.config.api.drain;
    let grace = state.config.api.shutdown_timeout;
    let shutdown = state.shutdown.clone();
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "api listening");
    let counts = state.clone();
    tokio::spawn(door::usage::RequestCounts::run(state.clone()));
    let server = axum::serve(listener, app(state).into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown({
            let shutdown = shutdown.clone();
            async move {
                shutdown.cancelled().await;
                tracing::info!(drain_ms = drain.as_millis() as u64, "draining");
                tokio::time::sleep(drain).await;
            }
        });
    tokio::select! {
        res = server.into_future() => res?,
        _ = async { shutdown.cancelled().await; tokio::time::sleep(drain + grace).await } => {
            tracing::warn!("shutdown timeout reached; closing remaining requests");
        }
    }
    // What this pod counted since its last flush.
    counts.requests.flush(&counts.db).await;
    tracing::info!("api stopped");
    Ok(())
}
