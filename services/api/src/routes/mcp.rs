//! `POST /mcp`: the MCP endpoint (`crate::mcp`). The route is here so the description
//! documents it; the protocol is `rmcp`'s, behind `crate::mcp::Endpoint`.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use shared::error::ErrorBody;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(mcp))
}

/// The MCP endpoint (Streamable HTTP, stateless)
///
/// One JSON-RPC message of the Model Context Protocol per request: `initialize`,
/// `notifications/initialized`, `ping`, `tools/list`, `tools/call`, `resources/list`,
/// `resources/read` (and `server/discover` for clients of protocol 2026-07-28). No
/// `Mcp-Session-Id`: every request is authenticated again. The client must accept both
/// `application/json` and `text/event-stream`; the answer is JSON, or an event stream when
/// a tool reports progress (`send_message` with `wait` and a `progressToken`).
///
/// `tools/list` shows each token the tools it may call: an instance token or key acts
/// only on its own instance, a `read_only` key sees the read tools, a `send_only` key the
/// send tools. A failing tool is a result with `isError` and the API's error code, not an
/// HTTP error. The tools and their schemas are listed in docs/mcp.md.
///
/// On a loopback listener, a `Host` or `Origin` that is not loopback nor the host of
/// `public_url` gets 403 (DNS rebinding protection). `GET` and `DELETE` answer 405.
#[utoipa::path(post, path = "/mcp", tag = "operation",
    request_body(content = crate::mcp::JsonRpcMessage, content_type = "application/json",
        description = "One JSON-RPC 2.0 message (request or notification)"),
    responses(
        (status = 200, description = "the JSON-RPC answer: `application/json`, or `text/event-stream` carrying progress notifications then the answer", content_type = "application/json", body = Object),
        (status = 202, description = "a notification, accepted"),
        (status = 400, description = "`validation_failed`: not a JSON-RPC message; or an unsupported `MCP-Protocol-Version`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: a Host or Origin refused on a loopback listener, or an address outside the token's allow-list", body = ErrorBody),
        (status = 406, description = "the client does not accept both `application/json` and `text/event-stream`"),
        (status = 413, description = "`media_too_large`: a message over 1 MiB", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`"),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn mcp(
    State(state): State<AppState>,
    endpoint: Option<Extension<crate::mcp::Endpoint>>,
    req: Request,
) -> Response {
    match endpoint {
        Some(Extension(endpoint)) => endpoint.handle(&state, req).await,
        // A tool's own request never reaches the endpoint again.
        None => ApiError::not_found("no such route").into_response(),
    }
}
