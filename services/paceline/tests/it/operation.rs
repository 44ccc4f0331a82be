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
    config.api.drain = std::time::Duration::from_millis(60_000);
    let api = TestApi::start_with(config).await;
    api.admin().get("/v1/me").await.expect(200);
    api.shutdown.cancel();
    api.admin().get("/v1/me").await.expect_error(503, "shutting_down");
    let msg = api.anon().get("/readyz").await.expect_error(503, "shutting_down");
    assert!(!msg.is_empty());
    api.anon().get("/healthz").await.expect(200);
}

/// A stop with a request in flight lets it end cleanly: an open event stream is closed
/// by the server (its body ends, no reset), and the server stops.
#[tokio::test]
async fn graceful_stop_ends_what_is_in_flight() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("stopping").await;
    let id = inst.id.to_string();
    let res = reqwest::Client::new()
        .get(format!("http://{}/v1/instances/{id}/events", api.addr))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    // The sentinel: the stream's head has come, so the request is in flight.
    assert_eq!(res.status(), 200);
    let body = tokio::spawn(res.text());
    api.stop().await.unwrap();
    body.await.unwrap().expect("the stream ends cleanly");
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
    let id = inst.id.to_string();
    api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(api::metrics::serve_metrics(listener, vec!["api"], api.shutdown.clone(), api.shutdown.clone()));
    let text = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    assert!(text.contains("paceline_http_requests_total"), "{text}");
    assert!(text.contains("route=\"/v1/instances/{id}\""), "{text}");
    assert!(!text.contains(&id), "raw ids and paths never become labels");
}

/// The probes kubelet calls on the metrics listener, with no token: alive, and ready once
/// every role of the process has started and until shutdown starts (while it still
/// serves).
#[tokio::test]
async fn probes_on_the_metrics_listener_follow_the_roles_and_shutdown() {
    let api = TestApi::start().await;
    let serve = |roles: Vec<&'static str>, stopping: shared::Shutdown| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(api::metrics::serve_metrics(listener, roles, stopping, shared::Shutdown::new()));
        addr
    };
    let get = |addr: std::net::SocketAddr, path: &'static str| async move {
        let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
        (r.status().as_u16(), r.json::<serde_json::Value>().await.unwrap())
    };
    let api_only = serve(vec!["api"], api.shutdown.clone()).await;
    assert_eq!(get(api_only, "/healthz").await.0, 200);
    let (status, body) = get(api_only, "/readyz").await;
    assert_eq!((status, body["checks"]["api"].as_str()), (200, Some("ok")), "{body}");
    // A role that has not started keeps the process unready.
    let (status, body) = get(serve(vec!["api", "never-started"], api.shutdown.clone()).await, "/readyz").await;
    assert_eq!(status, 503);
    assert_eq!(body["checks"]["never-started"], "starting");
    // From the start of shutdown: unready, still answering.
    let stopping = shared::Shutdown::new();
    let addr = serve(vec!["api"], stopping.clone()).await;
    stopping.cancel();
    let (status, body) = get(addr, "/readyz").await;
    assert_eq!((status, body["status"].as_str()), (503, Some("shutting_down")));
    assert_eq!(get(addr, "/healthz").await.0, 200);
}

/// A pod without `migrate_on_start` waits for the schema its build needs.
#[tokio::test]
async fn roles_wait_for_migrations_they_do_not_run() {
    let mut config = test_config();
    config.namespace.database_schema = Some(format!("wait_{}", uuid::Uuid::new_v4().simple()));
    config.migrate_on_start = false;
    let pool = shared::db::connect(&config).await.unwrap();
    assert!(!shared::db::schema_current(&pool).await.unwrap(), "a new schema has nothing applied");
    let shutdown = shared::Shutdown::new();
    let wait = std::time::Duration::from_secs(3);
    let behind = tokio::time::timeout(wait, shared::db::prepare(&pool, &config, &shutdown)).await;
    assert!(behind.is_err(), "it keeps waiting while the schema is behind");
    let waiting = tokio::spawn({
        let (pool, config, shutdown) = (pool.clone(), config.clone(), shutdown.clone());
        async move { shared::db::prepare(&pool, &config, &shutdown).await }
    });
    shared::db::migrate(&pool).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
    assert!(shared::db::schema_current(&pool).await.unwrap());
    // Shutting down ends the wait with an error, not a hang.
    let mut fresh = config.clone();
    fresh.namespace.database_schema = Some(format!("wait_{}", uuid::Uuid::new_v4().simple()));
    let pool = shared::db::connect(&fresh).await.unwrap();
    let stop = shared::Shutdown::new();
    stop.cancel();
    assert!(shared::db::prepare(&pool, &fresh, &stop).await.is_err());
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
