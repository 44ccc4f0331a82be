//! The local log over netsim and real worker processes: received messages, history sync,
//! receipts and chats; paging a long chat while messages keep arriving; history landing
//! once across a takeover; contacts and the block list; received media by signed URL.

use crate::bin;
use std::collections::HashSet;
use std::time::Duration;

use base64::Engine;
use harness::cluster::{wait_for, Cluster};
use harness::Client;
use serde_json::{json, Value};

const A: &str = "5511988880001";
const B: &str = "5511988880002";
const C: &str = "5511988880003";

fn jid(n: &str) -> String {
    shared::jid::Jid::user(n).to_string()
}

/// `from` sends a text to `to` through netsim; returns its network id.
async fn phone_text(c: &Cluster, from: &str, to: &str, text: &str) -> String {
    c.phone_text(from, to, text).await
}

async fn chat_messages(own: &Client, id: &str, chat: &str) -> Vec<Value> {
    own.get(&format!("/v1/instances/{id}/chats/{chat}/messages?limit=200")).await.expect(200)["messages"]
        .as_array()
        .unwrap()
        .clone()
}

async fn wait_count(own: &Client, id: &str, chat: &str, n: usize) -> Vec<Value> {
    wait_for(Duration::from_secs(20), || async {
        let m = chat_messages(own, id, chat).await;
        (m.len() >= n).then_some(m)
    })
    .await
    .unwrap_or_else(|| panic!("{n} messages in {chat}"))
}

async fn events(c: &Cluster, id: &str, kind: &str) -> Vec<Value> {
    let pool = c.pool().await;
    sqlx::query_scalar("SELECT payload FROM outbox WHERE instance_id = $1 AND type = $2 ORDER BY created_at, id")
        .bind(id)
        .bind(kind)
        .fetch_all(&pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn received_and_sent_messages_fill_chats_in_order() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    // Before pairing: synced as history, not announced one by one.
    phone_text(&c, B, A, "old 1").await;
    phone_text(&c, B, A, "old 2").await;
    let (inst, token) = c.paired_instance("recv", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let synced = wait_count(&own, &id, B, 2).await;
    assert!(synced.iter().all(|m| m["source"] == "history" && m["from_me"] == false));
    assert_eq!(synced[0]["content"]["text"], "old 2", "newest first");

    phone_text(&c, B, A, "live 1").await;
    phone_text(&c, C, A, "from C").await;
    phone_text(&c, B, A, "live 2").await;
    let sent = own
        .post(
            &format!("/v1/instances/{id}/messages?wait=true&timeout=20s"),
            &json!({ "to": B, "type": "text", "text": "answer" }),
        )
        .await
        .expect(200);
    let b = wait_count(&own, &id, B, 5).await;
    let texts: Vec<&str> = b.iter().map(|m| m["content"]["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["answer", "live 2", "live 1", "old 2", "old 1"]);
    assert_eq!(b[0]["id"], sent["id"], "the queue's message is logged under its id");
    assert_eq!((b[0]["from_me"].as_bool(), b[0]["source"].as_str()), (Some(true), Some("queue")));
    assert_eq!(b[1]["from_jid"], jid(B).as_str());

    // Chats by last message; the phone number works as the chat id.
    let chats = own.get(&format!("/v1/instances/{id}/chats")).await.expect(200);
    let order: Vec<&str> = chats["chats"].as_array().unwrap().iter().map(|c| c["jid"].as_str().unwrap()).collect();
    assert_eq!(order, [jid(B), jid(C)]);
    let chat_b = own.get(&format!("/v1/instances/{id}/chats/{B}")).await.expect(200);
    assert_eq!(chat_b["unread_count"], 0, "answering from the instance reads the chat");
    let chat_c = own.get(&format!("/v1/instances/{id}/chats/{}", jid(C))).await.expect(200);
    assert_eq!(chat_c["unread_count"], 1);

    // Receipts move the sent message forward, once each.
    c.netsim().post(&format!("/control/phones/{B}/read"), &json!({ "id": sent["wa_message_id"] })).await.expect(200);
    wait_for(Duration::from_secs(10), || async {
        (chat_messages(&own, &id, B).await[0]["status"] == "read").then_some(())
    })
    .await
    .expect("read receipt recorded");
    let delivered = events(&c, &id, "message.delivered").await;
    let read = events(&c, &id, "message.read").await;
    assert_eq!((delivered.len(), read.len()), (1, 1));
    assert_eq!(read[0]["data"]["message_id"], sent["id"]);
    let received = events(&c, &id, "message.received").await;
    assert_eq!(received.len(), 3, "live messages only, each once");
    assert_eq!(received[2]["data"]["content"]["text"], "live 2");
    assert!(!events(&c, &id, "chat.updated").await.is_empty());

    // The phone itself writes to C: logged as from_me, the chat counts as read.
    phone_text(&c, A, C, "from my phone").await;
    let cm = wait_count(&own, &id, C, 2).await;
    assert_eq!((cm[0]["from_me"].as_bool(), cm[0]["source"].as_str()), (Some(true), Some("live")));
    assert_eq!(own.get(&format!("/v1/instances/{id}/chats/{C}")).await.expect(200)["unread_count"], 0);

    // Chat changes go to the network, then to the log.
    phone_text(&c, C, A, "unread again").await;
    wait_count(&own, &id, C, 3).await;
    let p = own
        .patch(&format!("/v1/instances/{id}/chats/{C}"), &json!({ "archived": true, "pinned": true }))
        .await
        .expect(200);
    assert_eq!((p["archived"].as_bool(), p["pinned"].as_bool()), (Some(true), Some(true)));
    let r = own.post(&format!("/v1/instances/{id}/chats/{C}/read"), &json!({})).await.expect(200);
    assert_eq!(r["unread_count"], 0);
    let state = c.netsim().get(&format!("/control/phones/{A}/state")).await.expect(200);
    assert_eq!(state["chats"][C]["archived"], true);
    assert_eq!(state["chats"][C]["pinned"], true);
    assert_eq!(state["read"].as_array().unwrap().len(), 2, "both of C's messages were read: {state}");
    let m = own
        .patch(
            &format!("/v1/instances/{id}/chats/{C}"),
            &json!({ "muted_until": "2030-01-01T00:00:00Z", "read": false }),
        )
        .await
        .expect(200);
    assert_eq!(m["unread_count"], 1);
    assert!(m["muted_until"].as_str().unwrap().starts_with("2030-01-01"));
    own.delete(&format!("/v1/instances/{id}/chats/{C}")).await;
    own.get(&format!("/v1/instances/{id}/chats/{C}")).await.expect_error(404, "not_found");
    assert!(chat_messages(&own, &id, C).await.is_empty());
    let state = c.netsim().get(&format!("/control/phones/{A}/state")).await.expect(200);
    assert_eq!(state["chats"][C]["deleted"], true);
    own.get(&format!("/v1/instances/{id}/chats/not-a-number")).await.expect_error(400, "validation_failed");
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_a_1000_message_chat_while_new_ones_arrive_has_no_gaps_or_repeats() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("page", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    let mut sent = Vec::new();
    for i in 0..1000 {
        sent.push(phone_text(&c, B, A, &format!("m{i}")).await);
    }
    let pool = c.pool().await;
    wait_for(Duration::from_secs(60), || async {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM log_messages WHERE instance_id = $1")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
        (n == 1000).then_some(())
    })
    .await
    .expect("1000 messages logged");

    let base = format!("/v1/instances/{id}/chats/{B}/messages");
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut arrived = 0;
    loop {
        let path = match &cursor {
            Some(cur) => format!("{base}?limit=37&cursor={cur}"),
            None => format!("{base}?limit=37"),
        };
        let page = own.get(&path).await.expect(200);
        seen.extend(
            page["messages"].as_array().unwrap().iter().map(|m| m["wa_message_id"].as_str().unwrap().to_string()),
        );
        // New messages keep arriving during the walk.
        if arrived < 30 {
            phone_text(&c, B, A, &format!("new {arrived}")).await;
            arrived += 1;
        }
        match page["next_cursor"].as_str() {
            Some(cur) => cursor = Some(cur.to_string()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 1000, "no repeats and nothing new mixed into older pages");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 1000);
    let expected: Vec<String> = sent.iter().rev().cloned().collect();
    assert_eq!(seen, expected, "exactly the 1000, newest first, no gaps");

    // A cursor is bound to its chat and instance.
    let page = own.get(&format!("{base}?limit=10")).await.expect(200);
    let cur = page["next_cursor"].as_str().unwrap();
    own.get(&format!("/v1/instances/{id}/chats/{C}/messages?cursor={cur}"))
        .await
        .expect_error(400, "validation_failed");
    own.get(&format!("{base}?cursor=bm9wZQ")).await.expect_error(400, "validation_failed");
    own.get(&format!("{base}?limit=201")).await.expect_error(400, "validation_failed");
    own.get(&format!("{base}?limit=abc")).await.expect_error(400, "validation_failed");
    let chats = own.get(&format!("/v1/instances/{id}/chats?limit=1")).await.expect(200);
    assert!(chats.get("next_cursor").is_none(), "absent on the last page: {chats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_sync_lands_once_across_a_takeover() {
    let c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    for i in 0..20 {
        phone_text(&c, B, A, &format!("h{i}")).await;
    }
    let (inst, token) = c.paired_instance("hist", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    let pool = c.pool().await;
    let count = || async {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM log_messages WHERE instance_id = $1")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
        n
    };
    wait_for(Duration::from_secs(20), || async { (count().await == 20).then_some(()) }).await.expect("history landed");
    // The same sync again, to the same worker: nothing new. The sentinel, a live message
    // sent after it on the same session, lands after the sync was handled.
    c.netsim().post(&format!("/control/phones/{A}/resync"), &json!({})).await.expect(200);
    phone_text(&c, B, A, "sentinel 1").await;
    wait_count(&own, &id, B, 21).await;
    assert_eq!(count().await, 21, "the repeated sync added nothing");

    // The owner dies; the other worker resumes the session and gets the sync again.
    let (epoch, _, _) = c.ownership(&id).await;
    let owner = c.owner().await.expect("an owner");
    c.signal(owner, "KILL");
    wait_for(Duration::from_secs(20), || async {
        let (e, state, _) = c.ownership(&id).await;
        (e > epoch && state == "connected").then_some(())
    })
    .await
    .expect("taken over");
    let r = c.netsim().post(&format!("/control/phones/{A}/resync"), &json!({})).await.expect(200);
    assert_eq!(r["devices"], 1);
    phone_text(&c, B, A, "after takeover").await;
    wait_count(&own, &id, B, 22).await;
    phone_text(&c, B, A, "sentinel 2").await;
    wait_count(&own, &id, B, 23).await;
    assert_eq!(count().await, 23, "history landed once");
    let (unread,): (i32,) = sqlx::query_as("SELECT unread_count FROM chats WHERE instance_id = $1")
        .bind(&id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unread, 3, "history does not count as unread, and repeats add nothing");
    assert_eq!(events(&c, &id, "message.received").await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contacts_profiles_and_the_blocklist_round_trip_through_the_network() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, true).await;
    c.phone(C, false).await;
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG picture");
    c.netsim()
        .patch(
            &format!("/control/phones/{B}/profile"),
            &json!({ "name": "Bob's Shop", "about": "open 9-18", "business_profile": { "description": "bikes", "category": "retail" },
                     "picture": { "data": png, "mime_type": "image/png" } }),
        )
        .await
        .expect(200);
    c.netsim().post(&format!("/control/phones/{A}/contacts"), &json!({ "number": B, "name": "Bob" })).await.expect(200);
    let (inst, token) = c.paired_instance("contacts", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    phone_text(&c, C, A, "hi").await;

    let list = own.get(&format!("/v1/instances/{id}/contacts")).await.expect(200);
    let jids: Vec<&str> = list["contacts"].as_array().unwrap().iter().map(|c| c["jid"].as_str().unwrap()).collect();
    assert_eq!(jids, [jid(B), jid(C)]);
    let bob = own.get(&format!("/v1/instances/{id}/contacts/{B}")).await.expect(200);
    assert_eq!(bob, json!({ "jid": jid(B), "name": "Bob", "push_name": "Bob's Shop", "business": true }));
    let pic = own.get(&format!("/v1/instances/{id}/contacts/{B}/picture")).await.expect(200);
    let bytes = reqwest::get(pic["url"].as_str().unwrap()).await.unwrap().bytes().await.unwrap();
    assert_eq!(&bytes[..], b"\x89PNG picture");
    assert!(own.get(&format!("/v1/instances/{id}/contacts/{C}/picture")).await.expect(200)["url"].is_null());
    let prof = own.get(&format!("/v1/instances/{id}/contacts/{B}/profile")).await.expect(200);
    assert_eq!(prof["about"], "open 9-18");
    assert_eq!(prof["business_profile"]["category"], "retail");
    assert!(
        own.get(&format!("/v1/instances/{id}/contacts/{C}/profile")).await.expect(200)["business_profile"].is_null()
    );
    own.get(&format!("/v1/instances/{id}/contacts/5511988889999")).await.expect_error(404, "not_found");
    own.get(&format!("/v1/instances/{id}/contacts/123@g.us")).await.expect_error(400, "validation_failed");

    // Block C: the network refuses C's messages; unblock lets them through again.
    let b = own.post(&format!("/v1/instances/{id}/contacts/{C}/block"), &json!({})).await.expect(200);
    assert_eq!(b, json!({ "jid": jid(C), "blocked": true }));
    assert_eq!(own.get(&format!("/v1/instances/{id}/blocklist")).await.expect(200)["jids"], json!([jid(C)]));
    c.netsim()
        .post(&format!("/control/phones/{C}/messages"), &json!({ "to": A, "text": "let me in" }))
        .await
        .expect_error(403, "forbidden");
    own.post(&format!("/v1/instances/{id}/contacts/{C}/unblock"), &json!({})).await.expect(200);
    assert_eq!(own.get(&format!("/v1/instances/{id}/blocklist")).await.expect(200)["jids"], json!([]));
    phone_text(&c, C, A, "thanks").await;

    // Without a running session these need the network: 409.
    let (other, other_token) = c.api.create_instance("offline").await;
    let oid = other.id.as_str();
    c.api
        .client(Some(other_token))
        .get(&format!("/v1/instances/{oid}/contacts"))
        .await
        .expect_error(409, "instance_not_connected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn received_media_is_served_by_signed_urls_that_refuse_tampering_and_expire() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let photo = b"\x89PNG a received photo".to_vec();
    let data = base64::engine::general_purpose::STANDARD.encode(&photo);
    // Sent before pairing; its media expires on the network before the sync.
    let gone = c
        .netsim()
        .post(
            &format!("/control/phones/{B}/messages"),
            &json!({ "to": A, "type": "image", "text": "old", "media": { "data": data, "mime_type": "image/png" } }),
        )
        .await
        .expect(201);
    c.netsim()
        .post(&format!("/control/media/{}/expire", gone["media_id"].as_str().unwrap()), &json!({}))
        .await
        .expect(200);
    let (inst, token) = c.paired_instance("media", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    c.netsim()
        .post(
            &format!("/control/phones/{B}/messages"),
            &json!({ "to": A, "type": "image", "text": "look", "media": { "data": data, "mime_type": "image/png", "filename": "p.png" } }),
        )
        .await
        .expect(201);
    let msgs = wait_count(&own, &id, B, 2).await;
    assert_eq!(msgs[0]["content"]["caption"], "look");
    let media = &msgs[0]["content"]["media"];
    assert_eq!(media["size"], photo.len());
    let url = media["url"].as_str().unwrap().to_string();
    let res = reqwest::get(&url).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "image/png");
    assert_eq!(res.bytes().await.unwrap().to_vec(), photo);

    let anon = c.api.anon();
    let path = url.split_once(&c.api.addr.to_string()).unwrap().1.to_string();
    let tampered = format!("{}0", path.trim_end_matches(|ch: char| ch.is_ascii_hexdigit()));
    anon.get(&tampered).await.expect_error(403, "forbidden");
    anon.get(path.split('?').next().unwrap()).await.expect_error(403, "forbidden");
    anon.get(&format!("{}?exp=abc&sig=00", path.split('?').next().unwrap())).await.expect_error(403, "forbidden");
    let media_id = media["id"].as_str().unwrap();
    let signer = domain::media_urls::MediaUrls::new(&c.api.config, c.api.config.admin_token.as_deref());
    let stale = signer.sign(media_id, chrono::Utc::now() - chrono::Duration::hours(2)).unwrap();
    assert_eq!(reqwest::get(&stale).await.unwrap().status(), 403, "expired");

    // The media the network no longer had: recorded, and 410 however it is asked for.
    assert_eq!(msgs[1]["content"]["media"]["expired"], true);
    assert!(msgs[1]["content"]["media"].get("url").is_none());
    let gone_id = msgs[1]["content"]["media"]["id"].as_str().unwrap();
    let res = reqwest::get(signer.sign(gone_id, chrono::Utc::now()).unwrap()).await.unwrap();
    assert_eq!(res.status(), 410);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "media_unavailable");

    // Listening beyond loopback with no public_url: signed URLs are disabled (409).
    let mut cfg = harness::test_config();
    cfg.listen_addr = ([0, 0, 0, 0], 0).into();
    let wide = harness::TestApi::start_with(cfg).await;
    wide.anon().get(&format!("/media/{media_id}?exp=1&sig=00")).await.expect_error(409, "conflict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_that_fails_to_download_is_retried_until_it_arrives() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("media-retry", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    let photo = b"\x89PNG sent while the media servers were down".to_vec();
    let data = base64::engine::general_purpose::STANDARD.encode(&photo);

    // The media servers are briefly down when the message arrives.
    c.netsim().post("/control/faults", &json!({ "media_down": true })).await.expect(200);
    c.netsim()
        .post(
            &format!("/control/phones/{B}/messages"),
            &json!({ "to": A, "type": "image", "text": "later", "media": { "data": data, "mime_type": "image/png" } }),
        )
        .await
        .expect(201);
    let msgs = wait_count(&own, &id, B, 1).await;
    let media = &msgs[0]["content"]["media"];
    assert_eq!(media["pending"], true, "logged at once, media pending: {media}");
    assert!(media.get("expired").is_none());
    let signer = domain::media_urls::MediaUrls::new(&c.api.config, c.api.config.admin_token.as_deref());
    let pending_url = signer.sign(media["id"].as_str().unwrap(), chrono::Utc::now()).unwrap();
    let res = reqwest::get(&pending_url).await.unwrap();
    assert_eq!(res.status(), 502);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "worker_error");
    assert_eq!(body["error"]["retryable"], true);
    // A few tries fail while the servers stay down, and count.
    let pool = c.pool().await;
    let attempts = || async {
        sqlx::query_scalar::<_, i32>("SELECT fetch_attempts FROM media WHERE id = $1")
            .bind(media["id"].as_str())
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    wait_for(Duration::from_secs(10), || async { (attempts().await >= 1).then_some(()) })
        .await
        .expect("a retry failed and was counted");

    // They come back: the next try stores the bytes and updates the logged message.
    c.netsim().post("/control/faults", &json!({ "media_down": false })).await.expect(200);
    let media = wait_for(Duration::from_secs(20), || async {
        let m = chat_messages(&own, &id, B).await;
        let media = m[0]["content"]["media"].clone();
        (media.get("pending").is_none()).then_some(media)
    })
    .await
    .expect("the download was retried");
    assert_eq!(media["size"], photo.len());
    let res = reqwest::get(media["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().to_vec(), photo);
    assert_eq!(reqwest::get(&pending_url).await.unwrap().status(), 200, "the same media id now serves the bytes");
    // Who saw the message arrive with pending media is told it is there now.
    let updated = events(&c, &id, "message.media_updated").await;
    assert_eq!(updated.len(), 1, "{updated:?}");
    assert_eq!(updated[0]["data"]["media"]["size"], photo.len());
    assert_eq!(updated[0]["data"]["message_id"], msgs[0]["id"]);
    // Nothing is pending any more: the actor has nothing to wake up for.
    let inst_id = shared::ids::InstanceId::parse(&id).unwrap();
    assert_eq!(shared::db::log::next_media_retry(&pool, &inst_id).await.unwrap(), None);
}

/// A server that answers anything with an image's headers and then zeros forever;
/// counts the connections it took.
async fn endless_server() -> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n\r\n").await;
                let chunk = vec![0u8; 64 * 1024];
                while sock.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    (addr, hits)
}

/// The worker's peak resident memory (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_media_locators_leave_the_worker_up_and_bounded() {
    let mut c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("hostile-media", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    let (evil, hits) = endless_server().await;
    // A stranger writes its own locator: a server of its choosing that streams forever.
    c.netsim()
        .post(
            &format!("/control/phones/{B}/messages"),
            &json!({ "to": A, "type": "image", "text": "crafted", "body": { "media": {
                "url": format!("http://{evil}/forever"), "mime_type": "image/jpeg", "size": 1000 } } }),
        )
        .await
        .expect(201);
    // The network's own media server streams forever past the length it declared.
    let data = base64::engine::general_purpose::STANDARD.encode(b"\xff\xd8 a small start");
    c.netsim()
        .post(
            &format!("/control/phones/{B}/messages"),
            &json!({ "to": A, "type": "image", "text": "endless",
                     "media": { "data": data, "mime_type": "image/jpeg", "endless": true } }),
        )
        .await
        .expect(201);
    // The sentinel: once it is logged, both media messages before it were handled.
    phone_text(&c, B, A, "after").await;
    let msgs = wait_count(&own, &id, B, 3).await;
    let texts: Vec<&str> =
        msgs.iter().map(|m| m["content"]["text"].as_str().or(m["content"]["caption"].as_str()).unwrap()).collect();
    assert_eq!(texts, ["after", "endless", "crafted"]);
    for m in &msgs[1..] {
        let media = &m["content"]["media"];
        assert_eq!(media["expired"], true, "logged with its media unavailable: {media}");
        assert!(media.get("pending").is_none(), "not retried: {media}");
    }
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "the stranger's server was never contacted");
    let worker = &mut c.workers[0].child;
    assert!(worker.try_wait().unwrap().is_none(), "the worker is still up");
    let peak = peak_rss(worker.id());
    assert!(peak < 256 * 1024 * 1024, "the worker's memory stayed bounded: peak {} MB", peak >> 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn received_media_past_the_instance_quota_is_logged_unavailable() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.media.quota_bytes = 1_000).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("recv-quota", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    let send = |n: usize, caption: &'static str| {
        let data = base64::engine::general_purpose::STANDARD.encode(vec![1u8; n]);
        json!({ "to": A, "type": "image", "text": caption, "media": { "data": data, "mime_type": "image/png" } })
    };
    for (n, caption) in [(700, "fits"), (700, "over"), (200, "fits too")] {
        c.netsim().post(&format!("/control/phones/{B}/messages"), &send(n, caption)).await.expect(201);
        // One at a time, so which one crosses the quota is known.
        wait_for(Duration::from_secs(20), || async {
            chat_messages(&own, &id, B).await.iter().any(|m| m["content"]["caption"] == caption).then_some(())
        })
        .await
        .expect("logged");
    }
    let msgs = chat_messages(&own, &id, B).await;
    let media: Vec<(&str, bool)> = msgs
        .iter()
        .map(|m| (m["content"]["caption"].as_str().unwrap(), m["content"]["media"]["expired"] == true))
        .collect();
    assert_eq!(media, [("fits too", false), ("over", true), ("fits", false)]);
}
