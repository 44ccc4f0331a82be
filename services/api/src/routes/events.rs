//! The real-time event stream: Server-Sent Events of one instance (`{inst}/events`) or of
//! all (`/v1/events`, admin), read from the JetStream events stream by an ordered
//! consumer. Each item's `id` is its event id; a client that reconnects with
//! `Last-Event-ID` resumes right after that event (its stream sequence is recorded in
//! the outbox when published), with no gap and no repeat, for as long as the stream keeps
//! events (`shared::bus::EVENTS_RETENTION`, 7 days).

use std::convert::Infallible;
use std::time::Duration;

use async_nats::jetstream::consumer::{push, DeliverPolicy};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use shared::db::outbox;
use shared::error::ErrorBody;
use shared::ids::{EventId, InstanceId};
use shared::{ApiError, ErrorCode};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::catalog::Event;
use crate::extract::{Admin, InstanceAccess, ValidatedQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(instance_events)).routes(routes!(all_events))
}

/// How long a resume waits for the relay to publish the `Last-Event-ID` event (it can
/// only have been seen once published, but its sequence is recorded just after).
const RESUME_WAIT: Duration = Duration::from_secs(5);
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Query of the event stream routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Comma-separated event types to receive (default: all).
    pub types: Option<String>,
    /// Resume after this event, for clients that cannot set the `Last-Event-ID` header.
    pub last_event_id: Option<String>,
}

fn parse_types(raw: Option<&str>) -> Result<Vec<String>, ApiError> {
    let mut types: Vec<String> =
        raw.unwrap_or("").split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect();
    if types.iter().any(|t| !shared::events::known(t)) {
        return Err(ApiError::validation("types must be event types of the catalog (see the OpenAPI description)"));
    }
    types.sort();
    types.dedup();
    Ok(types)
}

/// Where to start: after `Last-Event-ID` (header first, then query), or with new events.
async fn start_policy(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
    instance: Option<&InstanceId>,
) -> Result<(DeliverPolicy, Option<u64>), ApiError> {
    let raw =
        headers.get("last-event-id").and_then(|v| v.to_str().ok()).or(query).map(str::trim).filter(|s| !s.is_empty());
    let Some(raw) = raw else { return Ok((DeliverPolicy::New, None)) };
    let bad = || ApiError::validation("Last-Event-ID is not an event of this stream");
    let id = EventId::parse(raw).map_err(|_| bad())?;
    let deadline = tokio::time::Instant::now() + RESUME_WAIT;
    loop {
        match outbox::stream_seq(&state.db, &id, instance).await? {
            // Pruned with the stream's retention: start at the oldest event kept, and say
            // that some were missed (the gap comment).
            None if id.made_at().is_some_and(|t| t < chrono::Utc::now() - shared::bus::EVENTS_RETENTION) => {
                return Ok((DeliverPolicy::All, Some(0)));
            }
            None => return Err(bad()),
            Some(Some(seq)) => {
                let next = seq as u64 + 1;
                return Ok((DeliverPolicy::ByStartSequence { start_sequence: next }, Some(next)));
            }
            Some(None) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Some(None) => return Err(ApiError::new(ErrorCode::WorkerTimeout, "the event is not published yet; retry")),
        }
    }
}

async fn open(
    state: AppState,
    headers: HeaderMap,
    q: StreamQuery,
    instance: Option<InstanceId>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let types = parse_types(q.types.as_deref())?;
    let (policy, resume_at) = start_policy(&state, &headers, q.last_event_id.as_deref(), instance.as_ref()).await?;
    let unavailable = |_| ApiError::new(ErrorCode::WorkerTimeout, "the event stream is unavailable; retry");
    let js = async_nats::jetstream::new(state.nats.clone());
    let mut stream = shared::bus::ensure_events_stream(&js, &state.subjects).await.map_err(unavailable)?;
    let inst = instance.as_ref().map(|i| i.as_str());
    let filter_subjects = if types.is_empty() {
        vec![state.subjects.events_filter(inst, None)]
    } else {
        types.iter().map(|t| state.subjects.events_filter(inst, Some(t))).collect()
    };
    // Events before the resume point that the stream no longer keeps: say so first.
    let gap = match resume_at {
        Some(next) => stream.info().await.map(|i| i.state.first_sequence > next).unwrap_or(false),
        None => false,
    };
    let consumer = stream
        .create_consumer(push::OrderedConfig {
            deliver_subject: state.nats.new_inbox(),
            filter_subjects,
            deliver_policy: policy,
            ..Default::default()
        })
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let messages = consumer.messages().await.map_err(|e| unavailable(e.to_string()))?;
    let first = gap.then(|| Ok(SseEvent::default().comment("some events after Last-Event-ID are no longer retained")));
    let items = messages.take_while(|m| std::future::ready(m.is_ok())).filter_map(|m| async move {
        let m = m.ok()?;
        let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
        let id = v.get("id")?.as_str()?.to_string();
        let kind = v.get("type")?.as_str()?.to_string();
        let data = std::str::from_utf8(&m.payload).ok()?.to_string();
        Some(Ok(SseEvent::default().id(id).event(kind).data(data)))
    });
    let stream = futures::stream::iter(first).chain(items).take_until(state.shutdown.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// The instance's events as they happen (Server-Sent Events). Each item: `id` the event
/// id, `event` its type, `data` the event JSON. Reconnect with `Last-Event-ID` (or
/// `?last_event_id=`) to resume after that event with nothing missed or repeated, within
/// the 7-day retention.
#[utoipa::path(get, path = "/v1/instances/{id}/events", tag = "events",
    params(("id" = InstanceId, Path, description = "instance id"), StreamQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "resume after this event")),
    responses(
        (status = 200, description = "an endless `text/event-stream`; each item's data is an event", content_type = "text/event-stream", body = Event),
        (status = 400, description = "`validation_failed`: unknown type, or a Last-Event-ID that is not this stream's", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`: the event stream is unavailable for now; retry", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn instance_events(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    headers: HeaderMap,
    ValidatedQuery(q): ValidatedQuery<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    shared::db::instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    open(state, headers, q, Some(id)).await
}

/// Every instance's events as they happen (admin). Same format and resume as the
/// instance stream.
#[utoipa::path(get, path = "/v1/events", tag = "events",
    params(StreamQuery, ("Last-Event-ID" = Option<String>, Header, description = "resume after this event")),
    responses(
        (status = 200, description = "an endless `text/event-stream`; each item's data is an event", content_type = "text/event-stream", body = Event),
        (status = 400, description = "`validation_failed`: unknown type, or an unknown Last-Event-ID", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: admin only", body = ErrorBody),
        (status = 504, description = "`worker_timeout`: the event stream is unavailable for now; retry", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn all_events(
    State(state): State<AppState>,
    _admin: Admin,
    headers: HeaderMap,
    ValidatedQuery(q): ValidatedQuery<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    open(state, headers, q, None).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn types_are_checked_against_the_catalog() {
        assert_eq!(super::parse_types(None).unwrap(), Vec::<String>::new());
        assert_eq!(
            super::parse_types(Some("message.sent, message.queued,message.sent")).unwrap(),
            ["message.queued", "message.sent"]
        );
        assert!(super::parse_types(Some("message.sent,nope")).is_err());
    }
}
