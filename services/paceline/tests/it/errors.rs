//! The error envelope: malformed input, unknown routes and methods, body limits.

use futures::stream;
use harness::TestApi;
use serde_json::json;

#[tokio::test]
async fn malformed_json_is_400_whatever_the_content_type() {
    let api = TestApi::start().await;
    let admin = api.admin();
    for ct in ["application/json", "text/plain", "application/x-www-form-urlencoded"] {
        let rb = admin.request(reqwest::Method::POST, "/v1/instances").header("content-type", ct).body("{\"name\": ");
        admin.send(rb).await.expect_error(400, "validation_failed");
    }
    // Valid JSON without a Content-Type is read as JSON.
    let rb = admin.request(reqwest::Method::POST, "/v1/instances").body(r#"{"name":"no-ct"}"#);
    admin.send(rb).await.expect(201);
    let rb = admin.request(reqwest::Method::POST, "/v1/instances");
    admin.send(rb).await.expect_error(400, "validation_failed");
}

#[tokio::test]
async fn messages_never_echo_numbers_or_tokens() {
    let api = TestApi::start().await;
    let admin = api.admin();
    let msg =
        admin.post("/v1/instances", &json!({ "name": 5511999990001u64 })).await.expect_error(400, "validation_failed");
    assert!(!msg.contains("5511999990001"), "{msg}");
    let msg = admin
        .post("/v1/instances", &json!({ "name": "x", "tags": "5511999990001" }))
        .await
        .expect_error(400, "validation_failed");
    assert!(!msg.contains("5511999990001"), "{msg}");
    let bad = "pl_inst_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let r = api.client(Some(bad.into())).get("/v1/me").await;
    assert!(!r.text.contains(bad));
    r.expect_error(401, "unauthorized");
}

#[tokio::test]
async fn unknown_routes_and_methods_get_the_envelope() {
    let api = TestApi::start().await;
    api.admin().get("/v1/nope").await.expect_error(404, "not_found");
    api.anon().get("/nope").await.expect_error(404, "not_found");
    // (`/` is Evolution's root document: evolution_manager.rs.)
    let r = api.admin().send(api.admin().request(reqwest::Method::PUT, "/v1/instances")).await;
    // The answer names the methods the route takes.
    let allow = r.headers.get("allow").expect("an Allow header").to_str().unwrap().to_string();
    assert!(allow.contains("GET") && allow.contains("POST") && !allow.contains("PUT"), "{allow}");
    r.expect_error(405, "method_not_allowed");
}

#[tokio::test]
async fn body_over_1mb_is_413() {
    let api = TestApi::start().await;
    let big = json!({ "name": "x", "tags": ["a".repeat(1024 * 1024)] });
    api.admin().post("/v1/instances", &big).await.expect_error(413, "media_too_large");
    // Just under the limit is read (and then validated).
    let near = json!({ "name": "x", "tags": ["a".repeat(1000 * 1000)] });
    api.admin().post("/v1/instances", &near).await.expect_error(400, "validation_failed");
}

#[tokio::test]
async fn messages_route_reads_up_to_140mb() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("big").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    // 2 MB is over the default limit but within this route's: it reaches the handler.
    let two_mb = json!({ "to": "5511999990001", "type": "document", "media": { "data": "A".repeat(2 * 1024 * 1024), "mime_type": "application/pdf" } });
    own.post(&path, &two_mb).await.expect(202);
    // Over 140 MB: 413, streamed so the test does not hold it in memory.
    let chunk = bytes::Bytes::from(vec![b' '; 1024 * 1024]);
    let chunks = (0..141).map(move |_| Ok::<_, std::io::Error>(chunk.clone()));
    let rb = own.request(reqwest::Method::POST, &path).body(reqwest::Body::wrap_stream(stream::iter(chunks)));
    own.send(rb).await.expect_error(413, "media_too_large");
}

#[tokio::test]
async fn every_interface_route_is_built_checks_the_token_first_and_unknown_ones_are_404() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("built").await;
    let id = inst.id.as_str();
    let own = api.client(Some(token));
    // Tokens are checked first.
    api.anon().get(&format!("/v1/instances/{id}/labels")).await.expect_error(401, "unauthorized");
    api.anon().get(&format!("/v1/instances/{id}/channels")).await.expect_error(401, "unauthorized");
    api.anon().post("/mcp", &json!({})).await.expect_error(401, "unauthorized");
    // Routes that need the session answer 409 without one, not 501.
    for path in ["communities", "labels", "channels"] {
        own.get(&format!("/v1/instances/{id}/{path}")).await.expect_error(409, "instance_not_connected");
    }
    own.post(&format!("/v1/instances/{id}/channels/120363000000000777@newsletter/follow"), &json!({}))
        .await
        .expect_error(409, "instance_not_connected");
    own.post(&format!("/v1/instances/{id}/channels/120363000000000777@newsletter/wave"), &json!({}))
        .await
        .expect_error(400, "validation_failed");
    own.get(&format!("/v1/instances/{id}/api-keys")).await.expect(200);
    own.get(&format!("/v1/instances/{id}/usage")).await.expect(200);
    api.admin().post(&format!("/v1/instances/{id}/pairing-links"), &json!({})).await.expect(201);
    // A route that does not exist at all stays 404.
    own.get(&format!("/v1/instances/{id}/nothing-here")).await.expect_error(404, "not_found");
}

#[tokio::test]
async fn the_admin_on_an_unknown_instance_gets_instance_not_found_everywhere() {
    let api = TestApi::start().await;
    let ghost = "inst_00000000000000000000000000000000";
    let admin = api.admin();
    for path in [
        "chats",
        "chats/5511999990001",
        "chats/5511999990001/messages",
        "webhooks",
        "messages/msg_00000000000000000000000000000000",
        "blocklist",
    ] {
        admin.get(&format!("/v1/instances/{ghost}/{path}")).await.expect_error(404, "instance_not_found");
    }
    admin
        .post(&format!("/v1/instances/{ghost}/webhooks"), &json!({ "url": "https://example.com/h" }))
        .await
        .expect_error(404, "instance_not_found");
    admin.get(&format!("/v1/instances/{ghost}")).await.expect_error(404, "instance_not_found");
}

#[tokio::test]
async fn action_routes_answer_bad_bodies_with_400_only() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("act").await;
    let name = inst.name.as_str();
    let key = api.anon().with_header("x-api-key", &token);
    let path = format!("/message/sendText/{name}");
    // Over the 1 MB body limit: 400 here (413 on the /v1 routes), malformed JSON too.
    let big = json!({ "number": "5511999990001", "message": "x".repeat(1_100_000) });
    key.post(&path, &big).await.expect_error(400, "media_too_large");
    let rb = key.request(reqwest::Method::POST, &path).header("content-type", "application/json").body("{\"number\": ");
    key.send(rb).await.expect_error(400, "validation_failed");
    key.patch(&format!("/instance/settings/{name}"), &json!({ "reject_call": "yes" }))
        .await
        .expect_error(400, "validation_failed");
}
