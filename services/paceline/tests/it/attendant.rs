//! The AI attendant on netsim, as its users run it: two `paceline attendant` processes
//! share the consumer, a small OpenAI-compatible server and a webhook bot in this test
//! record what they receive and answer deterministically. One reply per message (also
//! when the event comes again), built from the system prompt and the chat's history in
//! order; a reply from the phone pauses the chat and resume restarts it; the keyword
//! handoff; the reply limit; a provider that fails or times out; groups only when
//! mentioned; and the provider's key in no response, event or log line.

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

const SHOP: &str = "5511977770001";
const ANA: &str = "5511977770002";
const BEN: &str = "5511977770003";
const KEY: &str = "sk-test-attendant-0123456789abcdef";
const BOT_SECRET: &str = "bot-secret-9876543210";

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
            .env("PACELINE_LOG_LEVEL", "debug")
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
    c.netsim().post(&format!("/control/phones/{from}/messages"), &json!({ "to": to, "text": text })).await.expect(201);
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
        stream.get_consumer(api::attendant::CONSUMER).await.ok()?;
    consumer.info().await.ok().cloned()
}

/// Waits until the attendant pods have handled (acked) the `message.received` of `text`:
/// a barrier before asserting that something did not happen.
async fn handled(c: &Cluster, pool: &sqlx::PgPool, id: &str, text: &str) {
    let seq: i64 = wait_for(Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, Option<i64>>(
            "SELECT stream_seq FROM outbox WHERE instance_id = $1 AND type = 'message.received' \
             AND payload->'data'->'content'->>'text' = $2",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attendant_answers_once_hands_over_and_keeps_its_key() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let (p, base) = provider().await;
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    for n in [SHOP, ANA, BEN] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("shop", SHOP).await;
    let id = inst["id"].as_str().unwrap().to_string();
    let own = c.api.client(Some(token));
    let admin = c.api.admin();
    let pool = c.pool().await;
    let path = format!("/v1/instances/{id}/attendant");

    // Set up as a tenant would: the model server is on loopback, so only the admin may allow it.
    let config = json!({
        "provider": { "kind": "openai", "base_url": format!("{base}/v1"), "model": "shop-model", "api_key": KEY },
        "system_prompt": "You sell shoes. Be brief.",
        "memory_messages": 10,
        "handoff": { "keywords": ["human"], "pause_minutes": 30 },
    });
    own.get(&path).await.expect_error(404, "not_found");
    own.put(&path, &config).await.expect_error(400, "validation_failed");
    let mut private = config.clone();
    private["allow_private_targets"] = json!(true);
    own.put(&path, &private).await.expect_error(403, "forbidden");
    let shown = admin.put(&path, &private).await.expect(200);
    assert_eq!(shown["provider"]["api_key_set"], true);
    assert_eq!(shown["allow_private_targets"], true);
    let shown = own.get(&path).await;
    assert!(!shown.text.contains(KEY), "GET never shows the key");
    assert_eq!(shown.body["handoff"]["pause_minutes"], 30);
    own.patch(&path, &json!({ "nope": 1 })).await.expect_error(400, "validation_failed");
    assert!(!own.patch(&path, &json!({ "memory_messages": 10 })).await.expect(200).to_string().contains(KEY));

    let pods = pods(&c, 2);
    wait_for(Duration::from_secs(30), || consumer_info(&c)).await.expect("the attendant pods start");

    // A contact writes: one reply, from the system prompt and the chat in order.
    say(&c, ANA, SHOP, "hi, do you have red shoes?").await;
    wait_for(Duration::from_secs(30), || async { (!inbox(&c, ANA, SHOP).await.is_empty()).then_some(()) })
        .await
        .expect("the contact gets a reply");
    assert_eq!(inbox(&c, ANA, SHOP).await, ["echo: hi, do you have red shoes?"]);
    let seen = p.seen();
    assert_eq!(seen.len(), 1);
    let (_, auth, body) = &seen[0];
    assert_eq!(auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(body["model"], "shop-model");
    assert_eq!(
        body["messages"],
        json!([
            { "role": "system", "content": "You sell shoes. Be brief." },
            { "role": "user", "content": "hi, do you have red shoes?" },
        ])
    );
    let replied = wait_for(Duration::from_secs(10), || async {
        events(&pool, &id, "attendant.replied").await.into_iter().next()
    })
    .await
    .expect("attendant.replied");
    assert_eq!(replied["tokens"], json!({ "prompt": 11, "completion": 4 }));

    // The history goes with the next message, oldest first, the reply as the assistant.
    say(&c, ANA, SHOP, "size 40 please").await;
    wait_for(Duration::from_secs(30), || async { (inbox(&c, ANA, SHOP).await.len() == 2).then_some(()) })
        .await
        .expect("a second reply");
    let seen = p.seen();
    assert_eq!(
        seen[1].2["messages"],
        json!([
            { "role": "system", "content": "You sell shoes. Be brief." },
            { "role": "user", "content": "hi, do you have red shoes?" },
            { "role": "assistant", "content": "echo: hi, do you have red shoes?" },
            { "role": "user", "content": "size 40 please" },
        ])
    );

    // The same event again (as after a lost ack): still one reply, and the provider not asked.
    let payload: Value = sqlx::query_scalar(
        "SELECT payload FROM outbox WHERE instance_id = $1 AND type = 'message.received' ORDER BY id LIMIT 1",
    )
    .bind(&id)
    .fetch_one(&pool)
    .await
    .unwrap();
    let nats = async_nats::connect(&c.config.nats_url).await.unwrap();
    let subject = shared::bus::Subjects::new(&c.config).event(&id, "message.received");
    let js = async_nats::jetstream::new(nats);
    js.publish(subject, serde_json::to_vec(&payload).unwrap().into()).await.unwrap().await.unwrap();
    say(&c, BEN, SHOP, "barrier").await;
    wait_for(Duration::from_secs(30), || async { (!inbox(&c, BEN, SHOP).await.is_empty()).then_some(()) })
        .await
        .expect("the barrier is answered");
    wait_for(Duration::from_secs(30), || async {
        let info = consumer_info(&c).await?;
        (info.num_ack_pending == 0 && info.num_pending == 0).then_some(())
    })
    .await
    .expect("everything handled");
    assert_eq!(inbox(&c, ANA, SHOP).await.len(), 2, "a redelivered event adds no reply");
    assert_eq!(p.seen().len(), 3, "nor a provider call");
    assert_eq!(events(&pool, &id, "attendant.replied").await.len(), 3);

    // A reply from the account's own phone pauses the chat; resume restarts it.
    say(&c, SHOP, ANA, "I'll take it from here").await;
    let handoff = wait_for(Duration::from_secs(20), || async {
        events(&pool, &id, "attendant.handoff").await.into_iter().next()
    })
    .await
    .expect("attendant.handoff");
    assert_eq!(handoff["reason"], "human_reply");
    let paused = own.get(&path).await.expect(200);
    assert_eq!(paused["paused_chats"][0]["jid"], format!("{ANA}@s.whatsapp.net"));
    say(&c, ANA, SHOP, "are you there?").await;
    handled(&c, &pool, &id, "are you there?").await;
    let got = inbox(&c, ANA, SHOP).await;
    assert_eq!(got.last().map(String::as_str), Some("I'll take it from here"), "paused: no reply");
    own.post(&format!("{path}/chats/{ANA}/resume"), &json!({})).await.expect(204);
    own.post(&format!("{path}/chats/{ANA}/resume"), &json!({})).await.expect_error(404, "not_found");
    say(&c, ANA, SHOP, "hello again").await;
    wait_for(Duration::from_secs(30), || async {
        inbox(&c, ANA, SHOP).await.contains(&"echo: hello again".to_string()).then_some(())
    })
    .await
    .expect("resumed: answered");

    // The contact asks for a human: handed over, with its event, and no reply.
    say(&c, ANA, SHOP, "let me talk to a HUMAN").await;
    handled(&c, &pool, &id, "let me talk to a HUMAN").await;
    let handoffs = events(&pool, &id, "attendant.handoff").await;
    assert_eq!(handoffs.last().unwrap()["reason"], "keyword");
    assert_eq!(inbox(&c, ANA, SHOP).await.last().map(String::as_str), Some("echo: hello again"));

    // The reply limit: Ben has one reply this hour; at 1 an hour his next gets none.
    own.patch(&path, &json!({ "max_replies_per_chat_per_hour": 1 })).await.expect(200);
    say(&c, BEN, SHOP, "one more").await;
    handled(&c, &pool, &id, "one more").await;
    assert_eq!(inbox(&c, BEN, SHOP).await.len(), 1);
    assert_eq!(events(&pool, &id, "attendant.failed").await.last().unwrap()["reason"], "reply_limit");
    own.patch(&path, &json!({ "max_replies_per_chat_per_hour": 30 })).await.expect(200);

    // A provider that answers 500 (after its retries), then one that times out: failed
    // events; the next message is answered.
    p.mode.store(FAIL, Ordering::SeqCst);
    say(&c, BEN, SHOP, "are you broken?").await;
    handled(&c, &pool, &id, "are you broken?").await;
    let failed = events(&pool, &id, "attendant.failed").await;
    assert_eq!(
        (failed.last().unwrap()["reason"].as_str(), failed.last().unwrap()["detail"].as_str()),
        (Some("http_status"), Some("the provider answered 500"))
    );
    own.patch(&path, &json!({ "reply_timeout_seconds": 5 })).await.expect(200);
    p.mode.store(SLOW, Ordering::SeqCst);
    say(&c, BEN, SHOP, "hello?").await;
    handled(&c, &pool, &id, "hello?").await;
    assert_eq!(events(&pool, &id, "attendant.failed").await.last().unwrap()["reason"], "timeout");
    // While the provider thinks, Ben sees the account typing; the reply ends it.
    p.mode.store(THINKING, Ordering::SeqCst);
    own.patch(&path, &json!({ "reply_timeout_seconds": 60 })).await.expect(200);
    say(&c, BEN, SHOP, "back?").await;
    let typing =
        || async { c.netsim().get(&format!("/control/phones/{BEN}")).await.expect(200)["typing_from"].clone() };
    wait_for(Duration::from_secs(20), || async { (typing().await == json!([SHOP])).then_some(()) })
        .await
        .expect("the typing indicator shows");
    wait_for(Duration::from_secs(30), || async {
        inbox(&c, BEN, SHOP).await.contains(&"echo: back?".to_string()).then_some(())
    })
    .await
    .expect("answered after the failures");
    assert_eq!(typing().await, json!([]), "the reply ends the typing indicator");
    p.mode.store(OK, Ordering::SeqCst);

    // A voice note is transcribed once through the provider and answered from its words.
    let provider = json!({ "provider": {
        "kind": "openai", "base_url": format!("{base}/v1"), "model": "shop-model", "transcription_model": "whisper-1",
    } });
    let shown = own.patch(&path, &provider).await.expect(200);
    assert_eq!(shown["provider"]["api_key_set"], true, "the same kind keeps its key");
    let voice = json!({ "to": SHOP, "type": "voice",
        "media": { "data": "T2dnUwACAAAAAAAAAAB2b2ljZSBub3Rl", "mime_type": "audio/ogg", "filename": "note.ogg" } });
    c.netsim().post(&format!("/control/phones/{BEN}/messages"), &voice).await.expect(201);
    let reply = wait_for(Duration::from_secs(30), || async {
        inbox(&c, BEN, SHOP).await.into_iter().find(|t| t.ends_with("do you have boots"))
    })
    .await
    .expect("the voice note is answered");
    assert!(reply.starts_with("echo: [voice"), "{reply}");
    let seen = p.seen();
    let (_, auth, form) = seen.iter().find(|s| s.0 == "transcribe").expect("a transcription request");
    assert_eq!(auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(form["model"], "whisper-1");
    assert_eq!(form["file"], json!({ "mime": "audio/ogg", "size": 24 }));
    assert_eq!(seen.iter().filter(|s| s.0 == "transcribe").count(), 1);

    // A webhook bot (n8n's shape), its secret sent as a bearer token; in groups only
    // when the account is mentioned.
    let bot = json!({
        "provider": { "kind": "webhook", "url": format!("{base}/hook"), "secret": BOT_SECRET },
        "triggers": { "groups": true },
    });
    let shown = admin.patch(&path, &bot).await.expect(200);
    assert_eq!(shown["provider"], json!({ "kind": "webhook", "url": format!("{base}/hook"), "secret_set": true }));
    let group = own
        .post(&format!("/v1/instances/{id}/groups"), &json!({ "subject": "Shoe fans", "participants": [BEN] }))
        .await
        .expect(201);
    let gjid = group["jid"].as_str().unwrap().to_string();
    say(&c, BEN, &gjid, "hello group").await;
    handled(&c, &pool, &id, "hello group").await;
    let asked = p.seen().len();
    say(&c, BEN, &gjid, &format!("@{SHOP} what are your hours?")).await;
    let in_group = |v: Value| {
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["from"] == SHOP && m["group"] == gjid.as_str())
            .map(|m| m["text"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    let got = wait_for(Duration::from_secs(30), || async {
        let v = c.netsim().get(&format!("/control/phones/{BEN}/inbox")).await.expect(200);
        let g = in_group(v);
        (!g.is_empty()).then_some(g)
    })
    .await
    .expect("the bot answers in the group when mentioned");
    assert_eq!(got, [format!("bot: @{SHOP} what are your hours?")]);
    // A reply quoting the account's message calls for an answer too.
    let answer_id = wait_for(Duration::from_secs(5), || async {
        let v = c.netsim().get(&format!("/control/phones/{BEN}/inbox")).await.expect(200);
        v["messages"].as_array().unwrap().iter().find(|m| m["from"] == SHOP && m["group"] == gjid.as_str())?["id"]
            .as_str()
            .map(str::to_string)
    })
    .await
    .unwrap();
    let quoting = json!({ "to": gjid, "text": "and on sundays?", "body": { "reply_to": answer_id } });
    c.netsim().post(&format!("/control/phones/{BEN}/messages"), &quoting).await.expect(201);
    let got = wait_for(Duration::from_secs(30), || async {
        let v = c.netsim().get(&format!("/control/phones/{BEN}/inbox")).await.expect(200);
        let g = in_group(v);
        (g.len() == 2).then_some(g)
    })
    .await
    .expect("the bot answers a reply to its message");
    assert_eq!(got[1], "bot: and on sundays?");
    let seen = p.seen();
    assert_eq!(seen.len(), asked + 2, "the unmentioned message was not sent to the bot");
    let (kind, auth, body) = seen.last().unwrap();
    assert_eq!((kind.as_str(), auth.as_deref()), ("webhook", Some(format!("Bearer {BOT_SECRET}").as_str())));
    assert_eq!(body["chat_jid"], gjid);

    // Usage counts the replies and tokens.
    let usage = own.get(&format!("/v1/instances/{id}/usage")).await.expect(200);
    assert_eq!(usage["totals"]["attendant_replies"], 8, "{usage}");
    assert_eq!(usage["totals"]["attendant_tokens"], 6 * 15, "{usage}");

    // The keys are in no event, and in no log line of the attendant pods.
    let leaks: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE payload::text LIKE $1 OR payload::text LIKE $2")
            .bind(format!("%{KEY}%"))
            .bind(format!("%{BOT_SECRET}%"))
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(leaks, 0);
    let stored: Vec<u8> = sqlx::query_scalar("SELECT secret FROM attendants WHERE instance_id = $1")
        .bind(&id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!stored.windows(BOT_SECRET.len()).any(|w| w == BOT_SECRET.as_bytes()), "sealed at rest");
    let logs = pods.1.clone();
    drop(pods);
    let mut lines = 0;
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        lines += text.lines().count();
        assert!(!text.contains(KEY) && !text.contains(BOT_SECRET), "a key in {}", log.display());
    }
    assert!(lines > 10, "the pods logged at debug level ({lines} lines)");
    stop.cancel();
}

/// The admin's provider key and its `allow_private_targets` hold for the provider's
/// origin: the instance's token moving the provider elsewhere drops the key and the flag
/// (so neither the key nor a readable SSRF follows it), within the origin both stay.
#[tokio::test]
async fn the_key_and_private_targets_stay_with_the_origin_the_admin_gave() {
    let api = harness::TestApi::start().await;
    let (inst, token) = api.create_instance("attendant-origin").await;
    let id = inst["id"].as_str().unwrap();
    let (own, admin) = (api.client(Some(token)), api.admin());
    let path = format!("/v1/instances/{id}/attendant");
    let provider = |base: &str| json!({ "kind": "openai", "base_url": base, "model": "m" });
    let mut given = json!({ "provider": provider("http://127.0.0.1:9/v1"), "allow_private_targets": true });
    given["provider"]["api_key"] = json!(KEY);
    let shown = admin.put(&path, &given).await.expect(200);
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(true), Some(true))
    );

    // Another private address: refused, and nothing changes.
    for elsewhere in ["http://127.0.0.1:10/v1", "http://10.0.0.7/v1", "http://localhost:9/v1"] {
        own.patch(&path, &json!({ "provider": provider(elsewhere) })).await.expect_error(400, "validation_failed");
        own.put(&path, &json!({ "provider": provider(elsewhere), "allow_private_targets": true }))
            .await
            .expect_error(400, "validation_failed");
    }
    let shown = own.get(&path).await.expect(200);
    assert_eq!(shown["provider"]["base_url"], "http://127.0.0.1:9/v1");
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(true), Some(true))
    );

    // Within the origin, the key and the flag stay.
    let shown = own.patch(&path, &json!({ "provider": provider("http://127.0.0.1:9/v2") })).await.expect(200);
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(true), Some(true))
    );

    // A public server of the tenant's: allowed, without the key and the flag.
    let shown = own.patch(&path, &json!({ "provider": provider("https://8.8.8.8/v1") })).await.expect(200);
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(false), Some(false))
    );
    // Coming back needs the admin again.
    own.patch(&path, &json!({ "provider": provider("http://127.0.0.1:9/v1") }))
        .await
        .expect_error(400, "validation_failed");
    own.patch(&path, &json!({ "allow_private_targets": true })).await.expect_error(403, "forbidden");
    let shown = admin
        .patch(&path, &json!({ "provider": provider("http://127.0.0.1:9/v1"), "allow_private_targets": true }))
        .await
        .expect(200);
    assert_eq!(shown["allow_private_targets"], true);
}

/// Two attendants answering each other stop: the chat whose last messages are automatic
/// on both sides is handed over (`bot_loop`) and nothing more is sent; and an instance's
/// budget (replies per day here) leaves further messages unanswered with `budget`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attendants_stop_a_bot_loop_and_keep_to_their_budget() {
    const A: &str = "5511977772001";
    const B: &str = "5511977772002";
    const CUST: &str = "5511977772003";
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let (_p, base) = provider().await;
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    for n in [A, B, CUST] {
        c.phone(n, false).await;
    }
    let admin = c.api.admin();
    let mut ids = Vec::new();
    for (name, number, loop_messages) in [("bot-a", A, 6), ("bot-b", B, 0)] {
        let (inst, _) = c.paired_instance(name, number).await;
        let id = inst["id"].as_str().unwrap().to_string();
        c.unpaced(&id).await;
        let config = json!({
            "provider": { "kind": "openai", "base_url": format!("{base}/v1"), "model": "m" },
            "allow_private_targets": true,
            "handoff": { "loop_messages": loop_messages },
        });
        admin.put(&format!("/v1/instances/{id}/attendant"), &config).await.expect(200);
        ids.push(id);
    }
    let (a, b) = (ids[0].clone(), ids[1].clone());
    let pool = c.pool().await;
    let _pods = pods(&c, 1);
    wait_for(Duration::from_secs(30), || consumer_info(&c)).await.expect("the attendant starts");

    // B writes to A once; from then on each attendant answers the other's answer.
    let opening = format!("Hello! {}", "We are open from nine to six on weekdays. ".repeat(4));
    admin
        .post(&format!("/v1/instances/{b}/messages"), &json!({ "to": A, "type": "text", "text": opening }))
        .await
        .expect(202);
    let handoff = wait_for(Duration::from_secs(90), || async { events(&pool, &a, "attendant.handoff").await.pop() })
        .await
        .expect("A hands the loop over");
    assert_eq!(handoff["reason"], "bot_loop", "{handoff}");
    let replies = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM attendant_replies WHERE instance_id = $1")
            .bind(&a)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(replies().await, 3, "A answered three times: the sixth message of the chat was the loop");
    let shown = admin.get(&format!("/v1/instances/{a}/attendant")).await.expect(200);
    assert_eq!(shown["paused_chats"][0]["reason"], "bot_loop");
    // Nothing more goes from A to B (B's attendant has nothing left to answer either).
    let last = wait_for(Duration::from_secs(30), || async {
        let texts = inbox(&c, B, A).await;
        (texts.len() == 3).then_some(texts)
    })
    .await
    .expect("B received A's three answers");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(inbox(&c, B, A).await, last, "the loop stopped");

    // The budget: a day's replies used up, a new customer goes unanswered.
    admin
        .patch(&format!("/v1/instances/{a}/attendant"), &json!({ "budget": { "replies_per_day": 3 } }))
        .await
        .expect(200);
    say(&c, CUST, A, "hi, anyone there?").await;
    let failed = wait_for(Duration::from_secs(30), || async { events(&pool, &a, "attendant.failed").await.pop() })
        .await
        .expect("the message is not answered");
    assert_eq!(
        (failed["reason"].as_str(), failed["detail"].as_str()),
        (Some("budget"), Some("budget.replies_per_day reached"))
    );
    assert!(inbox(&c, CUST, A).await.is_empty());
    stop.cancel();
}
