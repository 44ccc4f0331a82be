//! Health, readiness, shutdown, request ids, metrics, OpenAPI, migrations.

use harness::{test_config, TestApi};

#[tokio::test]
async fn health_is_public_on_loopback() {
    let api = TestApi::start().await;
    assert_eq!(api.anon().get("/healthz").await.expect(200)["status"], "ok");
    let ready = api.anon().get("/readyz").await.expect(200);
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["checks"]["postgres"], "ok");
    assert_eq!(ready["checks"]["redis"], "ok");
    assert_eq!(ready["checks"]["nats"], "ok");
}

#[tokio::test]
async fn health_needs_admin_beyond_loopback() {
    let mut config = test_config();
    config.listen_addr = ([0, 0, 0, 0], 0).into();
    let api = TestApi::start_with(config).await;
    api.anon().get("/healthz").await.expect_error(401, "unauthorized");
    api.anon().get("/readyz").await.expect_error(401, "unauthorized");
    let (_, token) = api.create_instance("h").await;
    api.client(Some(token)).get("/readyz").await.expect_error(403, "forbidden");
    api.admin().get("/healthz").await.expect(200);
    api.admin().get("/readyz").await.expect(200);
}

#[tokio::test]
async fn draining_answers_503_shutting_down() {
    let mut config = test_config();
    config.drain = std::time::Duration::from_millis(60_000);
    let api = TestApi::start_with(config).await;
    api.admin().get("/v1/me").await.expect(200);
    api.shutdown.cancel();
    api.admin().get("/v1/me").await.expect_error(503, "shutting_down");
    let msg = api.anon().get("/readyz").await.expect_error(503, "shutting_down");
    assert!(!msg.is_empty());
    api.anon().get("/healthz").await.expect(200);
}

#[tokio::test]
async fn graceful_stop_finishes() {
    let api = TestApi::start().await;
    api.admin().get("/v1/me").await.expect(200);
    api.stop().await.unwrap();
}

#[tokio::test]
async fn request_ids_are_set_and_propagated() {
    let api = TestApi::start().await;
    let r = api.anon().get("/healthz").await;
    let id = r.headers.get("x-request-id").expect("x-request-id set").to_str().unwrap().to_string();
    assert_eq!(id.len(), 36);
    let r = api.anon().with_header("x-request-id", "abc-123").get("/healthz").await;
    assert_eq!(r.headers.get("x-request-id").unwrap(), "abc-123");
}

#[tokio::test]
async fn openapi_is_served_and_matches_the_committed_copy() {
    let api = TestApi::start().await;
    api.anon().get("/v1/openapi.json").await.expect_error(401, "unauthorized");
    let r = api.admin().get("/v1/openapi.json").await;
    assert_eq!(r.status, 200);
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../api/openapi.json")).unwrap();
    assert_eq!(r.text, committed);
    assert!(r.body["openapi"].as_str().unwrap().starts_with("3.1"));
}

#[tokio::test]
async fn metrics_use_route_templates() {
    let api = TestApi::start().await;
    let (inst, _) = api.create_instance("metered").await;
    let id = inst["id"].as_str().unwrap().to_string();
    api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(api::metrics::serve_metrics(listener, api.shutdown.clone()));
    let text = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    assert!(text.contains("paceline_http_requests_total"), "{text}");
    assert!(text.contains("route=\"/v1/instances/{id}\""), "{text}");
    assert!(!text.contains(&id), "raw ids and paths never become labels");
}

#[tokio::test]
async fn concurrent_migrations_apply_once() {
    let config = test_config();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let config = config.clone();
        tasks.push(tokio::spawn(async move {
            let pool = shared::db::connect(&config).await.unwrap();
            shared::db::migrate(&pool).await.unwrap();
            pool
        }));
    }
    let mut pools = Vec::new();
    for t in tasks {
        pools.push(t.await.unwrap());
    }
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM _sqlx_migrations").fetch_one(&pools[0]).await.unwrap();
    assert_eq!(n as usize, shared::db::MIGRATOR.iter().count());
}

#[tokio::test]
async fn the_docs_are_served_without_a_token_or_a_cdn() {
    let api = TestApi::start().await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = http.get(api.url("/docs")).send().await.unwrap();
    assert_eq!(r.status(), 303, "/docs redirects to /docs/");
    let page = reqwest::get(api.url("/docs/")).await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    // Every asset the page loads is ours: no other host.
    for src in html.split(['"', '\'']).filter(|s| s.ends_with(".js") || s.ends_with(".css")) {
        assert!(!src.contains("//"), "an external asset: {src}");
        let asset = reqwest::get(api.url(&format!("/docs/{}", src.trim_start_matches("./")))).await.unwrap();
        assert_eq!(asset.status(), 200, "{src}");
    }
    let init = reqwest::get(api.url("/docs/swagger-initializer.js")).await.unwrap().text().await.unwrap();
    assert!(init.contains("/docs/openapi.json"), "{init}");
    // The description beside it needs no token and is the one /v1/openapi.json serves.
    let open: serde_json::Value = reqwest::get(api.url("/docs/openapi.json")).await.unwrap().json().await.unwrap();
    let served = api.admin().get("/v1/openapi.json").await.expect(200);
    assert_eq!(open, served);
}
