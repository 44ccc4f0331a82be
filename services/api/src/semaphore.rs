//! Cluster-wide slots, shared by every API pod through Redis: what no tenant may hold
//! all of.
//!
//! - Large sends: a POST /messages whose body is over 1 MB (or of unknown length), and a
//!   send whose `media.url` is downloaded, take one of `large_body_slots` slots, at most
//!   one per instance, waiting for a free one up to `large_body_wait_ms` (then 503
//!   `rate_limited`). The gate reads the body within `large_body_read_timeout_ms` (then
//!   408 `request_timeout`), so a slow upload cannot keep a slot.
//! - Event streams: each open SSE stream holds a place among its instance's
//!   `events_streams_per_instance` (`routes::events`).
//!
//! A slot is a member of one or more sorted sets scored by its expiry: the holder renews
//! it (for at most its `max_hold`), so a slot of a crashed pod frees itself within
//! `large_body_slot_ttl_ms`. One Lua script takes a place in every set or in none.

use std::time::Duration;

use axum::extract::{Extension, Request};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use deadpool_redis::redis::{self, Script};
use shared::ids::InstanceId;
use shared::{ApiError, ErrorCode};
use tokio_util::sync::CancellationToken;

use crate::metrics::{SEMAPHORE_HOLDERS, SEMAPHORE_WAITERS};
use crate::state::AppState;

/// Bodies above this take a slot.
pub const LARGE_BODY: u64 = 1024 * 1024;
/// How often a waiting request tries again.
const POLL: Duration = Duration::from_millis(50);

/// KEYS: the sets; ARGV: now, expiry, holder, then each set's limit. Drops expired
/// holders, then takes a place in every set if each has room, else in none.
const ACQUIRE: &str = r#"
for i, k in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', k, '-inf', ARGV[1])
  if redis.call('ZCARD', k) >= tonumber(ARGV[3 + i]) then
    return 0
  end
end
for _, k in ipairs(KEYS) do
  redis.call('ZADD', k, ARGV[2], ARGV[3])
  redis.call('PEXPIRE', k, tonumber(ARGV[2]) - tonumber(ARGV[1]))
end
return 1
"#;

/// Marks a request that holds a large-body slot (the gate took it), so the handler does
/// not take a second one for a `media.url` download.
#[derive(Debug, Clone, Copy)]
pub struct SlotHeld;

/// A route's body limit when it is below the send route's 140 MB: the gate reads no more.
#[derive(Debug, Clone, Copy)]
pub struct BodyCap(pub usize);

/// Middleware on POST /messages (the state comes as an extension: the route's OpenAPI
/// description is built without one).
pub async fn gate(Extension(state): Extension<AppState>, req: Request, next: Next) -> Response {
    let length =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let limit = req.extensions().get::<BodyCap>().map_or(crate::service::messages::MESSAGES_BODY_LIMIT, |c| c.0);
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
    // (or waits for) a slot. The action routes name the instance and take the key as
    // theirs do (`X-API-Key` or `apikey`), refused as their extractor refuses, and answer
    // what the body gets (too large, too slow, no slot) as 400 with its code.
    let (mut parts, body) = req.into_parts();
    use axum::extract::FromRequestParts;
    let action =
        parts.extensions.get::<axum::extract::MatchedPath>().is_some_and(|p| p.as_str().contains("{instanceName}"));
    let refuse = |e: ApiError| if action { crate::routes::actions::as_400(e) } else { e }.into_response();
    let id = if action {
        crate::routes::actions::ActionAccess::from_request_parts(&mut parts, &state).await.map(|a| a.row.id)
    } else {
        crate::extract::InstanceAccess::from_request_parts(&mut parts, &state).await.map(|a| a.id)
    };
    let id = match id {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    // A body declared over the route's limit is refused before it waits for a slot.
    if length.is_some_and(|n| n > limit as u64) {
        return refuse(too_large());
    }
    let slot = match Slot::large_body(&state, &id).await {
        Ok(s) => s,
        Err(e) => return refuse(e),
    };
    // The body within its deadline, or the slot goes back.
    let read = state.config.large_body_read_timeout;
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

/// A held slot; renewed in the background (for at most its `max_hold`) until released
/// or dropped.
pub struct Slot {
    state: AppState,
    keys: Vec<String>,
    holder: String,
    renew: CancellationToken,
    released: bool,
    /// The gauge counting holders of this kind of slot, if any.
    gauge: Option<&'static str>,
}

impl Slot {
    /// One of the cluster's large-body slots, at most one per instance; waits for a free
    /// one up to `large_body_wait_ms`, then 503 `rate_limited`.
    pub async fn large_body(state: &AppState, instance: &InstanceId) -> Result<Slot, ApiError> {
        let sets = [
            (state.keys.large_body_slots(), state.config.large_body_slots),
            (state.keys.large_body_instance_slots(instance), 1),
        ];
        let wait = state.config.large_body_wait;
        // A request may hold its slot while it reads its body and then stores it.
        let max_hold = 2 * state.config.large_body_read_timeout;
        metrics::gauge!(SEMAPHORE_WAITERS).increment(1.0);
        let _waiting = scopeguard(|| metrics::gauge!(SEMAPHORE_WAITERS).decrement(1.0));
        let deadline = tokio::time::Instant::now() + wait;
        let holder = uuid::Uuid::new_v4().to_string();
        loop {
            if try_take(state, &sets, &holder).await? {
                metrics::gauge!(SEMAPHORE_HOLDERS).increment(1.0);
                return Ok(Slot::held(state, &sets, holder, max_hold, Some(SEMAPHORE_HOLDERS)));
            }
            if tokio::time::Instant::now() + POLL > deadline {
                return Err(ApiError::new(ErrorCode::RateLimited, "too many large sends at once; retry shortly")
                    .with_status(StatusCode::SERVICE_UNAVAILABLE)
                    .with_retry_after(1));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A place in `sets` (key, limit) taken at once or not at all (`None`), renewed for
    /// as long as it is held.
    pub async fn try_now(state: &AppState, sets: &[(String, u32)]) -> Result<Option<Slot>, ApiError> {
        let holder = uuid::Uuid::new_v4().to_string();
        if !try_take(state, sets, &holder).await? {
            return Ok(None);
        }
        Ok(Some(Slot::held(state, sets, holder, Duration::MAX, None)))
    }

    fn held(
        state: &AppState,
        sets: &[(String, u32)],
        holder: String,
        max_hold: Duration,
        gauge: Option<&'static str>,
    ) -> Slot {
        let keys: Vec<String> = sets.iter().map(|(k, _)| k.clone()).collect();
        let renew = CancellationToken::new();
        tokio::spawn(renewal(state.clone(), keys.clone(), holder.clone(), renew.clone(), max_hold));
        Slot { state: state.clone(), keys, holder, renew, released: false, gauge }
    }

    /// Gives the slot back before the response leaves.
    pub async fn release(mut self) {
        self.renew.cancel();
        self.released = remove(&self.state, &self.keys, &self.holder).await.is_ok();
    }
}

impl Drop for Slot {
    /// A request dropped mid-body (the client went away) still gives its slot back.
    fn drop(&mut self) {
        self.renew.cancel();
        if let Some(g) = self.gauge {
            metrics::gauge!(g).decrement(1.0);
        }
        if self.released {
            return;
        }
        let (state, keys, holder) = (self.state.clone(), std::mem::take(&mut self.keys), self.holder.clone());
        tokio::spawn(async move {
            let _ = remove(&state, &keys, &holder).await;
        });
    }
}

async fn try_take(state: &AppState, sets: &[(String, u32)], holder: &str) -> Result<bool, ApiError> {
    let ttl = state.config.large_body_slot_ttl.as_millis() as i64;
    let now = chrono::Utc::now().timestamp_millis();
    static SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(ACQUIRE));
    let mut script = SCRIPT.prepare_invoke();
    for (key, _) in sets {
        script.key(key);
    }
    script.arg(now).arg(now + ttl).arg(holder);
    for (_, limit) in sets {
        script.arg(*limit);
    }
    let mut conn = state.redis.get().await?;
    let got: i64 = script.invoke_async(&mut conn).await?;
    Ok(got == 1)
}

async fn remove(state: &AppState, keys: &[String], holder: &str) -> Result<(), ApiError> {
    let mut conn = state.redis.get().await?;
    let mut pipe = redis::pipe();
    for k in keys {
        pipe.cmd("ZREM").arg(k).arg(holder).ignore();
    }
    let () = pipe.query_async(&mut conn).await?;
    Ok(())
}

/// Pushes the slot's expiry forward every third of its TTL while it is held, for at
/// most `max_hold`; then it lapses within the TTL even if its request is still running.
async fn renewal(state: AppState, keys: Vec<String>, holder: String, stop: CancellationToken, max_hold: Duration) {
    let ttl = state.config.large_body_slot_ttl;
    let ttl_ms = ttl.as_millis() as i64;
    let until = tokio::time::Instant::now().checked_add(max_hold);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(ttl / 3) => {}
        }
        if until.is_some_and(|u| tokio::time::Instant::now() >= u) {
            tracing::warn!("a request held its slot past its longest hold; the slot lapses");
            return;
        }
        let Ok(mut conn) = state.redis.get().await else { continue };
        let expiry = chrono::Utc::now().timestamp_millis() + ttl_ms;
        let mut pipe = redis::pipe();
        for k in &keys {
            // XX: only while still a member (never resurrect a slot given back).
            pipe.cmd("ZADD").arg(k).arg("XX").arg(expiry).arg(&holder).ignore();
            pipe.cmd("PEXPIRE").arg(k).arg(ttl_ms).ignore();
        }
        let _: Result<(), _> = pipe.query_async(&mut conn).await;
    }
}

/// Runs `f` when dropped.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}
