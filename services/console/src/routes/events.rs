//! The live events page, and its stream: the API's SSE of the instance passed through
//! with the session's token (never in the page), resuming after the browser's
//! `Last-Event-ID`; a stream ends at the session's absolute limit.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use domain::instances::InstanceOut;
use serde::Deserialize;
use shared::ids::InstanceId;

use super::{no_instance, page, refused, to_sign_in};
use crate::pages;
use crate::Console;

#[derive(Deserialize)]
pub struct TypesQuery {
    #[serde(default)]
    types: String,
}

/// A filter of event types as the API takes it: comma-separated names of lower-case
/// letters, dots and underscores (the API checks each against its catalog).
fn valid_types(t: &str) -> bool {
    t.len() <= 512 && t.bytes().all(|b| b.is_ascii_lowercase() || matches!(b, b'.' | b'_' | b','))
}

/// An event id as the API makes them: letters, digits, `_` and `-`.
fn valid_event_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

pub async fn events(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Query(q): Query<TypesQuery>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    let types = if valid_types(q.types.trim()) { q.types.trim() } else { "" };
    match c.api.get::<InstanceOut>(&s.token, &format!("/v1/instances/{id}"), &[]).await {
        Ok(i) => page(&c, &s, StatusCode::OK, pages::events((&s.who, &s.csrf), id.as_str(), &i.name, types)),
        Err(e) => refused(&c, &s, e),
    }
}

/// The stream itself (what the page's EventSource reads): the API's answer passed on as
/// it comes, or the API's status when it refuses.
pub async fn stream(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Query(q): Query<TypesQuery>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return StatusCode::UNAUTHORIZED.into_response() };
    let Ok(id) = InstanceId::parse(&raw) else { return StatusCode::NOT_FOUND.into_response() };
    if !valid_types(&q.types) {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok()).filter(|v| valid_event_id(v));
    let path = format!("/v1/instances/{id}/events");
    match c.api.stream(&s.token, &path, &[("types", q.types.as_str())], last).await {
        Ok(res) => {
            // The stream ends with the session: at its absolute limit (the browser's
            // reconnect then finds no session).
            let end = tokio::time::sleep(c.sessions.remaining(&s));
            let body = futures::StreamExt::take_until(res.bytes_stream(), end);
            (
                [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-store")],
                Body::from_stream(body),
            )
                .into_response()
        }
        Err(e) => StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_and_ids_reach_the_api() {
        assert!(valid_types("message.sent,instance.state"));
        assert!(valid_types(""));
        assert!(!valid_types("message.sent&x=1"));
        assert!(!valid_types(&"a".repeat(513)));
        assert!(valid_event_id("evt_01JABCDEF"));
        assert!(!valid_event_id("evt\r\nx: 1"));
        assert!(!valid_event_id(""));
    }
}
