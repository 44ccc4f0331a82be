//! The AI attendant on netsim, as its users run it: two `paceline attendant` processes
//! share the consumer, a small OpenAI-compatible server and a webhook bot in this test
//! record what they receive and answer deterministically. One reply per message (also
//! when the event comes again), built from the system prompt and the chat's history in
//! order; a reply from the phone pauses the chat and resume restarts it; the keyword
//! handoff; the reply limit; a provider that fails or times out; groups only when
//! mentioned; and the provider's key in no response, event or log line.
//!
//! Here: the provider and the bot (one small server), the attendant pods, and the
//! helpers that read netsim's inboxes, the outbox and the shared consumer. The tests:
//! `replies` (one user's whole story: replies, handoff, limits, failures, voice, groups,
//! usage, the keys kept), `config` (the admin's key and private targets stay with their
//! origin) and `budget` (a bot loop stopped, the daily budget kept).

mod budget;
mod config;
mod replies;

use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use harness::cluster::{command, log_file, wait_for, Cluster};
use serde_json::{json, Value};

use crate::bin;

const KEY: &str = "sk-test-attendant-0123456789abcdef";

/// `ok`: answer; `fail`: 500; `slow`: answer after 30 s; `thinking`: after 2 s.
const OK: u8 = 0;
const FAIL: u8 = 1;
const SLOW: u8 = 2;
const THINKING: u8 = 3;

/// A request the provider got: (which endpoint, its Authorization header, its body).
type Seen = (String, Option<String>, Value);

#[derive(Clone, Default)]
struct Provider {
    seen: Arc<Mutex<Vec<Seen>>>,
    mode: Arc<AtomicU8>,
}

impl Provider {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The last user turn of a conversation.
fn last_user(turns: &Value) -> String {
    turns.as_array().unwrap().iter().rev().find(|t| t["role"] == "user").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn record(p: &Provider, path: &str, h: &HeaderMap, body: &Value) -> Option<StatusCode> {
    let auth = h.get("authorization").map(|v| v.to_str().unwrap().to_string());
    p.seen.lock().unwrap().push((path.to_string(), auth, body.clone()));
    match p.mode.load(Ordering::SeqCst) {
        FAIL => Some(StatusCode::INTERNAL_SERVER_ERROR),
        SLOW => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            None
        }
        THINKING => {
            tokio::time::sleep(Duration::from_secs(2)).await;
            None
        }
        _ => None,
    }
}

async fn completions(State(p): State<Provider>, h: HeaderMap, Json(body): Json<Value>) -> axum::response::Response {
    if let Some(s) = record(&p, "openai", &h, &body).await {
        return s.into_response();
    }
    let text = format!("echo: {}", last_user(&body["messages"]));
    Json(json!({
        "id": "cmpl-1", "object": "chat.completion", "model": body["model"],
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15 },
    }))
    .into_response()
}

/// `/audio/transcriptions`: the model and the file's type and size, answered with a fixed text.
async fn transcriptions(State(p): State<Provider>, h: HeaderMap, mut form: axum::extract::Multipart) -> Json<Value> {
    let mut seen = json!({});
    while let Some(field) = form.next_field().await.unwrap() {
        let name = field.name().unwrap_or("").to_string();
        let mime = field.content_type().map(str::to_string);
        let bytes = field.bytes().await.unwrap();
        seen[name.as_str()] = match name.as_str() {
            "file" => json!({ "mime": mime, "size": bytes.len() }),
            _ => json!(String::from_utf8_lossy(&bytes)),
        };
    }
    let auth = h.get("authorization").map(|v| v.to_str().unwrap().to_string());
    p.seen.lock().unwrap().push(("transcribe".into(), auth, seen));
    Json(json!({ "text": "do you have boots" }))
}

async fn bot(State(p): State<Provider>, h: HeaderMap, Json(body): Json<Value>) -> axum::response::Response {
    if let Some(s) = record(&p, "webhook", &h, &body).await {
        return s.into_response();
    }
    // n8n's "Respond to Webhook" with an AI agent answers `[{"output": ...}]`.
    Json(json!([{ "output": format!("bot: {}", body["message"]["content"]["text"].as_str().unwrap_or("")) }]))
        .into_response()
}

async fn provider() -> (Provider, String) {
    let p = Provider::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/audio/transcriptions", post(transcriptions))
        .route("/hook", post(bot))
        .with_state(p.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (p, base)
}

/// Two attendant pods as processes, their logs in files.
struct Pods(Vec<Child>, Vec<PathBuf>);

impl Drop for Pods {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn pods(c: &Cluster, n: usize) -> Pods {
    let dir = std::env::temp_dir().join(format!("paceline-attendant-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut kids, mut logs) = (Vec::new(), Vec::new());
    for i in 0..n {
        let log = dir.join(format!("attendant-{i}.log"));
        let mut cmd = command(bin(), "attendant", &c.config);
        cmd.env("PACELINE_METRICS_ADDR", harness::cluster::free_addr().to_string())
            .env("PACELINE_LOG__LEVEL", "debug")
            .stderr(log_file(&log));
        kids.push(cmd.spawn().unwrap());
        logs.push(log);
    }
    Pods(kids, logs)
}

/// Texts in `number`'s inbox from `from`.
async fn inbox(c: &Cluster, number: &str, from: &str) -> Vec<String> {
    let v = c.netsim().get(&format!("/control/phones/{number}/inbox")).await.expect(200);
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == from)
        .map(|m| m["text"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn say(c: &Cluster, from: &str, to: &str, text: &str) {
    c.phone_text(from, to, text).await;
}

/// Events of `kind` of the instance, oldest first.
async fn events(pool: &sqlx::PgPool, id: &str, kind: &str) -> Vec<Value> {
    sqlx::query_scalar("SELECT payload->'data' FROM outbox WHERE instance_id = $1 AND type = $2 ORDER BY id")
        .bind(id)
        .bind(kind)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// The shared attendant consumer's state.
async fn consumer_info(c: &Cluster) -> Option<async_nats::jetstream::consumer::Info> {
    let nats = async_nats::connect(&c.config.nats_url).await.ok()?;
    let js = async_nats::jetstream::new(nats);
    let stream = js.get_stream(shared::bus::Subjects::new(&c.config).events_stream()).await.ok()?;
    let mut consumer: async_nats::jetstream::consumer::PullConsumer =
        stream.get_consumer(attendant::CONSUMER).await.ok()?;
    consumer.info().await.ok().cloned()
}

/// Waits until the attendant pods have handled (acked) the `message.received` of `text`:
/// a barrier before asserting that something did not happen.
async fn handled(c: &Cluster, pool: &sqlx::PgPool, id: &str, text: &str) {
    let seq: i64 = wait_for(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, Option<i64>>(
            "SELECT p.stream_seq FROM outbox o LEFT JOIN outbox_published p ON p.event_id = o.id \
             WHERE o.instance_id = $1 AND o.type = 'message.received' AND o.payload->'data'->'content'->>'text' = $2",
        )
        .bind(id)
        .bind(text)
        .fetch_optional(pool)
        .await
        .unwrap()
        .flatten()
    })
    .await
    .expect("the message's event is published");
    wait_for(Duration::from_secs(30), || async {
        let info = consumer_info(c).await?;
        (info.ack_floor.stream_sequence >= seq as u64 && info.num_ack_pending == 0).then_some(())
    })
    .await
    .expect("the attendant handles the message");
}
