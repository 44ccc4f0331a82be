//! Instance leases in Redis: `SET NX PX` to acquire, a Lua compare-and-expire to renew
//! (all held leases in one round trip per chunk), a Lua compare-and-delete to release.
//! The value is the worker's id, so only the holder renews or releases.
//!
//! Renewal runs on a thread of its own ([`Renewer`]), with its own runtime and Redis
//! connection: no load on the worker's runtime (a thousand sessions, a slow scan, a
//! slow database) can delay it. A lease that expired anyway while nobody took it is
//! taken again (`revived`); the worker then checks that the instance's epoch is still
//! its own before it carries on, so the fence, not the renewal's timing, decides.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_redis::redis::{self, Script};
use deadpool_redis::Pool;
use shared::ids::InstanceId;
use shared::kv::Keys;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::metrics::{LEASE_RENEWAL_FAILED, LEASE_RENEWAL_SECONDS};

/// Per key: renews it while its value is ARGV[1] (1); takes it again when it expired and
/// nobody holds it (2); leaves another holder's alone (0).
const RENEW: &str = r#"
local out = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == ARGV[1] then
    out[i] = redis.call('PEXPIRE', key, ARGV[2])
  elseif not holder then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    out[i] = 2
  else
    out[i] = 0
  end
end
return out
"#;

/// Per key: deletes it while its value is ARGV[1] (one lease, or a worker shutting down
/// giving all of its back in a few calls).
const RELEASE: &str = r#"
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then n = n + redis.call('DEL', key) end
end
return n
"#;

/// Per instance (KEYS in pairs: its lease, its epoch counter): takes the lease while
/// nobody holds it and returns the next epoch, or 0 where another worker holds it.
const ACQUIRE: &str = r#"
local out = {}
for i = 1, #KEYS, 2 do
  if redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[#out + 1] = redis.call('INCR', KEYS[i + 1])
  else
    out[#out + 1] = 0
  end
end
return out
"#;

/// Keys per renewal script call (Lua runs atomically; keep each call short).
const RENEW_CHUNK: usize = 500;

/// The fleet's counts: instances that should run, and those of them no worker holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetCounts {
    pub desired: i64,
    pub unleased: i64,
    /// When they were measured (ms since the epoch).
    pub at_ms: i64,
}

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

    /// Tries to take the lease; on success returns the next epoch from the Redis counter
    /// ([`Leases::acquire_many`] with one).
    pub async fn acquire(&self, id: &InstanceId) -> redis::RedisResult<Option<i64>> {
        Ok(self.acquire_many(std::slice::from_ref(id)).await?.pop().flatten())
    }

    /// Tries to take the leases of `ids` in one call: the epoch of each taken (the Redis
    /// counter's next), `None` where another worker holds it.
    pub async fn acquire_many(&self, ids: &[InstanceId]) -> redis::RedisResult<Vec<Option<i64>>> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let script = Script::new(ACQUIRE);
        let mut call = script.prepare_invoke();
        for id in ids {
            call.key(self.keys.lease(id)).key(self.keys.epoch(id));
        }
        let epochs: Vec<i64> = call.arg(&self.worker).arg(self.ttl.as_millis() as u64).invoke_async(&mut conn).await?;
        Ok(epochs.into_iter().map(|e| (e > 0).then_some(e)).collect())
    }

    /// Gives the lease up (only if it is still ours).
    pub async fn release(&self, id: &InstanceId) -> redis::RedisResult<()> {
        self.release_many(std::slice::from_ref(id)).await
    }

    /// Gives up the leases of `ids` that are still ours, `RENEW_CHUNK` keys per call.
    pub async fn release_many(&self, ids: &[InstanceId]) -> redis::RedisResult<()> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let script = Script::new(RELEASE);
        for chunk in ids.chunks(RENEW_CHUNK) {
            let mut call = script.prepare_invoke();
            for id in chunk {
                call.key(self.keys.lease(id));
            }
            let _: i64 = call.arg(&self.worker).invoke_async(&mut conn).await?;
        }
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

    /// Takes the turn to measure the fleet's counts for `period`, unless another worker
    /// has it: one worker a period reads every instance, not every worker.
    pub async fn counts_turn(&self, period: Duration) -> redis::RedisResult<bool> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let ok: Option<String> = redis::cmd("SET")
            .arg(self.keys.fleet_counts_turn())
            .arg(&self.worker)
            .arg("NX")
            .arg("PX")
            .arg(period.as_millis() as u64)
            .query_async(&mut conn)
            .await?;
        Ok(ok.is_some())
    }

    /// Shares the fleet's counts (kept `keep`, then no longer trusted).
    pub async fn put_counts(&self, counts: FleetCounts, keep: Duration) -> redis::RedisResult<()> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let value = format!("{} {} {}", counts.desired, counts.unleased, counts.at_ms);
        redis::cmd("SET")
            .arg(self.keys.fleet_counts())
            .arg(value)
            .arg("PX")
            .arg(keep.as_millis() as u64)
            .query_async(&mut conn)
            .await
    }

    /// The fleet's counts as a worker last measured them (none once they are stale).
    pub async fn counts(&self) -> redis::RedisResult<Option<FleetCounts>> {
        let mut conn = self.pool.get().await.map_err(pool_err)?;
        let value: Option<String> = redis::cmd("GET").arg(self.keys.fleet_counts()).query_async(&mut conn).await?;
        Ok(value.and_then(|v| {
            let mut parts = v.split(' ').map(|p| p.parse().ok());
            Some(FleetCounts { desired: parts.next()??, unleased: parts.next()??, at_ms: parts.next()?? })
        }))
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

/// What a renewal round found, for the worker to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// Another worker holds these leases now: stop their sessions.
    Lost(Vec<InstanceId>),
    /// These leases had expired and nobody had taken them: taken again. The worker checks
    /// the instances' epochs before trusting them.
    Revived(Vec<InstanceId>),
    /// No renewal succeeded for a whole TTL (Redis unreachable): the leases may be
    /// someone else's by now.
    Stale,
}

/// Renews the held leases every third of the TTL on its own thread and runtime.
pub struct Renewer {
    held: Arc<Mutex<HashSet<InstanceId>>>,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Renewer {
    /// Starts the renewal thread; what it finds arrives on the returned receiver.
    pub fn start(
        redis_url: &str,
        keys: Keys,
        worker: String,
        ttl: Duration,
    ) -> anyhow::Result<(Renewer, mpsc::UnboundedReceiver<Renewal>)> {
        let client = redis::Client::open(redis_url)?;
        let held: Arc<Mutex<HashSet<InstanceId>>> = Arc::default();
        let stop = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let round = Round { client, conn: None, keys, worker, ttl };
        let (held_in, stop_in) = (held.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("lease-renewer".into())
            .spawn(move || runtime.block_on(round.run(held_in, tx, stop_in)))?;
        Ok((Renewer { held, stop, thread: Some(thread) }, rx))
    }

    /// Renews `id` from the next round on.
    pub fn hold(&self, id: &InstanceId) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone());
    }

    /// Stops renewing `id` (released, lost or ended).
    pub fn forget(&self, id: &InstanceId) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The renewal thread's state.
struct Round {
    client: redis::Client,
    conn: Option<redis::aio::MultiplexedConnection>,
    keys: Keys,
    worker: String,
    ttl: Duration,
}

/// After a failed round, the next comes this soon rather than a third of the TTL later.
const RETRY_SOON: Duration = Duration::from_millis(250);

impl Round {
    async fn run(
        mut self,
        held: Arc<Mutex<HashSet<InstanceId>>>,
        tx: mpsc::UnboundedSender<Renewal>,
        stop: CancellationToken,
    ) {
        let every = self.ttl / 3;
        let mut last_ok = Instant::now();
        let mut wait = every;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            let ids: Vec<InstanceId> = held.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
            let started = Instant::now();
            match self.renew(&ids).await {
                Ok((lost, mut revived)) => {
                    // A lease released while this round ran looks expired to it: give back
                    // what was taken again for an instance no longer held.
                    let gone: Vec<InstanceId> = {
                        let held = held.lock().unwrap_or_else(|p| p.into_inner());
                        revived.iter().filter(|id| !held.contains(*id)).cloned().collect()
                    };
                    if !gone.is_empty() {
                        revived.retain(|id| !gone.contains(id));
                        self.release(&gone).await;
                    }
                    ::metrics::histogram!(LEASE_RENEWAL_SECONDS).record(started.elapsed().as_secs_f64());
                    last_ok = Instant::now();
                    wait = every.saturating_sub(started.elapsed());
                    if !lost.is_empty() {
                        let _ = tx.send(Renewal::Lost(lost));
                    }
                    if !revived.is_empty() {
                        let _ = tx.send(Renewal::Revived(revived));
                    }
                }
                Err(e) => {
                    ::metrics::counter!(LEASE_RENEWAL_FAILED).increment(1);
                    tracing::warn!(error = %e, "lease renewal failed");
                    self.conn = None;
                    wait = RETRY_SOON;
                    if last_ok.elapsed() >= self.ttl && !ids.is_empty() {
                        let _ = tx.send(Renewal::Stale);
                        last_ok = Instant::now();
                    }
                }
            }
        }
    }

    /// Compare-and-deletes leases (best effort: a lease left behind lapses within the TTL).
    async fn release(&mut self, ids: &[InstanceId]) {
        let Some(conn) = &mut self.conn else { return };
        static SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(RELEASE));
        for chunk in ids.chunks(RENEW_CHUNK) {
            let mut inv = SCRIPT.prepare_invoke();
            for id in chunk {
                inv.key(self.keys.lease(id));
            }
            let _: Result<i64, _> = inv.arg(&self.worker).invoke_async(conn).await;
        }
    }

    /// One round: every held lease renewed (or revived), in chunks of one script call.
    async fn renew(&mut self, ids: &[InstanceId]) -> redis::RedisResult<(Vec<InstanceId>, Vec<InstanceId>)> {
        if ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let conn = match &mut self.conn {
            Some(c) => c,
            None => self.conn.insert(
                tokio::time::timeout(self.ttl / 3, self.client.get_multiplexed_async_connection())
                    .await
                    .map_err(|_| redis::RedisError::from((redis::ErrorKind::IoError, "redis connect timed out")))??,
            ),
        };
        static SCRIPT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(RENEW));
        let (mut lost, mut revived) = (Vec::new(), Vec::new());
        for chunk in ids.chunks(RENEW_CHUNK) {
            let mut inv = SCRIPT.prepare_invoke();
            for id in chunk {
                inv.key(self.keys.lease(id));
            }
            inv.arg(&self.worker).arg(self.ttl.as_millis() as u64);
            let results: Vec<i64> = tokio::time::timeout(self.ttl / 3, inv.invoke_async(conn))
                .await
                .map_err(|_| redis::RedisError::from((redis::ErrorKind::IoError, "lease renewal timed out")))??;
            for (id, r) in chunk.iter().zip(results) {
                match r {
                    0 => lost.push(id.clone()),
                    2 => revived.push(id.clone()),
                    _ => {}
                }
            }
        }
        Ok((lost, revived))
    }
}
