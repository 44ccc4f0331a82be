//! The cluster as the admin reads it (`GET /v1/cluster`): the live workers and how many
//! instances each holds, the instances whose session should run and no worker holds, the
//! instances by state, the webhook backlog and the large-body slots in use. Workers and
//! leases live in Redis (`kv::Keys::workers`, `kv::Keys::lease`), the rest in Postgres.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeZone, Utc};
use deadpool_redis::redis;
use serde::{Deserialize, Serialize};
use shared::db::instances::InstanceState;
use shared::ids::InstanceId;
use utoipa::ToSchema;

use crate::{Core, Result};

/// Lease keys read in one round trip.
const CHUNK: usize = 1_000;

/// A live worker (one that announced itself within the lease TTL).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerOut {
    /// `wk_...`, new at each start of a worker process.
    pub id: String,
    pub last_seen_at: DateTime<Utc>,
    /// Instances whose lease it holds.
    pub instances: i64,
}

/// The fleet in figures.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FleetCountsOut {
    pub total: i64,
    /// Instances whose session should run (connected, or on the way).
    pub running: i64,
    /// Of those, held by no worker now: a worker takes them within its scan interval.
    pub unleased: i64,
    /// Instances by state (every state, zero included).
    pub by_state: BTreeMap<String, i64>,
}

/// Webhook deliveries not yet done.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookBacklogOut {
    pub pending: i64,
    /// Pending and due now (the dispatchers' work at hand).
    pub due: i64,
    /// Pending after at least one failed attempt.
    pub retrying: i64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub oldest_pending_at: Option<DateTime<Utc>>,
}

/// The large-body slots every pod shares (`large_body.slots`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SlotsOut {
    pub in_use: i64,
    pub capacity: i64,
}

/// The cluster now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterOut {
    /// Live workers, the most loaded first.
    pub workers: Vec<WorkerOut>,
    pub instances: FleetCountsOut,
    pub webhooks: WebhookBacklogOut,
    pub large_body_slots: SlotsOut,
    pub computed_at: DateTime<Utc>,
}

/// The worker holding each of `ids`' leases now (`None`: no worker).
pub async fn holders(core: &Core, ids: &[InstanceId]) -> Result<Vec<Option<String>>> {
    let mut conn = core.redis.get().await?;
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        let keys: Vec<String> = chunk.iter().map(|id| core.keys.lease(id)).collect();
        let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query_async(&mut conn).await?;
        out.extend(got);
    }
    Ok(out)
}

/// The cluster now: workers from Redis with the leases they hold, the rest from Postgres.
pub async fn get(core: &Core) -> Result<ClusterOut> {
    let now = Utc::now();
    let mut conn = core.redis.get().await?;
    // Only workers seen within the lease TTL are alive (as the workers count each other).
    let since = now.timestamp_millis() - core.config.worker.lease_ttl.as_millis() as i64;
    let seen: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
        .arg(core.keys.workers())
        .arg(since)
        .arg("+inf")
        .arg("WITHSCORES")
        .query_async(&mut conn)
        .await?;
    let slots: i64 = redis::cmd("ZCOUNT")
        .arg(core.keys.large_body_slots())
        .arg(format!("({}", now.timestamp_millis()))
        .arg("+inf")
        .query_async(&mut conn)
        .await?;
    drop(conn);

    let running = shared::db::instances::desired_ids(&core.db).await?;
    let held = holders(core, &running).await?;
    let mut per_worker: BTreeMap<String, i64> = BTreeMap::new();
    for h in held.iter().flatten() {
        *per_worker.entry(h.clone()).or_default() += 1;
    }
    let mut workers: Vec<WorkerOut> = seen
        .into_iter()
        .map(|(id, ms)| WorkerOut {
            instances: per_worker.get(&id).copied().unwrap_or(0),
            last_seen_at: Utc.timestamp_millis_opt(ms as i64).single().unwrap_or(now),
            id,
        })
        .collect();
    workers.sort_by(|a, b| b.instances.cmp(&a.instances).then_with(|| a.id.cmp(&b.id)));

    let mut by_state: BTreeMap<String, i64> = InstanceState::ALL.iter().map(|s| (s.as_str().to_string(), 0)).collect();
    for (state, n) in shared::db::instances::count_by_state(&core.db).await? {
        by_state.insert(state.as_str().to_string(), n);
    }
    let (pending, due, retrying, oldest_pending_at) = shared::db::deliveries::backlog(&core.db).await?;
    Ok(ClusterOut {
        workers,
        instances: FleetCountsOut {
            total: by_state.values().sum(),
            running: running.len() as i64,
            unleased: held.iter().filter(|h| h.is_none()).count() as i64,
            by_state,
        },
        webhooks: WebhookBacklogOut { pending, due, retrying, oldest_pending_at },
        large_body_slots: SlotsOut { in_use: slots, capacity: i64::from(core.config.large_body.slots) },
        computed_at: now,
    })
}
