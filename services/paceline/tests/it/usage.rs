//! Usage matches a known workload exactly: sends (sent, failed), media bytes both ways,
//! received messages, number lookups (new and cached), webhook deliveries (succeeded
//! and failed) and API requests by token kind, rolled up from Postgres by a dispatcher.

use std::time::Duration;

use base64::Engine;
use harness::cluster::{wait_for, Cluster};
use harness::webhooks::WebhookSink;
use serde_json::{json, Value};

use crate::bin;

const A: &str = "5511999995001";
const B: &str = "5511999995002";
const C: &str = "5511999995003";
const NOBODY: &str = "5511999995009";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_matches_a_known_workload() {
    let c = Cluster::start(bin(), 1, |cfg| {
        cfg.allow_private_targets = true;
        cfg.usage.rollup_interval = Duration::from_millis(100);
        cfg.webhooks.retry_base = Duration::from_millis(50);
    })
    .await;
    let dispatcher = tokio::spawn(dispatcher::run(c.config.clone(), c.api.shutdown.clone()));
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("usage", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let base = format!("/v1/instances/{id}");

    // Instance-token requests on the instance's routes, counted as they are made.
    let mut by_instance = 0;
    let ok = WebhookSink::start().await;
    own.post(&format!("{base}/webhooks"), &json!({ "url": ok.url(), "events": ["message.sent"] })).await.expect(201);
    let gone = WebhookSink::start().await;
    gone.plan(&[(410, None)]);
    own.post(&format!("{base}/webhooks"), &json!({ "url": gone.url(), "events": ["message.failed"] }))
        .await
        .expect(201);
    by_instance += 2;

    // Sends: three texts and a 1,000-byte image go out; one to a number with no account fails.
    let image = base64::engine::general_purpose::STANDARD.encode(vec![9u8; 1000]);
    let mut ids = Vec::new();
    for body in [
        json!({ "to": B, "type": "text", "text": "one" }),
        json!({ "to": B, "type": "text", "text": "two" }),
        json!({ "to": B, "type": "text", "text": "three" }),
        json!({ "to": C, "type": "image", "media": { "data": image, "mime_type": "image/png" } }),
        json!({ "to": NOBODY, "type": "text", "text": "lost" }),
    ] {
        let m = own.post(&format!("{base}/messages"), &body).await.expect(202);
        ids.push(m["id"].as_str().unwrap().to_string());
        by_instance += 1;
    }
    // Received: two texts from B and a 500-byte image from C.
    let png = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 500]);
    for (from, body) in [
        (B, json!({ "to": A, "text": "hi" })),
        (B, json!({ "to": A, "text": "there" })),
        (C, json!({ "to": A, "type": "image", "media": { "data": png, "mime_type": "image/png" } })),
    ] {
        c.netsim().post(&format!("/control/phones/{from}/messages"), &body).await.expect(201);
    }
    // Lookups: two new; then those two from the cache and one more new.
    own.post(&format!("{base}/check-numbers"), &json!({ "numbers": [B, C] })).await.expect(200);
    own.post(&format!("{base}/check-numbers"), &json!({ "numbers": [B, C, NOBODY] })).await.expect(200);
    by_instance += 2;
    // A read_only key: two reads.
    let k =
        own.post(&format!("{base}/api-keys"), &json!({ "name": "reports", "scope": "read_only" })).await.expect(201);
    by_instance += 1;
    let key = c.api.client(Some(k["token"].as_str().unwrap().to_string()));
    key.get(&base).await.expect(200);
    key.get(&format!("{base}/chats")).await.expect(200);

    // Everything settles: sends finished, the failure and the sends delivered.
    let db = c.pool().await;
    let settled = wait_for(Duration::from_secs(30), || async {
        let (done, delivered): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM messages WHERE instance_id = $1 AND status IN ('sent', 'failed')), \
                    (SELECT count(*) FROM webhook_deliveries WHERE instance_id = $1 AND state <> 'pending')",
        )
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
        let received: i64 =
            sqlx::query_scalar("SELECT count(*) FROM log_messages WHERE instance_id = $1 AND NOT from_me")
                .bind(&id)
                .fetch_one(&db)
                .await
                .unwrap();
        (done == 5 && delivered == 5 && received == 3).then_some(())
    })
    .await;
    assert!(settled.is_some(), "the workload settles");

    // The admin reads usage (its own requests count as admin, not asserted exactly).
    let admin = c.api.admin();
    let want = json!({
        "messages_queued": 5, "messages_sent": 4, "messages_failed": 1, "messages_expired": 0,
        "messages_received": 3, "media_bytes_sent": 1000, "media_bytes_received": 500,
        "lookups_new": 3, "lookups_cached": 2, "deliveries_succeeded": 4, "deliveries_failed": 1,
        "requests_instance": by_instance, "requests_api_key": 2,
    });
    let usage = wait_for(Duration::from_secs(20), || async {
        let u: Value = admin.get(&format!("{base}/usage")).await.expect(200);
        let t = &u["totals"];
        want.as_object().unwrap().iter().all(|(k, v)| &t[k] == v).then_some(u)
    })
    .await;
    let u = match usage {
        Some(u) => u,
        None => panic!("usage: {}\nwant: {want}", admin.get(&format!("{base}/usage")).await.text),
    };
    assert!(u["totals"]["requests_admin"].as_i64().unwrap() >= 1);
    // Per day: 30 days by default, today's holding it all.
    let days = u["days"].as_array().unwrap();
    assert_eq!(days.len(), 30);
    let today = chrono::Utc::now().date_naive().to_string();
    assert_eq!(days.last().unwrap()["date"], today.as_str());
    assert_eq!(days.last().unwrap()["messages_sent"], 4);
    assert_eq!(days[0]["messages_sent"], 0);
    // Counted once: more roll-ups add nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again: Value = admin.get(&format!("{base}/usage")).await.expect(200);
    assert_eq!(again["totals"]["messages_sent"], 4);
    assert_eq!(again["totals"]["deliveries_succeeded"], 4);
    // Bad spans: 400.
    for q in [
        "from=2026-02-01&to=2026-01-01",
        "from=2026-01-01&to=2026-06-01",
        "from=yesterday",
        "from=0001-01-01",
        "to=9999-12-31",
    ] {
        admin.get(&format!("{base}/usage?{q}")).await.expect_error(400, "validation_failed");
    }
    let span: Value = admin.get(&format!("{base}/usage?from=2026-01-01&to=2026-01-03")).await.expect(200);
    assert_eq!(span["days"].as_array().unwrap().len(), 3);
    c.api.shutdown.cancel();
    let _ = dispatcher.await;
}
