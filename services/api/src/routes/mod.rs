//! The server's own routes (the description and `/docs`, the MCP endpoint), and the
//! answers for routes no door has.

pub mod mcp;
pub mod openapi;

use axum::http::Method;
use shared::{ApiError, ErrorCode};

/// Unknown routes get the envelope too.
pub async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

/// Known routes called with another method.
pub async fn method_not_allowed(method: Method) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("method {method} is not allowed on this route"))
}
