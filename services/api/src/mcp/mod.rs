//! The MCP endpoint (`POST /mcp`): Model Context Protocol over Streamable HTTP, stateless,
//! served by the official Rust SDK (`rmcp`).
//!
//! - Every request is authenticated again from its `Authorization: Bearer` header (the
//!   admin token, an instance token or a restricted key) before `rmcp` sees it; no
//!   `Mcp-Session-Id` is issued.
//! - Each tool is one REST operation of `/v1` ([`tools::TOOLS`]). A tool call is an
//!   in-process request through the same router, with the caller's token: the same
//!   extractors, validation, scope checks, pacing and errors as the REST route.
//! - `tools/list` shows a token only the tools whose operation its access row
//!   (`routes::access`) lets it call.
//! - On a loopback listener, a `Host` or `Origin` that is not loopback (or the host of
//!   `public_url`) is refused with 403: DNS rebinding protection.
//! - [`stdio`] is `paceline mcp`: MCP over stdin/stdout forwarded to `POST /mcp`.

pub mod server;
pub mod stdio;
pub mod tools;

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use shared::ApiError;

use door::extract::{authenticate, bearer_of};
use door::AppState;

/// Tool calls answered, by tool and result (`ok` or the error code).
pub const TOOL_CALLS: &str = "paceline_mcp_tool_calls_total";
/// The largest MCP request body: one JSON-RPC message. Media over this size goes by
/// `media.url`.
pub const BODY_LIMIT: usize = door::BODY_LIMIT;

/// One JSON-RPC 2.0 message a client sends: a request (with `id`) or a notification.
/// Checked before the protocol sees it: anything else is 400 `validation_failed`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct JsonRpcMessage {
    /// `2.0`.
    #[schema(value_type = String, pattern = "^2\\.0$")]
    jsonrpc: JsonRpcVersion,
    /// `initialize`, `tools/list`, `tools/call`, ...
    #[schema(min_length = 1, max_length = 256)]
    method: String,
    /// A request's id (a notification has none).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    params: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The only JSON-RPC version.
#[derive(Debug, serde::Deserialize)]
enum JsonRpcVersion {
    #[serde(rename = "2.0")]
    V2,
}

impl JsonRpcMessage {
    fn check(bytes: &[u8]) -> Result<(), ApiError> {
        let m: JsonRpcMessage = shared::http::parse_json(bytes)?;
        let id_ok = match &m.id {
            None => true,
            Some(v) => v.is_string() || v.is_i64() || v.is_u64(),
        };
        if m.method.is_empty() || m.method.len() > 256 || !id_ok {
            return Err(ApiError::validation(
                "not a JSON-RPC request: a method, and an id that is a string or integer",
            ));
        }
        Ok(())
    }
}

/// The MCP service, mounted at `POST /mcp` through a request extension (it holds the
/// router its tools call, which cannot hold it back).
#[derive(Clone)]
pub struct Endpoint {
    service: StreamableHttpService<server::McpServer, LocalSessionManager>,
}

impl Endpoint {
    /// The endpoint whose tools call `api`: the router of every route, without the outer
    /// layers (request logs and metrics count the `/mcp` request once).
    pub fn new(state: AppState, api: Router) -> Endpoint {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)))
            .with_sse_retry(None)
            .with_max_request_body_bytes(BODY_LIMIT)
            // Host and Origin are checked before authentication, by `guard_host`: the
            // rule depends on the listener and on `public_url`.
            .disable_allowed_hosts()
            .disable_allowed_origins();
        let tools = Arc::new(tools::Catalog::build());
        let service = StreamableHttpService::new(
            move || Ok(server::McpServer::new(state.clone(), api.clone(), tools.clone())),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        Endpoint { service }
    }

    /// Serves one MCP request: host check, authentication, then the protocol.
    pub async fn handle(&self, state: &AppState, mut req: Request) -> Response {
        if let Err(e) = guard_host(state, req.headers()) {
            return e.into_response();
        }
        let (mut parts, body) = req.into_parts();
        let principal = match bearer_of(&parts.headers) {
            Some(token) => authenticate(token, &parts, state).await,
            None => Err(ApiError::unauthorized()),
        };
        let principal = match principal {
            Ok(p) => p,
            Err(e) => return e.into_response(),
        };
        parts.extensions.insert(principal);
        // A message, as the description declares it, before the protocol reads it: what
        // is not one is our envelope's 400 (or 413), not the SDK's answer.
        let json = parts
            .headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"));
        let body = if parts.method == axum::http::Method::POST && json {
            let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
                Ok(b) => b,
                Err(_) => {
                    let e = ApiError::new(shared::ErrorCode::MediaTooLarge, "an MCP message is at most 1 MiB");
                    return e.into_response();
                }
            };
            if let Err(e) = JsonRpcMessage::check(&bytes) {
                return e.into_response();
            }
            axum::body::Body::from(bytes)
        } else {
            body
        };
        req = Request::from_parts(parts, body);
        self.service.handle(req).await.map(axum::body::Body::new).into_response()
    }
}

/// DNS rebinding protection: on a loopback listener, `Host` (and `Origin`, when sent)
/// must name a loopback host or the host of `public_url`. A pod listening off loopback
/// sits behind its ingress, which routes by host.
pub fn guard_host(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if !state.config.listen_addr.ip().is_loopback() {
        return Ok(());
    }
    let public = state.config.public_url.as_ref().and_then(|u| u.host_str()).map(str::to_ascii_lowercase);
    let allowed = |host: &str| {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        host == "localhost"
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || public.as_deref() == Some(host.as_str())
    };
    let host = headers.get(axum::http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let host_name = url::Url::parse(&format!("http://{host}")).ok().and_then(|u| u.host_str().map(str::to_string));
    if !host_name.is_some_and(|h| allowed(&h)) {
        return Err(ApiError::forbidden(
            "the Host header names a host this loopback listener does not serve (DNS rebinding protection)",
        ));
    }
    if let Some(origin) = headers.get(axum::http::header::ORIGIN) {
        let origin_host =
            origin.to_str().ok().and_then(|o| url::Url::parse(o).ok()).and_then(|u| {
                matches!(u.scheme(), "http" | "https").then(|| u.host_str().map(str::to_string)).flatten()
            });
        if !origin_host.is_some_and(|h| allowed(&h)) {
            return Err(ApiError::forbidden(
                "the Origin header names a site this loopback listener does not serve (DNS rebinding protection)",
            ));
        }
    }
    Ok(())
}
