//! Instances: create, list, get, patch, delete, and the tokens they carry.

use harness::TestApi;
use serde_json::json;

#[tokio::test]
async fn create_returns_instance_and_token_once() {
    let api = TestApi::start().await;
    let body = api
        .admin()
        .post(
            "/v1/instances",
            &json!({ "name": "shop-1", "tags": ["eu", "b2c"], "ip_allowlist": ["203.0.113.0/24"],
                     "min_interval_ms": 2000, "max_per_minute": 20, "unsafe_pacing": false, "proxy_url": null }),
        )
        .await
        .expect(201);
    let inst = &body["instance"];
    let token = body["token"].as_str().unwrap();
    assert!(token.starts_with("pl_inst_"));
    assert!(inst["id"].as_str().unwrap().starts_with("inst_"));
    assert_eq!(inst["name"], "shop-1");
    assert_eq!(inst["state"], "disconnected");
    assert_eq!(inst["tags"], json!(["b2c", "eu"]));
    assert_eq!(inst["ip_allowlist"], json!(["203.0.113.0/24"]));
    assert_eq!(inst["min_interval_ms"], 2000);
    assert_eq!(inst["max_per_minute"], 20);
    assert_eq!(inst["unsafe_pacing"], false);
    assert!(inst["proxy_url"].is_null());
    assert!(inst["created_at"].is_string());
    assert!(inst.get("token").is_none());

    let id = inst["id"].as_str().unwrap();
    let got = api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
    assert!(got.get("token").is_none(), "the token is shown only at creation");
    assert_eq!(got["name"], "shop-1");

    // The token is stored hashed.
    let pool = shared::db::connect(&api.config).await.unwrap();
    let (hash,): (String,) =
        sqlx::query_as("SELECT token_hash FROM instances WHERE id = $1").bind(id).fetch_one(&pool).await.unwrap();
    assert_ne!(hash, token);
    assert_eq!(hash, shared::auth::hash_token(token));
}

#[tokio::test]
async fn defaults_and_duplicate_names() {
    let api = TestApi::start().await;
    let (inst, _) = api.create_instance("dup").await;
    assert_eq!((inst.min_interval_ms, inst.max_per_minute), (2000, 20));
    assert_eq!(serde_json::to_value(&inst.settings).unwrap(), json!({ "reject_call": false, "msg_call": "" }));
    api.admin().post("/v1/instances", &json!({ "name": "dup" })).await.expect_error(409, "conflict");
}

#[tokio::test]
async fn bad_input_is_rejected_and_changes_nothing() {
    let api = TestApi::start().await;
    let admin = api.admin();
    for body in [
        json!({ "name": "" }),
        json!({ "name": "with space" }),
        json!({ "name": "a", "min_interval_ms": 999 }),
        json!({ "name": "a", "max_per_minute": 61 }),
        json!({ "name": "a", "ip_allowlist": ["not-an-ip"] }),
        json!({ "name": "a", "proxy_url": "ftp://x:1" }),
        json!({ "name": "a", "unknown_field": 1 }),
        json!({ "name": 5 }),
    ] {
        admin.post("/v1/instances", &body).await.expect_error(400, "validation_failed");
    }
    let list = admin.get("/v1/instances").await.expect(200);
    assert_eq!(list["instances"], json!([]));
    // Below the floors only with unsafe_pacing, which the admin sets.
    let ok = admin
        .post(
            "/v1/instances",
            &json!({ "name": "fast", "min_interval_ms": 100, "max_per_minute": 600, "unsafe_pacing": true }),
        )
        .await
        .expect(201);
    assert_eq!(ok["instance"]["min_interval_ms"], 100);
}

#[tokio::test]
async fn list_filters_and_paginates_without_gaps() {
    let api = TestApi::start().await;
    let admin = api.admin();
    let mut ids = Vec::new();
    for i in 0..7 {
        let tags = if i % 2 == 0 { json!(["even"]) } else { json!(["odd"]) };
        let b = admin.post("/v1/instances", &json!({ "name": format!("i{i}"), "tags": tags })).await.expect(201);
        ids.push(b["instance"]["id"].as_str().unwrap().to_string());
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/instances?limit=3&cursor={c}"),
            None => "/v1/instances?limit=3".to_string(),
        };
        let page = admin.get(&path).await.expect(200);
        let items = page["instances"].as_array().unwrap();
        assert!(items.len() <= 3);
        seen.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
        match page.get("next_cursor").and_then(|c| c.as_str()) {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ids, "every instance once, in creation order");

    let even = admin.get("/v1/instances?tag=even").await.expect(200);
    assert_eq!(even["instances"].as_array().unwrap().len(), 4);
    let disc = admin.get("/v1/instances?state=disconnected&limit=200").await.expect(200);
    assert_eq!(disc["instances"].as_array().unwrap().len(), 7);
    let conn = admin.get("/v1/instances?state=connected").await.expect(200);
    assert_eq!(conn["instances"], json!([]));

    admin.get("/v1/instances?cursor=garbage").await.expect_error(400, "validation_failed");
    admin.get("/v1/instances?limit=0").await.expect_error(400, "validation_failed");
    admin.get("/v1/instances?limit=201").await.expect_error(400, "validation_failed");
    admin.get("/v1/instances?state=nope").await.expect_error(400, "validation_failed");
}

#[tokio::test]
async fn patch_edits_fields_and_guards_admin_only_ones() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("editable").await;
    let id = inst.id.as_str();
    let path = format!("/v1/instances/{id}");
    let own = api.client(Some(token));

    let b = own
        .patch(
            &path,
            &json!({ "name": "renamed", "tags": ["x"], "min_interval_ms": 5000, "max_per_minute": 10,
                     "settings": { "reject_call": true, "msg_call": "busy" } }),
        )
        .await
        .expect(200);
    assert_eq!(b["name"], "renamed");
    assert_eq!(b["tags"], json!(["x"]));
    assert_eq!(b["min_interval_ms"], 5000);
    assert_eq!(b["settings"], json!({ "reject_call": true, "msg_call": "busy" }));

    // Admin-only fields: 403 for the instance token, and nothing changes.
    own.patch(&path, &json!({ "proxy_url": "http://p:3128", "name": "sneaky" })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "unsafe_pacing": true })).await.expect_error(403, "forbidden");
    assert_eq!(own.get(&path).await.expect(200)["name"], "renamed");

    // Floors hold until the admin lifts them.
    own.patch(&path, &json!({ "min_interval_ms": 10 })).await.expect_error(400, "validation_failed");
    let admin = api.admin();
    let b = admin
        .patch(&path, &json!({ "unsafe_pacing": true, "proxy_url": "socks5://user:hunter2@127.0.0.1:1080" }))
        .await
        .expect(200);
    assert_eq!(b["proxy_url"], "socks5://user:***@127.0.0.1:1080", "passwords never come back");
    // Past the floors is the admin's to set, even once unlocked.
    own.patch(&path, &json!({ "min_interval_ms": 10 })).await.expect_error(403, "forbidden");
    // ... restating `unsafe_pacing` in the same patch, as the description's schema says.
    admin.patch(&path, &json!({ "min_interval_ms": 10 })).await.expect_error(400, "validation_failed");
    admin.patch(&path, &json!({ "min_interval_ms": 10, "unsafe_pacing": true })).await.expect(200);
    // Turning unsafe_pacing off while below the floors is refused, not silently clamped.
    admin.patch(&path, &json!({ "unsafe_pacing": false })).await.expect_error(400, "validation_failed");
    let b = admin.patch(&path, &json!({ "proxy_url": null })).await.expect(200);
    assert!(b["proxy_url"].is_null());

    // Time zone and send window.
    let b = own
        .patch(&path, &json!({ "time_zone": "America/Sao_Paulo", "send_window": { "start": "09:00", "end": "18:00" } }))
        .await
        .expect(200);
    assert_eq!(b["time_zone"], "America/Sao_Paulo");
    assert_eq!(b["send_window"], json!({ "start": "09:00", "end": "18:00" }));
    own.patch(&path, &json!({ "time_zone": "Mars/Olympus" })).await.expect_error(400, "validation_failed");
    own.patch(&path, &json!({ "send_window": { "start": "9am", "end": "18:00" } }))
        .await
        .expect_error(400, "validation_failed");
    let b = own.patch(&path, &json!({ "send_window": null })).await.expect(200);
    assert!(b["send_window"].is_null());
    assert_eq!(b["time_zone"], "America/Sao_Paulo");

    // Renaming onto a taken name.
    api.create_instance("taken").await;
    admin.patch(&path, &json!({ "name": "taken" })).await.expect_error(409, "conflict");
}

#[tokio::test]
async fn delete_revokes_the_token_at_once() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("doomed").await;
    let id = inst.id.as_str();
    let own = api.client(Some(token));
    own.get("/v1/me").await.expect(200);
    // Another instance's token may not; the admin may (below), and so may its own token.
    let (other, other_token) = api.create_instance("other").await;
    api.client(Some(other_token.clone())).delete(&format!("/v1/instances/{id}")).await.expect_error(403, "forbidden");
    assert_eq!(api.admin().delete(&format!("/v1/instances/{id}")).await.status, 204);
    let other_id = other.id.as_str();
    assert_eq!(api.client(Some(other_token.clone())).delete(&format!("/v1/instances/{other_id}")).await.status, 204);
    api.client(Some(other_token)).get("/v1/me").await.expect_error(401, "unauthorized");
    own.get("/v1/me").await.expect_error(401, "unauthorized");
    api.admin().get(&format!("/v1/instances/{id}")).await.expect_error(404, "instance_not_found");
    api.admin().delete(&format!("/v1/instances/{id}")).await.expect_error(404, "instance_not_found");
}

#[tokio::test]
async fn ip_allowlist_uses_socket_or_trusted_proxy_header() {
    // Direct: the socket address (127.0.0.1) decides.
    let api = TestApi::start().await;
    let b = api
        .admin()
        .post("/v1/instances", &json!({ "name": "ipr", "ip_allowlist": ["203.0.113.0/24"] }))
        .await
        .expect(201);
    let token = b["token"].as_str().unwrap().to_string();
    let id = b["instance"]["id"].as_str().unwrap().to_string();
    let own = api.client(Some(token.clone()));
    own.get("/v1/me").await.expect_error(403, "forbidden");
    // A header from an untrusted peer is ignored.
    own.clone().with_header("x-forwarded-for", "203.0.113.5").get("/v1/me").await.expect_error(403, "forbidden");
    // The admin is not bound by the instance's list.
    api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
    api.admin().patch(&format!("/v1/instances/{id}"), &json!({ "ip_allowlist": ["127.0.0.0/8"] })).await.expect(200);
    own.get("/v1/me").await.expect(200);
    drop(api);

    // Behind a trusted proxy (loopback here), the header decides.
    let mut config = harness::test_config();
    config.api.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    let api = TestApi::start_with(config).await;
    let b = api
        .admin()
        .post("/v1/instances", &json!({ "name": "ipp", "ip_allowlist": ["203.0.113.0/24"] }))
        .await
        .expect(201);
    let own = api.client(Some(b["token"].as_str().unwrap().to_string()));
    own.clone().with_header("x-forwarded-for", "203.0.113.5").get("/v1/me").await.expect(200);
    own.clone().with_header("x-forwarded-for", "198.51.100.1").get("/v1/me").await.expect_error(403, "forbidden");
    own.get("/v1/me").await.expect_error(403, "forbidden");
    // A proxy that appends its own line (HAProxy): the client's spoofed first line is not
    // the client; the proxy's line, the right-most, is.
    let spoofed =
        own.clone().with_header("x-forwarded-for", "203.0.113.5").with_header("x-forwarded-for", "198.51.100.1");
    spoofed.get("/v1/me").await.expect_error(403, "forbidden");
    let real = own.clone().with_header("x-forwarded-for", "198.51.100.1").with_header("x-forwarded-for", "203.0.113.5");
    real.get("/v1/me").await.expect(200);
    // A header the proxy sent but nobody can read is no client: denied, not the proxy.
    own.clone()
        .with_header("x-forwarded-for", "203.0.113.5, unknown")
        .get("/v1/me")
        .await
        .expect_error(403, "forbidden");
    drop(api);

    // A stored allow-list of which nothing parses allows nobody (not everybody).
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("garbled").await;
    let db = shared::db::connect(&api.config).await.unwrap();
    sqlx::query("UPDATE instances SET ip_allowlist = ARRAY['not-a-network'] WHERE id = $1")
        .bind(inst.id.as_str())
        .execute(&db)
        .await
        .unwrap();
    api.client(Some(token)).get("/v1/me").await.expect_error(403, "forbidden");
}

#[tokio::test]
async fn me_tells_who_the_token_is() {
    let api = TestApi::start().await;
    assert_eq!(api.admin().get("/v1/me").await.expect(200)["kind"], "admin");
    let (inst, token) = api.create_instance("me").await;
    let me = api.client(Some(token)).get("/v1/me").await.expect(200);
    assert_eq!(me["kind"], "instance");
    assert_eq!(me["instance_id"], inst.id.as_str());
    assert_eq!(me["instance_name"], "me");
}

/// Tokens are cached per API pod; deleting an instance or narrowing its allow-list on one
/// pod takes effect on the others well within the cache's lifetime (they are told).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_changes_reach_every_api_pod_before_the_cache_expires() {
    use std::time::{Duration, Instant};
    let a = harness::TestApi::start().await;
    let b =
        harness::TestApi::start_with(shared::Config { listen_addr: ([127, 0, 0, 1], 0).into(), ..a.config.clone() })
            .await;
    let (inst, token) = a.create_instance("cached").await;
    let id = inst.id.to_string();
    let on_b = b.client(Some(token.clone()));
    on_b.get("/v1/me").await.expect(200);
    // Narrow the allow-list on A: B refuses the token from this address soon after.
    a.admin()
        .patch(&format!("/v1/instances/{id}"), &serde_json::json!({ "ip_allowlist": ["203.0.113.0/24"] }))
        .await
        .expect(200);
    let start = Instant::now();
    harness::cluster::wait_for(Duration::from_secs(4), || async {
        (on_b.get("/v1/me").await.status == 403).then_some(())
    })
    .await
    .expect("B applies the new allow-list");
    assert!(start.elapsed() < domain::auth::TTL, "told, not expired");
    a.admin().patch(&format!("/v1/instances/{id}"), &serde_json::json!({ "ip_allowlist": [] })).await.expect(200);
    harness::cluster::wait_for(Duration::from_secs(4), || async {
        (on_b.get("/v1/me").await.status == 200).then_some(())
    })
    .await
    .expect("and the wider one");
    // Delete on A: B stops taking the token.
    a.admin().delete(&format!("/v1/instances/{id}")).await;
    let start = Instant::now();
    harness::cluster::wait_for(Duration::from_secs(4), || async {
        (on_b.get("/v1/me").await.status == 401).then_some(())
    })
    .await
    .expect("B forgets the deleted instance's token");
    assert!(start.elapsed() < domain::auth::TTL);
    a.client(Some(token)).get("/v1/me").await.expect_error(401, "unauthorized");
}

#[tokio::test]
async fn bulk_applies_one_action_per_instance_by_ids_or_by_tag() {
    let api = TestApi::start().await;
    let admin = api.admin();
    let mut tagged = Vec::new();
    for n in 0..3 {
        let i = admin
            .post("/v1/instances", &serde_json::json!({ "name": format!("fleet-{n}"), "tags": ["fleet"] }))
            .await
            .expect(201);
        tagged.push((i["instance"]["id"].as_str().unwrap().to_string(), i["token"].as_str().unwrap().to_string()));
    }
    let (lone, lone_token) = api.create_instance("lone").await;
    let lone_id = lone.id.to_string();
    // `count=true` counts what the filters match, whatever the page.
    let page = admin.get("/v1/instances?tag=fleet&limit=1&count=true").await.expect(200);
    assert_eq!((page["total"].clone(), page["instances"].as_array().unwrap().len()), (serde_json::json!(3), 1));
    let page = admin.get("/v1/instances?tag=fleet&limit=1").await.expect(200);
    assert!(page.get("total").is_none(), "counted only when asked");

    // By tag, two per call: every tagged instance once, in id order, the other untouched.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut body = serde_json::json!({ "action": "connect", "tag": "fleet", "limit": 2 });
        if let Some(c) = &cursor {
            body["cursor"] = c.clone().into();
        }
        let out = admin.post("/v1/instances/bulk", &body).await.expect(200);
        assert_eq!(out["failed"], 0, "{out}");
        seen.extend(out["results"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()));
        match out.get("next_cursor").and_then(|c| c.as_str()) {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let mut want: Vec<String> = tagged.iter().map(|(id, _)| id.clone()).collect();
    want.sort();
    assert_eq!(seen, want);
    let db = shared::db::connect(&api.config).await.unwrap();
    let desired: Vec<String> =
        sqlx::query_scalar("SELECT id FROM instances WHERE desired ORDER BY id").fetch_all(&db).await.unwrap();
    assert_eq!(desired, want, "connected: wanted running, the untagged one not");

    // By ids: each its own result, in the order given; one unknown fails alone.
    let ghost = "inst_00000000000000000000000000000000";
    let out = admin
        .post("/v1/instances/bulk", &serde_json::json!({ "action": "delete", "ids": [tagged[0].0, ghost, lone_id] }))
        .await
        .expect(200);
    assert_eq!((out["succeeded"].as_u64(), out["failed"].as_u64()), (Some(2), Some(1)));
    assert_eq!(out["results"][0], serde_json::json!({ "id": tagged[0].0, "ok": true }));
    assert_eq!(out["results"][1]["error"]["code"], "instance_not_found");
    assert_eq!(out["results"][2]["ok"], true);
    api.client(Some(lone_token)).get("/v1/me").await.expect_error(401, "unauthorized");
    api.client(Some(tagged[0].1.clone())).get("/v1/me").await.expect_error(401, "unauthorized");
    api.client(Some(tagged[1].1.clone())).get("/v1/me").await.expect(200);

    // Logout with no worker running them: refused per instance, as its own route would.
    let out = admin
        .post("/v1/instances/bulk", &serde_json::json!({ "action": "logout", "ids": [tagged[1].0, tagged[1].0] }))
        .await
        .expect(200);
    assert_eq!(out["results"].as_array().unwrap().len(), 1, "each instance once: {out}");
    assert_eq!(out["results"][0]["error"]["code"], "instance_not_connected");

    // Tags added and removed: by ids, and by tag (the instances with one get another).
    let out = admin
        .post("/v1/instances/bulk", &serde_json::json!({ "action": "add_tag", "value": "vip", "ids": [tagged[1].0] }))
        .await
        .expect(200);
    assert_eq!(out["succeeded"], 1, "{out}");
    let out = admin
        .post("/v1/instances/bulk", &serde_json::json!({ "action": "add_tag", "value": "vip", "tag": "fleet" }))
        .await
        .expect(200);
    assert_eq!((out["succeeded"].as_u64(), out["failed"].as_u64()), (Some(2), Some(0)), "{out}");
    let tags = |id: String| {
        let admin = admin.clone();
        async move { admin.get(&format!("/v1/instances/{id}")).await.expect(200)["tags"].clone() }
    };
    assert_eq!(tags(tagged[1].0.clone()).await, serde_json::json!(["fleet", "vip"]), "added once");
    assert_eq!(tags(tagged[2].0.clone()).await, serde_json::json!(["fleet", "vip"]));
    let out = admin
        .post("/v1/instances/bulk", &serde_json::json!({ "action": "remove_tag", "value": "fleet", "tag": "vip" }))
        .await
        .expect(200);
    assert_eq!(out["succeeded"], 2, "{out}");
    assert_eq!(tags(tagged[2].0.clone()).await, serde_json::json!(["vip"]));
    // Too many tags fails that instance alone, with the rule's error.
    let many: Vec<String> = (0..32).map(|n| format!("t{n}")).collect();
    admin.patch(&format!("/v1/instances/{}", tagged[2].0), &serde_json::json!({ "tags": many })).await.expect(200);
    let out = admin
        .post(
            "/v1/instances/bulk",
            &serde_json::json!({ "action": "add_tag", "value": "one-more", "ids": [tagged[2].0, tagged[1].0] }),
        )
        .await
        .expect(200);
    assert_eq!(
        (out["results"][0]["error"]["code"].clone(), out["results"][1]["ok"].clone()),
        (serde_json::json!("validation_failed"), serde_json::json!(true)),
        "{out}"
    );

    // Bad requests change nothing; instance tokens may not.
    for bad in [
        serde_json::json!({ "action": "add_tag", "ids": [tagged[1].0] }),
        serde_json::json!({ "action": "add_tag", "value": "", "ids": [tagged[1].0] }),
        serde_json::json!({ "action": "connect", "value": "vip", "ids": [tagged[1].0] }),
        serde_json::json!({ "action": "connect" }),
        serde_json::json!({ "action": "connect", "ids": [], }),
        serde_json::json!({ "action": "connect", "ids": ["nope"] }),
        serde_json::json!({ "action": "explode", "ids": [tagged[1].0] }),
        serde_json::json!({ "action": "connect", "ids": [tagged[1].0], "tag": "fleet" }),
        serde_json::json!({ "action": "connect", "tag": "fleet", "cursor": "garbage" }),
        serde_json::json!({ "action": "connect", "tag": "fleet", "limit": 501 }),
    ] {
        admin.post("/v1/instances/bulk", &bad).await.expect_error(400, "validation_failed");
    }
    api.client(Some(tagged[1].1.clone()))
        .post("/v1/instances/bulk", &serde_json::json!({ "action": "delete", "ids": [tagged[1].0] }))
        .await
        .expect_error(403, "forbidden");
    let ids = (0..501).map(|_| shared::ids::InstanceId::new().to_string()).collect::<Vec<_>>();
    admin
        .post("/v1/instances/bulk", &serde_json::json!({ "action": "connect", "ids": ids }))
        .await
        .expect_error(400, "validation_failed");
}

/// What the admin set, the instance's own token cannot undo: an allow-list it may only
/// narrow, pacing past the floors, and the proxy's credentials it never sees.
#[tokio::test]
async fn admin_limits_hold_against_the_instance_token() {
    let api = TestApi::start().await;
    let b = api
        .admin()
        .post("/v1/instances", &json!({ "name": "limited", "ip_allowlist": ["127.0.0.0/8"], "unsafe_pacing": true,
            "min_interval_ms": 200, "max_per_minute": 300, "proxy_url": "http://customer-7:hunter2@proxy.example:3128" }))
        .await
        .expect(201);
    assert_eq!(b["instance"]["ip_allowlist_locked"], true);
    let id = b["instance"]["id"].as_str().unwrap().to_string();
    let path = format!("/v1/instances/{id}");
    let own = api.client(Some(b["token"].as_str().unwrap().to_string()));
    // The allow-list: never removed or widened, only narrowed.
    own.patch(&path, &json!({ "ip_allowlist": [] })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "ip_allowlist": ["0.0.0.0/0"] })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "ip_allowlist": ["127.0.0.1", "198.51.100.1"] })).await.expect_error(403, "forbidden");
    let narrowed = own.patch(&path, &json!({ "ip_allowlist": ["127.0.0.1"] })).await.expect(200);
    assert_eq!(narrowed["ip_allowlist"], json!(["127.0.0.1/32"]));
    assert_eq!(narrowed["ip_allowlist_locked"], true, "still the admin's");
    own.patch(&path, &json!({ "ip_allowlist": ["127.0.0.0/8"] })).await.expect_error(403, "forbidden");
    // Pacing: the instance may slow down, never go past the floors unsafe_pacing unlocked.
    own.patch(&path, &json!({ "min_interval_ms": 100 })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "max_per_minute": 120 })).await.expect_error(403, "forbidden");
    let slower = own.patch(&path, &json!({ "min_interval_ms": 2000, "max_per_minute": 20 })).await.expect(200);
    assert_eq!((slower["min_interval_ms"].as_u64(), slower["max_per_minute"].as_u64()), (Some(2000), Some(20)));
    own.patch(&path, &json!({ "min_interval_ms": 200 })).await.expect_error(403, "forbidden");
    // The proxy: the admin sees its user, anyone else neither user nor password.
    assert_eq!(own.get(&path).await.expect(200)["proxy_url"], "http://***@proxy.example:3128/");
    assert_eq!(api.admin().get(&path).await.expect(200)["proxy_url"], "http://customer-7:***@proxy.example:3128/");
    // Once the admin clears its list, the instance's own list is its own.
    let cleared = api.admin().patch(&path, &json!({ "ip_allowlist": [] })).await.expect(200);
    assert_eq!(cleared["ip_allowlist_locked"], false);
    own.patch(&path, &json!({ "ip_allowlist": ["127.0.0.0/8"] })).await.expect(200);
    let own_list = own.patch(&path, &json!({ "ip_allowlist": [] })).await.expect(200);
    assert_eq!(own_list["ip_allowlist"], json!([]));
}

/// The admin's pacing and risk policy are locked as its allow-list is: the instance's
/// token may make them stricter than the admin's values (not only than the deployment's
/// defaults), may not return the policy to the deployment's with `null`, and touches
/// neither lock; the admin may lift a lock.
#[tokio::test]
async fn the_admins_pacing_and_risk_policy_are_locked_against_the_instance_token() {
    let api = TestApi::start().await;
    let admin = api.admin();
    let b = admin
        .post(
            "/v1/instances",
            &json!({ "name": "locked", "min_interval_ms": 5000, "max_per_minute": 10,
            "risk_policy": { "critical": 60, "slowdown": 4 } }),
        )
        .await
        .expect(201);
    assert_eq!(
        (b["instance"]["pacing_locked"].as_bool(), b["instance"]["risk_policy_locked"].as_bool()),
        (Some(true), Some(true))
    );
    let path = format!("/v1/instances/{}", b["instance"]["id"].as_str().unwrap());
    let own = api.client(Some(b["token"].as_str().unwrap().to_string()));
    // Pacing: within the floors, yet faster than the admin's: refused.
    own.patch(&path, &json!({ "min_interval_ms": 2000 })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "max_per_minute": 20 })).await.expect_error(403, "forbidden");
    let slower = own.patch(&path, &json!({ "min_interval_ms": 6000, "max_per_minute": 8 })).await.expect(200);
    assert_eq!((slower["min_interval_ms"].as_u64(), slower["max_per_minute"].as_u64()), (Some(6000), Some(8)));
    // The policy: not back to the deployment's, not looser than the admin's.
    own.patch(&path, &json!({ "risk_policy": null })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "risk_policy": { "critical": 70 } })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "risk_policy": { "critical": 60, "slowdown": 2 } })).await.expect_error(403, "forbidden");
    let stricter = own.patch(&path, &json!({ "risk_policy": { "critical": 55, "slowdown": 5 } })).await.expect(200);
    assert_eq!(stricter["risk_policy"], json!({ "critical": 55.0, "slowdown": 5.0 }));
    // The locks are the admin's.
    for lock in ["pacing_locked", "risk_policy_locked"] {
        own.patch(&path, &json!({ lock: false })).await.expect_error(403, "forbidden");
    }
    let shown = own.get(&path).await.expect(200);
    assert_eq!(shown["min_interval_ms"], 6000, "a refused patch changed nothing");
    // The admin lifts them: the instance's own limits are the deployment's floors again.
    let lifted = admin.patch(&path, &json!({ "pacing_locked": false, "risk_policy_locked": false })).await.expect(200);
    assert_eq!((lifted["pacing_locked"].as_bool(), lifted["risk_policy_locked"].as_bool()), (Some(false), Some(false)));
    own.patch(&path, &json!({ "min_interval_ms": 2000, "max_per_minute": 20 })).await.expect(200);
    own.patch(&path, &json!({ "risk_policy": null })).await.expect(200);
    // An instance the admin gave no values: the token sets its own within the floors.
    let free = admin.post("/v1/instances", &json!({ "name": "free" })).await.expect(201);
    assert_eq!(free["instance"]["pacing_locked"], false);
    let path = format!("/v1/instances/{}", free["instance"]["id"].as_str().unwrap());
    let own = api.client(Some(free["token"].as_str().unwrap().to_string()));
    own.patch(&path, &json!({ "min_interval_ms": 1000, "max_per_minute": 60 })).await.expect(200);
}
