//! The instance actor with drivers that misbehave on purpose, run in-process: a task that
//! panics gives its lease back (and is counted), and a slow session operation does not
//! hold up the instance's sends.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};
use shared::Shutdown;
use tokio::sync::mpsc;
use worker::driver::{Driver, DriverError, DriverEvent, OpenTarget, Outgoing, RemoteMedia, Session};

const A: &str = "5511977770001";
const B: &str = "5511977770002";

/// The netsim network with workers run here, in-process, on the test's drivers.
async fn cluster() -> Cluster {
    // No worker processes: the tests start their own worker in this process.
    Cluster::start(Path::new("/nonexistent"), 0, |_| {}).await
}

fn start_worker(c: &Cluster, sim: Arc<dyn Driver>) -> Shutdown {
    let shutdown = Shutdown::new();
    let drivers = worker::Drivers { sim: Some(sim), whatsapp: None };
    tokio::spawn(worker::run_with(c.config.clone(), drivers, shutdown.clone()));
    shutdown
}

/// Opens sessions by panicking: a bug in a driver.
struct Panicking;

#[async_trait::async_trait]
impl Driver for Panicking {
    fn name(&self) -> &'static str {
        "sim"
    }

    async fn open(
        &self,
        _: &OpenTarget,
        _: Option<Value>,
    ) -> Result<(Box<dyn Session>, mpsc::Receiver<DriverEvent>), DriverError> {
        panic!("a bug in the driver");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicked_actor_releases_its_lease_and_is_counted() {
    let c = cluster().await;
    let shutdown = start_worker(&c, Arc::new(Panicking));
    let (inst, _) = c.api.create_instance("panics").await;
    let id = inst.id.to_string();
    c.api.admin().post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    let redis = shared::kv::connect(&c.config).unwrap();
    let key = shared::kv::Keys::new(&c.config).lease(&shared::ids::InstanceId::parse(&id).unwrap());
    // The worker claims it (a new epoch), the task panics, the lease goes back.
    let claimed = wait_for(Duration::from_secs(10), || async { (c.ownership(&id).await.0 > 0).then_some(()) }).await;
    assert!(claimed.is_some(), "the worker claimed the instance");
    let panics = wait_for(Duration::from_secs(10), || async {
        let text = shared::telemetry::prometheus().render();
        let n: f64 = text
            .lines()
            .filter(|l| l.starts_with("paceline_worker_actor_panics_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        (n >= 1.0).then_some(n)
    })
    .await;
    assert!(panics.is_some(), "the panic was counted");
    let released = wait_for(Duration::from_secs(5), || {
        let (redis, key) = (redis.clone(), key.clone());
        async move {
            let mut conn = redis.get().await.unwrap();
            let holder: Option<String> =
                deadpool_redis::redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
            holder.is_none().then_some(())
        }
    })
    .await;
    assert!(released.is_some(), "the lease was released, not renewed forever");
    // This worker leaves it to others for a while rather than crash on it again at once.
    tokio::time::sleep(c.config.worker.scan * 3).await;
    let mut conn = redis.get().await.unwrap();
    let holder: Option<String> = deadpool_redis::redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
    assert!(holder.is_none(), "not claimed again at once by the worker it panicked on");
    shutdown.cancel();
}

/// netsim's sessions, with every session operation (contacts, chats, ...) taking 20 s.
struct SlowOperations(worker::driver::sim::SimDriver);

struct SlowSession(Box<dyn Session>);

#[async_trait::async_trait]
impl Driver for SlowOperations {
    fn name(&self) -> &'static str {
        "sim"
    }

    async fn open(
        &self,
        target: &OpenTarget,
        credentials: Option<Value>,
    ) -> Result<(Box<dyn Session>, mpsc::Receiver<DriverEvent>), DriverError> {
        let (session, events) = self.0.open(target, credentials).await?;
        Ok((Box::new(SlowSession(session)), events))
    }
}

#[async_trait::async_trait]
impl Session for SlowSession {
    async fn send(&self, msg: &Outgoing) -> Result<(), DriverError> {
        self.0.send(msg).await
    }
    async fn pairing_code(&self, phone: &str) -> Result<String, DriverError> {
        self.0.pairing_code(phone).await
    }
    async fn logout(&self) -> Result<(), DriverError> {
        self.0.logout().await
    }
    async fn check_numbers(&self, numbers: &[String]) -> Result<Vec<shared::contract::NumberAnswer>, DriverError> {
        self.0.check_numbers(numbers).await
    }
    async fn net(&self, op: &shared::contract::NetOp) -> Result<shared::contract::Answer, DriverError> {
        tokio::time::sleep(Duration::from_secs(20)).await;
        self.0.net(op).await
    }
    async fn download(&self, media: &RemoteMedia) -> Result<Vec<u8>, DriverError> {
        self.0.download(media).await
    }
    async fn reject_call(&self, call_id: &str, message: Option<String>) -> Result<(), DriverError> {
        self.0.reject_call(call_id, message).await
    }
    async fn close(&self) {
        self.0.close().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_session_operation_does_not_delay_a_queued_send() {
    let c = cluster().await;
    let sim = worker::driver::sim::SimDriver::new(&c.config.netsim.url, Duration::from_secs(30));
    let shutdown = start_worker(&c, Arc::new(SlowOperations(sim)));
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("slow-ops", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    // A session operation that takes 20 s (the API gives up on it first: 504).
    let slow = tokio::spawn({
        let (own, id) = (own.clone(), id.clone());
        async move { own.get(&format!("/v1/instances/{id}/contacts")).await.status }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Meanwhile a send goes out at once.
    let started = Instant::now();
    let sent = own
        .post(
            &format!("/v1/instances/{id}/messages?wait=true&timeout=15s"),
            &json!({ "to": B, "type": "text", "text": "now" }),
        )
        .await;
    assert_eq!(sent.status, 200, "sent while the operation was still running: {}", sent.text);
    assert_eq!(sent.body["status"], "sent");
    println!("sent in {} ms while a 20 s session operation ran", started.elapsed().as_millis());
    assert_eq!(slow.await.unwrap(), 504, "the slow operation timed out at the API");
    shutdown.cancel();
}
