//! HTTP pieces every service with a JSON API shares: the body extractor whose
//! rejections are error envelopes (the parsing itself is [`crate::json`]).

use axum::extract::{FromRequest, Request};
use bytes::Bytes;
use serde::de::DeserializeOwned;

pub use crate::json::{integral, parse_json, parse_json_or_default, sanitize_serde_message};
use crate::ApiError;

/// A JSON body parsed whatever the Content-Type, with 400 `validation_failed` for
/// malformed JSON or wrong fields and 413 `media_too_large` over the route's body limit.
pub struct ValidatedJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ValidatedJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(crate::ErrorCode::MediaTooLarge, "request body is larger than this route accepts")
            } else {
                ApiError::validation("request body could not be read")
            }
        })?;
        parse_json(&bytes).map(ValidatedJson)
    }
}
