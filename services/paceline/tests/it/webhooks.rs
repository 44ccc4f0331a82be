//! Webhook endpoints: register, list, read, rotate, disable, delete; the URL guard; and
//! another instance's webhooks stay invisible.

use harness::{test_config, TestApi};
use serde_json::json;

#[tokio::test]
async fn internal_urls_and_unknown_events_are_refused() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("wh-guard").await;
    let path = format!("/v1/instances/{}/webhooks", inst.id.as_str());
    let own = api.client(Some(token));
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://[::1]/h",
        "http://169.254.169.254/",
        "ftp://example.com/h",
        "not a url",
    ] {
        own.post(&path, &json!({ "url": url })).await.expect_error(400, "validation_failed");
    }
    assert_eq!(own.get(&path).await.expect(200)["webhooks"], json!([]));
}

#[tokio::test]
async fn webhook_lifecycle() {
    let mut config = test_config();
    config.allow_private_targets = true;
    let api = TestApi::start_with(config).await;
    let (inst, token) = api.create_instance("wh").await;
    let path = format!("/v1/instances/{}/webhooks", inst.id.as_str());
    let own = api.client(Some(token));
    own.post(&path, &json!({ "url": "http://127.0.0.1:9/hook", "events": ["message.nope"] }))
        .await
        .expect_error(400, "validation_failed");
    let w = own
        .post(&path, &json!({ "url": "http://127.0.0.1:9/hook", "events": ["message.sent", "message.received", "message.sent"] }))
        .await
        .expect(201);
    let wid = w["id"].as_str().unwrap().to_string();
    assert!(wid.starts_with("wh_"));
    let secret = w["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(w["events"], json!(["message.received", "message.sent"]));
    assert_eq!(w["enabled"], true);

    let listed = own.get(&path).await.expect(200);
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 1);
    assert!(listed["webhooks"][0].get("secret").is_none(), "secrets only at creation and rotation");
    let one = own.get(&format!("{path}/{wid}")).await.expect(200);
    assert!(one.get("secret").is_none());

    let rotated =
        own.patch(&format!("{path}/{wid}"), &json!({ "rotate_secret": true, "enabled": false })).await.expect(200);
    let new_secret = rotated["secret"].as_str().unwrap();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    assert_eq!(rotated["enabled"], false);
    let edited = own.patch(&format!("{path}/{wid}"), &json!({ "events": [] })).await.expect(200);
    assert!(edited.get("secret").is_none());
    assert_eq!(edited["events"], json!([]));

    // Another instance's webhook is not found, even with the admin token on that path.
    let (other, other_token) = api.create_instance("wh-other").await;
    let other_path = format!("/v1/instances/{}/webhooks", other.id.as_str());
    api.client(Some(other_token)).get(&format!("{other_path}/{wid}")).await.expect_error(404, "not_found");
    api.admin().delete(&format!("{other_path}/{wid}")).await.expect_error(404, "not_found");

    assert_eq!(own.delete(&format!("{path}/{wid}")).await.status, 204);
    own.get(&format!("{path}/{wid}")).await.expect_error(404, "not_found");
}

/// The 20-webhook limit holds when many are registered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_limit_holds_under_concurrent_creation() {
    let mut config = harness::test_config();
    config.allow_private_targets = true;
    let api = harness::TestApi::start_with(config).await;
    let (inst, token) = api.create_instance("many-hooks").await;
    let path = format!("/v1/instances/{}/webhooks", inst.id.as_str());
    let own = api.client(Some(token));
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let (own, path) = (own.clone(), path.clone());
            tokio::spawn(async move {
                own.post(&path, &serde_json::json!({ "url": format!("http://127.0.0.1:9/h{i}") })).await.status
            })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        match t.await.unwrap() {
            201 => created += 1,
            400 => {}
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(created, 20);
    let listed = own.get(&path).await.expect(200);
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 20);
}

/// Credentials in a webhook's URL are never shown as given: the password to nobody, the
/// user name only to the admin (as a proxy's), on `/v1` and Evolution's `webhook/find`
/// alike; what is delivered still uses them.
#[tokio::test]
async fn credentials_in_webhook_urls_are_masked() {
    let mut config = test_config();
    config.allow_private_targets = true;
    let api = TestApi::start_with(config).await;
    let (inst, token) = api.create_instance("wh-creds").await;
    let id = inst.id.as_str();
    let path = format!("/v1/instances/{id}/webhooks");
    let own = api.client(Some(token.clone()));
    let w = own.post(&path, &json!({ "url": "http://hook-user:s3cret-pw@127.0.0.1:9/h" })).await.expect(201);
    assert_eq!(w["url"], "http://***@127.0.0.1:9/h");
    let one = format!("{path}/{}", w["id"].as_str().unwrap());
    let key = api.create_key(&own, id, "read_only").await;
    let reader = api.client(Some(key.clone()));
    for c in [&own, &reader] {
        let list = c.get(&path).await;
        assert!(!list.text.contains("s3cret-pw") && !list.text.contains("hook-user"), "{}", list.text);
        assert_eq!(c.get(&one).await.expect(200)["url"], "http://***@127.0.0.1:9/h");
    }
    assert_eq!(api.admin().get(&one).await.expect(200)["url"], "http://hook-user:***@127.0.0.1:9/h");
    let evo = api.anon().with_header("apikey", &token);
    evo.post("/webhook/set/wh-creds", &json!({ "url": "http://evo:evo-pw@127.0.0.1:9/e" })).await.expect(200);
    let found = api.anon().with_header("apikey", &key).get("/webhook/find/wh-creds").await.expect(200);
    assert_eq!(found["url"], "http://***@127.0.0.1:9/e");
    // Stored as given: deliveries still carry them.
    let db = shared::db::connect(&api.config).await.unwrap();
    let stored: Vec<String> = sqlx::query_scalar("SELECT url FROM webhooks WHERE instance_id = $1 ORDER BY id")
        .bind(id)
        .fetch_all(&db)
        .await
        .unwrap();
    assert_eq!(stored, ["http://hook-user:s3cret-pw@127.0.0.1:9/h", "http://evo:evo-pw@127.0.0.1:9/e"]);
}
