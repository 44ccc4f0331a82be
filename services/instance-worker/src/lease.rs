//! Instance leases in Redis: `SET NX PX` to acquire, a Lua compare-and-expire to renew
//! (all held leases in one round trip per chunk), a Lua compare-and-delete to release.
//! The value is the worker's id, so only the holder renews or releases.

use std::time::Duration;

use deadpool_redis::redis::{self, Script};
use deadpool_redis::Pool;
use shared::ids::InstanceId;
use shared::kv::Keys;

/// Renews every key whose value is ARGV[1]; returns 1/0 per key.
const RENEW: &str = r#"
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    out[i] = redis.call('PEXPIRE', key, ARGV[2])
  else
    out[i] = 0
  end
end
return out
"#;

const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end
"#;

/// Keys per renewal script call (Lua runs atomically; keep each call short).
const RENEW_CHUNK: usize = 500;

/// One worker's view of the leases.
#[derive(Clone)]
pub struct Leases {
    pool: Pool,
    keys: Keys,
    worker: String,
    ttl: Duration,
}

impl Leases {
    pub fn new(pool: Pool, keys: Keys, worker: String, ttl: Duration) -> Self {
        Leases { pool, keys, worker, ttl }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Tries to take the lease; on success returns the next epoch from the Redis counter.
    pub async fn acquire(&self, id: &InstanceId) -> redis::RedisResult<Option<i64>> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let ok: Option<String> = redis::cmd("SET")
            .arg(self.keys.lease(id))
            .arg(&self.worker)
            .arg("NX")
            .arg("PX")
            .arg(self.ttl.as_millis() as u64)
            .query_async(&mut conn)
            .await?;
        if ok.is_none() {
            return Ok(None);
        }
        let epoch: i64 = redis::cmd("INCR").arg(self.keys.epoch(id)).query_async(&mut conn).await?;
        Ok(Some(epoch))
    }

    /// Renews every lease in `ids`; returns the ones that are no longer ours.
    pub async fn renew(&self, ids: &[InstanceId]) -> redis::RedisResult<Vec<InstanceId>> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let script = Script::new(RENEW);
        let mut lost = Vec::new();
        for chunk in ids.chunks(RENEW_CHUNK) {
            let mut inv = script.prepare_invoke();
            for id in chunk {
                inv.key(self.keys.lease(id));
            }
            inv.arg(&self.worker).arg(self.ttl.as_millis() as u64);
            let results: Vec<i64> = inv.invoke_async(&mut conn).await?;
            lost.extend(chunk.iter().zip(results).filter(|(_, r)| *r == 0).map(|(id, _)| id.clone()));
        }
        Ok(lost)
    }

    /// Gives the lease up (only if it is still ours).
    pub async fn release(&self, id: &InstanceId) -> redis::RedisResult<()> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let _: i64 = Script::new(RELEASE).key(self.keys.lease(id)).arg(&self.worker).invoke_async(&mut conn).await?;
        Ok(())
    }

    /// Which of `ids` nobody holds.
    pub async fn free(&self, ids: &[InstanceId]) -> redis::RedisResult<Vec<InstanceId>> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let mut free = Vec::new();
        for chunk in ids.chunks(1_000) {
            let keys: Vec<String> = chunk.iter().map(|id| self.keys.lease(id)).collect();
            let holders: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query_async(&mut conn).await?;
            free.extend(chunk.iter().zip(holders).filter(|(_, h)| h.is_none()).map(|(id, _)| id.clone()));
        }
        Ok(free)
    }

    /// Announces this worker alive and returns how many workers are (heartbeat within TTL).
    pub async fn heartbeat(&self) -> redis::RedisResult<usize> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let now = chrono::Utc::now().timestamp_millis();
        let (_, _, n): (i64, i64, usize) = redis::pipe()
            .cmd("ZADD")
            .arg(self.keys.workers())
            .arg(now)
            .arg(&self.worker)
            .cmd("ZREMRANGEBYSCORE")
            .arg(self.keys.workers())
            .arg("-inf")
            .arg(now - self.ttl.as_millis() as i64)
            .cmd("ZCARD")
            .arg(self.keys.workers())
            .query_async(&mut conn)
            .await?;
        Ok(n)
    }

    /// Leaves the live-worker set (on shutdown).
    pub async fn leave(&self) -> redis::RedisResult<()> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let _: i64 = redis::cmd("ZREM").arg(self.keys.workers()).arg(&self.worker).query_async(&mut conn).await?;
        Ok(())
    }
}

fn pool_err(e: deadpool_redis::PoolError) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::IoError, "redis pool", e.to_string()))
}
