//! Restricted API keys: created and listed by the instance token (never by a key), a
//! `read_only` key reads and a `send_only` key sends and nothing else, keys obey the
//! instance's IP allow-list and their own, and a revoked or expired key is refused: at
//! once on the pod that revoked it, and on another pod within the token cache's 5 s.

use std::time::{Duration, Instant};

use base64::Engine;
use harness::cluster::wait_for;
use harness::TestApi;
use serde_json::{json, Value};

async fn create(owner: &harness::Client, id: &str, body: Value) -> (Value, String) {
    let k = owner.post(&format!("/v1/instances/{id}/api-keys"), &body).await.expect(201);
    (k["key"].clone(), k["token"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn keys_reach_their_scope_and_nothing_else() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("shop-keys").await;
    let id = inst.id.to_string();
    let owner = api.client(Some(token));
    let base = format!("/v1/instances/{id}");

    let (ro, ro_token) = create(&owner, &id, json!({ "name": "dashboard", "scope": "read_only" })).await;
    assert!(ro["id"].as_str().unwrap().starts_with("key_"));
    assert!(ro_token.starts_with("pl_key_"));
    assert_eq!(ro["scope"], "read_only");
    assert_eq!(ro["last_used_at"], Value::Null);
    let (_, so_token) = create(&owner, &id, json!({ "name": "crm", "scope": "send_only" })).await;
    let reader = api.client(Some(ro_token.clone()));
    let sender = api.client(Some(so_token.clone()));

    // read_only: every read of its instance, nothing else.
    assert_eq!(reader.get(&base).await.expect(200)["id"], id.as_str());
    reader.get(&format!("{base}/chats")).await.expect(200);
    reader.get(&format!("{base}/webhooks")).await.expect(200);
    let me = reader.get("/v1/me").await.expect(200);
    assert_eq!((me["kind"].as_str(), me["scope"].as_str()), (Some("api_key"), Some("read_only")));
    let text = json!({ "to": "5511999990001", "type": "text", "text": "hi" });
    reader.post(&format!("{base}/messages"), &text).await.expect_error(403, "forbidden");
    reader.patch(&base, &json!({ "tags": ["x"] })).await.expect_error(403, "forbidden");
    reader.get(&format!("{base}/api-keys")).await.expect_error(403, "forbidden");
    reader.get("/v1/instances").await.expect_error(403, "forbidden");
    // A GET that changes something is not a read: resetting a group's invite link.
    let invite = format!("{base}/groups/120363000000000001@g.us/invite-link");
    reader.get(&format!("{invite}?reset=true")).await.expect_error(403, "forbidden");
    reader.get(&invite).await.expect_error(409, "instance_not_connected");
    // Pairing is the owner's: whoever scans the QR first binds the instance to a phone.
    reader.get(&format!("{base}/qr")).await.expect_error(403, "forbidden");

    // send_only: sends and reads their status, checks numbers; nothing else.
    let m = sender.post(&format!("{base}/messages"), &text).await.expect(202);
    sender.get(&format!("{base}/messages/{}", m["id"].as_str().unwrap())).await.expect(200);
    // A body over 1 MB goes through the large-send gate, which checks access first: the
    // key's scope holds there too.
    let big = base64::engine::general_purpose::STANDARD.encode(vec![5u8; 1_200_000]);
    let image = json!({ "to": "5511999990001", "type": "image", "media": { "data": big, "mime_type": "image/png" } });
    sender.post(&format!("{base}/messages"), &image).await.expect(202);
    reader.post(&format!("{base}/messages"), &image).await.expect_error(403, "forbidden");
    sender.get(&base).await.expect_error(403, "forbidden");
    sender.get(&format!("{base}/chats")).await.expect_error(403, "forbidden");
    // On the action routes it goes in X-API-Key: the send routes, not connect.
    let action = api.anon().with_header("x-api-key", &so_token);
    let sent = action
        .post("/message/sendText/shop-keys", &json!({ "number": "5511999990001", "message": "hi" }))
        .await
        .expect(200);
    assert!(sent["messageId"].is_string());
    // A body over 1 MB goes through the large-send gate with the action routes' own key
    // header, X-API-Key or Evolution's apikey.
    let media = json!({ "number": "5511999990001", "mediatype": "image", "mimetype": "image/png", "media": big });
    for header in ["x-api-key", "apikey"] {
        let sent =
            api.anon().with_header(header, &so_token).post("/message/sendMedia/shop-keys", &media).await.expect(200);
        assert!(sent["messageId"].is_string());
    }
    // Refused there as on a small body: 403 for a key of another scope, 401 without one.
    api.anon()
        .with_header("x-api-key", &ro_token)
        .post("/message/sendMedia/shop-keys", &media)
        .await
        .expect_error(403, "forbidden");
    api.anon().post("/message/sendMedia/shop-keys", &media).await.expect_error(401, "unauthorized");
    action.get("/instance/connect/shop-keys").await.expect_error(403, "forbidden");
    api.anon()
        .with_header("x-api-key", &ro_token)
        .post("/message/sendText/shop-keys", &json!({ "number": "5511999990001", "message": "hi" }))
        .await
        .expect_error(403, "forbidden");

    // No key creates, lists or revokes keys.
    for k in [&reader, &sender] {
        k.post(&format!("{base}/api-keys"), &json!({ "name": "more", "scope": "read_only" }))
            .await
            .expect_error(403, "forbidden");
    }
    // Another instance's routes: 403.
    let (other, _) = api.create_instance("elsewhere").await;
    reader.get(&format!("/v1/instances/{}", other.id.as_str())).await.expect_error(403, "forbidden");

    // Bad input: 400, nothing created.
    for bad in [
        json!({ "name": "x", "scope": "admin" }),
        json!({ "name": "  ", "scope": "read_only" }),
        json!({ "name": "x".repeat(101), "scope": "read_only" }),
        json!({ "name": "x", "scope": "read_only", "expires_at": "2020-01-01T00:00:00Z" }),
        json!({ "name": "x", "scope": "read_only", "ip_allowlist": ["not-an-ip"] }),
        json!({ "name": "x", "scope": "read_only", "token": "mine" }),
    ] {
        owner.post(&format!("{base}/api-keys"), &bad).await.expect_error(400, "validation_failed");
    }
    // Listed without tokens, paged, with when each was last used.
    let page = owner.get(&format!("{base}/api-keys?limit=1")).await.expect(200);
    assert_eq!(page["keys"].as_array().unwrap().len(), 1);
    assert!(page["keys"][0].get("token").is_none());
    assert!(!page["keys"][0]["last_used_at"].is_null(), "the read_only key was used");
    let rest =
        owner.get(&format!("{base}/api-keys?cursor={}", page["next_cursor"].as_str().unwrap())).await.expect(200);
    assert_eq!(rest["keys"].as_array().unwrap().len(), 1);
    assert!(rest.get("next_cursor").is_none());
    // The admin reaches them too.
    assert_eq!(api.admin().get(&format!("{base}/api-keys")).await.expect(200)["keys"].as_array().unwrap().len(), 2);
}

/// Statuses and channel posts are the owner's, through every door: a `send_only` key
/// that may send messages may not send one to `status@broadcast` or a channel, on
/// `/v1` or the action routes; the owner's own post to a channel asks the network for
/// its role first (here: no session, so 409) and queues nothing.
#[tokio::test]
async fn statuses_and_channel_posts_are_the_owners_on_every_door() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("owner-sends").await;
    let id = inst.id.to_string();
    let owner = api.client(Some(token));
    let base = format!("/v1/instances/{id}");
    let (_, so_token) = create(&owner, &id, json!({ "name": "crm", "scope": "send_only" })).await;
    let sender = api.client(Some(so_token.clone()));
    let action = api.anon().with_header("x-api-key", &so_token);
    for to in
        ["status@broadcast", " status@broadcast", "120363000000000009@newsletter", "120363000000000009:3@newsletter"]
    {
        let text = json!({ "to": to, "type": "text", "text": "hi" });
        sender.post(&format!("{base}/messages"), &text).await.expect_error(403, "forbidden");
        let evo = json!({ "number": to, "text": "hi" });
        action.post("/message/sendText/owner-sends", &evo).await.expect_error(400, "forbidden");
    }
    let post = json!({ "to": "120363000000000009@newsletter", "type": "text", "text": "hi" });
    owner.post(&format!("{base}/messages"), &post).await.expect_error(409, "instance_not_connected");
    let db = shared::db::connect(&api.config).await.unwrap();
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE instance_id = $1")
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(queued, 0, "nothing refused was queued");
    // The owner's status goes through any door.
    let status = json!({ "to": "status@broadcast", "type": "text", "text": "open today" });
    owner.post(&format!("{base}/messages"), &status).await.expect(202);
    // A person is still the key's to message.
    sender
        .post(&format!("{base}/messages"), &json!({ "to": "5511999990001", "type": "text", "text": "hi" }))
        .await
        .expect(202);
}

#[tokio::test]
async fn keys_obey_the_instance_allowlist_and_their_own() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("guarded").await;
    let id = inst.id.to_string();
    let owner = api.client(Some(token));
    let base = format!("/v1/instances/{id}");
    let (k, elsewhere) =
        create(&owner, &id, json!({ "name": "office", "scope": "read_only", "ip_allowlist": ["203.0.113.7/24"] }))
            .await;
    assert_eq!(k["ip_allowlist"], json!(["203.0.113.0/24"]));
    api.client(Some(elsewhere)).get(&base).await.expect_error(403, "forbidden");
    let (_, here) =
        create(&owner, &id, json!({ "name": "local", "scope": "read_only", "ip_allowlist": ["127.0.0.1"] })).await;
    let here = api.client(Some(here));
    here.get(&base).await.expect(200);
    // The instance's own list applies to every key of it.
    api.admin().patch(&base, &json!({ "ip_allowlist": ["198.51.100.0/24"] })).await.expect(200);
    here.get(&base).await.expect_error(403, "forbidden");
}

#[tokio::test]
async fn revoked_and_expired_keys_are_refused_on_every_pod() {
    let one = TestApi::start().await;
    let mut config = one.config.clone();
    config.listen_addr = ([127, 0, 0, 1], 0).into();
    let two = TestApi::start_with(config).await;
    let (inst, token) = one.create_instance("two-pods").await;
    let id = inst.id.to_string();
    let owner = one.client(Some(token));
    let (k, key) = create(&owner, &id, json!({ "name": "partner", "scope": "read_only" })).await;
    let path = format!("/v1/instances/{id}");
    // Both pods have it cached.
    one.client(Some(key.clone())).get(&path).await.expect(200);
    two.client(Some(key.clone())).get(&path).await.expect(200);

    owner.delete(&format!("{path}/api-keys/{}", k["id"].as_str().unwrap())).await.expect(204);
    let revoked = Instant::now();
    one.client(Some(key.clone())).get(&path).await.expect_error(401, "unauthorized");
    let refused = wait_for(Duration::from_secs(10), || async {
        (two.client(Some(key.clone())).get(&path).await.status == 401).then(Instant::now)
    })
    .await
    .expect("the other pod refuses it");
    assert!(refused - revoked <= Duration::from_secs(5), "within the cache's bound: {:?}", refused - revoked);
    owner.delete(&format!("{path}/api-keys/{}", k["id"].as_str().unwrap())).await.expect_error(404, "not_found");

    // Expiry: good until expires_at, then 401 on both pods.
    let at = chrono::Utc::now() + chrono::Duration::seconds(2);
    let (k, key) = create(&owner, &id, json!({ "name": "trial", "scope": "read_only", "expires_at": at })).await;
    assert!(!k["expires_at"].is_null());
    two.client(Some(key.clone())).get(&path).await.expect(200);
    for pod in [&one, &two] {
        let gone = wait_for(Duration::from_secs(10), || async {
            (pod.client(Some(key.clone())).get(&path).await.status == 401).then(chrono::Utc::now)
        })
        .await
        .expect("the key expires");
        assert!(gone >= at, "not before its time");
    }
}
