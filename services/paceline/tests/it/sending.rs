//! The send queue end to end over netsim and real worker processes: every type delivered
//! once, failure codes, wait semantics, expiry, pacing measured at the recipient, and a
//! worker killed mid-send losing and duplicating nothing.

use crate::bin;
use std::collections::HashSet;
use std::time::Duration;

use base64::Engine;
use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

const A: &str = "5511999990001";
const B: &str = "5511999990002";

async fn inbox(c: &Cluster, number: &str) -> Value {
    c.netsim().get(&format!("/control/phones/{number}/inbox")).await.expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_is_delivered_once() {
    let c = Cluster::start(bin(), 2, |cfg| cfg.allow_private_targets = true).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("types", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let server = harness::media_server().await;
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG fake image bytes");
    let path = format!("/v1/instances/{id}/messages?wait=true&timeout=20s");
    let first =
        own.post(&path, &json!({ "to": B, "type": "text", "text": "hello", "link_preview": true })).await.expect(200);
    let bodies = vec![
        json!({ "to": B, "type": "image", "media": { "data": png, "mime_type": "image/png" }, "caption": "an image" }),
        json!({ "to": B, "type": "video", "media": { "url": format!("http://{server}/file/2048") } }),
        json!({ "to": B, "type": "audio", "media": { "url": format!("http://{server}/file/1024"), "mime_type": "audio/mpeg" } }),
        json!({ "to": B, "type": "voice", "media": { "url": format!("http://{server}/file/512"), "mime_type": "audio/ogg" } }),
        json!({ "to": B, "type": "document", "media": { "url": format!("http://{server}/file/4096"), "mime_type": "application/pdf", "filename": "r.pdf" }, "caption": "report" }),
        json!({ "to": B, "type": "sticker", "media": { "data": png, "mime_type": "image/webp" } }),
        json!({ "to": B, "type": "location", "location": { "latitude": -23.55, "longitude": -46.63, "name": "SP" } }),
        json!({ "to": B, "type": "contact", "contact": { "name": "Ana", "phone": "5511999990009", "email": "a@example.com" } }),
        json!({ "to": B, "type": "poll", "poll": { "name": "lunch?", "values": ["pizza", "sushi"], "selectable_count": 1 } }),
        json!({ "to": B, "type": "reaction", "reaction": { "message_id": first["wa_message_id"], "emoji": "👍" } }),
        json!({ "to": B, "type": "text", "text": "a reply", "reply_to": first["id"] }),
    ];
    let mut sent = vec![first];
    for b in bodies {
        let m = own.post(&path, &b).await.expect(200);
        assert_eq!(m["status"], "sent", "{m}");
        assert!(m["wa_message_id"].as_str().unwrap().starts_with("3EB0"));
        sent.push(m);
    }
    let got = inbox(&c, B).await;
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), sent.len(), "{got}");
    assert_eq!(got["duplicates"], 0);
    let kinds: Vec<&str> = msgs.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "text", "image", "video", "audio", "voice", "document", "sticker", "location", "contact", "poll",
            "reaction", "text"
        ]
    );
    for (m, s) in msgs.iter().zip(&sent) {
        assert_eq!(m["id"], s["wa_message_id"], "in order, under the pre-assigned ids");
        assert_eq!(m["from"], A);
    }
    assert_eq!(msgs[1]["body"]["media"]["sha256"], hex_sha(b"\x89PNG fake image bytes"));
    assert_eq!(msgs[2]["body"]["media"]["size"], 2048);
    assert_eq!(msgs[5]["body"]["media"]["filename"], "r.pdf");
    assert_eq!(msgs[7]["body"]["location"]["latitude"], -23.55);
    assert_eq!(msgs[9]["body"]["poll"]["values"], json!(["pizza", "sushi"]));
    // The reply quotes by the network's id: the phone never sees our msg_ ids.
    assert_eq!(msgs[11]["body"]["reply_to"], sent[0]["wa_message_id"]);
    // The workers count sends by result and time them.
    let mut sent_metric = 0.0;
    for i in 0..c.workers.len() {
        sent_metric += c.worker_metric(i, "paceline_queue_sends_total", "result=\"sent\"").await;
        let text = c.worker_metrics(i).await;
        assert!(text.contains("paceline_queue_depth"), "queue depth gauge exported");
    }
    assert_eq!(sent_metric as usize, sent.len());
    // Each status change left its event.
    let db = c.pool().await;
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM outbox WHERE instance_id = $1 AND type = 'message.sent'")
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(n as usize, sent.len());
}

fn hex_sha(b: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_wait_and_expiry() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("fails", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    // No account: 400 invalid_number with wait, the same reason on GET without.
    let path = format!("/v1/instances/{id}/messages");
    own.post(&format!("{path}?wait=true"), &json!({ "to": "5511999990404", "type": "text", "text": "x" }))
        .await
        .expect_error(400, "invalid_number");
    let m = own.post(&path, &json!({ "to": "5511999990405", "type": "text", "text": "y" })).await.expect(202);
    let failed = wait_for(Duration::from_secs(10), || async {
        let r = own.get(&format!("{path}/{}", m["id"].as_str().unwrap())).await.body;
        (r["status"] == "failed").then_some(r)
    })
    .await
    .unwrap();
    assert!(failed["error"].as_str().unwrap().starts_with("invalid_number: "), "{failed}");
    assert!(!failed["error"].as_str().unwrap().contains("5511999990405"));

    // Transient network errors are retried: with every send failing, the message ends
    // failed with the last reason after its attempts.
    c.netsim().post("/control/faults", &json!({ "error_rate": 1.0 })).await.expect(200);
    let r =
        own.post(&format!("{path}?wait=true&timeout=60s"), &json!({ "to": B, "type": "text", "text": "doomed" })).await;
    r.expect_error(502, "worker_error");
    c.netsim().post("/control/faults", &json!({ "error_rate": 0.0 })).await.expect(200);

    // Expiry: a message whose expiry passes while waiting answers 410.
    let (idle, idle_token) = c.api.create_instance("idle").await;
    let idle_id = idle["id"].as_str().unwrap().to_string();
    let idle_client = c.api.client(Some(idle_token));
    let db = c.pool().await;
    let waiter = tokio::spawn({
        let idle_client = idle_client.clone();
        let p = format!("/v1/instances/{idle_id}/messages?wait=true&timeout=30s");
        async move { idle_client.post(&p, &json!({ "to": B, "type": "text", "text": "late", "expires_after": "1m" })).await }
    });
    // Time passes (the row's expiry is moved instead of waiting a minute).
    wait_for(Duration::from_secs(5), || async {
        let r = sqlx::query("UPDATE messages SET expires_at = now() - interval '1 second' WHERE instance_id = $1")
            .bind(&idle_id)
            .execute(&db)
            .await
            .unwrap();
        (r.rows_affected() == 1).then_some(())
    })
    .await
    .unwrap();
    waiter.await.unwrap().expect_error(410, "message_expired");
    // Nothing of it reached the network.
    assert!(inbox(&c, B).await["messages"].as_array().unwrap().iter().all(|m| m["text"] != "late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_intervals_are_honoured_at_the_recipient() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("paced", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    // The floor: 1 s apart (plus up to 25% jitter), in order.
    c.api
        .admin()
        .patch(&format!("/v1/instances/{id}"), &json!({ "min_interval_ms": 1000, "max_per_minute": 60 }))
        .await
        .expect(200);
    let own = c.api.client(Some(token));
    for i in 0..5 {
        own.post(&format!("/v1/instances/{id}/messages"), &json!({ "to": B, "type": "text", "text": format!("p{i}") }))
            .await
            .expect(202);
    }
    let msgs = wait_for(Duration::from_secs(30), || async {
        let got = inbox(&c, B).await;
        let m = got["messages"].as_array().unwrap().clone();
        (m.len() == 5).then_some(m)
    })
    .await
    .expect("all five arrive");
    let times: Vec<chrono::DateTime<chrono::Utc>> =
        msgs.iter().map(|m| m["received_at"].as_str().unwrap().parse().unwrap()).collect();
    let texts: Vec<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["p0", "p1", "p2", "p3", "p4"], "queue order kept");
    let gaps: Vec<i64> = times.windows(2).map(|w| (w[1] - w[0]).num_milliseconds()).collect();
    println!("gaps between sends at the recipient (ms): {gaps:?}");
    assert!(gaps.iter().all(|g| *g >= 1000), "{gaps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_send_loses_and_duplicates_nothing() {
    let mut c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("chaos", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.api
        .admin()
        .patch(
            &format!("/v1/instances/{id}"),
            &json!({ "unsafe_pacing": true, "min_interval_ms": 30, "max_per_minute": 100000 }),
        )
        .await
        .expect(200);
    let own = c.api.client(Some(token));
    const N: usize = 60;
    for i in 0..N {
        own.post(
            &format!("/v1/instances/{id}/messages"),
            &json!({ "to": B, "type": "text", "text": format!("m{i:03}") }),
        )
        .await
        .expect(202);
    }
    // Kill the owner while it is sending.
    wait_for(Duration::from_secs(20), || async {
        let n = inbox(&c, B).await["messages"].as_array().unwrap().len();
        (n >= 10).then_some(())
    })
    .await
    .unwrap();
    let owner = c.owner().await.expect("an owner");
    c.signal(owner, "KILL");
    let _ = c.workers[owner].child.wait();
    let got = wait_for(Duration::from_secs(30), || async {
        let got = inbox(&c, B).await;
        (got["messages"].as_array().unwrap().len() >= N).then_some(got)
    })
    .await
    .expect("every message arrives");
    let msgs = got["messages"].as_array().unwrap();
    let texts: HashSet<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap()).collect();
    let ids: HashSet<&str> = msgs.iter().map(|m| m["id"].as_str().unwrap()).collect();
    println!("after SIGKILL mid-send: {} delivered, {} re-sends absorbed by id", msgs.len(), got["resends_absorbed"]);
    assert_eq!(msgs.len(), N, "nothing lost, nothing doubled under a new id");
    assert_eq!(texts.len(), N);
    assert_eq!(ids.len(), N);
    assert_eq!(got["duplicates"], 0);
    let ordered: Vec<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap()).collect();
    let mut sorted = ordered.clone();
    sorted.sort();
    assert_eq!(ordered, sorted, "order kept across the takeover");
    // Every row ends sent (the last commit may trail the network's delivery).
    let db = c.pool().await;
    let all_sent = wait_for(Duration::from_secs(10), || async {
        let (sent,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM messages WHERE instance_id = $1 AND status = 'sent'")
                .bind(&id)
                .fetch_one(&db)
                .await
                .unwrap();
        (sent as usize == N).then_some(())
    })
    .await;
    assert!(all_sent.is_some(), "every row ends sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_flight_message_is_resent_under_its_id_after_a_crash() {
    let mut c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("inflight", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    // A slow network: the send reaches netsim, which delivers it after the sender died.
    c.netsim().post("/control/faults", &json!({ "latency_ms": 1500 })).await.expect(200);
    let own = c.api.client(Some(token));
    let m = own
        .post(&format!("/v1/instances/{id}/messages"), &json!({ "to": B, "type": "text", "text": "exactly once" }))
        .await
        .expect(202);
    let db = c.pool().await;
    wait_for(Duration::from_secs(10), || async {
        let (s,): (String,) = sqlx::query_as("SELECT status FROM messages WHERE id = $1")
            .bind(m["id"].as_str())
            .fetch_one(&db)
            .await
            .unwrap();
        (s == "in_flight").then_some(())
    })
    .await
    .expect("the send starts");
    let owner = c.owner().await.expect("an owner");
    c.signal(owner, "KILL");
    let _ = c.workers[owner].child.wait();
    let row = wait_for(Duration::from_secs(30), || async {
        let r = own.get(&format!("/v1/instances/{id}/messages/{}", m["id"].as_str().unwrap())).await.body;
        (r["status"] == "sent").then_some(r)
    })
    .await
    .expect("the new owner finishes it");
    c.netsim().post("/control/faults", &json!({ "latency_ms": 0 })).await.expect(200);
    let got = inbox(&c, B).await;
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{got}");
    assert_eq!(msgs[0]["id"], row["wa_message_id"], "re-sent under the id assigned before the first attempt");
    assert_eq!(got["duplicates"], 0);
    assert_eq!(got["resends_absorbed"], 1, "the re-send happened and the network absorbed it");
    let (attempts,): (i32,) = sqlx::query_as("SELECT attempts FROM messages WHERE id = $1")
        .bind(m["id"].as_str())
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(attempts, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn action_send_routes_go_through_the_same_queue() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.allow_private_targets = true).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("evo", A).await;
    c.unpaced(inst["id"].as_str().unwrap()).await;
    let key = c.api.anon().with_header("x-api-key", &token);
    let server = harness::media_server().await;
    let first = key
        .post(
            "/message/sendText/evo",
            &json!({ "number": B, "message": "line1\\nline2", "linkPreview": false, "delay": 0 }),
        )
        .await
        .expect(200);
    assert!(first["messageId"].as_str().unwrap().starts_with("3EB0"));
    assert_eq!(first["serviceId"].as_str().unwrap().len(), 36, "UUID-shaped");
    let calls = [
        (
            "/message/sendContact/evo",
            json!({ "number": B, "contactName": "Ana", "contactPhone": "5511999990009", "organization": "ACME" }),
        ),
        ("/message/sendReaction/evo", json!({ "phone": B, "reaction": "🔥", "messageId": first["messageId"] })),
        (
            "/message/sendLocation/evo",
            json!({ "number": B, "title": "Office", "address": "Av. Paulista", "latitude": -23.56, "longitude": -46.65 }),
        ),
        (
            "/message/sendPoll/evo",
            json!({ "number": B, "name": "When?", "values": ["mon", "tue", "wed"], "selectableCount": 2 }),
        ),
        (
            "/message/sendMedia/evo",
            json!({ "number": B, "caption": "sheet", "media": format!("http://{server}/file/300"), "fileName": "q3.xlsx" }),
        ),
        (
            "/message/sendMedia/evo",
            json!({ "number": B, "media": format!("http://{server}/file/200?name=p.png"), "mediatype": "image" }),
        ),
        ("/message/sendWhatsAppAudio/evo", json!({ "number": B, "audio": format!("http://{server}/file/100") })),
    ];
    for (path, body) in calls {
        key.post(path, &body).await.expect(200);
    }
    let msgs = wait_for(Duration::from_secs(20), || async {
        let m = inbox(&c, B).await["messages"].as_array().unwrap().clone();
        (m.len() == 8).then_some(m)
    })
    .await
    .expect("all eight arrive");
    let kinds: Vec<&str> = msgs.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "contact", "reaction", "location", "poll", "document", "image", "voice"]);
    assert_eq!(msgs[0]["text"], "line1\nline2");
    assert_eq!(msgs[4]["body"]["poll"]["selectable_count"], 2);
    // Refusals use 400 and 404 only.
    key.post("/message/sendText/evo", &json!({ "number": "12", "message": "x" }))
        .await
        .expect_error(400, "validation_failed");
    key.post("/message/sendText/evo", &json!({ "message": "x" })).await.expect_error(400, "validation_failed");
    key.post("/message/sendText/nobody", &json!({ "number": B, "message": "x" }))
        .await
        .expect_error(404, "instance_not_found");
    let r = key.post("/message/sendMedia/evo", &json!({ "number": B, "media": format!("http://{server}/file/{}", 101 * 1024 * 1024), "mediatype": "document" })).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], "media_too_large");
    let r =
        key.post("/message/sendMedia/evo", &json!({ "number": B, "media": format!("http://{server}/missing") })).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["code"], "media_fetch_failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remaining_failure_codes() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.netsim_request_timeout = Duration::from_millis(400)).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("codes", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let path = format!("/v1/instances/{id}/messages?wait=true&timeout=60s");

    // forbidden: the recipient blocked us; permanent, no retry.
    c.netsim().post(&format!("/control/phones/{B}/block"), &json!({ "number": A })).await.expect(200);
    own.post(&path, &json!({ "to": B, "type": "text", "text": "blocked" })).await.expect_error(403, "forbidden");
    c.netsim().post(&format!("/control/phones/{B}/unblock"), &json!({ "number": A })).await.expect(200);

    // worker_timeout: the network never answers in time; after its attempts the message
    // is failed, and the error table says sending again later may succeed.
    c.netsim().post("/control/faults", &json!({ "latency_ms": 1000 })).await.expect(200);
    let r = own.post(&path, &json!({ "to": B, "type": "text", "text": "slow" })).await;
    assert_eq!(r.body["error"]["retryable"], true, "{}", r.text);
    r.expect_error(504, "worker_timeout");
    c.netsim().post("/control/faults", &json!({ "latency_ms": 0 })).await.expect(200);

    // instance_not_connected: queued messages of an instance that logged out fail, not
    // linger; not retryable until it is paired again.
    own.post(&path, &json!({ "to": B, "type": "text", "text": "still fine" })).await.expect(200);
    c.netsim().post(&format!("/control/phones/{A}/logout"), &json!({})).await.expect(200);
    c.wait_state(&id, "logged_out", Duration::from_secs(10)).await;
    let r = own.post(&path, &json!({ "to": B, "type": "text", "text": "after logout" })).await;
    assert_eq!(r.body["error"]["retryable"], false, "{}", r.text);
    let msg = r.expect_error(409, "instance_not_connected");
    assert!(msg.contains("logged out"), "{msg}");
}

/// A `wait=true` call on a pod that starts draining answers at once with 202 and the
/// queued message, instead of holding the pod's shutdown for its whole timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_pod_ends_wait_calls_with_202() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("drain-wait", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    let own = c.api.client(Some(token));
    // One send a minute: the second waits for the first's interval.
    own.patch(&format!("/v1/instances/{id}"), &json!({ "min_interval_ms": 60_000, "max_per_minute": 1 }))
        .await
        .expect(200);
    let path = format!("/v1/instances/{id}/messages?wait=true&timeout=2m");
    own.post(&path, &json!({ "to": B, "type": "text", "text": "first" })).await.expect(200);
    let waiting = tokio::spawn({
        let own = own.clone();
        async move { own.post(&path, &json!({ "to": B, "type": "text", "text": "second" })).await }
    });
    // The second is queued behind the pacer; its caller waits.
    let queued = wait_for(Duration::from_secs(10), || async {
        let v: Value = c.api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
        (v["queue_depth"] == 1).then_some(())
    })
    .await;
    assert!(queued.is_some(), "the second message waits in the queue");
    assert!(!waiting.is_finished());
    c.api.shutdown.cancel();
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("answered at once").unwrap();
    assert_eq!(answer.status, 202, "{}", answer.text);
    assert_eq!(answer.body["status"], "queued");
}

/// A message whose NATS wake-up never came (written straight to Postgres here) is found
/// by the worker's sweep and sent, though the idle queue itself looks only every 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_its_wake_up_is_found_by_the_sweep() {
    use shared::db::messages::{enqueue, NewMessage, Queued};
    use shared::message::{Content, Outbound};
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("sweep", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    // The queue has looked and found nothing: it is idle.
    own.post(&format!("/v1/instances/{id}/messages?wait=true"), &json!({ "to": B, "type": "text", "text": "first" }))
        .await
        .expect(200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pool = c.pool().await;
    let msg = shared::ids::MessageId::new();
    let queued = enqueue(
        &pool,
        &[NewMessage {
            id: msg.clone(),
            instance_id: shared::ids::InstanceId::parse(&id).unwrap(),
            to_jid: format!("{B}@s.whatsapp.net"),
            message: Outbound {
                content: Content::Text { text: "no wake-up".into(), link_preview: false },
                reply_to: None,
                mentions: vec![],
            },
            client_message_id: None,
            content_hash: "sweep-test".into(),
            wa_message_id: format!("3EB0{}", uuid::Uuid::new_v4().simple()).to_uppercase()[..22].to_string(),
            expires_at: chrono::Utc::now() + chrono::Duration::hours(1),
        }],
    )
    .await
    .unwrap();
    assert!(matches!(queued[0], Queued::New(_)));
    let sent = wait_for(Duration::from_secs(10), || async {
        let v: Value = own.get(&format!("/v1/instances/{id}/messages/{msg}")).await.expect(200);
        (v["status"] == "sent").then_some(())
    })
    .await;
    assert!(sent.is_some(), "the sweep found it well before the 30 s idle poll");
}

/// Replies and reactions name the message by the network's id, whichever id the tenant
/// gave: our `msg_` ids never reach a phone. A failed message never reached the network,
/// so a reply to it quotes nothing; a reaction names a message of its own chat only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_and_reactions_name_messages_by_their_network_id() {
    const C: &str = "5511999990003";
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    c.phone(C, false).await;
    let (inst, token) = c.paired_instance("quotes", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    // B writes in: the log knows it by a msg_ id, the phone by its network id.
    let sent = c.netsim().post(&format!("/control/phones/{B}/messages"), &json!({ "to": A, "text": "cake?" })).await;
    let network_id = sent.expect(201)["id"].as_str().unwrap().to_string();
    let received = wait_for(Duration::from_secs(10), || async {
        let m = own.get(&format!("/v1/instances/{id}/chats/{B}/messages")).await.expect(200);
        m["messages"][0]["id"].as_str().map(str::to_string)
    })
    .await
    .expect("B's message is logged");
    // A message that failed (no account) never reached the network.
    let path = format!("/v1/instances/{id}/messages");
    let failed = own.post(&path, &json!({ "to": "5511999990404", "type": "text", "text": "x" })).await.expect(202);
    let failed = failed["id"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(10), || async {
        (own.get(&format!("{path}/{failed}")).await.body["status"] == "failed").then_some(())
    })
    .await
    .expect("the message fails");

    let wait = format!("{path}?wait=true&timeout=20s");
    own.post(&wait, &json!({ "to": B, "type": "text", "text": "yes", "reply_to": received })).await.expect(200);
    own.post(&wait, &json!({ "to": B, "type": "text", "text": "and", "reply_to": failed })).await.expect(200);
    let react = json!({ "to": B, "type": "reaction", "reaction": { "message_id": received, "emoji": "👍" } });
    own.post(&wait, &react).await.expect(200);
    // The same message reacted to from another chat: refused, nothing reaches C.
    let elsewhere = json!({ "to": C, "type": "reaction", "reaction": { "message_id": received, "emoji": "👍" } });
    own.post(&wait, &elsewhere).await.expect_error(400, "validation_failed");

    let got = inbox(&c, B).await;
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{got}");
    assert_eq!(msgs[0]["body"]["reply_to"], network_id.as_str(), "quoted by the network's id");
    assert!(msgs[1]["body"].get("reply_to").is_none(), "a failed message is not quoted: {}", msgs[1]);
    assert_eq!(msgs[2]["body"]["reaction"]["message_id"], network_id.as_str());
    assert_eq!(inbox(&c, C).await["messages"], json!([]));
}

/// A send whose database read fails (its media, here: the table is away) stays in flight
/// and in order, and goes once the database answers again, sent once, no attempt spent
/// and nothing failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_read_fails_goes_once_the_database_answers() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("reads", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    // Unpaced but for a 3 s gap: the second message is built 3 s after the first went.
    let gap = json!({ "unsafe_pacing": true, "min_interval_ms": 3000, "max_per_minute": 100000 });
    c.api.admin().patch(&format!("/v1/instances/{id}"), &gap).await.expect(200);
    let own = c.api.client(Some(token));
    let path = format!("/v1/instances/{id}/messages");
    own.post(&format!("{path}?wait=true&timeout=20s"), &json!({ "to": B, "type": "text", "text": "first" }))
        .await
        .expect(200);
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG an image");
    let image = json!({ "to": B, "type": "image", "media": { "data": png, "mime_type": "image/png" } });
    let m = own.post(&path, &image).await.expect(202);
    let pool = c.pool().await;
    sqlx::query("ALTER TABLE media RENAME TO media_away").execute(&pool).await.unwrap();
    // Past its send time, it waits: neither sent nor failed.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let record = own.get(&format!("{path}/{}", m["id"].as_str().unwrap())).await.expect(200);
    sqlx::query("ALTER TABLE media_away RENAME TO media").execute(&pool).await.unwrap();
    assert!(matches!(record["status"].as_str(), Some("queued" | "in_flight")), "{record}");
    assert_eq!(inbox(&c, B).await["messages"].as_array().unwrap().len(), 1);
    let sent = wait_for(Duration::from_secs(15), || async {
        let r = own.get(&format!("{path}/{}", m["id"].as_str().unwrap())).await.body;
        (r["status"] == "sent").then_some(r)
    })
    .await
    .expect("sent once the table is back");
    assert_eq!(sent["error"], Value::Null, "{sent}");
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM messages WHERE id = $1")
        .bind(m["id"].as_str().unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(attempts, 1, "the failed reads spent no attempt");
    let got = inbox(&c, B).await;
    assert_eq!(got["messages"].as_array().unwrap().len(), 2, "{got}");
    assert_eq!(got["duplicates"], 0);
}

/// The queue never answers 429: a send the network refuses for its rate (netsim's cap on
/// new contacts) waits and goes once the network takes it again, and `wait=true`
/// answers 202 meanwhile. The refusal still counts as the `rate_limited` risk signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_rate_limit_is_waited_out_never_answered_429() {
    const C: &str = "5511999990003";
    let c = Cluster::start(bin(), 1, |_| {}).await;
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("limited", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    c.netsim()
        .post("/control/faults", &json!({ "first_contact_cap": 1, "first_contact_window_secs": 2 }))
        .await
        .expect(200);
    let path = format!("/v1/instances/{id}/messages?wait=true&timeout=2s");
    own.post(&path, &json!({ "to": B, "type": "text", "text": "first" })).await.expect(200);
    let r = own.post(&path, &json!({ "to": C, "type": "text", "text": "second" })).await;
    assert_ne!(r.status, 429, "{}", r.text);
    let m = r.expect(202);
    assert_eq!(m["status"], "in_flight", "still trying: {m}");
    let sent = wait_for(Duration::from_secs(30), || async {
        let m = own.get(&format!("/v1/instances/{id}/messages/{}", m["id"].as_str().unwrap())).await.expect(200);
        (m["status"] == "sent").then_some(m)
    })
    .await
    .expect("sent once the network takes it");
    assert!(sent.get("error").is_none(), "{sent}");
    let inbox = c.netsim().get(&format!("/control/phones/{C}/inbox")).await.expect(200);
    assert_eq!(inbox["messages"].as_array().unwrap().iter().filter(|m| m["text"] == "second").count(), 1);
    let pool = c.pool().await;
    let signals = shared::db::risk::signals(&pool, &shared::ids::InstanceId::parse(&id).unwrap()).await.unwrap();
    assert_eq!(signals.rate_limited_24h, 1, "the refusal is a risk signal");
}
