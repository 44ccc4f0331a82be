//! POST/GET {inst}/messages without a worker: validation, media storage and limits, the
//! SSRF guard, idempotency, and wait=true timing out to 202.

use base64::Engine;
use harness::{test_config, TestApi};
use serde_json::json;
use shared::db::messages::{MessageOut, MessageStatus};

fn b64(n: usize) -> String {
    base64::engine::general_purpose::STANDARD.encode(vec![7u8; n])
}

#[tokio::test]
async fn queued_messages_have_a_record_and_an_event() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("q").await;
    let id = inst.id.as_str();
    let own = api.client(Some(token));
    let m: MessageOut = own
        .post(
            &format!("/v1/instances/{id}/messages"),
            &json!({ "to": "+55 11 99999-0001", "type": "text", "text": "hello" }),
        )
        .await
        .expect_as(202);
    assert!(m.id.as_str().starts_with("msg_"));
    assert_eq!(m.status, MessageStatus::Queued);
    assert_eq!(m.to, shared::jid::Jid::user("5511999990001").as_str());
    assert!(m.wa_message_id.is_none(), "shown once sent");
    let got: MessageOut = own.get(&format!("/v1/instances/{id}/messages/{}", m.id)).await.expect_as(200);
    assert_eq!(got, m);
    own.get(&format!("/v1/instances/{id}/messages/msg_00000000000000000000000000000000"))
        .await
        .expect_error(404, "not_found");
    // The network id is assigned at once, and the queued event written with the row.
    let db = shared::db::connect(&api.config).await.unwrap();
    let (wa,): (String,) = sqlx::query_as("SELECT wa_message_id FROM messages WHERE id = $1")
        .bind(m.id.as_str())
        .fetch_one(&db)
        .await
        .unwrap();
    assert!(wa.starts_with("3EB0"));
    let events = shared::db::outbox::types_for(&db, &shared::ids::InstanceId::parse(id).unwrap()).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(kinds, ["instance.created", "message.queued"]);
    assert!(events[1].1["id"].as_str().unwrap().starts_with("evt_"));
    assert_eq!(events[1].1["data"]["id"], m.id.as_str());
}

#[tokio::test]
async fn idempotency_by_client_message_id() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("idem").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let body = json!({ "to": "5511999990001", "type": "text", "text": "once", "client_message_id": "order-42" });
    let a = own.post(&path, &body).await.expect(202);
    let b = own
        .post(
            &path,
            &json!({ "to": "+5511999990001", "type": "text", "text": "once", "client_message_id": "order-42" }),
        )
        .await
        .expect(202);
    assert_eq!(a["id"], b["id"], "same key, same content: the same message");
    own.post(
        &path,
        &json!({ "to": "5511999990001", "type": "text", "text": "other", "client_message_id": "order-42" }),
    )
    .await
    .expect_error(409, "conflict");
    // Keys are per instance.
    let (other, other_token) = api.create_instance("idem2").await;
    let c = api
        .client(Some(other_token))
        .post(&format!("/v1/instances/{}/messages", other.id.as_str()), &body)
        .await
        .expect(202);
    assert_ne!(c["id"], a["id"]);
}

#[tokio::test]
async fn wait_times_out_to_202_while_queued() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("w").await;
    let path = format!("/v1/instances/{}/messages?wait=true&timeout=1s", inst.id.as_str());
    let m = api
        .client(Some(token.clone()))
        .post(&path, &json!({ "to": "5511999990001", "type": "text", "text": "x" }))
        .await
        .expect(202);
    assert_eq!(m["status"], "queued");
    let bad = format!("/v1/instances/{}/messages?wait=true&timeout=soon", inst.id.as_str());
    api.client(Some(token))
        .post(&bad, &json!({ "to": "5511999990001", "type": "text", "text": "x" }))
        .await
        .expect_error(400, "validation_failed");
}

#[tokio::test]
async fn limits_give_413_and_bad_types_400() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("lim").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let over_image = json!({ "to": "5511999990001", "type": "image", "media": { "data": b64(16 * 1024 * 1024 + 1), "mime_type": "image/png" } });
    own.post(&path, &over_image).await.expect_error(413, "media_too_large");
    let big_text = json!({ "to": "5511999990001", "type": "text", "text": "x".repeat(64 * 1024 + 1) });
    own.post(&path, &big_text).await.expect_error(413, "media_too_large");
    let ok_doc = json!({ "to": "5511999990001", "type": "document", "media": { "data": b64(2 * 1024 * 1024), "mime_type": "application/pdf", "filename": "a.pdf" } });
    let m = own.post(&path, &ok_doc).await.expect(202);
    assert_eq!(m["type"], "document");
    own.post(&path, &json!({ "to": "5511999990001", "type": "fax" })).await.expect_error(400, "validation_failed");
    own.post(&path, &json!({ "to": "5511999990001", "type": "poll", "poll": { "name": "p", "values": ["one"] } }))
        .await
        .expect_error(400, "validation_failed");
}

#[tokio::test]
async fn media_urls_are_guarded_fetched_and_limited() {
    // Without the private-target escape hatch, internal addresses are refused.
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("ssrf").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let server = harness::media_server().await;
    // Names that resolve to loopback here go through the guarded resolver.
    let loopback_names: Vec<String> = ["localhost.", "ip6-localhost", "ip6-loopback"]
        .iter()
        .filter(|n| {
            std::net::ToSocketAddrs::to_socket_addrs(&(**n, 80)).is_ok_and(|mut a| a.all(|a| a.ip().is_loopback()))
        })
        .map(|n| format!("http://{n}:{}/file/10", server.port()))
        .collect();
    for url in loopback_names.into_iter().chain([
        format!("http://{server}/file/10"),
        format!("http://localhost:{}/file/10", server.port()),
        "http://[::1]/x".to_string(),
        "http://169.254.169.254/latest/meta-data".to_string(),
        "http://10.0.0.1/x".to_string(),
        "ftp://example.com/x".to_string(),
    ]) {
        let r = own.post(&path, &json!({ "to": "5511999990001", "type": "image", "media": { "url": url } })).await;
        let msg = r.expect_error(400, "validation_failed");
        assert!(!msg.contains("169.254") && !msg.contains("localhost"), "{msg}");
    }
    drop(api);

    // With it (tests only), downloads work and their limits hold.
    let mut config = test_config();
    config.allow_private_targets = true;
    let api = TestApi::start_with(config).await;
    let (inst, token) = api.create_instance("fetch").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let m = own.post(&path, &json!({ "to": "5511999990001", "type": "image", "media": { "url": format!("http://{server}/file/1000") } })).await.expect(202);
    let db = shared::db::connect(&api.config).await.unwrap();
    let (size, mime): (i64, String) = sqlx::query_as(
        "SELECT size, mime_type FROM media WHERE id = (SELECT content->'media'->>'id' FROM messages WHERE id = $1)",
    )
    .bind(m["id"].as_str())
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!((size, mime.as_str()), (1000, "image/png"));
    let over = 16 * 1024 * 1024 + 1;
    own.post(
        &path,
        &json!({ "to": "5511999990001", "type": "image", "media": { "url": format!("http://{server}/file/{over}") } }),
    )
    .await
    .expect_error(413, "media_too_large");
    own.post(&path, &json!({ "to": "5511999990001", "type": "image", "media": { "url": format!("http://{server}/stream/{over}") } })).await.expect_error(413, "media_too_large");
    own.post(
        &path,
        &json!({ "to": "5511999990001", "type": "image", "media": { "url": format!("http://{server}/missing") } }),
    )
    .await
    .expect_error(422, "media_fetch_failed");
    let redirected = format!("http://{server}/redirect?to=/file/5");
    own.post(&path, &json!({ "to": "5511999990001", "type": "image", "media": { "url": redirected } }))
        .await
        .expect(202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_accepts_batch_without_breaking_idempotency() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("batch").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    // Many at once with one key: one message, every answer names it.
    let body = json!({ "to": "5511999990001", "type": "text", "text": "same", "client_message_id": "k-1" });
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let (own, path, body) = (own.clone(), path.clone(), body.clone());
            tokio::spawn(async move { own.post(&path, &body).await.expect(202)["id"].as_str().unwrap().to_string() })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        ids.insert(t.await.unwrap());
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    // Many distinct ones at once: all stored, each with its event.
    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let (own, path) = (own.clone(), path.clone());
            tokio::spawn(async move {
                own.post(&path, &json!({ "to": "5511999990001", "type": "text", "text": format!("n{i}") })).await.status
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 202);
    }
    let db = shared::db::connect(&api.config).await.unwrap();
    let (messages, events): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM messages WHERE instance_id = $1), \
                (SELECT count(*) FROM outbox WHERE instance_id = $1 AND type = 'message.queued')",
    )
    .bind(inst.id.as_str())
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!((messages, events), (61, 61));
    // A deleted instance takes nothing.
    api.admin().delete(&format!("/v1/instances/{}", inst.id.as_str())).await;
    api.admin()
        .post(&path, &json!({ "to": "5511999990001", "type": "text", "text": "gone" }))
        .await
        .expect_error(404, "instance_not_found");
}

#[tokio::test]
async fn the_idle_sweeper_fails_expired_and_unpaired_messages_only() {
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    let send = |token: String, id: String, text: &'static str| {
        let client = api.client(Some(token));
        async move {
            let m = client
                .post(
                    &format!("/v1/instances/{id}/messages"),
                    &json!({ "to": "5511999990001", "type": "text", "text": text }),
                )
                .await
                .expect(202);
            m["id"].as_str().unwrap().to_string()
        }
    };
    let (idle, idle_token) = api.create_instance("idle").await;
    let idle_id = idle.id.to_string();
    let (gone, gone_token) = api.create_instance("gone").await;
    let gone_id = gone.id.to_string();
    let (running, running_token) = api.create_instance("running").await;
    let running_id = running.id.to_string();

    let stale = send(idle_token.clone(), idle_id.clone(), "stale").await;
    let fresh = send(idle_token, idle_id.clone(), "fresh").await;
    let unpaired = [send(gone_token.clone(), gone_id.clone(), "a").await, send(gone_token, gone_id.clone(), "b").await];
    let own_expiry = send(running_token, running_id.clone(), "expires in order at its worker").await;
    // Time passes for two of them; one instance logged out; one is wanted running.
    sqlx::query("UPDATE messages SET expires_at = now() - interval '1 second' WHERE id = ANY($1)")
        .bind(vec![stale.clone(), own_expiry.clone()])
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("UPDATE instances SET state = 'logged_out' WHERE id = $1").bind(&gone_id).execute(&db).await.unwrap();
    sqlx::query("UPDATE instances SET desired = true WHERE id = $1").bind(&running_id).execute(&db).await.unwrap();

    // A sweep without the unpaired part fails only the expired one.
    let first = shared::db::messages::fail_idle(&db, 10, false).await.unwrap();
    assert_eq!(first.iter().map(|r| r.id.to_string()).collect::<Vec<_>>(), std::slice::from_ref(&stale));
    let failed = [first, shared::db::messages::fail_idle(&db, 10, true).await.unwrap()].concat();
    let mut got: Vec<(String, String)> =
        failed.iter().map(|r| (r.id.to_string(), r.error_code.clone().unwrap())).collect();
    got.sort();
    let mut want = vec![
        (stale.clone(), "message_expired".to_string()),
        (unpaired[0].clone(), "instance_not_connected".to_string()),
        (unpaired[1].clone(), "instance_not_connected".to_string()),
    ];
    want.sort();
    assert_eq!(got, want);
    let status = |id: String| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT status FROM messages WHERE id = $1")
                .bind(id)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    assert_eq!(status(fresh).await, "queued", "not expired yet");
    assert_eq!(status(own_expiry).await, "queued", "its worker expires it");
    // Each failure is written with its event; a second sweep finds nothing.
    let events = shared::db::outbox::types_for(&db, &shared::ids::InstanceId::parse(&gone_id).unwrap()).await.unwrap();
    assert_eq!(events.iter().filter(|(t, _)| t == "message.failed").count(), 2);
    assert!(shared::db::messages::fail_idle(&db, 10, true).await.unwrap().is_empty());
}
