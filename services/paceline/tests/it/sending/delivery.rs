//! Every type delivered once, in order, under its pre-assigned id; the action routes
//! through the same queue; replies and reactions naming messages by the network's id.

use std::time::Duration;

use base64::Engine;
use harness::cluster::{wait_for, Cluster};
use serde_json::json;

use super::{failed_message, inbox, A, B};
use crate::bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_is_delivered_once() {
    let c = Cluster::start(bin(), 2, |cfg| cfg.allow_private_targets = true).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("types", A).await;
    let id = inst.id.to_string();
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
async fn action_send_routes_go_through_the_same_queue() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.allow_private_targets = true).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("evo", A).await;
    c.unpaced(inst.id.as_str()).await;
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
    let id = inst.id.to_string();
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
    let failed = failed_message(&own, &path).await;

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
