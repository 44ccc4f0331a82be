//! The core's error: what went wrong in domain terms, with the interface's stable code
//! where one applies. Doors map it to their envelope: `/v1` through
//! `From<Error> for ApiError` (status and body), Evolution's routes from there to
//! theirs. Messages are safe to show: no phone numbers, no tokens; internal causes are
//! logged where they arise and shown as `internal` only.

use shared::{ApiError, ErrorCode};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The input breaks an operation's rule (`validation_failed`).
    #[error("{0}")]
    Invalid(String),
    /// One field of the input breaks its rule (`validation_failed` naming `field`).
    #[error("{message}")]
    InvalidField { field: String, message: String },
    /// The caller may not do this (`forbidden`).
    #[error("{0}")]
    Forbidden(String),
    /// The instance does not exist (`instance_not_found`).
    #[error("instance not found")]
    InstanceNotFound,
    /// Something the operation names does not exist (`not_found`).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A per-instance cap is used up; it frees in `retry_after` seconds (`rate_limited`).
    #[error("{message}")]
    RateLimited { message: String, retry_after: u64 },
    /// An account's quota is used up (`quota_exceeded`): 403 for what it holds, 429 with
    /// `Retry-After` (seconds to midnight UTC) for a daily one.
    #[error("{message}")]
    Quota { message: String, retry_after: Option<u64> },
    /// What all tenants share is busy for now; try again in `retry_after` seconds (503
    /// `rate_limited`).
    #[error("{message}")]
    Busy { message: String, retry_after: u64 },
    /// Refused for the state things are in, or failed on the way (the worker, the
    /// network), with the interface's code: `conflict`, `instance_not_connected`,
    /// `worker_timeout`, `invalid_number` and the like.
    #[error("{code}: {message}")]
    Refused { code: ErrorCode, message: String, retryable: bool },
    /// An unexpected failure, logged where it happened.
    #[error("internal error")]
    Internal,
}

impl Error {
    /// A refusal with `code`'s default `retryable`.
    pub fn refused(code: ErrorCode, message: impl Into<String>) -> Error {
        Error::Refused { code, message: message.into(), retryable: code.retryable() }
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid(message.into())
    }

    /// `field` of the request breaks its rule.
    pub fn field(field: &str, message: impl Into<String>) -> Error {
        Error::InvalidField { field: field.into(), message: message.into() }
    }

    pub fn forbidden(message: impl Into<String>) -> Error {
        Error::Forbidden(message.into())
    }

    /// Logs `cause` here (with the caller's place) and answers `internal`.
    #[track_caller]
    pub fn internal(cause: impl std::fmt::Display) -> Error {
        let at = std::panic::Location::caller();
        tracing::error!(error = %cause, at = %at, "internal error");
        Error::Internal
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        match e {
            Error::Invalid(m) => ApiError::validation(m),
            Error::InvalidField { field, message } => ApiError::validation(message).with_field(field),
            Error::Forbidden(m) => ApiError::forbidden(m),
            Error::InstanceNotFound => ApiError::instance_not_found(),
            Error::NotFound(what) => ApiError::not_found(what),
            Error::RateLimited { message, retry_after } => {
                ApiError::new(ErrorCode::RateLimited, message).with_retry_after(retry_after)
            }
            Error::Quota { message, retry_after: None } => {
                ApiError::new(ErrorCode::QuotaExceeded, message).with_status(ErrorCode::Forbidden.status())
            }
            Error::Quota { message, retry_after: Some(s) } => ApiError::new(ErrorCode::QuotaExceeded, message)
                .with_status(ErrorCode::RateLimited.status())
                .with_retryable(true)
                .with_retry_after(s),
            Error::Busy { message, retry_after } => ApiError::new(ErrorCode::RateLimited, message)
                .with_status(ErrorCode::ShuttingDown.status())
                .with_retry_after(retry_after),
            Error::Refused { code, message, retryable } => ApiError::new(code, message).with_retryable(retryable),
            Error::Internal => ApiError::new(ErrorCode::Internal, "internal error"),
        }
    }
}

/// Errors of the shared layer (the worker's reply, storage helpers) in the core's terms.
/// The HTTP-only parts (a status override, `Allow`) have no meaning here and are dropped.
impl From<ApiError> for Error {
    fn from(e: ApiError) -> Error {
        match e.code {
            ErrorCode::ValidationFailed => match e.field {
                Some(field) => Error::InvalidField { field, message: e.message },
                None => Error::Invalid(e.message),
            },
            ErrorCode::Forbidden => Error::Forbidden(e.message),
            ErrorCode::InstanceNotFound => Error::InstanceNotFound,
            ErrorCode::RateLimited if e.status == ErrorCode::ShuttingDown.status() => {
                Error::Busy { message: e.message, retry_after: e.retry_after.unwrap_or(1) }
            }
            ErrorCode::RateLimited => {
                Error::RateLimited { message: e.message, retry_after: e.retry_after.unwrap_or(1) }
            }
            ErrorCode::QuotaExceeded if e.status == ErrorCode::Forbidden.status() => {
                Error::Quota { message: e.message, retry_after: None }
            }
            ErrorCode::QuotaExceeded if e.status == ErrorCode::RateLimited.status() => {
                Error::Quota { message: e.message, retry_after: Some(e.retry_after.unwrap_or(1)) }
            }
            // Already logged where it was made.
            ErrorCode::Internal => Error::Internal,
            code => Error::Refused { code, message: e.message, retryable: e.retryable },
        }
    }
}

impl From<sqlx::Error> for Error {
    #[track_caller]
    fn from(e: sqlx::Error) -> Error {
        Error::internal(format_args!("database: {e}"))
    }
}

impl From<deadpool_redis::PoolError> for Error {
    #[track_caller]
    fn from(e: deadpool_redis::PoolError) -> Error {
        Error::internal(format_args!("redis pool: {e}"))
    }
}

impl From<deadpool_redis::redis::RedisError> for Error {
    #[track_caller]
    fn from(e: deadpool_redis::redis::RedisError) -> Error {
        Error::internal(format_args!("redis: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code survives the trip through the shared layer's error and back, with its
    /// message, `retryable` and `Retry-After`: a door shows what the core decided.
    #[test]
    fn codes_round_trip_through_api_error() {
        for code in ErrorCode::ALL {
            let api = ApiError::new(code, "a message").with_retryable(!code.retryable()).with_retry_after(7);
            let back = ApiError::from(Error::from(api.clone()));
            assert_eq!(back.code, code);
            assert_eq!(back.status, code.status(), "{code}");
            match code {
                ErrorCode::Internal => assert_eq!(back.message, "internal error"),
                ErrorCode::InstanceNotFound => assert_eq!(back.message, "instance not found"),
                _ => assert_eq!(back.message, "a message", "{code}"),
            }
            if !matches!(
                code,
                ErrorCode::ValidationFailed
                    | ErrorCode::Forbidden
                    | ErrorCode::InstanceNotFound
                    | ErrorCode::RateLimited
                    | ErrorCode::Internal
            ) {
                assert_eq!(back.retryable, !code.retryable(), "{code}");
            }
            assert_eq!(back.retry_after.is_some(), code == ErrorCode::RateLimited, "{code}");
        }
    }

    #[test]
    fn not_found_names_what() {
        let e = ApiError::from(Error::NotFound("label"));
        assert_eq!((e.code, e.message.as_str()), (ErrorCode::NotFound, "label not found"));
    }
}
