//! Cluster-wide slots, shared by every pod through Redis: what no tenant may hold all
//! of. A slot is a member of one or more sorted sets scored by its expiry: the holder
//! renews it (for at most its `max_hold`), so a slot of a crashed pod frees itself within
//! `large_body.slot_ttl_ms`. One Lua script takes a place in every set or in none.
//!
//! - Large sends: a send whose body is large (the API's gate takes the slot) or whose
//!   `media.url` is downloaded takes one of `large_body.slots` slots, at most one per
//!   instance, waiting for a free one up to `large_body.wait_ms` (then 503
//!   `rate_limited`).
//! - Event streams: each open SSE stream holds a place among its instance's
//!   `events.streams_per_instance`.

use std::time::Duration;

use deadpool_redis::redis::{self, Script};
use shared::ids::InstanceId;
use tokio_util::sync::CancellationToken;

use crate::{Core, Error, Result};

/// Large-body slots held by this pod (a gauge).
pub const HOLDERS: &str = "paceline_semaphore_holders";
/// Large sends of this pod waiting for a slot (a gauge).
pub const WAITERS: &str = "paceline_semaphore_waiters";

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

/// A held slot; renewed in the background (for at most its `max_hold`) until released
/// or dropped.
pub struct Slot {
    core: Core,
    keys: Vec<String>,
    holder: String,
    renew: CancellationToken,
    released: bool,
    /// The gauge counting holders of this kind of slot, if any.
    gauge: Option<&'static str>,
}

impl Slot {
    /// One of the cluster's large-body slots, at most one per instance; waits for a free
    /// one up to `large_body.wait_ms`, then 503 `rate_limited`.
    pub async fn large_body(core: &Core, instance: &InstanceId) -> Result<Slot> {
        let sets = [
            (core.keys.large_body_slots(), core.config.large_body.slots),
            (core.keys.large_body_instance_slots(instance), 1),
        ];
        let wait = core.config.large_body.wait;
        // A request may hold its slot while it reads its body and then stores it.
        let max_hold = 2 * core.config.large_body.read_timeout;
        metrics::gauge!(WAITERS).increment(1.0);
        let _waiting = scopeguard(|| metrics::gauge!(WAITERS).decrement(1.0));
        let deadline = tokio::time::Instant::now() + wait;
        let holder = uuid::Uuid::new_v4().to_string();
        loop {
            if try_take(core, &sets, &holder).await? {
                metrics::gauge!(HOLDERS).increment(1.0);
                return Ok(Slot::held(core, &sets, holder, max_hold, Some(HOLDERS)));
            }
            if tokio::time::Instant::now() + POLL > deadline {
                return Err(Error::Busy {
                    message: "too many large sends at once; retry shortly".into(),
                    retry_after: 1,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A place in `sets` (key, limit) taken at once or not at all (`None`), renewed for
    /// as long as it is held.
    pub async fn try_now(core: &Core, sets: &[(String, u32)]) -> Result<Option<Slot>> {
        let holder = uuid::Uuid::new_v4().to_string();
        if !try_take(core, sets, &holder).await? {
            return Ok(None);
        }
        Ok(Some(Slot::held(core, sets, holder, Duration::MAX, None)))
    }

    fn held(
        core: &Core,
        sets: &[(String, u32)],
        holder: String,
        max_hold: Duration,
        gauge: Option<&'static str>,
    ) -> Slot {
        let keys: Vec<String> = sets.iter().map(|(k, _)| k.clone()).collect();
        let renew = CancellationToken::new();
        tokio::spawn(renewal(core.clone(), keys.clone(), holder.clone(), renew.clone(), max_hold));
        Slot { core: core.clone(), keys, holder, renew, released: false, gauge }
    }

    /// Gives the slot back before the response leaves.
    pub async fn release(mut self) {
        self.renew.cancel();
        self.released = remove(&self.core, &self.keys, &self.holder).await.is_ok();
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
        let (core, keys, holder) = (self.core.clone(), std::mem::take(&mut self.keys), self.holder.clone());
        tokio::spawn(async move {
            let _ = remove(&core, &keys, &holder).await;
        });
    }
}

async fn try_take(core: &Core, sets: &[(String, u32)], holder: &str) -> Result<bool> {
    let ttl = core.config.large_body.slot_ttl.as_millis() as i64;
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
    let mut conn = core.redis.get().await?;
    let got: i64 = script.invoke_async(&mut conn).await?;
    Ok(got == 1)
}

async fn remove(core: &Core, keys: &[String], holder: &str) -> Result<()> {
    let mut conn = core.redis.get().await?;
    let mut pipe = redis::pipe();
    for k in keys {
        pipe.cmd("ZREM").arg(k).arg(holder).ignore();
    }
    let () = pipe.query_async(&mut conn).await?;
    Ok(())
}

/// Pushes the slot's expiry forward every third of its TTL while it is held, for at
/// most `max_hold`; then it lapses within the TTL even if its request is still running.
async fn renewal(core: Core, keys: Vec<String>, holder: String, stop: CancellationToken, max_hold: Duration) {
    let ttl = core.config.large_body.slot_ttl;
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
        let Ok(mut conn) = core.redis.get().await else { continue };
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
