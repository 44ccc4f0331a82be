//! Chaos: workers, two API pods and two dispatchers as real processes, a NATS and a Redis
//! of the run's own, and netsim; a loop kills and restarts them and injects network
//! faults while sends flow through both API pods with webhooks registered. Then the
//! invariants are checked:
//! - every accepted message ends `sent`, or `failed` with a reason;
//! - netsim's inboxes hold each network id once, and only ids of sent messages;
//! - every message netsim delivered to an instance (contacts write in meanwhile) is in
//!   the instance's log exactly once, with one `message.received`;
//! - every event reaches its webhook at least once, and the delivery log shows it once;
//! - no lease epoch of an instance was claimed twice, and the instance's fence is the
//!   newest claim.
//!
//! The short run is a test (`chaos.rs` in the paceline tests); `loadtest/chaos.sh` runs
//! the same code for as long as it is told (`PACELINE_CHAOS_*`, see [`Options`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use shared::Config;

use crate::cluster::{command, free_addr, log_file, wait_for, ApiProc, Cluster};
use crate::webhooks::{NatsServer, WebhookSink};

/// A Redis server of the run's own (no persistence, as in production's cache role), to
/// kill and start again.
pub struct RedisServer {
    pub port: u16,
    child: Option<tokio::process::Child>,
}

impl RedisServer {
    pub async fn start() -> RedisServer {
        let port = free_addr().port();
        let mut s = RedisServer { port, child: None };
        s.restart().await;
        s
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same port, empty.
    pub async fn restart(&mut self) {
        let bin = std::env::var("PACELINE_TEST_REDIS_SERVER")
            .expect("PACELINE_TEST_REDIS_SERVER is not set: run the tests through scripts/test");
        let child = tokio::process::Command::new(bin)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        for _ in 0..100 {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("redis-server exited ({status}): port {} was taken by someone else", self.port);
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server did not start");
    }

    /// Stops the server (SIGKILL).
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }
}

/// How long and how wide a run is: `PACELINE_CHAOS_SECONDS`, `PACELINE_CHAOS_INSTANCES`,
/// `PACELINE_CHAOS_WORKERS`, `PACELINE_CHAOS_STEP_MS` override the defaults given.
#[derive(Debug, Clone)]
pub struct Options {
    pub seconds: u64,
    pub instances: usize,
    pub workers: usize,
    /// Time between two faults.
    pub step: Duration,
}

impl Options {
    pub fn from_env(default: Options) -> Options {
        let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        Options {
            seconds: var("PACELINE_CHAOS_SECONDS").unwrap_or(default.seconds),
            instances: var("PACELINE_CHAOS_INSTANCES").map_or(default.instances, |v| v as usize),
            workers: var("PACELINE_CHAOS_WORKERS").map_or(default.workers, |v| v as usize),
            step: var("PACELINE_CHAOS_STEP_MS").map_or(default.step, Duration::from_millis),
        }
    }
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct Report {
    pub faults: BTreeMap<&'static str, u32>,
    pub accepted: usize,
    pub sent: usize,
    pub failed: usize,
    pub received: usize,
    pub resends_absorbed: u64,
    /// Messages contacts sent to the instances, each logged once.
    pub inbound: usize,
    pub events: usize,
    pub deliveries: usize,
    pub webhook_requests: usize,
    pub claims: usize,
    pub converged_in: Duration,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "faults injected: {:?}", self.faults)?;
        writeln!(
            f,
            "messages: {} accepted, {} sent, {} failed; netsim received {} (0 duplicates), absorbed {} re-sends",
            self.accepted, self.sent, self.failed, self.received, self.resends_absorbed
        )?;
        writeln!(f, "inbound: {} messages from contacts, each logged once with one message.received", self.inbound)?;
        writeln!(
            f,
            "events: {} for the webhooks, {} in the delivery log (each once), {} requests at the receiver",
            self.events, self.deliveries, self.webhook_requests
        )?;
        writeln!(f, "lease claims: {} (no epoch claimed twice)", self.claims)?;
        write!(f, "converged {:.1} s after the last fault", self.converged_in.as_secs_f64())
    }
}

/// The kinds of fault, applied in turn.
const FAULTS: [&str; 7] = [
    "kill_worker",
    "netsim_errors",
    "kill_api",
    "restart_nats",
    "kill_dispatcher",
    "restart_redis",
    "drop_connections",
];

const RECIPIENTS: [&str; 3] = ["5511970000001", "5511970000002", "5511970000003"];
const EVENTS: [&str; 4] = ["message.queued", "message.sent", "message.failed", "message.received"];

struct Procs {
    apis: Vec<(SocketAddr, Option<ApiProc>)>,
    dispatchers: Vec<Child>,
}

/// An accepted message: (instance, message id).
type Accepted = Arc<Mutex<Vec<(String, String)>>>;

/// Runs the whole scenario against `bin` (the `paceline` binary); panics with the broken
/// invariant, else returns the figures.
pub async fn run(bin: &Path, opts: Options) -> Report {
    let logs = std::env::temp_dir().join(format!("pl-chaos-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&logs).unwrap();
    println!("chaos: {opts:?}; logs in {}", logs.display());
    let mut nats = NatsServer::start().await;
    let mut redis = RedisServer::start().await;
    let (nats_url, redis_url) = (nats.url(), redis.url());
    let mut cluster = Cluster::start(bin, 0, |c| {
        c.nats_url = nats_url;
        c.redis_url = redis_url;
        c.allow_private_targets = true;
        c.webhooks.retry_base = Duration::from_millis(200);
        c.webhooks.retry_max = Duration::from_millis(1_000);
        c.webhooks.timeout = Duration::from_millis(2_000);
        c.events.stream_max_bytes = 64 * 1024 * 1024;
    })
    .await;
    cluster.worker_log_dir = Some(logs.clone());
    for _ in 0..opts.workers {
        cluster.spawn_worker();
    }
    let config = cluster.config.clone();
    let mut procs = Procs { apis: Vec::new(), dispatchers: Vec::new() };
    for i in 0..2 {
        let addr = free_addr();
        let api = ApiProc::start_at(bin, &config, addr, Some(&logs.join(format!("api-{i}.log")))).await;
        procs.apis.push((addr, Some(api)));
        procs.dispatchers.push(dispatcher(bin, &config, &logs, i));
    }
    let sink = WebhookSink::start().await;
    for r in RECIPIENTS {
        cluster.phone(r, false).await;
    }
    let mut instances = Vec::new();
    for i in 0..opts.instances {
        let number = format!("55119800{i:05}");
        cluster.phone(&number, false).await;
        let (inst, token) = cluster.paired_instance(&format!("chaos-{i}"), &number).await;
        let id = inst.id.to_string();
        cluster.unpaced(&id).await;
        cluster
            .api
            .client(Some(token.clone()))
            .post(&format!("/v1/instances/{id}/webhooks"), &json!({ "url": sink.url(), "events": EVENTS }))
            .await
            .expect(201);
        instances.push((id, token));
    }
    let pool = cluster.pool().await;
    let since: String = sqlx::query_scalar("SELECT now()::text").fetch_one(&pool).await.unwrap();

    // Senders: through both API pods in turn, each message retried under its
    // client_message_id until an answer says it is stored.
    let accepted: Accepted = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let api_urls: Vec<String> = procs.apis.iter().map(|(a, _)| format!("http://{a}")).collect();
    let mut senders = Vec::new();
    for s in 0..2 {
        let (accepted, stop, counter) = (accepted.clone(), stop.clone(), counter.clone());
        let (urls, instances) = (api_urls.clone(), instances.clone());
        senders.push(tokio::spawn(async move {
            let http = shared::fetch::client_builder().timeout(Duration::from_secs(10)).build().unwrap();
            let mut turn = s;
            while !stop.load(Ordering::Relaxed) {
                let k = counter.fetch_add(1, Ordering::Relaxed);
                let (id, token) = &instances[k as usize % instances.len()];
                let body = json!({
                    "to": RECIPIENTS[k as usize % RECIPIENTS.len()],
                    "type": "text",
                    "text": format!("chaos {k}"),
                    "client_message_id": format!("chaos-{k}"),
                });
                let started = Instant::now();
                loop {
                    turn += 1;
                    let url = format!("{}/v1/instances/{id}/messages", urls[turn % urls.len()]);
                    let res = http.post(url).bearer_auth(token).json(&body).send().await;
                    if let Ok(r) = res {
                        let status = r.status().as_u16();
                        if status == 202 || status == 200 {
                            let m: Value = r.json().await.unwrap_or(Value::Null);
                            if let Some(mid) = m["id"].as_str() {
                                accepted.lock().unwrap().push((id.clone(), mid.to_string()));
                                break;
                            }
                        } else {
                            assert!(
                                status == 503 || status == 502 || status == 500,
                                "an accept answered {status}: {}",
                                r.text().await.unwrap_or_default()
                            );
                        }
                    }
                    assert!(started.elapsed() < Duration::from_secs(120), "message {k} was never accepted");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        }));
    }

    // Contacts write in to the instances meanwhile: (instance, network id) of each
    // message netsim took.
    let inbound: Accepted = Arc::default();
    let netsim = cluster.netsim();
    let numbers: Vec<String> = (0..opts.instances).map(|i| format!("55119800{i:05}")).collect();
    let writer = {
        let (inbound, stop, netsim) = (inbound.clone(), stop.clone(), netsim.clone());
        let ids: Vec<String> = instances.iter().map(|(i, _)| i.clone()).collect();
        tokio::spawn(async move {
            let mut k = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let (from, i) = (RECIPIENTS[k % RECIPIENTS.len()], k % numbers.len());
                let body = json!({ "to": numbers[i], "text": format!("inbound {k}") });
                let r = netsim.post(&format!("/control/phones/{from}/messages"), &body).await.expect(201);
                inbound.lock().unwrap().push((ids[i].clone(), r["id"].as_str().unwrap().to_string()));
                k += 1;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        })
    };

    // The faults, in turn, one per step.
    let mut report = Report::default();
    let mut rng = 7u64;
    let mut next = |n: usize| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) as usize % n
    };
    let end = Instant::now() + Duration::from_secs(opts.seconds);
    let mut turn = 0;
    while Instant::now() < end {
        tokio::time::sleep(opts.step).await;
        let fault = FAULTS[turn % FAULTS.len()];
        turn += 1;
        *report.faults.entry(fault).or_default() += 1;
        match fault {
            "kill_worker" => {
                let w = next(cluster.workers.len());
                cluster.signal(w, "KILL");
                tokio::time::sleep(Duration::from_millis(300)).await;
                cluster.respawn_worker(w);
            }
            "kill_api" => {
                let i = next(procs.apis.len());
                let (addr, api) = &mut procs.apis[i];
                drop(api.take());
                tokio::time::sleep(Duration::from_millis(300)).await;
                *api = Some(ApiProc::start_at(bin, &config, *addr, Some(&logs.join(format!("api-{i}.log")))).await);
            }
            "kill_dispatcher" => {
                let i = next(procs.dispatchers.len());
                let _ = procs.dispatchers[i].kill();
                let _ = procs.dispatchers[i].wait();
                tokio::time::sleep(Duration::from_millis(300)).await;
                procs.dispatchers[i] = dispatcher(bin, &config, &logs, i);
            }
            "restart_nats" => {
                nats.kill().await;
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                nats.restart().await;
            }
            "restart_redis" => {
                redis.kill().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                redis.restart().await;
            }
            "netsim_errors" => {
                netsim.post("/control/faults", &json!({ "latency_ms": 150, "error_rate": 0.2 })).await.expect(200);
                tokio::time::sleep(Duration::from_millis(2_000)).await;
                netsim.post("/control/faults", &json!({})).await.expect(200);
            }
            "drop_connections" => {
                netsim.post("/control/faults", &json!({ "drop_connections": true })).await.expect(200);
            }
            _ => unreachable!(),
        }
        println!("chaos: {fault} ({} accepted so far)", accepted.lock().unwrap().len());
    }
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.await.expect("a sender failed");
    }
    writer.await.expect("the inbound writer failed");
    let calm = Instant::now();
    let accepted: Vec<(String, String)> = accepted.lock().unwrap().clone();
    report.accepted = accepted.len();
    assert!(report.accepted > 0, "nothing was accepted");

    // 1. Every accepted message ends sent, or failed with a reason.
    let ids: Vec<String> = accepted.iter().map(|(_, m)| m.clone()).collect();
    let settle = Duration::from_secs(180);
    let rows = wait_for(settle, || async {
        let rows: Vec<(String, String, Option<String>, String)> =
            sqlx::query_as("SELECT id, status, error, wa_message_id FROM messages WHERE id = ANY($1)")
                .bind(&ids)
                .fetch_all(&pool)
                .await
                .ok()?;
        (rows.len() == ids.len() && rows.iter().all(|r| r.1 == "sent" || r.1 == "failed")).then_some(rows)
    })
    .await
    .unwrap_or_else(|| panic!("accepted messages still unfinished {settle:?} after the last fault"));
    for (id, status, error, _) in &rows {
        assert!(status == "sent" || error.as_deref().is_some_and(|e| !e.is_empty()), "{id} failed with no reason");
    }
    report.sent = rows.iter().filter(|r| r.1 == "sent").count();
    report.failed = rows.len() - report.sent;

    // 2. Each sent message's network id is in an inbox exactly once; nothing else is.
    let sent: HashSet<&str> = rows.iter().filter(|r| r.1 == "sent").map(|r| r.3.as_str()).collect();
    let unsent: HashSet<&str> = rows.iter().filter(|r| r.1 != "sent").map(|r| r.3.as_str()).collect();
    let mut seen: HashMap<String, u32> = HashMap::new();
    for r in RECIPIENTS {
        let inbox = netsim.get(&format!("/control/phones/{r}/inbox")).await.expect(200);
        assert_eq!(inbox["duplicates"], 0, "netsim saw a duplicate at {r}");
        report.resends_absorbed += inbox["resends_absorbed"].as_u64().unwrap_or(0);
        for m in inbox["messages"].as_array().unwrap() {
            *seen.entry(m["id"].as_str().unwrap().to_string()).or_default() += 1;
        }
    }
    for (id, n) in &seen {
        assert_eq!(*n, 1, "network id {id} arrived {n} times");
        assert!(!unsent.contains(id.as_str()), "a message marked failed arrived: {id}");
    }
    let missing: Vec<&&str> = sent.iter().filter(|id| !seen.contains_key(**id)).collect();
    assert!(missing.is_empty(), "{} sent messages never arrived, e.g. {:?}", missing.len(), missing.first());
    report.received = seen.len();

    // 3. Every message netsim took for an instance is logged once, with one
    // `message.received` (it reaches its webhook by 4).
    let inbound: Vec<(String, String)> = inbound.lock().unwrap().clone();
    let (inst_of, wa_ids): (Vec<String>, Vec<String>) = inbound.iter().cloned().unzip();
    let logged: Vec<(String, String, i64, i64)> = wait_for(settle, || async {
        let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT v.i, v.w, (SELECT count(*) FROM log_messages l WHERE l.instance_id = v.i AND l.wa_message_id = v.w), \
                 (SELECT count(*) FROM outbox o WHERE o.instance_id = v.i AND o.type = 'message.received' \
                    AND o.payload->'data'->>'wa_message_id' = v.w) \
             FROM UNNEST($1::text[], $2::text[]) AS v(i, w)",
        )
        .bind(&inst_of)
        .bind(&wa_ids)
        .fetch_all(&pool)
        .await
        .ok()?;
        rows.iter().all(|r| r.2 > 0).then_some(rows)
    })
    .await
    .unwrap_or_else(|| panic!("received messages still unlogged {settle:?} after the last fault"));
    for (inst, wa, n, events) in &logged {
        assert_eq!((*n, *events), (1, 1), "{inst}: network id {wa} logged {n} times with {events} events");
    }
    report.inbound = logged.len();
    assert!(report.inbound > 0, "no contact wrote in");

    // 4. Every event for the webhooks reaches the receiver, and the log shows it once.
    let types: Vec<String> = EVENTS.iter().map(|s| s.to_string()).collect();
    let inst_ids: Vec<String> = instances.iter().map(|(i, _)| i.clone()).collect();
    let events: Vec<String> = wait_for(settle, || async {
        // The relay marks an event published before the fan-out has created its
        // deliveries: an event of ours with no finished delivery is pending too.
        let pending: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM outbox o WHERE NOT EXISTS \
                (SELECT 1 FROM outbox_published p WHERE p.event_id = o.id)) + \
             (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending') + \
             (SELECT count(*) FROM outbox o WHERE o.instance_id = ANY($1) AND o.type = ANY($2) \
                AND o.created_at > $3::timestamptz AND NOT EXISTS ( \
                  SELECT 1 FROM webhook_deliveries d WHERE d.event_id = o.id AND d.state <> 'pending'))",
        )
        .bind(&inst_ids)
        .bind(&types)
        .bind(&since)
        .fetch_one(&pool)
        .await
        .ok()?;
        if pending > 0 {
            return None;
        }
        sqlx::query_scalar(
            "SELECT id FROM outbox WHERE instance_id = ANY($1) AND type = ANY($2) AND created_at > $3::timestamptz",
        )
        .bind(&inst_ids)
        .bind(&types)
        .bind(&since)
        .fetch_all(&pool)
        .await
        .ok()
    })
    .await
    .unwrap_or_else(|| panic!("events or deliveries still pending {settle:?} after the last fault"));
    let received: HashSet<String> =
        sink.received().iter().filter_map(|r| r.header("webhook-id").map(str::to_string)).collect();
    report.webhook_requests = sink.received().len();
    let mut logged: HashMap<String, u32> = HashMap::new();
    for (id, token) in &instances {
        let own = cluster.api.client(Some(token.clone()));
        let hooks = own.get(&format!("/v1/instances/{id}/webhooks")).await.expect(200);
        let wh = hooks["webhooks"][0]["id"].as_str().unwrap().to_string();
        let mut cursor = String::new();
        loop {
            let page =
                own.get(&format!("/v1/instances/{id}/webhooks/{wh}/deliveries?limit=100{cursor}")).await.expect(200);
            for d in page["deliveries"].as_array().unwrap() {
                assert_eq!(d["state"], "succeeded", "a delivery did not succeed: {d}");
                *logged.entry(d["event_id"].as_str().unwrap().to_string()).or_default() += 1;
            }
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => break,
            }
        }
    }
    for e in &events {
        assert!(received.contains(e), "event {e} never reached its webhook");
        assert_eq!(logged.get(e), Some(&1), "event {e} is in the delivery log {:?} times", logged.get(e));
    }
    report.events = events.len();
    report.deliveries = logged.len();
    report.converged_in = calm.elapsed();

    // 5. Lease epochs: each claimed once per instance; the fence is the newest claim.
    let mut claims: HashMap<String, Vec<i64>> = HashMap::new();
    for entry in std::fs::read_dir(&logs).unwrap() {
        let path = entry.unwrap().path();
        if !path.file_name().unwrap().to_string_lossy().starts_with("worker-") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
            if v["message"] == "instance claimed" {
                let epoch = v["epoch"].as_i64().expect("a claim logs its epoch");
                claims.entry(v["instance_id"].as_str().unwrap().to_string()).or_default().push(epoch);
            }
        }
    }
    for (id, _) in &instances {
        let epochs = claims.get(id).unwrap_or_else(|| panic!("no claim of {id} was logged"));
        let unique: HashSet<i64> = epochs.iter().copied().collect();
        assert_eq!(unique.len(), epochs.len(), "an epoch of {id} was claimed twice: {epochs:?}");
        let fence: i64 = sqlx::query_scalar("SELECT owner_epoch FROM instances WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(Some(&fence), epochs.iter().max(), "{id}: the fence is not the newest claim {epochs:?}");
    }
    report.claims = claims.values().map(Vec::len).sum();
    drop(procs);
    drop(cluster);
    let _ = std::fs::remove_dir_all(&logs);
    report
}

fn dispatcher(bin: &Path, c: &Config, logs: &Path, i: usize) -> Child {
    let mut cmd = command(bin, "dispatcher", c);
    cmd.env("PACELINE_METRICS_ADDR", free_addr().to_string())
        .stderr(log_file(&logs.join(format!("dispatcher-{i}.log"))));
    cmd.spawn().expect("spawn paceline dispatcher")
}

impl Drop for Procs {
    fn drop(&mut self) {
        for d in &mut self.dispatchers {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}
