//! The one error type at the HTTP edge. [`ErrorCode`] is the closed list of codes from
//! interface.md part 7 (plus `method_not_allowed`, `not_implemented`, `request_timeout`
//! and `quota_exceeded`); each code knows
//! its HTTP status and default `retryable`. Internal causes are logged, never sent.

use http::StatusCode;
use serde::{Deserialize, Serialize};

/// A stable error code; clients handle this, not the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    ValidationFailed,
    InvalidNumber,
    Unauthorized,
    Forbidden,
    InstanceNotFound,
    NotFound,
    MethodNotAllowed,
    Conflict,
    BusinessAccountRequired,
    InstanceNotConnected,
    InstanceBanned,
    InstanceNotPairing,
    MediaUnavailable,
    MessageExpired,
    MediaTooLarge,
    MediaFetchFailed,
    /// A request body was not sent within its deadline (408).
    RequestTimeout,
    /// The instance's share of something all tenants share (stored media) is used up.
    QuotaExceeded,
    RateLimited,
    WorkerError,
    WorkerTimeout,
    ShuttingDown,
    Internal,
}

impl ErrorCode {
    /// Every code, for documentation and exhaustive tests.
    pub const ALL: [ErrorCode; 23] = [
        ErrorCode::ValidationFailed,
        ErrorCode::InvalidNumber,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::InstanceNotFound,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::BusinessAccountRequired,
        ErrorCode::InstanceNotConnected,
        ErrorCode::InstanceBanned,
        ErrorCode::InstanceNotPairing,
        ErrorCode::MediaUnavailable,
        ErrorCode::MessageExpired,
        ErrorCode::MediaTooLarge,
        ErrorCode::MediaFetchFailed,
        ErrorCode::RequestTimeout,
        ErrorCode::QuotaExceeded,
        ErrorCode::RateLimited,
        ErrorCode::WorkerError,
        ErrorCode::WorkerTimeout,
        ErrorCode::ShuttingDown,
        ErrorCode::Internal,
    ];

    /// The wire form, e.g. `validation_failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ValidationFailed => "validation_failed",
            ErrorCode::InvalidNumber => "invalid_number",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::InstanceNotFound => "instance_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::BusinessAccountRequired => "business_account_required",
            ErrorCode::InstanceNotConnected => "instance_not_connected",
            ErrorCode::InstanceBanned => "instance_banned",
            ErrorCode::InstanceNotPairing => "instance_not_pairing",
            ErrorCode::MediaUnavailable => "media_unavailable",
            ErrorCode::MessageExpired => "message_expired",
            ErrorCode::MediaTooLarge => "media_too_large",
            ErrorCode::MediaFetchFailed => "media_fetch_failed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::WorkerError => "worker_error",
            ErrorCode::WorkerTimeout => "worker_timeout",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status from the spec's table. `rate_limited` is 429 here; the large-body
    /// semaphore's give-up answers 503 through [`ApiError::with_status`].
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::ValidationFailed | ErrorCode::InvalidNumber => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::InstanceNotFound | ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::Conflict
            | ErrorCode::BusinessAccountRequired
            | ErrorCode::InstanceNotConnected
            | ErrorCode::InstanceBanned
            | ErrorCode::InstanceNotPairing => StatusCode::CONFLICT,
            ErrorCode::MediaUnavailable | ErrorCode::MessageExpired => StatusCode::GONE,
            ErrorCode::MediaTooLarge | ErrorCode::QuotaExceeded => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::MediaFetchFailed => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::WorkerError => StatusCode::BAD_GATEWAY,
            ErrorCode::WorkerTimeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The default `retryable` flag. Codes marked "depends" in the spec take the value of
    /// their common case (`instance_not_connected`: no worker yet, so true;
    /// `instance_not_pairing`: already connected, so false) and are overridden per use.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::InstanceNotConnected
                | ErrorCode::MediaFetchFailed
                | ErrorCode::RequestTimeout
                | ErrorCode::RateLimited
                | ErrorCode::WorkerError
                | ErrorCode::WorkerTimeout
                | ErrorCode::ShuttingDown
                | ErrorCode::Internal
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error envelope's body: `{ "error": { "code", "message", "retryable" } }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The inside of the error envelope.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// Stable code; clients handle this.
    pub code: ErrorCode,
    /// English text for humans; never carries phone numbers or tokens.
    pub message: String,
    /// True when retrying later, with a wait, may succeed.
    pub retryable: bool,
    /// The request field at fault, when a `validation_failed` is about one: its name in
    /// the body or query, dotted inside objects (`settings.msg_call`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub field: Option<String>,
}

/// An error answered to a client. Build it from a code and a message that is safe to show.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
    pub status: StatusCode,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
    /// Methods for an `Allow` header (405).
    pub allow: Option<String>,
    /// The request field at fault (`error.field`).
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retryable: code.retryable(),
            status: code.status(),
            retry_after: None,
            allow: None,
            field: None,
        }
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationFailed, message)
    }

    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "a valid bearer token is required")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    pub fn instance_not_found() -> Self {
        Self::new(ErrorCode::InstanceNotFound, "instance not found")
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn shutting_down() -> Self {
        Self::new(ErrorCode::ShuttingDown, "the server is shutting down; retry on another pod")
    }

    /// An unexpected failure: the cause is logged here, the client sees only `internal`.
    #[track_caller]
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        let at = std::panic::Location::caller();
        tracing::error!(error = %cause, at = %at, "internal error");
        Self::new(ErrorCode::Internal, "internal error")
    }

    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Names the request field at fault.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message.clone(),
                retryable: self.retryable,
                field: self.field.clone(),
            },
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

impl From<sqlx::Error> for ApiError {
    #[track_caller]
    fn from(e: sqlx::Error) -> Self {
        ApiError::internal(format_args!("database: {e}"))
    }
}

impl From<deadpool_redis::PoolError> for ApiError {
    #[track_caller]
    fn from(e: deadpool_redis::PoolError) -> Self {
        ApiError::internal(format_args!("redis pool: {e}"))
    }
}

impl From<deadpool_redis::redis::RedisError> for ApiError {
    #[track_caller]
    fn from(e: deadpool_redis::redis::RedisError) -> Self {
        ApiError::internal(format_args!("redis: {e}"))
    }
}

#[cfg(feature = "http")]
impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        use http::{header, HeaderValue};
        let mut res = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if let Some(allow) = self.allow.as_deref().and_then(|a| HeaderValue::from_str(a).ok()) {
            res.headers_mut().insert(header::ALLOW, allow);
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_spec_table() {
        let table = [
            ("validation_failed", 400, false),
            ("invalid_number", 400, false),
            ("unauthorized", 401, false),
            ("forbidden", 403, false),
            ("instance_not_found", 404, false),
            ("not_found", 404, false),
            ("conflict", 409, false),
            ("instance_not_connected", 409, true),
            ("instance_banned", 409, false),
            ("media_unavailable", 410, false),
            ("message_expired", 410, false),
            ("media_too_large", 413, false),
            ("media_fetch_failed", 422, true),
            ("rate_limited", 429, true),
            ("worker_error", 502, true),
            ("worker_timeout", 504, true),
            ("shutting_down", 503, true),
            ("internal", 500, true),
        ];
        for (name, status, retryable) in table {
            let code = ErrorCode::ALL.into_iter().find(|c| c.as_str() == name).unwrap();
            assert_eq!(code.status().as_u16(), status, "{name}");
            assert_eq!(code.retryable(), retryable, "{name}");
            assert_eq!(serde_json::to_value(code).unwrap(), name);
        }
    }

    #[cfg(feature = "http")]
    #[tokio::test]
    async fn internal_errors_hide_their_cause() {
        use axum::response::IntoResponse;
        let res = ApiError::internal("password=hunter2 in connection string").into_response();
        assert_eq!(res.status(), 500);
        let body = axum::body::to_bytes(res.into_body(), 1 << 16).await.unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(!text.contains("hunter2"));
        assert!(text.contains("\"retryable\":true"));
    }
}
