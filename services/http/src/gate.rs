//! The large-body gate: a POST /messages (or another body-heavy route) whose body is over
//! 1 MB (or of unknown length) takes one of the cluster's large-body slots
//! (`domain::slots`) before its body is read, and reads it within
//! `large_body.read_timeout_ms` (then 408 `request_timeout`), so a slow upload cannot keep
//! a slot. A send's `media.url` download takes its slot in `domain::send`.
//!
//! Each door gates its routes with the extractor that names the instance its way:
//! [`gate`] for `/v1`'s `{id}`, and a door of its own (Evolution's `{instanceName}`)
//! through [`admit`].

use std::future::Future;
use std::pin::Pin;

use axum::extract::{Extension, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::ids::InstanceId;
use shared::{ApiError, ErrorCode};

use crate::state::AppState;
use domain::slots::Slot;

/// How a door names the instance of a request (its caller checked), before the body is
/// read.
pub type Resolve =
    for<'a> fn(&'a mut Parts, &'a AppState) -> Pin<Box<dyn Future<Output = Result<InstanceId, ApiError>> + Send + 'a>>;

/// Bodies above this take a slot.
pub const LARGE_BODY: u64 = 1024 * 1024;
/// Marks a request that holds a large-body slot (the gate took it), so the handler does
/// not take a second one for a `media.url` download.
#[derive(Debug, Clone, Copy)]
pub struct SlotHeld;

/// A route's body limit when it is below the send route's 140 MB: the gate reads no more.
#[derive(Debug, Clone, Copy)]
pub struct BodyCap(pub usize);

/// Middleware on `/v1`'s body-heavy routes (POST messages and the like), whose path
/// names the instance as `{id}` (the state comes as an extension: the route's OpenAPI
/// description is built without one).
pub async fn gate(Extension(state): Extension<AppState>, req: Request, next: Next) -> Response {
    let resolve: Resolve = |parts, state| {
        Box::pin(async move { crate::extract::InstanceAccess::from_request_parts(parts, state).await.map(|a| a.id) })
    };
    admit(state, req, next, resolve, |e| e).await
}

/// The gate for a route whose instance `resolve` names; `refuse` maps what the body gets
/// (too large, too slow, no slot) to the door's answer. A refused caller gets what
/// `resolve` answered.
pub async fn admit(
    state: AppState,
    req: Request,
    next: Next,
    resolve: Resolve,
    refuse: fn(ApiError) -> ApiError,
) -> Response {
    let length =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let limit = req.extensions().get::<BodyCap>().map_or(domain::send::MESSAGES_BODY_LIMIT, |c| c.0);
    let too_large = || {
        let mb = limit.div_ceil(1024 * 1024);
        ApiError::new(ErrorCode::MediaTooLarge, format!("the body is over {mb} MB, or it broke off"))
    };

    let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
    let large = match length {
        Some(n) => n > LARGE_BODY,
        None => chunked,
    };
    if !large {
        return next.run(req).await;
    }
    // The caller first: a request without a valid token for this instance never holds
    // (or waits for) a slot.
    let (mut parts, body) = req.into_parts();
    let refuse = |e: ApiError| refuse(e).into_response();
    let id = match resolve(&mut parts, &state).await {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    // A body declared over the route's limit is refused before it waits for a slot.
    if length.is_some_and(|n| n > limit as u64) {
        return refuse(too_large());
    }
    let slot = match Slot::large_body(&state, &id).await {
        Ok(s) => s,
        Err(e) => return refuse(e.into()),
    };
    // The body within its deadline, or the slot goes back.
    let read = state.config.large_body.read_timeout;
    let bytes = match tokio::time::timeout(read, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => {
            slot.release().await;
            return refuse(too_large());
        }
        Err(_) => {
            slot.release().await;
            let e = ApiError::new(
                ErrorCode::RequestTimeout,
                format!("the body was not received within {} s", read.as_secs()),
            );
            return refuse(e);
        }
    };
    let mut req = Request::from_parts(parts, axum::body::Body::from(bytes));
    req.extensions_mut().insert(SlotHeld);
    let res = next.run(req).await;
    slot.release().await;
    res
}
