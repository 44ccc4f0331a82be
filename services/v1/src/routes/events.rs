//! The real-time event stream: Server-Sent Events of one instance (`{inst}/events`), of
//! an account's instances (`/v1/accounts/{account_id}/events`), or of all (`/v1/events`, admin),
//! read from the JetStream events stream by an ordered consumer. Each item's `id` is its event id; a client that reconnects with
//! `Last-Event-ID` resumes right after that event (its stream sequence is recorded in
//! the outbox when published), with no gap and no repeat, for as long as the stream keeps
//! events (`shared::bus::EVENTS_RETENTION`, 7 days).

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::consumer::{push, DeliverPolicy};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use shared::db::outbox;
use shared::error::ErrorBody;
use shared::ids::{AccountId, EventId, InstanceId};
use shared::{ApiError, ErrorCode};
use tokio_util::sync::CancellationToken;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::catalog::Event;
use domain::slots::Slot;
use door::extract::{AccountAccess, Admin, ClientIp, InstanceAccess, Principal, ValidatedQuery};
use door::AppState;

/// Event streams (SSE) open on this pod (a gauge).
pub const EVENT_STREAMS: &str = "paceline_event_streams";
/// Event streams refused, by limit (instance, pod).
pub const EVENT_STREAMS_REFUSED: &str = "paceline_event_streams_refused_total";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(instance_events)).routes(routes!(all_events)).routes(routes!(account_events))
}

/// How long a resume waits for the relay to publish the `Last-Event-ID` event (it can
/// only have been seen once published, but its sequence is recorded just after).
const RESUME_WAIT: Duration = Duration::from_secs(5);
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Query of the event stream routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Comma-separated event types to receive (default: all).
    #[param(value_type = Option<Vec<domain::catalog::EventType>>, style = Form, explode = false)]
    pub types: Option<String>,
    /// Resume after this event, for clients that cannot set the `Last-Event-ID` header.
    #[param(value_type = Option<EventId>)]
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
    let bad = || ApiError::validation("Last-Event-ID must be an event id (evt_...)");
    // An empty header names no event (as an EventSource that has seen none sends it).
    let raw = match headers.get("last-event-id").filter(|v| !v.is_empty()) {
        Some(v) => Some(v.to_str().map_err(|_| bad())?),
        None => query,
    };
    let Some(raw) = raw else { return Ok((DeliverPolicy::New, None)) };
    let id = EventId::parse(raw).map_err(|_| bad())?;
    let deadline = tokio::time::Instant::now() + RESUME_WAIT;
    loop {
        match outbox::stream_seq(&state.db, &id, instance).await? {
            // Not an event of this stream (pruned with the retention, or never this
            // instance's): resume from the id's own time, never from the whole stream, on
            // the instance's own subjects. Past the retention, say some were missed.
            None => {
                let pruned = id.made_at().is_some_and(|t| t < chrono::Utc::now() - shared::bus::EVENTS_RETENTION);
                return Ok((from_its_time(&id).ok_or_else(bad)?, pruned.then_some(0)));
            }
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

/// Who opened a stream, to check again while it is open.
#[derive(Debug, Clone)]
enum Access {
    /// The admin's stream of every instance: ends only with the pod.
    Admin,
    /// The admin on one instance: ends when the instance is deleted.
    AdminOn(InstanceId),
    /// An instance token (from `ip`): ends when the token no longer reaches the instance
    /// (deleted, its allow-list changed).
    Token { token: String, instance: InstanceId, ip: Option<IpAddr> },
    /// The admin on one account: ends when the account is deleted.
    AdminOnAccount(AccountId),
    /// An account's token (from `ip`): ends when it no longer works.
    AccountToken { token: String, account: AccountId, ip: Option<IpAddr> },
}

impl Access {
    fn instance(&self) -> Option<&InstanceId> {
        match self {
            Access::Admin | Access::AdminOnAccount(_) | Access::AccountToken { .. } => None,
            Access::AdminOn(i) | Access::Token { instance: i, .. } => Some(i),
        }
    }

    fn account(&self) -> Option<&AccountId> {
        match self {
            Access::AdminOnAccount(a) | Access::AccountToken { account: a, .. } => Some(a),
            _ => None,
        }
    }

    /// Whether the stream may stay open. A backend error keeps it (checked again soon).
    async fn holds(&self, state: &AppState) -> bool {
        match self {
            Access::Admin => true,
            Access::AdminOn(id) => shared::db::instances::exists(&state.db, id).await.unwrap_or(true),
            Access::Token { token, instance, ip } => {
                match door::extract::authenticate_from(token, || *ip, state).await {
                    Ok(p) => p.instance(state, instance.as_str()).await.is_ok(),
                    Err(e) => !matches!(e.code, ErrorCode::Unauthorized | ErrorCode::Forbidden),
                }
            }
            Access::AdminOnAccount(id) => shared::db::accounts::get(&state.db, id).await.map_or(true, |a| a.is_some()),
            Access::AccountToken { token, account, ip } => {
                match door::extract::authenticate_from(token, || *ip, state).await {
                    Ok(p) => p.account() == Some(account),
                    Err(e) => !matches!(e.code, ErrorCode::Unauthorized | ErrorCode::Forbidden),
                }
            }
        }
    }
}

/// The instances an account's stream lets through, each from the time it joined the
/// account (a moved instance's earlier events stay its earlier account's): read when the
/// stream opens, again every few seconds and whenever an instance's access changes (a
/// move), and kept current by the stream's own fresh `instance.created` and
/// `instance.deleted` events, which name the account they happened in.
#[derive(Clone)]
struct Members {
    account: AccountId,
    state: std::sync::Arc<std::sync::RwLock<MemberSet>>,
}

#[derive(Default)]
struct MemberSet {
    /// Instance id -> when it joined the account.
    since: std::collections::HashMap<String, chrono::DateTime<chrono::Utc>>,
    /// When the set was read from Postgres: a lifecycle event older than that adds nothing.
    read_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Members {
    async fn load(state: &AppState, account: &AccountId) -> Result<Members, ApiError> {
        let m = Members { account: account.clone(), state: Default::default() };
        m.refresh(state).await?;
        Ok(m)
    }

    async fn refresh(&self, state: &AppState) -> Result<(), ApiError> {
        let read_at = chrono::Utc::now();
        let rows = shared::db::accounts::members(&state.db, &self.account).await?;
        let since = rows.into_iter().map(|(i, at)| (i.to_string(), at.unwrap_or(read_at))).collect();
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = MemberSet { since, read_at: Some(read_at) };
        Ok(())
    }

    /// Whether the event `v` (an envelope) is the account's.
    fn admits(&self, v: &serde_json::Value) -> bool {
        let Some(instance) = v["instance_id"].as_str() else { return false };
        let Some(at) = v["created_at"].as_str().and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok()) else {
            return false;
        };
        let named = v["data"]["account_id"].as_str() == Some(self.account.as_str());
        let mut set = self.state.write().unwrap_or_else(|p| p.into_inner());
        let fresh = set.read_at.is_none_or(|r| at > r);
        match v["type"].as_str() {
            // Written by the server with the account the instance was in then.
            Some("instance.created") if named => {
                if fresh {
                    set.since.insert(instance.to_string(), at);
                }
                true
            }
            Some("instance.deleted") if named => {
                set.since.remove(instance);
                true
            }
            _ => set.since.get(instance).is_some_and(|since| at >= *since),
        }
    }
}

/// Reads an account stream's instances again every `auth::TTL`, and at once (at most
/// once a second) when an instance's access changes, until the stream ends.
fn keep_current(state: AppState, members: Members, end: CancellationToken) {
    tokio::spawn(async move {
        let mut changes = state.auth_changes.subscribe();
        loop {
            tokio::select! {
                _ = end.cancelled() => return,
                _ = tokio::time::sleep(domain::auth::TTL) => {}
                _ = changes.recv() => tokio::time::sleep(Duration::from_secs(1)).await,
            }
            if let Err(e) = members.refresh(&state).await {
                tracing::debug!(error = %e.message, "reading an account's instances failed; kept as they were");
            }
        }
    });
}

/// What an open stream holds until it ends: its place among its instance's streams
/// (cluster-wide) and this pod's, and the watcher of its access (stopped on drop).
struct Hold {
    _slot: Option<Slot>,
    _pod: PodStream,
    _watch: tokio_util::sync::DropGuard,
}

/// One of this pod's open streams.
struct PodStream(AppState);

impl PodStream {
    fn take(state: &AppState) -> Option<PodStream> {
        let open = state.event_streams.fetch_add(1, Ordering::SeqCst);
        if open >= state.config.events.streams_per_pod as usize {
            state.event_streams.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        metrics::gauge!(EVENT_STREAMS).increment(1.0);
        Some(PodStream(state.clone()))
    }
}

impl Drop for PodStream {
    fn drop(&mut self) {
        self.0.event_streams.fetch_sub(1, Ordering::SeqCst);
        metrics::gauge!(EVENT_STREAMS).decrement(1.0);
    }
}

fn too_many(limit: &'static str, what: &str) -> ApiError {
    metrics::counter!(EVENT_STREAMS_REFUSED, "limit" => limit).increment(1);
    ApiError::new(ErrorCode::RateLimited, format!("too many event streams are open {what}; close one or retry later"))
        .with_retry_after(5)
}

/// Checks the stream's access every `auth_cache::TTL` and whenever its instance's
/// access changes; ends the stream (cancels `end`) when it no longer holds.
fn watch(state: AppState, access: Access, end: CancellationToken) {
    tokio::spawn(async move {
        let mut changes = state.auth_changes.subscribe();
        loop {
            tokio::select! {
                _ = end.cancelled() => return,
                _ = tokio::time::sleep(domain::auth::TTL) => {}
                change = changes.recv() => match change {
                    Ok(id) if Some(&id) != access.instance() => continue,
                    _ => {}
                },
            }
            if !access.holds(&state).await {
                tracing::info!("an event stream's access ended; closing it");
                end.cancel();
                return;
            }
        }
    });
}

/// A resume after an event the stream no longer keeps starts at that event's own time
/// (its id's), never at the start of the whole stream.
fn from_its_time(id: &EventId) -> Option<DeliverPolicy> {
    let at = id.made_at()?;
    // An id from the future (made up): nothing after it yet, so from now.
    if at > chrono::Utc::now() {
        return Some(DeliverPolicy::New);
    }
    let nanos = at.timestamp_nanos_opt()?;
    let start_time = time::OffsetDateTime::from_unix_timestamp_nanos(nanos.into()).ok()?;
    Some(DeliverPolicy::ByStartTime { start_time })
}

/// The event a restricted key's stream leaves out: the QR carries the pairing, which is
/// the owner's act alone.
const OWNER_ONLY: &str = "instance.qr_updated";

/// `owner`: the admin or the instance's own token (a restricted key's stream leaves out
/// [`OWNER_ONLY`], and may not ask for it).
async fn open(
    state: AppState,
    headers: HeaderMap,
    q: StreamQuery,
    access: Access,
    owner: bool,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let instance = access.instance().cloned();
    let types = parse_types(q.types.as_deref())?;
    if !owner && types.iter().any(|t| t == OWNER_ONLY) {
        return Err(ApiError::forbidden("a restricted API key does not receive the pairing QR"));
    }
    let pod = PodStream::take(&state).ok_or_else(|| too_many("pod", "on this server"))?;
    let account = access.account().cloned();
    let slot = match (&instance, &account) {
        (Some(id), _) => {
            let set = [(state.keys.event_streams(id), state.config.events.streams_per_instance)];
            Some(Slot::try_now(&state, &set).await?.ok_or_else(|| too_many("instance", "for this instance"))?)
        }
        (None, Some(a)) => {
            let set = [(state.keys.account_event_streams(a), state.config.events.streams_per_instance)];
            Some(Slot::try_now(&state, &set).await?.ok_or_else(|| too_many("account", "for this account"))?)
        }
        (None, None) => None,
    };
    let members = match &account {
        Some(a) => Some(Members::load(&state, a).await?),
        None => None,
    };
    let (policy, resume_at) = start_policy(&state, &headers, q.last_event_id.as_deref(), instance.as_ref()).await?;
    let unavailable = |e: &dyn std::fmt::Display| {
        tracing::warn!(error = %e, "the event stream is unavailable");
        ApiError::new(ErrorCode::WorkerTimeout, "the event stream is unavailable; retry")
    };
    let js = async_nats::jetstream::new(state.nats.clone());
    let mut stream = shared::bus::ensure_events_stream(&js, &state.subjects, state.config.events.stream_max_bytes)
        .await
        .map_err(|e| unavailable(&e))?;
    let inst = instance.as_ref().map(|i| i.as_str());
    // Only the instance's own subjects: a resume never reads other tenants' events.
    let filter_subjects = if types.is_empty() {
        vec![state.subjects.events_filter(inst, None)]
    } else {
        types.iter().map(|t| state.subjects.events_filter(inst, Some(t))).collect()
    };
    // Events before the resume point that the stream no longer keeps: say so first.
    let gap = match resume_at {
        Some(0) => true,
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
        .map_err(|e| unavailable(&e))?;
    let messages = consumer.messages().await.map_err(|e| unavailable(&e))?;
    let end = CancellationToken::new();
    if let Some(m) = &members {
        keep_current(state.clone(), m.clone(), end.clone());
    }
    watch(state.clone(), access, end.clone());
    let hold = Hold { _slot: slot, _pod: pod, _watch: end.clone().drop_guard() };
    let first = gap.then(|| Ok(SseEvent::default().comment("some events after Last-Event-ID are no longer retained")));
    let items = messages.take_while(|m| std::future::ready(m.is_ok())).filter_map(move |m| {
        // The hold lives as long as the stream.
        let _ = &hold;
        let members = members.clone();
        async move {
            let m = m.ok()?;
            let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            if members.as_ref().is_some_and(|m| !m.admits(&v)) {
                return None;
            }
            let id = v.get("id")?.as_str()?.to_string();
            let kind = v.get("type")?.as_str()?.to_string();
            if !owner && kind == OWNER_ONLY {
                return None;
            }
            let data = std::str::from_utf8(&m.payload).ok()?.to_string();
            Some(Ok(SseEvent::default().id(id).event(kind).data(data)))
        }
    });
    let stream = futures::stream::iter(first)
        .chain(items)
        .take_until(end.cancelled_owned())
        .take_until(state.shutdown.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// The instance's events as they happen (Server-Sent Events). Each item: `id` the event
/// id, `event` its type, `data` the event JSON. Reconnect with `Last-Event-ID` (or
/// `?last_event_id=`) to resume after that event with nothing missed or repeated, within
/// the 7-day retention (an id this stream does not have resumes from the id's own time). A stream ends when its token's access does (the instance
/// deleted, its allow-list changed).
#[utoipa::path(get, path = "/v1/instances/{id}/events", tag = "events",
    params(("id" = InstanceId, Path, description = "instance id"), StreamQuery,
        ("Last-Event-ID" = Option<EventId>, Header, description = "resume after this event")),
    responses(
        (status = 200, description = "an endless `text/event-stream`; each item's data is an event", content_type = "text/event-stream", body = Event),
        (status = 400, description = "`validation_failed`: an unknown type, or a Last-Event-ID that is no event id", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden` (also a restricted key asking for `instance.qr_updated`: a key's stream leaves the QR out)", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many event streams open for this instance (across the cluster) or on this server; `Retry-After`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`: the event stream is unavailable for now; retry", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn instance_events(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    ValidatedQuery(q): ValidatedQuery<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    shared::db::instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    let owner = !matches!(principal, Principal::Key { .. });
    let access = match principal {
        Principal::Admin => Access::AdminOn(id),
        Principal::Instance { .. } | Principal::Key { .. } | Principal::Account { .. } => {
            let token = door::extract::bearer_of(&headers).unwrap_or_default().to_string();
            Access::Token { token, instance: id, ip }
        }
    };
    open(state, headers, q, access, owner).await
}

/// Every instance's events as they happen (admin). Same format and resume as the
/// instance stream.
#[utoipa::path(get, path = "/v1/events", tag = "events",
    params(StreamQuery, ("Last-Event-ID" = Option<EventId>, Header, description = "resume after this event")),
    responses(
        (status = 200, description = "an endless `text/event-stream`; each item's data is an event", content_type = "text/event-stream", body = Event),
        (status = 400, description = "`validation_failed`: an unknown type, or a Last-Event-ID that is no event id", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: admin only", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many event streams open on this server; `Retry-After`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`: the event stream is unavailable for now; retry", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn all_events(
    State(state): State<AppState>,
    _admin: Admin,
    headers: HeaderMap,
    ValidatedQuery(q): ValidatedQuery<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    open(state, headers, q, Access::Admin, true).await
}

/// The events of every instance of the account as they happen: the admin, or the
/// account's own token. Same format and resume as the instance stream; an instance the
/// account creates comes in with its `instance.created`, and one it deletes leaves after
/// its `instance.deleted`.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/events", tag = "events",
    params(("account_id" = AccountId, Path, description = "account id"), StreamQuery,
        ("Last-Event-ID" = Option<EventId>, Header, description = "resume after this event")),
    responses(
        (status = 200, description = "an endless `text/event-stream`; each item's data is an event", content_type = "text/event-stream", body = Event),
        (status = 400, description = "`validation_failed`: an unknown type, or a Last-Event-ID that is no event id", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's token, or neither the admin nor an account token", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many event streams open for this account or on this server; `Retry-After`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`: the event stream is unavailable for now; retry", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn account_events(
    State(state): State<AppState>,
    AccountAccess { id, principal }: AccountAccess,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    ValidatedQuery(q): ValidatedQuery<StreamQuery>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let access = match principal {
        Principal::Admin => Access::AdminOnAccount(id),
        _ => {
            let token = door::extract::bearer_of(&headers).unwrap_or_default().to_string();
            Access::AccountToken { token, account: id, ip }
        }
    };
    open(state, headers, q, access, true).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pruned_resume_starts_at_the_ids_time_not_the_whole_stream() {
        let eight_days = chrono::Utc::now() - chrono::Duration::days(8);
        let uuid = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            eight_days.timestamp() as u64,
            eight_days.timestamp_subsec_nanos(),
        ));
        let id = shared::ids::EventId::parse(&format!("evt_{}", uuid.simple())).unwrap();
        match super::from_its_time(&id) {
            Some(async_nats::jetstream::consumer::DeliverPolicy::ByStartTime { start_time }) => {
                assert_eq!(start_time.unix_timestamp(), eight_days.timestamp());
            }
            other => panic!("{other:?}"),
        }
    }

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
