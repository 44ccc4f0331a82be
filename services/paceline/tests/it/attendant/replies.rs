//! One user's whole story with the attendant: a reply per message from the prompt and
//! the history, a redelivered event adding nothing, the handoffs, the reply limit, a
//! failing and a slow provider, a voice note, a webhook bot in a group, usage, and the
//! keys in no event or log line.

use std::sync::atomic::Ordering;
use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use super::{consumer_info, events, handled, inbox, pods, provider, say, FAIL, KEY, OK, SLOW, THINKING};
use crate::bin;

const SHOP: &str = "5511977770001";
const ANA: &str = "5511977770002";
const BEN: &str = "5511977770003";
const BOT_SECRET: &str = "bot-secret-9876543210";

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
    let id = inst.id.to_string();
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

    // Usage counts the replies and tokens (recorded once the reply is queued, which may
    // be just after it went out).
    let usage = wait_for(Duration::from_secs(20), || async {
        let u = own.get(&format!("/v1/instances/{id}/usage")).await.expect(200);
        (u["totals"]["attendant_replies"] == 8).then_some(u)
    })
    .await
    .expect("the eighth reply counted");
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
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}
