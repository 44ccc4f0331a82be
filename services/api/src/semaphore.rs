//! The cluster-wide semaphore for large sends: a POST /messages whose body is over 1 MB
//! (or of unknown length) takes one of `large_body_slots` slots before its body is read,
//! waiting for a free one up to `large_body_wait_ms` (then 503 `rate_limited`). Slots are
//! members of a Redis sorted set scored by their expiry: the holder renews its slot, so
//! a slot of a crashed pod frees itself within `large_body_slot_ttl_ms`.

use std::time::Duration;

use axum::extract::{Extension, Request};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use deadpool_redis::redis::{self, Script};
use shared::{ApiError, ErrorCode};
use tokio_util::sync::CancellationToken;

use crate::metrics::{SEMAPHORE_HOLDERS, SEMAPHORE_WAITERS};
use crate::state::AppState;

/// Bodies above this take a slot.
pub const LARGE_BODY: u64 = 1024 * 1024;
/// How often a waiting request tries again.
const POLL: Duration = Duration::from_millis(50);

/// Drops expired holders, then takes a slot if fewer than ARGV[3] are held.
const ACQUIRE: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  return 1
end
return 0
"#;

/// Middleware on POST /messages (the state comes as an extension: the route's OpenAPI
/// description is built without one).
pub async fn gate(Extension(state): Extension<AppState>, req: Request, next: Next) -> Response {
    let length =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
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
    if let Err(e) = <crate::extract::InstanceAccess as axum::extract::FromRequestParts<AppState>>::from_request_parts(
        &mut parts, &state,
    )
    .await
    {
        return e.into_response();
    }
    let req = Request::from_parts(parts, body);
    let slot = match Slot::acquire(&state).await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let res = next.run(req).await;
    slot.release().await;
    res
}

/// A held slot; renewed in the background until released or dropped.
struct Slot {
    state: AppState,
    holder: String,
    renew: CancellationToken,
    released: bool,
}

impl Slot {
    async fn acquire(state: &AppState) -> Result<Slot, ApiError> {
        let holder = uuid::Uuid::new_v4().to_string();
        let ttl = state.config.large_body_slot_ttl_ms;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(state.config.large_body_wait_ms);
        metrics::gauge!(SEMAPHORE_WAITERS).increment(1.0);
        let _waiting = scopeguard(|| metrics::gauge!(SEMAPHORE_WAITERS).decrement(1.0));
        loop {
            let now = chrono::Utc::now().timestamp_millis();
            let mut conn = state.redis.get().await?;
            let got: i64 = Script::new(ACQUIRE)
                .key(state.keys.large_body_slots())
                .arg(now)
                .arg(now + ttl as i64)
                .arg(state.config.large_body_slots)
                .arg(&holder)
                .invoke_async(&mut conn)
                .await?;
            if got == 1 {
                break;
            }
            if tokio::time::Instant::now() + POLL > deadline {
                return Err(ApiError::new(ErrorCode::RateLimited, "too many large sends at once; retry shortly")
                    .with_status(StatusCode::SERVICE_UNAVAILABLE)
                    .with_retry_after(1));
            }
            tokio::time::sleep(POLL).await;
        }
        metrics::gauge!(SEMAPHORE_HOLDERS).increment(1.0);
        let renew = CancellationToken::new();
        tokio::spawn(renewal(state.clone(), holder.clone(), renew.clone()));
        Ok(Slot { state: state.clone(), holder, renew, released: false })
    }

    /// Gives the slot back before the response leaves.
    async fn release(mut self) {
        self.renew.cancel();
        self.released = remove(&self.state, &self.holder).await.is_ok();
    }
}

impl Drop for Slot {
    /// A request dropped mid-body (the client went away) still gives its slot back.
    fn drop(&mut self) {
        self.renew.cancel();
        metrics::gauge!(SEMAPHORE_HOLDERS).decrement(1.0);
        if self.released {
            return;
        }
        let (state, holder) = (self.state.clone(), self.holder.clone());
        tokio::spawn(async move {
            let _ = remove(&state, &holder).await;
        });
    }
}

async fn remove(state: &AppState, holder: &str) -> Result<(), ApiError> {
    let mut conn = state.redis.get().await?;
    let _: i64 = redis::cmd("ZREM").arg(state.keys.large_body_slots()).arg(holder).query_async(&mut conn).await?;
    Ok(())
}

/// Pushes the slot's expiry forward every third of its TTL while the request runs.
async fn renewal(state: AppState, holder: String, stop: CancellationToken) {
    let ttl = state.config.large_body_slot_ttl_ms;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(ttl / 3)) => {}
        }
        let Ok(mut conn) = state.redis.get().await else { continue };
        let expiry = chrono::Utc::now().timestamp_millis() + ttl as i64;
        // XX: only while still a member (never resurrect a slot given back).
        let _: Result<i64, _> = redis::cmd("ZADD")
            .arg(state.keys.large_body_slots())
            .arg("XX")
            .arg(expiry)
            .arg(&holder)
            .query_async(&mut conn)
            .await;
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
