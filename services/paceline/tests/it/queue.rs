//! `GET {inst}/queue`: counts, the hold, pending messages with the earliest time each can
//! go under the pacing in force (from the sends Postgres recorded), failed ones with their
//! reasons, cursors per list; `POST {inst}/queue/pause` and `/resume`; and the
//! instance's state history (`GET {inst}/states`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use crate::bin;

const A: &str = "5511933330001";
const B: &str = "5511933330002";
const C: &str = "5511933330003";

fn at(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap_or_else(|| panic!("a time, not {v}")).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_shows_when_each_message_can_go_and_why_others_failed() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.pacing.jitter = 0.0).await;
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("paced", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    // One every 30 s, two a minute.
    let pacing = json!({ "min_interval_ms": 30_000, "max_per_minute": 2 });
    c.api.admin().patch(&format!("/v1/instances/{id}"), &pacing).await.expect(200);
    let path = format!("/v1/instances/{id}/messages");
    let mut ids = Vec::new();
    for i in 0..3 {
        let m = own.post(&path, &json!({ "to": B, "type": "text", "text": format!("n{i}") })).await.expect(202);
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    let first = wait_for(Duration::from_secs(20), || async {
        let r = own.get(&format!("{path}/{}", ids[0])).await.body;
        (r["status"] == "sent").then_some(r)
    })
    .await
    .expect("the first goes at once");
    let t0 = at(&first["sent_at"]);

    let q = own.get(&format!("/v1/instances/{id}/queue")).await.expect(200);
    assert_eq!(q["list"], "pending");
    assert!(q.get("held").is_none(), "{q}");
    assert_eq!(q["counts"]["queued"], 2, "{q}");
    assert_eq!(q["counts"]["sent_last_minute"], 1, "{q}");
    assert_eq!(q["effective_pacing"]["min_interval_ms"], 30_000);
    let data = q["data"].as_array().unwrap();
    assert_eq!(data.iter().map(|m| m["id"].as_str().unwrap()).collect::<Vec<_>>(), [&ids[1], &ids[2]]);
    // The interval after the first, then the cap: the third waits for the first to leave
    // the minute.
    assert_eq!(at(&data[0]["due_at"]) - t0, chrono::Duration::seconds(30), "{q}");
    assert_eq!(at(&data[1]["due_at"]) - t0, chrono::Duration::seconds(60), "{q}");
    assert_eq!(data[0]["status"], "queued");
    assert_eq!(data[0]["to"], format!("{B}@s.whatsapp.net"));

    // A page at a time: the second page's time counts the messages ahead of it.
    let p1 = own.get(&format!("/v1/instances/{id}/queue?limit=1")).await.expect(200);
    let cursor = p1["next_cursor"].as_str().expect("a second page").to_string();
    let p2 = own.get(&format!("/v1/instances/{id}/queue?limit=1&cursor={cursor}")).await.expect(200);
    assert_eq!(p2["data"][0]["id"], ids[2].as_str());
    assert_eq!(p2["data"][0]["due_at"], data[1]["due_at"]);
    assert!(p2["next_cursor"].is_null());
    // A cursor belongs to its list (and its instance); unknown lists and limits are refused.
    let other = format!("/v1/instances/{id}/queue?list=failed&cursor={cursor}");
    own.get(&other).await.expect_error(400, "validation_failed");
    own.get(&format!("/v1/instances/{id}/queue?list=sent")).await.expect_error(400, "validation_failed");
    own.get(&format!("/v1/instances/{id}/queue?limit=0")).await.expect_error(400, "validation_failed");

    // Paused by hand: nothing is due until a resume; a second pause is a conflict.
    own.post(&format!("/v1/instances/{id}/queue/pause"), &json!({})).await.expect(204);
    own.post(&format!("/v1/instances/{id}/queue/pause"), &json!({})).await.expect_error(409, "conflict");
    let q = own.get(&format!("/v1/instances/{id}/queue")).await.expect(200);
    assert_eq!(q["held"], "paused", "{q}");
    assert!(q["data"].as_array().unwrap().iter().all(|m| m.get("due_at").is_none()), "{q}");
    let i = own.get(&format!("/v1/instances/{id}")).await.expect(200);
    assert_eq!(i["queue_paused"]["reason"], "manual", "{i}");
    own.post(&format!("/v1/instances/{id}/queue/resume"), &json!({})).await.expect(204);
    let q = own.get(&format!("/v1/instances/{id}/queue")).await.expect(200);
    assert!(q.get("held").is_none(), "{q}");

    // A read_only key reads the queue; a send_only key does not, nor may it pause.
    let reader = c.api.client(Some(c.api.create_key(&own, &id, "read_only").await));
    reader.get(&format!("/v1/instances/{id}/queue")).await.expect(200);
    reader.post(&format!("/v1/instances/{id}/queue/pause"), &json!({})).await.expect_error(403, "forbidden");
    let sender = c.api.client(Some(c.api.create_key(&own, &id, "send_only").await));
    sender.get(&format!("/v1/instances/{id}/queue")).await.expect_error(403, "forbidden");

    // The instance's state history (GET {inst}/states), newest first, a page at a time.
    let h = reader.get(&format!("/v1/instances/{id}/states")).await.expect(200);
    let changes = h["changes"].as_array().unwrap().clone();
    assert_eq!(changes[0]["state"], "connected", "{h}");
    assert_eq!(changes[0]["previous_state"], changes[1]["state"], "each change starts where the one before ended: {h}");
    assert!(changes.iter().any(|c| c["state"] == "qr_pending"), "{h}");
    assert_eq!(changes.last().unwrap()["previous_state"], "disconnected", "{h}");
    let p1 = own.get(&format!("/v1/instances/{id}/states?limit=1")).await.expect(200);
    let next = p1["next_cursor"].as_str().expect("more than one change").to_string();
    let p2 = own.get(&format!("/v1/instances/{id}/states?limit=1&cursor={next}")).await.expect(200);
    assert_eq!(p2["changes"][0], changes[1]);
    own.get(&format!("/v1/instances/{id}/states?cursor={cursor}")).await.expect_error(400, "validation_failed");

    // Failed messages, the latest first, with their reasons (and no number in them).
    let (fast, fast_token) = c.paired_instance("fast", C).await;
    let fast = fast.id.to_string();
    c.unpaced(&fast).await;
    let fast_own = c.api.client(Some(fast_token));
    let fpath = format!("/v1/instances/{fast}/messages");
    let mut failed = Vec::new();
    for n in ["5511933330404", "5511933330405"] {
        let m = fast_own.post(&fpath, &json!({ "to": n, "type": "text", "text": "?" })).await.expect(202);
        failed.push(m["id"].as_str().unwrap().to_string());
        wait_for(Duration::from_secs(20), || async {
            let r = fast_own.get(&format!("{fpath}/{}", failed.last().unwrap())).await.body;
            (r["status"] == "failed").then_some(())
        })
        .await
        .expect("it fails: no account");
    }
    let q = fast_own.get(&format!("/v1/instances/{fast}/queue?list=failed&limit=1")).await.expect(200);
    assert_eq!(q["counts"]["failed_last_day"], 2, "{q}");
    assert_eq!(q["data"][0]["id"], failed[1].as_str(), "the latest failure first");
    let reason = q["data"][0]["error"].as_str().unwrap();
    assert!(reason.starts_with("invalid_number: ") && !reason.contains("5511933330405"), "{reason}");
    let next = q["next_cursor"].as_str().unwrap();
    let q2 = fast_own.get(&format!("/v1/instances/{fast}/queue?list=failed&cursor={next}")).await.expect(200);
    assert_eq!(q2["data"][0]["id"], failed[0].as_str());
    // Another instance's cursor is refused.
    c.api
        .admin()
        .get(&format!("/v1/instances/{id}/queue?list=failed&cursor={next}"))
        .await
        .expect_error(400, "validation_failed");

    // An instance that is not connected holds its queue: no times.
    let (idle, idle_token) = c.api.create_instance("idle").await;
    let idle = idle.id.to_string();
    let idle_own = c.api.client(Some(idle_token));
    idle_own
        .post(&format!("/v1/instances/{idle}/messages"), &json!({ "to": B, "type": "text", "text": "later" }))
        .await
        .expect(202);
    let q = idle_own.get(&format!("/v1/instances/{idle}/queue")).await.expect(200);
    assert_eq!(q["held"], "not_connected", "{q}");
    assert_eq!(q["counts"]["queued"], 1);
    assert!(q["data"][0].get("due_at").is_none(), "{q}");
}
