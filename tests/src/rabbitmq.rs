//! RabbitMQ for the event sink's tests: the broker `scripts/test` starts (Debian's
//! rabbitmq-server on 127.0.0.1, guest/guest: [`amqp_url`]), which a test can stop and
//! start again with what it held ([`broker`], [`Node`]), or a node of the test's own
//! ([`Node::private`]) for a test that takes its broker down while other tests run. What
//! the gateway published is read with the real `pika` client (`tests/rabbitmq/consume.py`
//! through [`crate::run_python`]): [`consume`], [`queue_len`]; [`declare_queue`] binds a
//! queue of the test's own, [`publish`] puts a message in.
//!
//! Every function here blocks (a subprocess): from an async test, call it through
//! `tokio::task::spawn_blocking`, or on the multi-thread runtime, if the gateway must keep
//! running meanwhile (a broker stops in about 2 s and starts in 4 to 8 s).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

/// The AMQP URL of the tests' broker (`amqp://guest:guest@127.0.0.1:PORT/%2f`).
pub fn amqp_url() -> String {
    var("PACELINE_TEST_AMQP_URL")
}

fn var(k: &str) -> String {
    std::env::var(k)
        .unwrap_or_else(|_| panic!("{k} is not set: run the tests through scripts/test, which starts RabbitMQ"))
}

/// Runs `action` (`stop`, `start` or `kill`) on the tests' broker, see [`Node`].
pub fn broker(action: &str) {
    let node = Node::shared();
    match action {
        "stop" => node.stop(),
        "start" => node.start(),
        "kill" => node.kill(),
        _ => panic!("broker({action:?}): the actions are stop, start and kill"),
    }
}

/// A RabbitMQ node, acted on through `scripts/lib/rabbitmq-node`
/// (`PACELINE_TEST_RABBITMQ_CTL`).
pub struct Node {
    /// Its AMQP URL.
    pub url: String,
    env: PathBuf,
    private: bool,
}

impl Node {
    /// The tests' broker, which every RabbitMQ test shares: stopping it takes it away
    /// from the others that run at the time too.
    pub fn shared() -> Node {
        Node { url: amqp_url(), env: PathBuf::from(var("PACELINE_TEST_RABBITMQ_ENV")), private: false }
    }

    /// A node of this test's own, started (a fresh node takes 5 to 8 s), on free ports,
    /// under the tests' data directory (`.paceline/test/rabbitmq/private/`, its log
    /// there too); killed when dropped (and by `scripts/test` at the end if it is not).
    pub fn private() -> Node {
        let shared = PathBuf::from(var("PACELINE_TEST_RABBITMQ_ENV"));
        let id = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("pl-{}@localhost", &id[..12]);
        let dir = shared.parent().expect("the shared node's directory").join("private").join(&id[..12]);
        let [port, dist] = free_ports();
        let out = ctl_output(None, &["init", &dir.to_string_lossy(), &port.to_string(), &dist.to_string(), &name]);
        assert!(out.status.success(), "rabbitmq-node init: {}", String::from_utf8_lossy(&out.stderr));
        let env = PathBuf::from(String::from_utf8(out.stdout).expect("a path").trim());
        let node = Node { url: format!("amqp://guest:guest@127.0.0.1:{port}/%2f"), env, private: true };
        node.start();
        node
    }

    /// An orderly shutdown; returns once the node is gone and its port refuses
    /// connections. Durable queues and persistent messages are kept for [`Node::start`].
    pub fn stop(&self) {
        self.run(&["stop"]);
    }

    /// Starts the node again with its data; returns once it accepts AMQP connections.
    pub fn start(&self) {
        self.run(&["start"]);
    }

    /// SIGKILL (a crash, nothing flushed on the way out); returns once it is gone.
    pub fn kill(&self) {
        self.run(&["kill"]);
    }

    /// Whether the node runs and accepts AMQP connections.
    pub fn running(&self) -> bool {
        ctl_output(Some(&self.env), &["status"]).status.success()
    }

    /// `rabbitmqctl ARGS` against the node (e.g. `["close_all_connections", "test"]`,
    /// `["list_queues", "name", "messages"]`); its output.
    pub fn ctl(&self, args: &[&str]) -> String {
        let mut all = vec!["ctl"];
        all.extend_from_slice(args);
        self.run(&all)
    }

    fn run(&self, args: &[&str]) -> String {
        let out = ctl_output(Some(&self.env), args);
        assert!(
            out.status.success(),
            "rabbitmq-node {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.private {
            let _ = ctl_output(Some(&self.env), &["kill"]);
        }
    }
}

fn ctl_output(env: Option<&Path>, args: &[&str]) -> Output {
    let ctl = var("PACELINE_TEST_RABBITMQ_CTL");
    let mut cmd = Command::new(&ctl);
    if let Some(env) = env {
        cmd.arg("-e").arg(env);
    }
    cmd.args(args).output().unwrap_or_else(|e| panic!("{ctl} runs: {e}"))
}

/// Two distinct free ports (both bound until both are known).
fn free_ports() -> [u16; 2] {
    let bind = || std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let (a, b) = (bind(), bind());
    [a.local_addr().unwrap().port(), b.local_addr().unwrap().port()]
}

/// A message read from a queue.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Received {
    pub routing_key: String,
    pub exchange: String,
    pub redelivered: bool,
    /// The body parsed as JSON; a UTF-8 body that is no JSON as a string; null when not
    /// UTF-8 (see `body_bytes`).
    pub body: Value,
    pub body_bytes: Vec<u8>,
    /// 2 = persistent.
    pub delivery_mode: Option<u8>,
    pub message_id: Option<String>,
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    /// The `type` property.
    pub message_type: Option<String>,
    pub correlation_id: Option<String>,
    pub app_id: Option<String>,
    /// Seconds since the epoch.
    pub timestamp: Option<i64>,
    /// The headers table (byte strings as text, or `{"base64": ...}` when not UTF-8;
    /// timestamps as seconds); null when the message has none.
    pub headers: Value,
}

/// Reads up to `want` messages from `queue` (which must exist: the gateway declares it),
/// waiting up to `timeout_secs` for them, and acks what it read; messages beyond `want`
/// stay queued. Fewer than `want` when the time is up: assert on the length.
pub fn consume(url: &str, queue: &str, want: usize, timeout_secs: u64) -> Vec<Received> {
    let v = pika(json!({ "op": "consume", "url": url, "queue": queue, "want": want, "timeout": timeout_secs }));
    serde_json::from_value(v["messages"].clone()).expect("the messages as Received")
}

/// Declares a durable topic exchange (as the gateway declares its own: the same
/// arguments, or the broker refuses) and a durable queue bound to it with `binding_key`.
pub fn declare_queue(url: &str, queue: &str, exchange: &str, binding_key: &str) {
    pika(json!({ "op": "declare", "url": url, "queue": queue, "exchange": exchange, "binding_key": binding_key }));
}

/// Publishes a persistent message (mandatory, with publisher confirms: it is queued when
/// this returns, or this panics).
pub fn publish(url: &str, exchange: &str, routing_key: &str, body: &[u8]) {
    pika(json!({ "op": "publish", "url": url, "exchange": exchange, "routing_key": routing_key, "body": body }));
}

/// How many messages `queue` holds (ready ones, not those delivered and unacked); None
/// when there is no such queue.
pub fn queue_len(url: &str, queue: &str) -> Option<u64> {
    let v = pika(json!({ "op": "count", "url": url, "queue": queue }));
    v["messages"].as_u64()
}

fn pika(input: Value) -> Value {
    let out = crate::run_python(PIKA, &input);
    assert!(
        out.status.success(),
        "pika {} on {}: {}",
        input["op"],
        input["queue"],
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("pika's script answers JSON")
}

/// The AMQP client (`tests/rabbitmq/consume.py`).
const PIKA: &str = include_str!("../rabbitmq/consume.py");
