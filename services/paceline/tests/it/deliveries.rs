//! Webhook deliveries end to end: API -> outbox -> relay -> JetStream -> fan-out ->
//! signed attempts at a local receiver, with the delivery log, retries, resend, endpoint
//! isolation and disabling; and no loss when NATS restarts.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use harness::cluster::wait_for;
use harness::webhooks::{verify_with_standardwebhooks, NatsServer, WebhookSink};
use harness::{test_config, Client, TestApi};
use serde_json::{json, Value};
use shared::Config;

/// An API and a dispatcher in this process, webhooks allowed on loopback, fast retries.
struct Setup {
    api: TestApi,
    dispatcher: tokio::task::JoinHandle<anyhow::Result<()>>,
    dispatcher_stop: shared::Shutdown,
}

pub(crate) fn config() -> Config {
    let mut c = test_config();
    c.allow_private_targets = true;
    c.webhooks.retry_base = std::time::Duration::from_millis(200);
    c.webhooks.retry_max = std::time::Duration::from_millis(1_000);
    c.webhooks.timeout = std::time::Duration::from_millis(2_000);
    c
}

impl Setup {
    async fn start(c: Config) -> Setup {
        let api = TestApi::start_with(c.clone()).await;
        let dispatcher_stop = shared::Shutdown::new();
        let dispatcher = tokio::spawn(dispatcher::run(c, dispatcher_stop.clone()));
        Setup { api, dispatcher, dispatcher_stop }
    }

    async fn stop(self) {
        self.dispatcher_stop.cancel();
        self.dispatcher.await.unwrap().unwrap();
    }
}

/// An instance with a token client; returns (id, client).
pub(crate) async fn instance(api: &TestApi, name: &str) -> (String, Client) {
    let (inst, token) = api.create_instance(name).await;
    (inst.id.to_string(), api.client(Some(token)))
}

pub(crate) async fn hook(own: &Client, id: &str, url: &str, events: &[&str]) -> Value {
    own.post(&format!("/v1/instances/{id}/webhooks"), &json!({ "url": url, "events": events })).await.expect(201)
}

/// Queues a text message: its `message.queued` event is what gets delivered.
pub(crate) async fn queue(own: &Client, id: &str, text: &str) -> Value {
    own.post(&format!("/v1/instances/{id}/messages"), &json!({ "to": "5511999990001", "type": "text", "text": text }))
        .await
        .expect(202)
}

async fn log(own: &Client, id: &str, wh: &str) -> Vec<Value> {
    own.get(&format!("/v1/instances/{id}/webhooks/{wh}/deliveries?limit=100")).await.expect(200)["deliveries"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_verify_with_the_standard_webhooks_package_across_a_rotation() {
    let s = Setup::start(config()).await;
    let sink = WebhookSink::start().await;
    let (id, own) = instance(&s.api, "dl-sign").await;
    let w = hook(&own, &id, &sink.url(), &["message.queued"]).await;
    let wh = w["id"].as_str().unwrap().to_string();
    let old_secret = w["secret"].as_str().unwrap().to_string();
    let m = queue(&own, &id, "hello").await;

    let got =
        wait_for(Duration::from_secs(15), || async { sink.received().first().cloned() }).await.expect("delivered");
    let body = got.json();
    assert_eq!(body["type"], "message.queued");
    assert_eq!(body["instance_id"], id.as_str());
    assert_eq!(body["data"]["id"], m["id"]);
    assert_eq!(got.header("webhook-id"), body["id"].as_str(), "webhook-id is the event id");
    assert!(got.header("webhook-signature").unwrap().starts_with("v1,"));
    verify_with_standardwebhooks(&old_secret, &got).expect("the reference verifier accepts our signature");
    let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert!(verify_with_standardwebhooks(other, &got).is_err(), "and refuses it under another secret");

    // The delivery log shows it succeeded (the sink records the request before it
    // answers, and the outcome is written after the answer).
    let entries = wait_for(Duration::from_secs(15), || async {
        let e = log(&own, &id, &wh).await;
        e.iter().any(|d| d["state"] == "succeeded").then_some(e)
    })
    .await
    .expect("the outcome logged");
    assert_eq!(entries.len(), 1);
    let d = &entries[0];
    assert!(d["id"].as_str().unwrap().starts_with("dlv_"));
    assert_eq!(d["event_id"], body["id"]);
    assert_eq!(
        (d["state"].as_str(), d["attempts"].as_i64(), d["response_status"].as_i64()),
        (Some("succeeded"), Some(1), Some(200))
    );
    assert!(d["latency_ms"].is_i64() && d["delivered_at"].is_string());

    // After a rotation both secrets verify, for a day.
    let rotated =
        own.patch(&format!("/v1/instances/{id}/webhooks/{wh}"), &json!({ "rotate_secret": true })).await.expect(200);
    let new_secret = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, old_secret);
    queue(&own, &id, "after rotation").await;
    let got = wait_for(Duration::from_secs(15), || async { sink.received().get(1).cloned() }).await.expect("delivered");
    assert_eq!(got.header("webhook-signature").unwrap().split(' ').count(), 2);
    verify_with_standardwebhooks(&new_secret, &got).expect("verifies with the new secret");
    verify_with_standardwebhooks(&old_secret, &got).expect("and still with the old one");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_then_recovering_endpoint_is_retried_and_logged() {
    let s = Setup::start(config()).await;
    let sink = WebhookSink::start().await;
    sink.plan(&[(500, None), (503, Some("1")), (429, None)]);
    let (id, own) = instance(&s.api, "dl-retry").await;
    let wh = hook(&own, &id, &sink.url(), &[]).await["id"].as_str().unwrap().to_string();
    queue(&own, &id, "retry me").await;

    // While it fails, the log shows the attempts and the next one.
    let pending = wait_for(Duration::from_secs(15), || async {
        let l = log(&own, &id, &wh).await;
        l.first().filter(|d| d["attempts"] == 1).cloned()
    })
    .await
    .expect("first attempt logged");
    assert_eq!(pending["state"], "pending");
    assert_eq!(pending["response_status"], 500);
    assert!(pending["next_attempt_at"].is_string());
    assert!(pending["last_error"].as_str().unwrap().contains("500"));

    let done = wait_for(Duration::from_secs(20), || async {
        log(&own, &id, &wh).await.into_iter().find(|d| d["state"] == "succeeded")
    })
    .await
    .expect("succeeds once the endpoint recovers");
    assert_eq!(done["attempts"], 4);
    assert_eq!(done["response_status"], 200);
    assert!(done["next_attempt_at"].is_null());
    let got = sink.received();
    assert_eq!(got.iter().map(|r| r.status).collect::<Vec<_>>(), [500, 503, 429, 200]);
    let ids: HashSet<_> = got.iter().map(|r| r.header("webhook-id").unwrap().to_string()).collect();
    assert_eq!(ids.len(), 1, "every attempt carries the same webhook-id");

    // The endpoint's failure streak was reset by the success: it stays enabled.
    let w = own.get(&format!("/v1/instances/{id}/webhooks/{wh}")).await.expect(200);
    assert_eq!(w["enabled"], true);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_log_pages_newest_first_and_rejects_foreign_cursors() {
    let s = Setup::start(config()).await;
    let sink = WebhookSink::start().await;
    let (id, own) = instance(&s.api, "dl-page").await;
    let wh = hook(&own, &id, &sink.url(), &[]).await["id"].as_str().unwrap().to_string();
    let wh2 = hook(&own, &id, &sink.url(), &["message.sent"]).await["id"].as_str().unwrap().to_string();
    for i in 0..7 {
        queue(&own, &id, &format!("m{i}")).await;
    }
    wait_for(Duration::from_secs(15), || async { (log(&own, &id, &wh).await.len() == 7).then_some(()) })
        .await
        .expect("7 deliveries");
    let base = format!("/v1/instances/{id}/webhooks/{wh}/deliveries");
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("{base}?limit=3&cursor={c}"),
            None => format!("{base}?limit=3"),
        };
        let page = own.get(&q).await.expect(200);
        seen.extend(page["deliveries"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => {
                assert!(page.get("next_cursor").is_none(), "absent on the last page: {page}");
                break;
            }
        }
    }
    assert_eq!(seen.len(), 7);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(seen, sorted, "newest first, no gaps or repeats");
    let page = own.get(&format!("{base}?limit=3")).await.expect(200);
    let c = page["next_cursor"].as_str().unwrap();
    own.get(&format!("/v1/instances/{id}/webhooks/{wh2}/deliveries?cursor={c}"))
        .await
        .expect_error(400, "validation_failed");
    own.get(&format!("{base}?cursor=garbage")).await.expect_error(400, "validation_failed");
    own.get(&format!("{base}?limit=101")).await.expect_error(400, "validation_failed");
    own.get(&format!("{base}?limit=-1")).await.expect_error(400, "validation_failed");
    own.get(&format!("/v1/instances/{id}/webhooks/wh_00000000000000000000000000000000/deliveries"))
        .await
        .expect_error(404, "not_found");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_can_be_resent_and_others_cannot() {
    let mut c = config();
    // No retries: the first failure is final.
    c.webhooks.retry_span = std::time::Duration::from_millis(0);
    c.api.drain = std::time::Duration::from_millis(3_000);
    let s = Setup::start(c).await;
    let sink = WebhookSink::start().await;
    sink.plan(&[(500, None)]);
    let (id, own) = instance(&s.api, "dl-resend").await;
    let wh = hook(&own, &id, &sink.url(), &[]).await["id"].as_str().unwrap().to_string();
    queue(&own, &id, "x").await;
    let failed = wait_for(Duration::from_secs(15), || async {
        log(&own, &id, &wh).await.into_iter().find(|d| d["state"] == "failed")
    })
    .await
    .expect("fails after one attempt");
    let dlv = failed["id"].as_str().unwrap().to_string();
    let resend = format!("/v1/instances/{id}/webhooks/{wh}/deliveries/{dlv}/resend");
    let r = own.post(&resend, &json!({})).await.expect(202);
    assert_eq!(r["state"], "pending");
    let done = wait_for(Duration::from_secs(15), || async {
        log(&own, &id, &wh).await.into_iter().find(|d| d["state"] == "succeeded")
    })
    .await
    .expect("the resend succeeds");
    assert_eq!(done["attempts"], 2);
    own.post(&resend, &json!({})).await.expect_error(409, "conflict");
    own.post(
        &format!("/v1/instances/{id}/webhooks/{wh}/deliveries/dlv_00000000000000000000000000000000/resend"),
        &json!({}),
    )
    .await
    .expect_error(404, "not_found");

    // A draining pod refuses it with 503 shutting_down (and changes nothing).
    s.api.shutdown.cancel();
    own.post(&resend, &json!({})).await.expect_error(503, "shutting_down");
    s.dispatcher_stop.cancel();
    s.dispatcher.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_disables_at_once_and_repeated_failures_disable_with_an_event() {
    let mut c = config();
    c.webhooks.disable_after_failures = 3;
    c.webhooks.disable_after = std::time::Duration::from_millis(0);
    let s = Setup::start(c).await;
    let gone = WebhookSink::start().await;
    gone.default_status(410);
    let dead = WebhookSink::start().await;
    dead.default_status(500);
    let (id, own) = instance(&s.api, "dl-disable").await;
    let wg = hook(&own, &id, &gone.url(), &["message.queued"]).await["id"].as_str().unwrap().to_string();
    let wd = hook(&own, &id, &dead.url(), &["message.queued"]).await["id"].as_str().unwrap().to_string();
    queue(&own, &id, "1").await;
    let get = |wh: String| {
        let own = own.clone();
        let id = id.clone();
        async move { own.get(&format!("/v1/instances/{id}/webhooks/{wh}")).await.expect(200) }
    };
    let w =
        wait_for(Duration::from_secs(15), || async { Some(get(wg.clone()).await).filter(|w| w["enabled"] == false) })
            .await
            .expect("410 disables the endpoint");
    assert!(w["disabled_reason"].as_str().unwrap().contains("410"));
    assert_eq!(gone.received().len(), 1, "no retry after 410");
    let d = &log(&own, &id, &wg).await[0];
    assert_eq!((d["state"].as_str(), d["response_status"].as_i64()), (Some("failed"), Some(410)));

    let w =
        wait_for(Duration::from_secs(20), || async { Some(get(wd.clone()).await).filter(|w| w["enabled"] == false) })
            .await
            .expect("three failures in a row disable the endpoint");
    assert!(w["disabled_reason"].as_str().unwrap().contains("3 attempts"));
    assert_eq!(log(&own, &id, &wd).await[0]["state"], "failed", "its pending delivery failed with it");
    let db = shared::db::connect(&s.api.config).await.unwrap();
    let events = shared::db::outbox::types_for(&db, &shared::ids::InstanceId::parse(&id).unwrap()).await.unwrap();
    let disabled: Vec<&Value> = events.iter().filter(|(t, _)| t == "webhook.disabled").map(|(_, p)| p).collect();
    assert_eq!(disabled.len(), 2);
    assert!(disabled.iter().any(|p| p["data"]["webhook_id"] == wd.as_str()));

    // Re-enabling starts over; a resend while disabled is refused.
    let dlv = log(&own, &id, &wd).await[0]["id"].as_str().unwrap().to_string();
    own.post(&format!("/v1/instances/{id}/webhooks/{wd}/deliveries/{dlv}/resend"), &json!({}))
        .await
        .expect_error(409, "conflict");
    let w = own.patch(&format!("/v1/instances/{id}/webhooks/{wd}"), &json!({ "enabled": true })).await.expect(200);
    assert_eq!(w["enabled"], true);
    assert!(w.get("disabled_reason").is_none());
    s.stop().await;
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_endpoint_does_not_delay_another() {
    let mut c = config();
    c.webhooks.timeout = std::time::Duration::from_millis(20_000);
    let s = Setup::start(c).await;
    let slow = WebhookSink::start().await;
    slow.delay(Duration::from_secs(3600));
    let fast = WebhookSink::start().await;
    let (id, own) = instance(&s.api, "dl-iso").await;
    hook(&own, &id, &slow.url(), &[]).await;
    let wf = hook(&own, &id, &fast.url(), &[]).await["id"].as_str().unwrap().to_string();
    for i in 0..30 {
        queue(&own, &id, &format!("m{i}")).await;
    }
    // Every delivery to the fast endpoint completes while the slow one has answered none
    // (its attempts hang for up to 20 s; the fast ones finish long before).
    wait_for(Duration::from_secs(15), || async {
        let l = log(&own, &id, &wf).await;
        (l.len() == 30 && l.iter().all(|d| d["state"] == "succeeded")).then_some(())
    })
    .await
    .expect("the fast endpoint gets all 30");
    assert_eq!(fast.received().len(), 30);
    assert!(slow.received().is_empty(), "the slow endpoint is still hanging");
    s.api.shutdown.cancel();
    s.dispatcher_stop.cancel();
    s.dispatcher.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dispatchers_deliver_each_event_once() {
    let c = config();
    let s = Setup::start(c.clone()).await;
    let second_stop = shared::Shutdown::new();
    let second = tokio::spawn(dispatcher::run(c, second_stop.clone()));
    let sink = WebhookSink::start().await;
    let (id, own) = instance(&s.api, "dl-two").await;
    hook(&own, &id, &sink.url(), &["message.queued"]).await;
    for i in 0..150 {
        queue(&own, &id, &format!("m{i}")).await;
    }
    wait_for(Duration::from_secs(30), || async { (sink.received().len() >= 150).then_some(()) })
        .await
        .expect("150 deliveries");
    // The sentinel: once an event queued after all of them is delivered, a second
    // delivery of any of them would have had its turn.
    let sentinel = queue(&own, &id, "sentinel").await["id"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(30), || async {
        sink.received().iter().any(|r| r.json()["data"]["id"] == sentinel.as_str()).then_some(())
    })
    .await
    .expect("the sentinel delivered");
    let mut per_event: HashMap<String, usize> = HashMap::new();
    for r in sink.received() {
        *per_event.entry(r.header("webhook-id").unwrap().to_string()).or_default() += 1;
    }
    assert_eq!(per_event.len(), 151);
    assert!(per_event.values().all(|n| *n == 1), "no event delivered twice");
    second_stop.cancel();
    second.await.unwrap().unwrap();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_restarting_mid_stream_loses_no_event() {
    // The dispatcher's warnings (on stderr, shown when this test fails).
    let logs = shared::Config {
        log: shared::config::section::Log { format: shared::config::LogFormat::Pretty, level: "warn".into() },
        ..Default::default()
    };
    shared::telemetry::init_logging(&logs);
    let mut nats = NatsServer::start().await;
    let mut c = config();
    c.nats_url = nats.url();
    let s = Setup::start(c).await;
    let sink = WebhookSink::start().await;
    let (id, own) = instance(&s.api, "dl-nats").await;
    hook(&own, &id, &sink.url(), &["message.queued"]).await;
    let mut queued = HashSet::new();
    for i in 0..20 {
        queued.insert(queue(&own, &id, &format!("before {i}")).await["id"].as_str().unwrap().to_string());
    }
    nats.kill().await;
    // Accepting messages needs only Postgres: their events wait in the outbox.
    for i in 0..20 {
        queued.insert(queue(&own, &id, &format!("during {i}")).await["id"].as_str().unwrap().to_string());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    nats.restart().await;
    for i in 0..20 {
        queued.insert(queue(&own, &id, &format!("after {i}")).await["id"].as_str().unwrap().to_string());
    }
    let delivered =
        || sink.received().iter().map(|r| r.json()["data"]["id"].as_str().unwrap().to_string()).collect::<HashSet<_>>();
    if wait_for(Duration::from_secs(60), || async { (delivered().len() == 60).then_some(()) }).await.is_none() {
        // Say where things stopped: the dispatcher, the outbox, the delivery rows.
        let db = shared::db::connect(&s.api.config).await.unwrap();
        let (unpublished, published): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE p.event_id IS NULL), count(p.event_id) \
             FROM outbox o LEFT JOIN outbox_published p ON p.event_id = o.id",
        )
        .fetch_one(&db)
        .await
        .unwrap();
        let states: Vec<(String, i64)> =
            sqlx::query_as("SELECT state, count(*) FROM webhook_deliveries GROUP BY state")
                .fetch_all(&db)
                .await
                .unwrap();
        let dispatcher =
            if s.dispatcher.is_finished() { format!("ended: {:?}", s.dispatcher.await) } else { "running".into() };
        panic!(
            "all 60 events delivered; got {}. dispatcher {dispatcher}; outbox {unpublished} unpublished, {published} published; deliveries {states:?}",
            delivered().len()
        );
    }
    assert_eq!(delivered(), queued);
    s.api.shutdown.cancel();
    s.dispatcher_stop.cancel();
    s.dispatcher.await.unwrap().unwrap();
}

/// An API with one instance, a webhook to nowhere and one queued message's event: the
/// delivery to create for it (claim-level tests drive the rows by hand), and the webhook.
async fn one_event(name: &str) -> (TestApi, sqlx::PgPool, shared::db::deliveries::NewDelivery, String) {
    let c = config();
    let api = TestApi::start_with(c.clone()).await;
    let (id, own) = instance(&api, name).await;
    let wh = hook(&own, &id, "http://127.0.0.1:9/hook", &[]).await["id"].as_str().unwrap().to_string();
    queue(&own, &id, "x").await;
    let db = shared::db::connect(&c).await.unwrap();
    let (event,): (String,) =
        sqlx::query_as("SELECT id FROM outbox WHERE instance_id = $1").bind(&id).fetch_one(&db).await.unwrap();
    let row = shared::db::deliveries::NewDelivery {
        webhook_id: shared::ids::WebhookId::parse(&wh).unwrap(),
        instance_id: shared::ids::InstanceId::parse(&id).unwrap(),
        event_id: shared::ids::EventId::parse(&event).unwrap(),
        event_type: "message.queued".into(),
    };
    (api, db, row, wh)
}

/// A claim that lapsed and was taken again (even by the same pod) no longer applies: its
/// late outcome changes nothing; the new claim's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_outcome_of_a_lapsed_claim_changes_nothing() {
    use shared::db::deliveries::{self, DeliveryState, Outcome};
    let (_api, db, row, wh) = one_event("dl-claims").await;
    // Claimed for 0 ms: lapsed at once; the same pod's scanner claims it again.
    let created =
        deliveries::insert_claimed(&db, std::slice::from_ref(&row), "pod-a", Duration::ZERO, Duration::from_secs(60))
            .await
            .unwrap();
    let (dlv, hook_id, _, _, old_claim) = created[0].clone();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let due = deliveries::claim_due(&db, "pod-a", 60_000, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_ne!(due[0].claim_id, old_claim);
    let outcome = |claim: &str, state: DeliveryState| Outcome {
        id: dlv.clone(),
        claim_id: claim.to_string(),
        webhook_id: hook_id.clone(),
        state,
        attempted: true,
        response_status: Some(if state == DeliveryState::Failed { 500 } else { 200 }),
        latency_ms: Some(1),
        error: None,
        next_attempt_at: None,
        gone: false,
        logged: None,
        request_excerpt: None,
    };
    deliveries::record(&db, "pod-a", &[outcome(&old_claim, DeliveryState::Failed)], 1, Duration::ZERO).await.unwrap();
    let (state, attempts): (String, i32) =
        sqlx::query_as("SELECT state, attempts FROM webhook_deliveries WHERE id = $1")
            .bind(&dlv)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!((state.as_str(), attempts), ("pending", 0), "the stale failure is ignored");
    let (enabled,): (bool,) =
        sqlx::query_as("SELECT enabled FROM webhooks WHERE id = $1").bind(&wh).fetch_one(&db).await.unwrap();
    assert!(enabled, "and does not count toward disabling the endpoint");
    deliveries::record(&db, "pod-a", &[outcome(&due[0].claim_id, DeliveryState::Succeeded)], 1, Duration::ZERO)
        .await
        .unwrap();
    let (state,): (String,) =
        sqlx::query_as("SELECT state FROM webhook_deliveries WHERE id = $1").bind(&dlv).fetch_one(&db).await.unwrap();
    assert_eq!(state, "succeeded");
}

/// A delivery's log keeps its latest ten attempts, oldest first, and the latest one's
/// request; an outcome without an attempt (put back) changes neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempt_log_keeps_the_latest_ten() {
    use shared::db::deliveries::{self, Attempt, DeliveryState, Outcome};
    let (_api, db, row, _) = one_event("dl-log").await;
    let created = deliveries::insert_claimed(
        &db,
        std::slice::from_ref(&row),
        "pod-l",
        Duration::from_secs(60),
        Duration::from_secs(600),
    )
    .await
    .unwrap();
    let (dlv, hook_id, _, _, mut claim) = created[0].clone();
    for n in 1..=13 {
        let attempted = n != 7;
        let o = Outcome {
            id: dlv.clone(),
            claim_id: claim.clone(),
            webhook_id: hook_id.clone(),
            state: DeliveryState::Pending,
            attempted,
            response_status: Some(500),
            latency_ms: Some(1),
            error: None,
            next_attempt_at: Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
            gone: false,
            logged: attempted.then(|| Attempt {
                at: chrono::Utc::now(),
                url: "http://127.0.0.1:9/hook".into(),
                status: Some(500 + n),
                latency_ms: Some(1),
                error: None,
                request_bytes: 2,
                response: None,
            }),
            request_excerpt: attempted.then(|| format!("{{\"n\":{n}}}")),
        };
        deliveries::record(&db, "pod-l", &[o], 1000, Duration::from_secs(3600)).await.unwrap();
        claim = deliveries::claim_due(&db, "pod-l", 60_000, 10).await.unwrap().pop().expect("due again").claim_id;
    }
    let d = deliveries::detail(&db, &row.webhook_id, &dlv).await.unwrap().unwrap();
    let statuses: Vec<i32> = d.attempt_log.0.iter().map(|a| a.status.unwrap()).collect();
    assert_eq!(statuses, vec![503, 504, 505, 506, 508, 509, 510, 511, 512, 513], "the latest ten, oldest first");
    assert_eq!((d.row.attempts, d.last_request.as_deref()), (12, Some("{\"n\":13}")));
}

/// Disabling an endpoint by hand fails what it had pending (so it can be resent later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_an_endpoint_fails_its_pending_deliveries() {
    let mut c = config();
    c.webhooks.retry_base = std::time::Duration::from_millis(60_000);
    c.webhooks.retry_max = std::time::Duration::from_millis(60_000);
    let s = Setup::start(c).await;
    let sink = WebhookSink::start().await;
    sink.default_status(500);
    let (id, own) = instance(&s.api, "dl-manual").await;
    let wh = hook(&own, &id, &sink.url(), &[]).await["id"].as_str().unwrap().to_string();
    queue(&own, &id, "x").await;
    wait_for(Duration::from_secs(15), || async {
        log(&own, &id, &wh).await.into_iter().find(|d| d["state"] == "pending" && d["attempts"] == 1)
    })
    .await
    .expect("a pending retry");
    own.patch(&format!("/v1/instances/{id}/webhooks/{wh}"), &json!({ "enabled": false })).await.expect(200);
    let d = &log(&own, &id, &wh).await[0];
    assert_eq!(d["state"], "failed");
    assert!(d["last_error"].as_str().unwrap().contains("disabled"));
    s.stop().await;
}

/// Pods start while NATS is down (they keep connecting in the background), and once it
/// is up the events committed meanwhile are delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_started_while_nats_is_down_deliver_once_it_is_up() {
    let mut nats = NatsServer::start().await;
    nats.kill().await;
    let mut c = config();
    c.nats_url = nats.url();
    let s = Setup::start(c).await;
    let sink = WebhookSink::start().await;
    let (id, own) = instance(&s.api, "dl-nats-late").await;
    hook(&own, &id, &sink.url(), &["message.queued"]).await;
    for i in 0..5 {
        queue(&own, &id, &format!("m{i}")).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!s.dispatcher.is_finished(), "the dispatcher waits for NATS instead of giving up");
    nats.restart().await;
    wait_for(Duration::from_secs(60), || async { (sink.received().len() == 5).then_some(()) })
        .await
        .expect("the five events delivered once NATS is up");
    s.api.shutdown.cancel();
    s.dispatcher_stop.cancel();
    s.dispatcher.await.unwrap().unwrap();
}
