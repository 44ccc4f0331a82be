//! Pruning past the event stream's retention: events and deliveries by age, and what
//! must stay (unpublished events, events a delivery still refers to).

use harness::TestApi;
use serde_json::json;

use crate::deliveries::{config, hook, instance};

#[tokio::test]
async fn events_and_deliveries_past_retention_are_pruned_by_age() {
    use dispatcher::retention::db as retention;
    let api = TestApi::start_with(config()).await;
    let (id, own) = instance(&api, "retention").await;
    let wh = hook(&own, &id, "http://127.0.0.1:9/hook", &["message.queued"]).await;
    let wh_id = wh["id"].as_str().unwrap().to_string();
    let db = shared::db::connect(&api.config).await.unwrap();
    let now = chrono::Utc::now();
    // An id made at `t` (UUIDv7 layout: the millisecond timestamp first).
    let made_at = |prefix: &str, t: chrono::DateTime<chrono::Utc>, n: u32| {
        format!("{prefix}{:012x}{:020x}", t.timestamp_millis(), n)
    };
    let old = now - chrono::Duration::days(8);
    let recent = now - chrono::Duration::days(1);
    let event = |eid: String, published: bool| {
        let db = db.clone();
        let id = id.clone();
        async move {
            // Published: the relay's record of it (what retention reads).
            sqlx::query(
                "WITH e AS (INSERT INTO outbox (id, instance_id, type, payload) VALUES ($1, $2, 'message.queued', '{}')) \
                 INSERT INTO outbox_published (event_id, stream_seq) SELECT $1, 1 WHERE $3",
            )
            .bind(eid)
            .bind(id)
            .bind(published)
            .execute(&db)
            .await
            .unwrap();
        }
    };
    let delivery = |did: String, eid: String, state: &'static str| {
        let db = db.clone();
        let (id, wh_id) = (id.clone(), wh_id.clone());
        async move {
            sqlx::query(
                "INSERT INTO webhook_deliveries (id, webhook_id, instance_id, event_id, event_type, state, retry_until, next_attempt_at) \
                 VALUES ($1, $2, $3, $4, 'message.queued', $5, now() + interval '1 day', CASE WHEN $5 = 'pending' THEN now() + interval '1 hour' END)",
            )
            .bind(did)
            .bind(wh_id)
            .bind(id)
            .bind(eid)
            .bind(state)
            .execute(&db)
            .await
            .unwrap();
        }
    };
    let (old_evt, old_unpublished, new_evt) =
        (made_at("evt_", old, 1), made_at("evt_", old, 2), made_at("evt_", recent, 3));
    event(old_evt.clone(), true).await;
    event(old_unpublished.clone(), false).await;
    event(new_evt.clone(), true).await;
    let old_evt2 = made_at("evt_", old, 4);
    event(old_evt2.clone(), true).await;
    let (old_done, old_pending, new_done) =
        (made_at("dlv_", old, 1), made_at("dlv_", old, 2), made_at("dlv_", recent, 3));
    delivery(old_done.clone(), old_evt.clone(), "succeeded").await;
    delivery(old_pending.clone(), old_evt2.clone(), "pending").await;
    delivery(new_done.clone(), new_evt.clone(), "failed").await;
    // A delivery made late (a backlog, a resend) for an old event keeps that event.
    let (kept_evt, late) = (made_at("evt_", old, 5), made_at("dlv_", recent, 4));
    event(kept_evt.clone(), true).await;
    delivery(late.clone(), kept_evt.clone(), "failed").await;

    let cutoff = now - shared::bus::EVENTS_RETENTION;
    // Batches of one: the pending delivery is failed first, then pruned in a later pass.
    let first = retention::prune(&db, cutoff, 1).await.unwrap();
    assert_eq!((first.failed, first.deliveries), (1, 1));
    let mut passes = 1;
    while retention::prune(&db, cutoff, 1).await.unwrap() != retention::Pruned::default() {
        passes += 1;
        assert!(passes < 10, "pruning converges");
    }
    let ids = |table: &'static str| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, String>(&format!("SELECT id FROM {table} ORDER BY id"))
                .fetch_all(&db)
                .await
                .unwrap()
        }
    };
    let outbox_left = ids("outbox").await;
    assert!(!outbox_left.contains(&old_evt) && !outbox_left.contains(&old_evt2), "published and past retention: gone");
    assert!(outbox_left.contains(&old_unpublished), "never published: kept whatever its age");
    assert!(outbox_left.contains(&new_evt), "within retention: kept");
    assert!(outbox_left.contains(&kept_evt), "an old event a delivery still refers to: kept");
    let mut want = vec![new_done.clone(), late.clone()];
    want.sort();
    assert_eq!(ids("webhook_deliveries").await, want, "old deliveries gone, pending ones too once failed");
    // A pruned delivery is gone from the log: resending it is 404.
    own.post(&format!("/v1/instances/{id}/webhooks/{wh_id}/deliveries/{old_done}/resend"), &json!({}))
        .await
        .expect_error(404, "not_found");
}
