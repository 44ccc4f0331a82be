//! Webhook and event-stream test tools: a programmable webhook receiver, the Standard
//! Webhooks reference verifier (the `standardwebhooks` Python package), an SSE reader,
//! and a private NATS server a test may stop and start.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use futures::StreamExt;

/// One request the sink received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The status it was answered with.
    pub status: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("a webhook body is JSON")
    }
}

#[derive(Default)]
struct SinkState {
    /// Answers to give, in order: (status, Retry-After); then `default`.
    plan: VecDeque<(u16, Option<String>)>,
    default: Option<u16>,
    delay: Duration,
    body: String,
    received: Vec<Received>,
}

/// A webhook receiver on loopback whose answers a test scripts.
#[derive(Clone)]
pub struct WebhookSink {
    pub addr: SocketAddr,
    state: Arc<Mutex<SinkState>>,
}

impl WebhookSink {
    pub async fn start() -> WebhookSink {
        let state = Arc::new(Mutex::new(SinkState::default()));
        let st = state.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
            let st = st.clone();
            async move {
                let (answer, delay, text) = {
                    let mut s = st.lock().unwrap();
                    let answer = s.plan.pop_front().unwrap_or((s.default.unwrap_or(200), None));
                    (answer, s.delay, s.body.clone())
                };
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let headers = headers
                    .iter()
                    .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
                    .collect();
                st.lock().unwrap().received.push(Received { headers, body, status: answer.0 });
                let mut res = (StatusCode::from_u16(answer.0).unwrap(), text).into_response();
                if let Some(ra) = answer.1 {
                    res.headers_mut().insert("retry-after", ra.parse().unwrap());
                }
                res
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        WebhookSink { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Answers the next requests with these (status, Retry-After), in order.
    pub fn plan(&self, answers: &[(u16, Option<&str>)]) {
        self.state.lock().unwrap().plan = answers.iter().map(|(s, r)| (*s, r.map(str::to_string))).collect();
    }

    /// The status once the plan ran out (200 unless set).
    pub fn default_status(&self, status: u16) {
        self.state.lock().unwrap().default = Some(status);
    }

    /// The body of every answer (empty unless set).
    pub fn answer_body(&self, body: &str) {
        self.state.lock().unwrap().body = body.to_string();
    }

    /// Waits this long before answering each request.
    pub fn delay(&self, d: Duration) {
        self.state.lock().unwrap().delay = d;
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }
}

/// Verifies a delivery with the `standardwebhooks` reference package under `secret`:
/// `Ok(())` when it accepts it, else its error.
pub fn verify_with_standardwebhooks(secret: &str, r: &Received) -> Result<(), String> {
    let script = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
req = json.load(sys.stdin)
Webhook(req["secret"]).verify(req["body"], req["headers"])
print("ok")
"#;
    let headers: serde_json::Map<String, serde_json::Value> =
        r.headers.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
    let input = serde_json::json!({ "secret": secret, "body": r.body, "headers": headers });
    let out = crate::run_python(script, &input);
    if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed").to_string())
    }
}

/// One Server-Sent Events item.
#[derive(Debug, Clone, Default)]
pub struct SseItem {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    /// A comment line (`: ...`), when the item is one.
    pub comment: Option<String>,
}

/// Reads a `text/event-stream` response item by item.
pub struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
}

impl SseReader {
    pub fn new(res: reqwest::Response) -> SseReader {
        SseReader { body: res.bytes_stream().boxed(), buf: String::new() }
    }

    /// The next event (comments included; keep-alive comments skipped), or `None`
    /// when the stream ended or `within` passed.
    pub async fn next(&mut self, within: Duration) -> Option<SseItem> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let mut item = SseItem::default();
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(c) = line.strip_prefix(':') {
                        item.comment = Some(c.trim().to_string());
                    } else if let Some((k, v)) = line.split_once(':') {
                        let v = v.strip_prefix(' ').unwrap_or(v);
                        match k {
                            "id" => item.id = Some(v.to_string()),
                            "event" => item.event = Some(v.to_string()),
                            "data" => data.push(v.to_string()),
                            _ => {}
                        }
                    }
                }
                item.data = data.join("\n");
                if item.id.is_none()
                    && item.event.is_none()
                    && item.data.is_empty()
                    && item.comment.as_deref() == Some("")
                {
                    continue; // keep-alive
                }
                return Some(item);
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next()).await.ok()??.ok()?;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

impl SseReader {
    /// Whether the server ended the stream within `within` (events before the end are
    /// skipped); false when it is still open then.
    pub async fn ends_within(&mut self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return false,
                Ok(None) | Ok(Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }
}

/// A NATS server of the test's own (JetStream on disk), to stop and start again.
pub struct NatsServer {
    pub port: u16,
    dir: std::path::PathBuf,
    child: Option<tokio::process::Child>,
}

impl NatsServer {
    pub async fn start() -> NatsServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("pl-nats-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut s = NatsServer { port, dir, child: None };
        s.restart().await;
        s
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same port and storage.
    pub async fn restart(&mut self) {
        let bin = std::env::var("PACELINE_TEST_NATS_SERVER")
            .expect("PACELINE_TEST_NATS_SERVER is not set: run the tests through scripts/test");
        let child = tokio::process::Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(&self.dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("nats-server starts");
        self.child = Some(child);
        let addr = format!("127.0.0.1:{}", self.port);
        for _ in 0..100 {
            // Ours, and NATS: another test's listener may have taken a port that was free
            // a moment ago (then this server could not bind it and exits).
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("nats-server exited ({status}): port {} was taken by someone else", self.port);
            }
            if let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await {
                use tokio::io::AsyncReadExt;
                let mut head = [0u8; 5];
                let read = tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut head)).await;
                assert!(
                    matches!(read, Ok(Ok(_))) && &head == b"INFO ",
                    "something else than our nats-server listens on port {}",
                    self.port
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("nats-server did not start");
    }

    /// Stops the server (SIGKILL: no goodbye to clients).
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
