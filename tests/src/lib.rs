//! The integration-test harness: real Postgres, Redis and NATS (started by
//! `scripts/test`, found through `PACELINE_TEST_*`), a fresh schema and key/subject
//! prefixes per test, in-process services on port 0, and a typed HTTP client.

pub mod browser;
pub mod chaos;
pub mod chatwoot;
pub mod cluster;
pub mod events;
pub mod rabbitmq;
pub mod s3;
pub mod webhooks;

use std::net::SocketAddr;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use shared::auth::{generate_token, ADMIN_TOKEN_PREFIX};
use shared::config::section;
use shared::error::ErrorBody;
use shared::{Config, Shutdown};

/// The backends' URLs, from the environment `scripts/test` sets.
pub struct Backends {
    pub database_url: String,
    pub redis_url: String,
    pub nats_url: String,
}

pub fn backends() -> Backends {
    let var = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!(
                "{k} is not set: run the integration tests through scripts/test, which starts Postgres, Redis and NATS"
            )
        })
    };
    Backends {
        database_url: var("PACELINE_TEST_DATABASE_URL"),
        redis_url: var("PACELINE_TEST_REDIS_URL"),
        nats_url: var("PACELINE_TEST_NATS_URL"),
    }
}

/// A config isolated from every other test: its own schema, key prefix, subject prefix
/// and admin token; no drain delay.
/// The test venv's Python, with the tools `scripts/test` installs (MCP SDK, Helm's
/// engine, kubernetes-validate, schemathesis, ...).
pub fn test_python() -> std::path::PathBuf {
    std::path::PathBuf::from(
        std::env::var("PACELINE_TEST_PYTHON")
            .expect("PACELINE_TEST_PYTHON is not set: run the tests through scripts/test, which installs the tools"),
    )
}

/// Node.js and the npm packages `scripts/test` installs for it (the MCP TypeScript SDK):
/// (node, its `node_modules`).
/// Runs `script` with the test venv's Python, `input` as JSON on its stdin; its output.
pub fn run_python(script: &str, input: &Value) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(test_python())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("the input is written");
    child.wait_with_output().expect("python ends")
}

pub fn test_node() -> (std::path::PathBuf, std::path::PathBuf) {
    let var = |k: &str| {
        std::path::PathBuf::from(
            std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set: run the tests through scripts/test")),
        )
    };
    (var("PACELINE_TEST_NODE"), var("PACELINE_TEST_NODE_MODULES"))
}

pub fn test_config() -> Config {
    let b = backends();
    let tag = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut c = Config {
        database_url: b.database_url,
        redis_url: b.redis_url,
        nats_url: b.nats_url,
        admin_token: Some(generate_token(ADMIN_TOKEN_PREFIX)),
        listen_addr: ([127, 0, 0, 1], 0).into(),
        ..Config::default()
    };
    c.namespace =
        section::Namespace { database_schema: Some(tag.clone()), key_prefix: tag.clone(), subject_prefix: tag };
    c.database.max_connections = 5;
    c.api.drain = Duration::from_millis(0);
    c.api.shutdown_timeout = Duration::from_millis(5_000);
    c.api.connect_qr_wait = Duration::from_millis(0);
    c.api.rpc_timeout = Duration::from_millis(2_000);
    // JetStream reserves a stream's max_bytes on the server: every test has its own
    // events stream, so each keeps a small one.
    c.events.stream_max_bytes = 16 * 1024 * 1024;
    c
}

/// An API server running in this process.
pub struct TestApi {
    pub addr: SocketAddr,
    pub config: Config,
    pub shutdown: Shutdown,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl TestApi {
    pub async fn start() -> TestApi {
        Self::start_with(test_config()).await
    }

    /// Starts the API with `config`, bound to `config.listen_addr` (port 0 picks one).
    pub async fn start_with(config: Config) -> TestApi {
        let listener = tokio::net::TcpListener::bind(config.listen_addr).await.expect("bind");
        let mut addr = listener.local_addr().unwrap();
        if addr.ip().is_unspecified() {
            addr.set_ip([127, 0, 0, 1].into());
        }
        let shutdown = Shutdown::new();
        let mut config = config;
        config.listen_addr = listener.local_addr().unwrap();
        let state = api::AppState::connect(config.clone(), shutdown.clone()).await.expect("api state");
        let task = tokio::spawn(api::serve(state, listener));
        TestApi { addr, config, shutdown, task: Some(task) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A client with the admin token.
    pub fn admin(&self) -> Client {
        self.client(self.config.admin_token.clone())
    }

    /// A client with no token.
    pub fn anon(&self) -> Client {
        self.client(None)
    }

    pub fn client(&self, token: Option<String>) -> Client {
        Client {
            http: shared::fetch::client_builder().build().unwrap(),
            base: format!("http://{}", self.addr),
            token,
            headers: Vec::new(),
        }
    }

    /// Creates an instance with the admin token; returns (instance, token).
    pub async fn create_instance(&self, name: &str) -> (Instance, String) {
        let body = self.admin().post("/v1/instances", &serde_json::json!({ "name": name })).await.expect(201);
        (record(&body["instance"]), body["token"].as_str().unwrap().to_string())
    }

    /// Creates an API key of `scope` (named after it) on instance `id` with `owner`'s
    /// token; returns its token.
    pub async fn create_key(&self, owner: &Client, id: &str, scope: &str) -> String {
        let body = serde_json::json!({ "name": scope, "scope": scope });
        let key = owner.post(&format!("/v1/instances/{id}/api-keys"), &body).await.expect(201);
        key["token"].as_str().unwrap().to_string()
    }

    /// Starts the graceful shutdown and waits for the server to stop.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(30), task).await??
    }
}

impl Drop for TestApi {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A small typed HTTP client: every call returns a [`Resp`] to assert on.
#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl Client {
    pub fn with_header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut rb = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        for (k, v) in &self.headers {
            rb = rb.header(k, v);
        }
        rb
    }

    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Resp {
        let res = rb.send().await.expect("request failed");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let text = res.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp { status, headers, body, text }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.request(reqwest::Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send(self.request(reqwest::Method::POST, path).json(body)).await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Resp {
        self.send(self.request(reqwest::Method::PATCH, path).json(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.send(self.request(reqwest::Method::PUT, path).json(body)).await
    }
}

/// An answer: status, headers, and the body as JSON (Null when not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    /// Asserts the status and returns the body.
    #[track_caller]
    pub fn expect(self, status: u16) -> Value {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.text);
        self.body
    }

    /// Asserts the status and reads the body as the API's own record type `T` (so a
    /// body that drifts from its type fails here, naming the field).
    #[track_caller]
    pub fn expect_as<T: DeserializeOwned>(self, status: u16) -> T {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.text);
        record(&self.body)
    }

    /// Asserts an error envelope with this status and code; returns the message.
    #[track_caller]
    pub fn expect_error(self, status: u16, code: &str) -> String {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.text);
        let err: ErrorBody = record(&self.body);
        assert_eq!(err.error.code.as_str(), code, "unexpected code; body: {}", self.text);
        err.error.message
    }
}

/// An instance as the API shows it: the API's own type.
pub type Instance = domain::instances::InstanceOut;

/// `v` read as the record type `T`; a mismatch panics naming the field and the body.
#[track_caller]
pub fn record<T: DeserializeOwned>(v: &Value) -> T {
    serde_path_to_error::deserialize(v)
        .unwrap_or_else(|e| panic!("the body is not a {}: {e}; body: {v}", std::any::type_name::<T>()))
}

/// A JPEG's first bytes followed by `n` bytes of `j`.
pub fn jpeg(n: usize) -> Vec<u8> {
    let mut b = vec![0xFF, 0xD8, 0xFF, 0xE0];
    b.resize(4 + n, b'j');
    b
}

/// A tiny HTTP server for media URLs: `/file/{n}` serves `n` bytes of `x`, `/jpeg/{n}`
/// a JPEG's first bytes and `n` of `j` ([`jpeg`]), `/missing` answers 404, `/redirect?to=URL` redirects. Returns its address.
pub async fn media_server() -> SocketAddr {
    use axum::extract::{Path, Query};
    use axum::response::{IntoResponse, Redirect};
    use axum::routing::get;
    let app =
        axum::Router::new()
            .route(
                "/file/{n}",
                get(|Path(n): Path<usize>| async move {
                    ([(axum::http::header::CONTENT_TYPE, "image/png")], vec![b'x'; n])
                }),
            )
            .route(
                "/jpeg/{n}",
                get(
                    |Path(n): Path<usize>| async move { ([(axum::http::header::CONTENT_TYPE, "image/jpeg")], jpeg(n)) },
                ),
            )
            .route(
                "/stream/{n}",
                // No Content-Length: the limit must stop the download while it streams.
                get(|Path(n): Path<usize>| async move {
                    let chunks =
                        (0..n.div_ceil(65536)).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'y'; 65536])));
                    axum::body::Body::from_stream(futures::stream::iter(chunks))
                }),
            )
            .route("/missing", get(|| async { axum::http::StatusCode::NOT_FOUND.into_response() }))
            .route(
                "/redirect",
                get(|Query(q): Query<std::collections::HashMap<String, String>>| async move {
                    Redirect::temporary(q.get("to").map(String::as_str).unwrap_or("/")).into_response()
                }),
            );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
