//! The instance worker: claims instance leases in Redis, runs each instance's session
//! through a network driver, and answers the API's requests for it over NATS.
//!
//! Scheduling: every `worker.scan_ms` (or at once when the API publishes a wake-up) the
//! worker lists the instances that should run, finds those nobody holds, and claims up to
//! its fair share (instances / live workers). Each claim takes a lease (`SET NX PX`) and
//! a new epoch recorded on the instance row, a hundred instances a round trip (one Lua
//! call, one transaction); all later writes are fenced on it. Leases are renewed in
//! batches every third of their TTL on a thread of their own (`lease::Renewer`), so no
//! load here delays them; on SIGTERM the worker hands its sessions over a batch at a
//! time (`drain`): each batch stopped, its leases released and the others woken to take
//! it over at once.

pub mod actor;
pub mod batch;
pub mod connects;
pub mod db;
mod drain;
pub mod driver;
pub mod lease;
pub mod metrics;
pub mod pacer;
pub mod queue;
pub mod receive;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::db::sessions;
use anyhow::Context;
use futures::StreamExt;
use rand::seq::SliceRandom;
use shared::config::Role;
use shared::ids::InstanceId;
use shared::{bus, health, kv, Config, Shutdown};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::actor::{Ctx, Outcome};
use crate::lease::Leases;
use crate::metrics::{
    ACTOR_PANICS, INSTANCES_DESIRED, INSTANCES_SHED, INSTANCES_UNLEASED, LEASES_HELD, LEASE_ACQUIRED, LEASE_LOST,
    LEASE_REVIVED, QUEUE_DEPTH, QUEUE_DEPTH_INSTANCE, QUEUE_OLDEST, QUEUE_OLDEST_INSTANCE,
};

/// How long stopping sessions may take on shutdown before leases are released anyway.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// After an instance's task panicked, this worker leaves it to the others this long.
const PANIC_COOLDOWN: Duration = Duration::from_secs(60);
/// A worker over its fair share hands instances over, at most this fraction of what it
/// holds per scan (at least one), so a new worker fills up in seconds without every
/// session reconnecting at once.
const SHED_FRACTION: usize = 20;
/// An instance handed over is left to the others this long.
const SHED_COOLDOWN: Duration = Duration::from_secs(30);
/// How often the worker looks for queued messages of its idle instances, in one
/// statement (a wake-up NATS lost waits at most this).
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Instances a scan claims in one round trip to Redis and one Postgres transaction.
const CLAIM_BATCH: usize = 100;
/// How often queue depth and age are measured for the metrics.
const QUEUE_STATS_EVERY: Duration = Duration::from_secs(5);

/// The network drivers a worker opens sessions with; `None` uses the default one
/// (netsim at `netsim.url`, WhatsApp through whatsapp-rust).
#[derive(Default, Clone)]
pub struct Drivers {
    pub sim: Option<Arc<dyn driver::Driver>>,
    pub whatsapp: Option<Arc<dyn driver::Driver>>,
}

/// Runs the worker until `shutdown`.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    run_with(config, Drivers::default(), shutdown).await
}

/// [`run`] with drivers of the caller's (tests use ones that misbehave on purpose).
pub async fn run_with(config: Config, drivers: Drivers, shutdown: Shutdown) -> anyhow::Result<()> {
    config.validate(Role::Worker)?;
    metrics::describe();
    let pool = shared::db::connect(&config).await.context("connecting to postgres")?;
    shared::db::prepare(&pool, &config, &shutdown).await.context("preparing the database schema")?;
    let redis = kv::connect(&config).context("configuring redis")?;
    let nats = bus::connect(&config, "worker").await.context("connecting to nats")?;
    shared::health::register(
        "worker",
        vec![health::postgres(pool.clone()), health::redis(redis.clone()), health::nats(nats.clone())],
    );
    let subjects = bus::Subjects::new(&config);
    let worker_id = format!("wk_{}", uuid::Uuid::new_v4().simple());
    let ttl = config.worker.lease_ttl;
    let leases = Leases::new(redis, kv::Keys::new(&config), worker_id.clone(), ttl);
    let (renewer, mut renewals) =
        lease::Renewer::start(&config.redis_url, kv::Keys::new(&config), worker_id.clone(), ttl)
            .context("starting the lease renewal thread")?;
    let media = receive::MediaPolicy { retry_base: config.media.retry_base, quota: config.media.quota_bytes };
    let store = shared::db::media::Store::new(pool.clone(), &config.media_store).map_err(anyhow::Error::msg)?;
    if store.objects().is_some() {
        health::report("worker", "media_store", health::media_store(store.clone()));
    }
    let ctx = Arc::new(Ctx {
        db: pool.clone(),
        store: store.clone(),
        nats: nats.clone(),
        subjects: subjects.clone(),
        // Both drivers, so an instance may run on another network than the deployment's.
        sim: Some(drivers.sim.unwrap_or_else(|| {
            Arc::new(driver::sim::SimDriver::new(&config.netsim.url, config.netsim.request_timeout))
        })),
        whatsapp: drivers.whatsapp.unwrap_or_else(|| {
            Arc::new(
                driver::whatsapp::WhatsappDriver::new(
                    pool.clone(),
                    config.whatsapp.ws_url.as_deref(),
                    config.whatsapp.connect_timeout,
                )
                .with_media(media, store),
            )
        }),
        default_network: config.network,
        pacing: actor::PacingDefaults {
            grace_min: config.pacing.grace_min,
            grace_max: config.pacing.grace_max,
            jitter: config.pacing.jitter,
            ramp: config.pacing.ramp,
            ramp_start: config.pacing.ramp_start,
            risk: config.risk_policy(),
        },
        retry_base: config.worker.queue_retry_base,
        media,
        starts: batch::starts(pool.clone()),
        finisher: batch::finisher(pool.clone()),
        receipts: batch::receipts(pool.clone()),
        stops: batch::stops(pool.clone()),
        connects: connects::Connects::new(config.worker.connects_per_second),
    });
    tracing::info!(worker_id, network = %config.network, "worker started");
    let mut w = Worker {
        ctx,
        leases,
        renewer,
        handoff: bytes::Bytes::from(format!("handoff {worker_id}")),
        connect_rate: config.worker.connects_per_second,
        worker_id,
        max: config.worker.max_instances,
        held: HashMap::new(),
        actors: JoinSet::new(),
        tasks: HashMap::new(),
        cooldown: HashMap::new(),
        nudges: HashMap::new(),
        stopping: HashSet::new(),
        per_instance: config.metrics.per_instance,
        reported: Vec::new(),
        scans: 0,
        counted: None,
    };
    let mut stats = tokio::time::interval(QUEUE_STATS_EVERY);
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut wake = nats.subscribe(subjects.workers_wake()).await.context("subscribing to wake-ups")?;
    let handoff = w.handoff.clone();
    let mut scan = tokio::time::interval(config.worker.scan);
    scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = scan.tick() => w.scan(false).await,
            Some(m) = wake.next() => {
                // One scan answers every wake-up already waiting (thousands arrive while
                // many instances connect at once); this worker's own handoffs need none.
                let mut others = m.payload != handoff;
                while let Some(Some(m)) = futures::FutureExt::now_or_never(wake.next()) {
                    others |= m.payload != handoff;
                }
                if others {
                    w.scan(true).await
                }
            }
            Some(r) = renewals.recv() => w.renewed(r).await,
            _ = stats.tick() => w.queue_stats().await,
            _ = sweep.tick() => w.sweep().await,
            Some(done) = w.actors.join_next_with_id(), if !w.actors.is_empty() => {
                let handing = !w.stopping.is_empty();
                if let Some(id) = w.finished(done) {
                    // Compare-and-delete: harmless when the lease is already someone else's.
                    if let Err(e) = w.leases.release(&id).await {
                        tracing::warn!(error = %e, "lease release failed");
                    }
                    // A handover's sessions all released: the workers under their share
                    // claim them now, not on their next scan (up to `worker.scan` later).
                    if handing && w.stopping.is_empty() {
                        let _ = nats.publish(subjects.workers_wake(), handoff.clone()).await;
                    }
                }
            }
        }
    }
    w.shutdown().await;
    bus::flush_bounded(&nats).await;
    pool.close().await;
    tracing::info!("worker stopped");
    Ok(())
}

struct Worker {
    ctx: Arc<Ctx>,
    leases: Leases,
    /// Renews the held leases on its own thread.
    renewer: lease::Renewer,
    worker_id: String,
    /// What this worker publishes when it hands instances over (the others scan at once).
    handoff: bytes::Bytes,
    /// Sessions a worker connects a second (`worker.connects_per_second`): how fast a
    /// stopping worker hands over.
    connect_rate: u32,
    max: usize,
    /// Each held instance's stop signal and the epoch it was claimed at.
    held: HashMap<InstanceId, (CancellationToken, i64)>,
    actors: JoinSet<(InstanceId, Outcome)>,
    /// Which instance each actor task runs (a panicked task tells only its id).
    tasks: HashMap<tokio::task::Id, InstanceId>,
    /// Instances whose actor panicked here: not claimed again by this worker before then.
    cooldown: HashMap<InstanceId, tokio::time::Instant>,
    /// Instances handed over whose sessions are still stopping.
    stopping: HashSet<InstanceId>,
    /// Each running instance's nudge: the sweep found messages in its queue.
    nudges: HashMap<InstanceId, Arc<tokio::sync::Notify>>,
    per_instance: bool,
    /// Instances with per-instance series, to zero them once they leave.
    reported: Vec<InstanceId>,
    /// Scans so far.
    scans: u64,
    /// This worker's newest count of the instances that should run, and when it began
    /// (ms since the epoch).
    counted: Option<(usize, i64)>,
}

impl Worker {
    /// Claims free instances up to this worker's fair share, and expires queued messages
    /// of instances nobody runs. `woken`: something changed (an instance to run, a worker
    /// leaving), so the instances are counted in Postgres; a periodic scan reads the count
    /// the fleet shares in Redis instead (one worker measures it every 5 s), so idle
    /// workers do not each count every instance every second.
    async fn scan(&mut self, woken: bool) {
        // Messages of logged-out and banned instances: every 30th scan (it probes each such
        // instance, and abandoned ones pile up over the years). Periodic scans only: a
        // woken one is claiming a handover, which waits for nothing else.
        if !woken {
            self.scans += 1;
            match shared::db::messages::fail_idle(&self.ctx.db, 500, self.scans % 30 == 1).await {
                Ok(rows) => {
                    for r in rows {
                        let payload = serde_json::to_vec(&r.view()).expect("serializes");
                        let _ = self.ctx.nats.publish(self.ctx.subjects.message_result(&r.id), payload.into()).await;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "expiring idle messages failed"),
            }
        }
        let workers = match self.leases.heartbeat().await {
            Ok(n) => n.max(1),
            Err(e) => return tracing::warn!(error = %e, "heartbeat failed"),
        };
        // The count first: a worker at its share (the usual case) reads no ids. The shared
        // count serves unless this worker's own count is newer (it was woken since: the
        // shared one may predate an instance that came to run).
        let shared = if woken { None } else { self.leases.counts().await.ok().flatten() };
        let known = match (shared, self.counted) {
            (Some(c), Some((n, at))) if at >= c.at_ms => Some(n),
            (Some(c), _) => Some(c.desired.max(0) as usize),
            (None, _) => None,
        };
        let desired = match known {
            Some(n) => n,
            None => match self.count_desired().await {
                Some(n) => n,
                None => return,
            },
        };
        let mut share = desired.div_ceil(workers).min(self.max);
        // Instances whose sessions are already stopping do not count.
        let running = self.held.len() - self.stopping.len();
        if running > share && known.is_some() {
            // Handing sessions over is never done on a shared count, which may predate
            // instances this worker just claimed.
            let Some(n) = self.count_desired().await else { return };
            share = n.div_ceil(workers).min(self.max);
        }
        // Handing over only on the periodic scan: at most a twentieth a `worker.scan`,
        // however many wake-ups (other workers' handoffs) arrive meanwhile.
        if running > share {
            if !woken {
                self.shed(share);
            }
            return;
        }
        if self.held.len() >= share {
            return;
        }
        let ids = match sessions::desired_ids(&self.ctx.db, 1_000_000).await {
            Ok(ids) => ids,
            Err(e) => return tracing::warn!(error = %e, "listing instances failed"),
        };
        let now = tokio::time::Instant::now();
        self.cooldown.retain(|_, until| *until > now);
        let candidates: Vec<InstanceId> =
            ids.into_iter().filter(|id| !self.held.contains_key(id) && !self.cooldown.contains_key(id)).collect();
        let mut free = match self.leases.free(&candidates).await {
            Ok(f) => f,
            Err(e) => return tracing::warn!(error = %e, "reading leases failed"),
        };
        // Workers scanning at once should not all race for the same instances.
        free.shuffle(&mut rand::thread_rng());
        let mut free = free.into_iter();
        // Up to the share; claims lost to another worker (two woken by the same handoff)
        // are made up from the rest of the list at once, not on the next scan.
        loop {
            let want = share.saturating_sub(self.held.len());
            let round: Vec<InstanceId> = free.by_ref().take(want).collect();
            if round.is_empty() {
                break;
            }
            // A batch at a time, each one Redis call and one Postgres transaction: a
            // fresh worker takes thousands in seconds, and a stopping worker's batch is
            // taken over at once; their sessions then connect at the paced rate.
            for batch in round.chunks(CLAIM_BATCH) {
                for (id, claim) in self.claim_many(batch).await {
                    self.start(id, claim);
                }
            }
        }
    }

    /// Hands instances over to workers under their share (one joined): stops a few
    /// sessions; `finished` releases their leases, and once the last is released a wake-up
    /// has the others claim them at once, resuming from the credentials in Postgres.
    fn shed(&mut self, share: usize) {
        // Sessions stopped for another reason (a lost lease) do not count either.
        let mut running: Vec<InstanceId> = self
            .held
            .iter()
            .filter(|(id, (c, _))| !self.stopping.contains(*id) && !c.is_cancelled())
            .map(|(id, _)| id.clone())
            .collect();
        if running.len() <= share {
            return;
        }
        let n = (running.len() - share).min((running.len() / SHED_FRACTION).max(1));
        running.shuffle(&mut rand::thread_rng());
        let until = tokio::time::Instant::now() + SHED_COOLDOWN;
        for id in running.into_iter().take(n) {
            if let Some((cancel, _)) = self.held.get(&id) {
                cancel.cancel();
                self.stopping.insert(id.clone());
                self.cooldown.insert(id.clone(), until);
                ::metrics::counter!(INSTANCES_SHED).increment(1);
                tracing::info!(instance_id = %id, share, "handing the instance over (over fair share)");
            }
        }
    }

    /// Takes the leases of `ids` that nobody holds, then their epochs on the rows; leaves
    /// out those another worker was first to and those no longer to run (their leases
    /// given back at once).
    async fn claim_many(&self, ids: &[InstanceId]) -> Vec<(InstanceId, sessions::Claim)> {
        let epochs = match self.leases.acquire_many(ids).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "lease acquire failed");
                return Vec::new();
            }
        };
        let taken: Vec<(InstanceId, i64)> =
            ids.iter().zip(epochs).filter_map(|(id, e)| e.map(|e| (id.clone(), e))).collect();
        let claims = match sessions::claim_many(&self.ctx.db, &taken, &self.worker_id).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "claim failed");
                Vec::new()
            }
        };
        // Deleted or no longer wanted since the scan (or the claim failed).
        let claimed: HashSet<&InstanceId> = claims.iter().map(|(id, _)| id).collect();
        let unwanted: Vec<InstanceId> =
            taken.iter().filter(|(id, _)| !claimed.contains(id)).map(|(id, _)| id.clone()).collect();
        if !unwanted.is_empty() {
            let _ = self.leases.release_many(&unwanted).await;
        }
        claims
    }

    /// Runs a claimed instance: its lease renewed, its actor started.
    fn start(&mut self, id: InstanceId, claim: sessions::Claim) {
        ::metrics::counter!(LEASE_ACQUIRED).increment(1);
        tracing::info!(instance_id = %id, epoch = claim.owner_epoch, "instance claimed");
        let cancel = CancellationToken::new();
        self.held.insert(id.clone(), (cancel.clone(), claim.owner_epoch));
        self.renewer.hold(&id);
        ::metrics::gauge!(LEASES_HELD).set(self.held.len() as f64);
        let ctx = self.ctx.clone();
        let task = id.clone();
        let nudge = Arc::new(tokio::sync::Notify::new());
        self.nudges.insert(id.clone(), nudge.clone());
        let handle = self.actors.spawn(async move {
            let outcome = actor::run(ctx, task.clone(), claim, cancel, nudge).await;
            (task, outcome)
        });
        self.tasks.insert(handle.id(), id);
    }

    /// Nudges the instances with queued messages: the safety net for lost NATS wake-ups,
    /// one statement for every held instance.
    async fn sweep(&self) {
        if self.nudges.is_empty() {
            return;
        }
        let ids: Vec<InstanceId> = self.nudges.keys().cloned().collect();
        match shared::db::messages::queued_among(&self.ctx.db, &ids).await {
            Ok(busy) => {
                for id in busy {
                    if let Some(n) = self.nudges.get(&id) {
                        n.notify_one();
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "queue sweep failed"),
        }
    }

    /// Counts the instances that should run and no worker holds (cluster-wide, as this
    /// worker sees it): above zero for longer than a lease TTL means they are stranded.
    /// How many instances should run, counted in Postgres (and remembered as this
    /// worker's newest count).
    async fn count_desired(&mut self) -> Option<usize> {
        let at = chrono::Utc::now().timestamp_millis();
        match sessions::desired_count(&self.ctx.db).await {
            Ok(n) => {
                let n = n.max(0) as usize;
                self.counted = Some((n, at));
                Some(n)
            }
            Err(e) => {
                tracing::warn!(error = %e, "counting instances failed");
                None
            }
        }
    }

    /// The fleet's counts, for the gauges and the periodic scans: measured by one worker a
    /// period (every instance read in Postgres and its lease in Redis), read by the others.
    async fn unleased(&self) {
        let measured = match self.leases.counts_turn(QUEUE_STATS_EVERY).await {
            Ok(true) => self.measure_fleet().await,
            _ => None,
        };
        let counts = match measured {
            Some(c) => Some(c),
            None => self.leases.counts().await.ok().flatten(),
        };
        if let Some(c) = counts {
            ::metrics::gauge!(INSTANCES_UNLEASED).set(c.unleased as f64);
            ::metrics::gauge!(INSTANCES_DESIRED).set(c.desired as f64);
        }
    }

    async fn measure_fleet(&self) -> Option<lease::FleetCounts> {
        let at_ms = chrono::Utc::now().timestamp_millis();
        let ids = sessions::desired_ids(&self.ctx.db, 1_000_000).await.ok()?;
        let free = self.leases.free(&ids).await.ok()?;
        let counts = lease::FleetCounts { desired: ids.len() as i64, unleased: free.len() as i64, at_ms };
        // Trusted for three periods: a turn missed (its worker died) is not yet stale.
        if let Err(e) = self.leases.put_counts(counts, QUEUE_STATS_EVERY * 3).await {
            tracing::debug!(error = %e, "sharing the fleet's counts failed");
        }
        Some(counts)
    }

    /// Measures the queues of the held instances: aggregate gauges always, per-instance
    /// series when `metrics.per_instance` is on.
    async fn queue_stats(&mut self) {
        self.unleased().await;
        let ids: Vec<InstanceId> = self.held.keys().cloned().collect();
        let rows = match shared::db::messages::queue_stats(&self.ctx.db, &ids).await {
            Ok(r) => r,
            Err(e) => return tracing::debug!(error = %e, "queue stats failed"),
        };
        ::metrics::gauge!(QUEUE_DEPTH).set(rows.iter().map(|r| r.1).sum::<i64>() as f64);
        ::metrics::gauge!(QUEUE_OLDEST).set(rows.iter().map(|r| r.2).fold(0.0, f64::max));
        if !self.per_instance {
            return;
        }
        for gone in self.reported.iter().filter(|id| !rows.iter().any(|r| &r.0 == *id)) {
            ::metrics::gauge!(QUEUE_DEPTH_INSTANCE, "instance_id" => gone.to_string()).set(0.0);
            ::metrics::gauge!(QUEUE_OLDEST_INSTANCE, "instance_id" => gone.to_string()).set(0.0);
        }
        for (id, depth, age) in &rows {
            ::metrics::gauge!(QUEUE_DEPTH_INSTANCE, "instance_id" => id.to_string()).set(*depth as f64);
            ::metrics::gauge!(QUEUE_OLDEST_INSTANCE, "instance_id" => id.to_string()).set(*age);
        }
        self.reported = rows.into_iter().map(|r| r.0).collect();
    }

    /// Acts on what a renewal round found: lost leases stop their sessions; revived
    /// ones carry on only where the instance's epoch is still the one claimed.
    async fn renewed(&mut self, r: lease::Renewal) {
        let stop = |w: &Worker, id: &InstanceId| {
            if let Some((c, _)) = w.held.get(id) {
                c.cancel();
            }
        };
        match r {
            lease::Renewal::Lost(lost) => {
                for id in lost {
                    tracing::warn!(instance_id = %id, "lease lost to another worker");
                    ::metrics::counter!(LEASE_LOST).increment(1);
                    stop(self, &id);
                }
            }
            lease::Renewal::Revived(ids) => {
                ::metrics::counter!(LEASE_REVIVED).increment(ids.len() as u64);
                let owned: Vec<(InstanceId, i64)> =
                    ids.iter().filter_map(|id| Some((id.clone(), self.held.get(id)?.1))).collect();
                match sessions::still_owned(&self.ctx.db, &owned).await {
                    Ok(still) => {
                        for (id, _) in owned.iter().filter(|(id, _)| !still.contains(id)) {
                            tracing::warn!(instance_id = %id, "lease expired and the instance moved on; stopping");
                            ::metrics::counter!(LEASE_LOST).increment(1);
                            stop(self, id);
                        }
                        tracing::info!(n = still.len(), "leases that had expired unrenewed were taken again");
                    }
                    // Unknown: the fence refuses every write of an epoch that moved on, so
                    // the sessions stop by themselves if they have to.
                    Err(e) => tracing::warn!(error = %e, "checking revived leases failed"),
                }
            }
            lease::Renewal::Stale => {
                tracing::warn!("no lease renewal for a whole TTL; stopping every session");
                // Lost to Redis, as the metric's description says: counted like leases
                // another worker took (once, not again while their sessions stop).
                for (c, _) in self.held.values().filter(|(c, _)| !c.is_cancelled()) {
                    ::metrics::counter!(LEASE_LOST).increment(1);
                    c.cancel();
                }
            }
        }
    }

    /// Forgets a finished actor's instance; the caller releases its lease (returned).
    fn finished(
        &mut self,
        done: Result<(tokio::task::Id, (InstanceId, Outcome)), tokio::task::JoinError>,
    ) -> Option<InstanceId> {
        let (id, outcome) = match done {
            Ok((task, (id, outcome))) => {
                self.tasks.remove(&task);
                (id, format!("{outcome:?}"))
            }
            Err(e) => {
                let id = self.tasks.remove(&e.id())?;
                if e.is_panic() {
                    // The session is gone with the task: give the instance back (another
                    // worker takes it) rather than renew a lease nothing uses.
                    tracing::error!(instance_id = %id, "an instance's task panicked; releasing its lease");
                    ::metrics::counter!(ACTOR_PANICS).increment(1);
                    self.cooldown.insert(id.clone(), tokio::time::Instant::now() + PANIC_COOLDOWN);
                }
                (id, "aborted".to_string())
            }
        };
        self.held.remove(&id);
        self.nudges.remove(&id);
        self.stopping.remove(&id);
        self.renewer.forget(&id);
        ::metrics::gauge!(LEASES_HELD).set(self.held.len() as f64);
        tracing::debug!(instance_id = %id, outcome, "instance released");
        Some(id)
    }
}
