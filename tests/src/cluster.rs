//! A cluster for multi-pod tests: the API and netsim in this process, workers as real
//! `paceline worker` processes (so tests can SIGKILL, SIGTERM, SIGSTOP and SIGCONT them),
//! all on one test's schema and prefixes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use shared::config::Network;
use shared::{Config, Shutdown};

use crate::{test_config, Client, Instance, TestApi};

/// A worker process and where its metrics are served.
pub struct WorkerProc {
    pub child: Child,
    pub metrics: SocketAddr,
}

pub struct Cluster {
    pub api: TestApi,
    pub netsim: SocketAddr,
    pub config: Config,
    pub workers: Vec<WorkerProc>,
    /// When set, each worker's log (stderr) is appended to `worker-{idx}.log` here.
    pub worker_log_dir: Option<PathBuf>,
    bin: PathBuf,
    netsim_shutdown: Shutdown,
}

pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

impl Cluster {
    /// Starts netsim and the API, then `workers` worker processes of `bin`. `tweak`
    /// adjusts the shared config (lease TTL, scan interval, ...) before anything starts.
    pub async fn start(bin: &Path, workers: usize, tweak: impl FnOnce(&mut Config)) -> Cluster {
        let mut config = test_config();
        config.network = Network::Sim;
        config.worker.lease_ttl = std::time::Duration::from_millis(2_000);
        config.worker.scan = std::time::Duration::from_millis(200);
        config.api.connect_qr_wait = std::time::Duration::from_millis(5_000);
        // No post-connection grace or ramp unless a test asks for them.
        config.pacing.grace_min = std::time::Duration::from_millis(0);
        config.pacing.grace_max = std::time::Duration::from_millis(0);
        config.pacing.ramp = std::time::Duration::from_millis(0);
        config.worker.queue_retry_base = std::time::Duration::from_millis(50);
        config.media.retry_base = std::time::Duration::from_millis(200);
        let netsim_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let netsim = netsim_listener.local_addr().unwrap();
        config.netsim.url = url::Url::parse(&format!("http://{netsim}")).unwrap();
        tweak(&mut config);
        let netsim_shutdown = Shutdown::new();
        tokio::spawn(netsim::run(netsim_listener, config.netsim.qr_rotate, netsim_shutdown.clone()));
        let api = TestApi::start_with(config.clone()).await;
        let mut c = Cluster {
            api,
            netsim,
            config,
            workers: Vec::new(),
            worker_log_dir: None,
            bin: bin.to_path_buf(),
            netsim_shutdown,
        };
        for _ in 0..workers {
            c.spawn_worker();
        }
        c
    }

    /// Starts one more worker process; returns its index.
    pub fn spawn_worker(&mut self) -> usize {
        let w = self.worker_proc(self.workers.len());
        self.workers.push(w);
        self.workers.len() - 1
    }

    /// Starts worker `idx` again (after it was killed and reaped), on a new metrics port.
    pub fn respawn_worker(&mut self, idx: usize) {
        let _ = self.workers[idx].child.kill();
        let _ = self.workers[idx].child.wait();
        self.workers[idx] = self.worker_proc(idx);
    }

    fn worker_proc(&self, idx: usize) -> WorkerProc {
        let metrics = free_addr();
        let mut cmd = command(&self.bin, "worker", &self.config);
        cmd.env("PACELINE_METRICS_ADDR", metrics.to_string());
        if let Some(dir) = &self.worker_log_dir {
            cmd.stderr(log_file(&dir.join(format!("worker-{idx}.log"))));
        }
        let child = cmd.spawn().expect("spawn paceline worker");
        WorkerProc { child, metrics }
    }

    /// Sends a signal (`KILL`, `TERM`, `STOP`, `CONT`) to worker `idx`.
    pub fn signal(&self, idx: usize, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.workers[idx].child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill -{sig} failed");
    }

    /// A worker's `/metrics` text ("" when it does not answer).
    pub async fn worker_metrics(&self, idx: usize) -> String {
        let url = format!("http://{}/metrics", self.workers[idx].metrics);
        match tokio::time::timeout(Duration::from_secs(2), reqwest::get(url)).await {
            Ok(Ok(r)) => r.text().await.unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// A metric's value in a worker's exposition (sum over label sets matching `filter`).
    pub async fn worker_metric(&self, idx: usize, name: &str, filter: &str) -> f64 {
        self.worker_metrics(idx)
            .await
            .lines()
            .filter(|l| l.starts_with(name) && l.contains(filter))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// The index of the worker that holds `n` leases or more, if any answers so.
    pub async fn owner(&self) -> Option<usize> {
        for i in 0..self.workers.len() {
            if self.worker_metric(i, "paceline_worker_leases_held", "").await >= 1.0 {
                return Some(i);
            }
        }
        None
    }

    /// A client for netsim's control API.
    pub fn netsim(&self) -> Client {
        Client {
            http: shared::fetch::client_builder().build().unwrap(),
            base: format!("http://{}", self.netsim),
            token: None,
            headers: Vec::new(),
        }
    }

    /// Registers `number` on the simulated network.
    pub async fn phone(&self, number: &str, business: bool) {
        self.netsim().post("/control/phones", &json!({ "number": number, "business": business })).await.expect(201);
    }

    /// The phone `from` texts `to` through netsim; returns the message's network id.
    pub async fn phone_text(&self, from: &str, to: &str, text: &str) -> String {
        let path = format!("/control/phones/{from}/messages");
        let r = self.netsim().post(&path, &json!({ "to": to, "text": text })).await.expect(201);
        r["id"].as_str().expect("a network id").to_string()
    }

    /// Creates an instance, connects it and pairs it by QR with `number`; returns
    /// (instance, token).
    pub async fn paired_instance(&self, name: &str, number: &str) -> (Instance, String) {
        let (inst, token) = self.api.create_instance(name).await;
        let id = inst.id.to_string();
        let admin = self.api.admin();
        admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
        let qr = wait_for(Duration::from_secs(20), || async {
            let r = admin.get(&format!("/v1/instances/{id}/qr")).await;
            (r.status == 200).then_some(r.body)
        })
        .await
        .expect("a QR code appears");
        self.netsim().post("/control/scan", &json!({ "code": qr["code"], "number": number })).await.expect(200);
        let inst = self.wait_state(&id, "connected", Duration::from_secs(20)).await;
        (inst, token)
    }

    /// Waits until the instance is in `state`; returns its record.
    pub async fn wait_state(&self, id: &str, state: &str, within: Duration) -> Instance {
        let admin = self.api.admin();
        let path = format!("/v1/instances/{id}");
        let got = wait_for(within, || async {
            let r = admin.get(&path).await.body;
            (r["state"] == state).then_some(r)
        })
        .await;
        match got {
            Some(v) => crate::record(&v),
            None => panic!("instance did not reach {state}: {}", admin.get(&path).await.text),
        }
    }

    /// Lets an instance send as fast as the network takes it (admin-only unsafe pacing).
    pub async fn unpaced(&self, id: &str) {
        self.api
            .admin()
            .patch(
                &format!("/v1/instances/{id}"),
                &json!({ "unsafe_pacing": true, "min_interval_ms": 0, "max_per_minute": 100000 }),
            )
            .await
            .expect(200);
    }

    /// The instance's row as workers see it: (owner_epoch, state, updated_at text).
    pub async fn ownership(&self, id: &str) -> (i64, String, String) {
        let pool = self.pool().await;
        sqlx::query_as("SELECT owner_epoch, state, updated_at::text FROM instances WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
    }

    pub async fn pool(&self) -> sqlx::PgPool {
        shared::db::connect(&{
            let mut one = self.config.clone();
            one.database.max_connections = 1;
            one
        })
        .await
        .unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = Command::new("kill").args(["-CONT", &w.child.id().to_string()]).stderr(Stdio::null()).status();
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
        self.netsim_shutdown.cancel();
    }
}

/// `paceline <role>` configured like `c` (only the `PACELINE_*` it sets; nothing inherited).
pub fn command(bin: &Path, role: &str, c: &Config) -> Command {
    let mut cmd = Command::new(bin);
    for (k, _) in std::env::vars() {
        if k.starts_with("PACELINE_") {
            cmd.env_remove(k);
        }
    }
    // Every setting of `c`, so a process runs exactly the test's configuration: a
    // section's keys as `PACELINE_<SECTION>__<KEY>`.
    let fields = serde_json::to_value(c).expect("the config serializes");
    let mut settings = Vec::new();
    for (key, value) in fields.as_object().expect("an object") {
        match value {
            Value::Object(section) => {
                settings.extend(section.iter().map(|(k, v)| (format!("{key}__{k}"), v.clone())));
            }
            v => settings.push((key.clone(), v.clone())),
        }
    }
    for (key, value) in settings {
        let value = match value {
            Value::Null | Value::Object(_) => continue,
            Value::String(s) => s,
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        };
        cmd.env(format!("PACELINE_{}", key.to_ascii_uppercase()), value);
    }
    cmd.arg(role)
        .env("PACELINE_NAMESPACE__DATABASE_SCHEMA", c.namespace.database_schema.as_deref().unwrap_or("public"))
        .env("PACELINE_DATABASE__MAX_CONNECTIONS", "5")
        .env("PACELINE_LOG__LEVEL", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd
}

/// A log file opened for appending, as a child's stderr.
pub fn log_file(path: &Path) -> Stdio {
    std::fs::OpenOptions::new().create(true).append(true).open(path).expect("open a log file").into()
}

/// An API process on a free port, killed on drop.
pub struct ApiProc {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ApiProc {
    /// Starts `paceline api` with `c` and waits until it is ready.
    pub async fn start(bin: &Path, c: &Config) -> ApiProc {
        Self::start_at(bin, c, free_addr(), None).await
    }

    /// Starts `paceline api` on `addr` (again, after a kill), its log appended to `log`.
    pub async fn start_at(bin: &Path, c: &Config, addr: SocketAddr, log: Option<&Path>) -> ApiProc {
        let mut cmd = command(bin, "api", c);
        cmd.env("PACELINE_LISTEN_ADDR", addr.to_string()).env("PACELINE_METRICS_ADDR", free_addr().to_string());
        if let Some(log) = log {
            cmd.stderr(log_file(log));
        }
        let child = cmd.spawn().expect("spawn paceline api");
        let ready = wait_for(Duration::from_secs(30), || async {
            reqwest::get(format!("http://{addr}/readyz")).await.ok().filter(|r| r.status() == 200).map(|_| ())
        })
        .await;
        assert!(ready.is_some(), "paceline api did not become ready");
        ApiProc { child, addr }
    }

    pub fn client(&self, token: Option<String>) -> Client {
        Client {
            http: shared::fetch::client_builder().build().unwrap(),
            base: format!("http://{}", self.addr),
            token,
            headers: Vec::new(),
        }
    }
}

impl Drop for ApiProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 50 ms until it yields a value or `within` passes. This waits for a
/// cluster to converge; it asserts nothing about timing.
pub async fn wait_for<T, F, Fut>(within: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if start.elapsed() >= within {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
