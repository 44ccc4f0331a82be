//! Per-instance caps on network actions that carry ban risk but are not paced like
//! sends (group creation, participant changes, joins by link): cluster-wide in Redis, a
//! sliding window per cap (a sorted set of takes scored by time), taken whole or not at
//! all by one script. Past a cap: 429 `rate_limited` with `Retry-After`.

use std::time::Duration;

use chrono::Utc;
use deadpool_redis::redis::Script;
use shared::ids::InstanceId;

use crate::{Core, Error, Result};

/// One cap: at most `limit` takes in any `window`.
#[derive(Debug, Clone, Copy)]
pub struct Cap {
    /// Names the cap in its Redis key.
    pub name: &'static str,
    pub limit: u32,
    pub window: Duration,
    /// What is counted, for the error message ("group creations a day").
    pub what: &'static str,
}

/// Takes `n` if the window has room: {0, 0}, or {1, ms until it has}.
const TAKE: &str = r#"
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local m = redis.call('ZCARD', KEYS[1])
if m + n > limit then
  local idx = m + n - limit - 1
  local e = redis.call('ZRANGE', KEYS[1], idx, idx, 'WITHSCORES')
  return {1, tonumber(e[2] or now) + window - now}
end
for i = 1, n do
  redis.call('ZADD', KEYS[1], now, ARGV[5] .. ':' .. i)
end
redis.call('PEXPIRE', KEYS[1], window + 1000)
return {0, 0}
"#;

/// Takes from a cap, to give back if the action then fails before reaching the network.
#[must_use]
pub struct Taken {
    key: String,
    members: Vec<String>,
}

/// Takes `n` from the instance's `cap`. More than the cap allows at all is 400
/// `validation_failed`; more than the window has left is 429 with `Retry-After`.
pub async fn take(core: &Core, id: &InstanceId, cap: Cap, n: u32) -> Result<Taken> {
    if n > cap.limit {
        return Err(Error::invalid(format!("at most {} {} for an instance", cap.limit, cap.what)));
    }
    let key = core.keys.cap(cap.name, id);
    let member = uuid::Uuid::new_v4().to_string();
    let mut conn = core.redis.get().await?;
    let (verdict, wait_ms): (i64, i64) = Script::new(TAKE)
        .key(&key)
        .arg(Utc::now().timestamp_millis())
        .arg(n)
        .arg(cap.limit)
        .arg(cap.window.as_millis() as u64)
        .arg(&member)
        .invoke_async(&mut conn)
        .await?;
    if verdict != 0 {
        return Err(Error::RateLimited {
            message: format!("at most {} {}", cap.limit, cap.what),
            retry_after: (wait_ms.max(0) as u64).div_ceil(1000).max(1),
        });
    }
    Ok(Taken { key, members: (1..=n).map(|i| format!("{member}:{i}")).collect() })
}

/// Runs `action` under one take of `cap`: taken before (so a refusal costs the network
/// nothing), given back if the action fails.
pub async fn capped<T, E: From<Error>>(
    core: &Core,
    id: &InstanceId,
    cap: Cap,
    action: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    capped_all(core, id, &[cap], action).await
}

impl Taken {
    /// Gives back what the action did not use (it failed before the network acted, or
    /// some members were refused). Best effort: a failure only leaves the cap tighter.
    pub async fn give_back(self, core: &Core, n: usize) {
        let back: Vec<&String> = self.members.iter().rev().take(n).collect();
        if back.is_empty() {
            return;
        }
        let Ok(mut conn) = core.redis.get().await else { return };
        let r: Result<(), _> = deadpool_redis::redis::cmd("ZREM").arg(&self.key).arg(back).query_async(&mut conn).await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "giving back a cap failed");
        }
    }

    /// Keeps everything taken.
    pub fn keep(self) {}
}

/// Runs `action` under one take of each cap (all or none); a failed action gives them back.
pub async fn capped_all<T, E: From<Error>>(
    core: &Core,
    id: &InstanceId,
    all: &[Cap],
    action: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let mut taken = Vec::new();
    for cap in all {
        match take(core, id, *cap, 1).await {
            Ok(t) => taken.push(t),
            Err(e) => {
                for t in taken {
                    t.give_back(core, 1).await;
                }
                return Err(e.into());
            }
        }
    }
    match action.await {
        Ok(v) => {
            taken.into_iter().for_each(Taken::keep);
            Ok(v)
        }
        Err(e) => {
            for t in taken {
                t.give_back(core, 1).await;
            }
            Err(e)
        }
    }
}
