//! Stored media: served a chunk at a time, inline only for safe types, within each
//! instance's quota, and collected when no message refers to it.

use base64::Engine;
use harness::{test_config, TestApi};
use serde_json::{json, Value};

const TO: &str = "5511999990001";

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The media id a queued message carries.
async fn media_of(db: &sqlx::PgPool, msg: &Value) -> String {
    sqlx::query_scalar("SELECT content->'media'->>'id' FROM messages WHERE id = $1")
        .bind(msg["id"].as_str())
        .fetch_one(db)
        .await
        .unwrap()
}

fn signed(api: &TestApi, media_id: &str) -> String {
    let signer = domain::media_urls::MediaUrls::new(&api.config, api.config.admin_token.as_deref());
    signer.sign(media_id, chrono::Utc::now()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_media_is_served_in_chunks_and_only_safe_types_inline() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("serve").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let db = shared::db::connect(&api.config).await.unwrap();

    // Larger than a chunk: stored in several, served back whole and in order.
    let doc: Vec<u8> = (0..(2 * shared::db::media::CHUNK + 12345)).map(|i| (i % 251) as u8).collect();
    let m = own
        .post(
            &path,
            &json!({ "to": TO, "type": "document",
            "media": { "data": b64(&doc), "mime_type": "application/pdf", "filename": "r.pdf" } }),
        )
        .await
        .expect(202);
    let id = media_of(&db, &m).await;
    let chunks: i64 = sqlx::query_scalar("SELECT count(*) FROM media_chunks WHERE media_id = $1")
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(chunks, 3);
    let res = reqwest::get(signed(&api, &id)).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-length"], doc.len().to_string().as_str());
    assert_eq!(res.headers()["content-disposition"], "inline; filename=\"r.pdf\"");
    assert_eq!(res.headers()["x-content-type-options"], "nosniff");
    assert_eq!(res.headers()["content-security-policy"], "sandbox");
    assert_eq!(res.bytes().await.unwrap().to_vec(), doc);

    // A sender's HTML or SVG is never rendered on our origin: an attachment, sandboxed.
    for (kind, mime) in [("document", "text/html"), ("image", "image/svg+xml"), ("document", "application/xhtml+xml")] {
        let script = b"<html><script>alert(document.domain)</script></html>";
        let m = own
            .post(&path, &json!({ "to": TO, "type": kind, "media": { "data": b64(script), "mime_type": mime } }))
            .await
            .expect(202);
        let res = reqwest::get(signed(&api, &media_of(&db, &m).await)).await.unwrap();
        assert_eq!(res.status(), 200);
        let h = res.headers();
        assert!(h["content-disposition"].to_str().unwrap().starts_with("attachment"), "{mime}: {h:?}");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["content-security-policy"], "sandbox");
    }
    let png = own
        .post(
            &path,
            &json!({ "to": TO, "type": "image", "media": { "data": b64(b"\x89PNG..."), "mime_type": "image/png" } }),
        )
        .await
        .expect(202);
    let res = reqwest::get(signed(&api, &media_of(&db, &png).await)).await.unwrap();
    assert_eq!(res.headers()["content-disposition"], "inline");
    assert_eq!(res.headers()["content-type"], "image/png");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_media_quota_refuses_past_it_and_refusals_and_replays_leave_nothing() {
    let mut config = test_config();
    config.media.quota_bytes = 1_000;
    let api = TestApi::start_with(config).await;
    let (inst, token) = api.create_instance("quota").await;
    let inst_id = inst.id.to_string();
    let path = format!("/v1/instances/{inst_id}/messages");
    let own = api.client(Some(token));
    let db = shared::db::connect(&api.config).await.unwrap();
    let rows = || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM media WHERE instance_id = $1")
            .bind(&inst_id)
            .fetch_one(&db)
            .await
            .unwrap();
        n
    };
    let image = |n: usize, key: &str| {
        json!({ "to": TO, "type": "image", "client_message_id": key,
                "media": { "data": b64(&vec![7u8; n]), "mime_type": "image/png" } })
    };
    own.post(&path, &image(600, "a")).await.expect(202);
    assert_eq!(rows().await, 1);
    // An idempotent replay stores nothing more, and a conflict nothing at all.
    own.post(&path, &image(600, "a")).await.expect(202);
    own.post(&path, &image(300, "a")).await.expect_error(409, "conflict");
    assert_eq!(rows().await, 1, "replays and conflicts leave no media behind");
    // Past the quota: refused, and nothing stored.
    let r = own.post(&path, &image(600, "b")).await;
    assert_eq!(r.body["error"]["retryable"], false);
    r.expect_error(413, "quota_exceeded");
    assert_eq!(rows().await, 1);
    own.post(&path, &image(300, "c")).await.expect(202);
    let used = shared::db::media::usage(&db, &shared::ids::InstanceId::parse(&inst_id).unwrap()).await.unwrap();
    assert_eq!(used, 900, "usage counts what is stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unclaimed_media_is_collected_and_old_media_gives_its_bytes_back() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("gc").await;
    let inst_id = shared::ids::InstanceId::parse(inst.id.as_str()).unwrap();
    let path = format!("/v1/instances/{inst_id}/messages");
    let own = api.client(Some(token));
    let db = shared::db::connect(&api.config).await.unwrap();
    let m = own
        .post(&path, &json!({ "to": TO, "type": "image", "media": { "data": b64(b"kept"), "mime_type": "image/png" } }))
        .await
        .expect(202);
    let kept = media_of(&db, &m).await;
    // Left by a crash between storing and queueing: no message refers to it.
    let (orphan, _) = shared::db::media::store(
        &shared::db::media::Store::postgres(db.clone()),
        &inst_id,
        shared::db::media::Direction::Outbound,
        "image/png",
        None,
        shared::db::media::MediaBody::Data(b"orphan"),
        u64::MAX,
    )
    .await
    .unwrap();
    // Within its grace it stays (its message may be about to be queued).
    assert_eq!(shared::db::media::collect_unclaimed(&db, 100).await.unwrap(), 0);
    sqlx::query("UPDATE media SET created_at = now() - interval '2 hours'").execute(&db).await.unwrap();
    assert_eq!(shared::db::media::collect_unclaimed(&db, 100).await.unwrap(), 1);
    let left: Vec<String> = sqlx::query_scalar("SELECT id FROM media").fetch_all(&db).await.unwrap();
    assert_eq!(left, std::slice::from_ref(&kept), "the orphan went, the queued message's media stayed");
    assert!(!left.contains(&orphan.to_string()));
    let chunks: i64 = sqlx::query_scalar("SELECT count(*) FROM media_chunks").fetch_one(&db).await.unwrap();
    assert_eq!(chunks, 1, "its bytes went with it");

    // Past the retention: the bytes go, the quota frees, the URL answers 410.
    sqlx::query("UPDATE media SET created_at = now() - interval '31 days'").execute(&db).await.unwrap();
    assert_eq!(shared::db::media::retention::expire_due(&db, api.config.media_retention(), 100).await.unwrap(), 1);
    assert_eq!(shared::db::media::usage(&db, &inst_id).await.unwrap(), 0);
    let res = reqwest::get(signed(&api, &kept)).await.unwrap();
    assert_eq!(res.status(), 410);
}

/// Evolution's `getBase64FromMediaMessage` streams the media as base64 (no whole copy:
/// the answer has no length up front) and judges its size by what is stored, not by the
/// logged descriptor (which says 0 while a download is pending).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base64_of_a_logged_media_is_streamed_and_sized_by_what_is_stored() {
    use shared::db::log::{record_received, Received, Source};
    use shared::db::media::{store, MediaBody};
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("b64-media").await;
    let id = shared::ids::InstanceId::parse(inst.id.as_str()).unwrap();
    let db = shared::db::connect(&api.config).await.unwrap();
    let quota = api.config.media.quota_bytes;
    let photo: Vec<u8> = (0..(3 * shared::db::media::CHUNK + 1)).map(|i| (i * 13 % 256) as u8).collect();
    let pg = shared::db::media::Store::postgres(db.clone());
    let (small, _) = store(
        &pg,
        &id,
        shared::db::media::Direction::Inbound,
        "image/jpeg",
        Some("p.jpg"),
        MediaBody::Data(&photo),
        quota,
    )
    .await
    .unwrap();
    let huge = vec![1u8; 16 * 1024 * 1024 + 1];
    let (big, _) =
        store(&pg, &id, shared::db::media::Direction::Inbound, "image/jpeg", None, MediaBody::Data(&huge), quota)
            .await
            .unwrap();
    let epoch: i64 =
        sqlx::query_scalar("SELECT owner_epoch FROM instances WHERE id = $1").bind(&id).fetch_one(&db).await.unwrap();
    let logged = |wa: &str, media: &shared::ids::MediaId| Received {
        wa_message_id: wa.into(),
        chat_jid: format!("{TO}@s.whatsapp.net"),
        from_jid: format!("{TO}@s.whatsapp.net"),
        chat_lid: None,
        from_lid: None,
        from_me: false,
        kind: "image".into(),
        content: json!({ "caption": "look", "media": { "id": media, "mime_type": "image/jpeg", "size": 0 } }),
        ts: chrono::Utc::now(),
    };
    let msgs = [logged("WAB64SMALL", &small), logged("WAB64BIG", &big)];
    record_received(&db, &id, epoch, &msgs, Source::Live).await.unwrap().expect("fenced write");

    let url = format!("http://{}/chat/getBase64FromMediaMessage/b64-media", api.addr);
    let ask = |wa: &'static str| {
        let (url, token) = (url.clone(), token.clone());
        async move {
            reqwest::Client::new()
                .post(url)
                .header("apikey", token)
                .json(&json!({ "message": { "key": { "id": wa } } }))
                .send()
                .await
                .unwrap()
        }
    };
    let r = ask("WAB64SMALL").await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("content-length").is_none(), "streamed, not built whole");
    let v: Value = r.json().await.unwrap();
    assert_eq!((v["mediaType"].as_str(), v["fileName"].as_str()), (Some("image"), Some("p.jpg")));
    assert_eq!(v["size"]["fileLength"], photo.len());
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(v["base64"].as_str().unwrap()).unwrap(), photo);
    let r = ask("WAB64BIG").await;
    assert_eq!(r.status(), 413, "16 MB as stored, though the log said 0");
}
