//! Crashes and outages: a worker killed mid-send, an in-flight message re-sent under its
//! id, and a send whose database read fails.

use std::collections::HashSet;
use std::time::Duration;

use base64::Engine;
use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use super::{inbox, A, B};
use crate::bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_send_loses_and_duplicates_nothing() {
    let mut c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("chaos", A).await;
    let id = inst.id.to_string();
    c.api
        .admin()
        .patch(
            &format!("/v1/instances/{id}"),
            &json!({ "unsafe_pacing": true, "min_interval_ms": 30, "max_per_minute": 100000 }),
        )
        .await
        .expect(200);
    let own = c.api.client(Some(token));
    const N: usize = 60;
    for i in 0..N {
        own.post(
            &format!("/v1/instances/{id}/messages"),
            &json!({ "to": B, "type": "text", "text": format!("m{i:03}") }),
        )
        .await
        .expect(202);
    }
    // Kill the owner while it is sending.
    wait_for(Duration::from_secs(20), || async {
        let n = inbox(&c, B).await["messages"].as_array().unwrap().len();
        (n >= 10).then_some(())
    })
    .await
    .unwrap();
    let owner = c.owner().await.expect("an owner");
    c.signal(owner, "KILL");
    let _ = c.workers[owner].child.wait();
    let got = wait_for(Duration::from_secs(30), || async {
        let got = inbox(&c, B).await;
        (got["messages"].as_array().unwrap().len() >= N).then_some(got)
    })
    .await
    .expect("every message arrives");
    let msgs = got["messages"].as_array().unwrap();
    let texts: HashSet<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap()).collect();
    let ids: HashSet<&str> = msgs.iter().map(|m| m["id"].as_str().unwrap()).collect();
    println!("after SIGKILL mid-send: {} delivered, {} re-sends absorbed by id", msgs.len(), got["resends_absorbed"]);
    assert_eq!(msgs.len(), N, "nothing lost, nothing doubled under a new id");
    assert_eq!(texts.len(), N);
    assert_eq!(ids.len(), N);
    assert_eq!(got["duplicates"], 0);
    let ordered: Vec<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap()).collect();
    let mut sorted = ordered.clone();
    sorted.sort();
    assert_eq!(ordered, sorted, "order kept across the takeover");
    // Every row ends sent (the last commit may trail the network's delivery).
    let db = c.pool().await;
    let all_sent = wait_for(Duration::from_secs(10), || async {
        let (sent,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM messages WHERE instance_id = $1 AND status = 'sent'")
                .bind(&id)
                .fetch_one(&db)
                .await
                .unwrap();
        (sent as usize == N).then_some(())
    })
    .await;
    assert!(all_sent.is_some(), "every row ends sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_flight_message_is_resent_under_its_id_after_a_crash() {
    let mut c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("inflight", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    // A slow network: the send reaches netsim, which delivers it after the sender died.
    c.netsim().post("/control/faults", &json!({ "latency_ms": 1500 })).await.expect(200);
    let own = c.api.client(Some(token));
    let m = own
        .post(&format!("/v1/instances/{id}/messages"), &json!({ "to": B, "type": "text", "text": "exactly once" }))
        .await
        .expect(202);
    let db = c.pool().await;
    wait_for(Duration::from_secs(10), || async {
        let (s,): (String,) = sqlx::query_as("SELECT status FROM messages WHERE id = $1")
            .bind(m["id"].as_str())
            .fetch_one(&db)
            .await
            .unwrap();
        (s == "in_flight").then_some(())
    })
    .await
    .expect("the send starts");
    let owner = c.owner().await.expect("an owner");
    c.signal(owner, "KILL");
    let _ = c.workers[owner].child.wait();
    let row = wait_for(Duration::from_secs(30), || async {
        let r = own.get(&format!("/v1/instances/{id}/messages/{}", m["id"].as_str().unwrap())).await.body;
        (r["status"] == "sent").then_some(r)
    })
    .await
    .expect("the new owner finishes it");
    c.netsim().post("/control/faults", &json!({ "latency_ms": 0 })).await.expect(200);
    let got = inbox(&c, B).await;
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{got}");
    assert_eq!(msgs[0]["id"], row["wa_message_id"], "re-sent under the id assigned before the first attempt");
    assert_eq!(got["duplicates"], 0);
    assert_eq!(got["resends_absorbed"], 1, "the re-send happened and the network absorbed it");
    let (attempts,): (i32,) = sqlx::query_as("SELECT attempts FROM messages WHERE id = $1")
        .bind(m["id"].as_str())
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(attempts, 2);
}

/// A send whose database read fails (its media, here: the table is away) stays in flight
/// and in order, and goes once the database answers again, sent once, no attempt spent
/// and nothing failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_read_fails_goes_once_the_database_answers() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("reads", A).await;
    let id = inst.id.to_string();
    // Unpaced but for a 3 s gap: the second message is built 3 s after the first went.
    let gap = json!({ "unsafe_pacing": true, "min_interval_ms": 3000, "max_per_minute": 100000 });
    c.api.admin().patch(&format!("/v1/instances/{id}"), &gap).await.expect(200);
    let own = c.api.client(Some(token));
    let path = format!("/v1/instances/{id}/messages");
    own.post(&format!("{path}?wait=true&timeout=20s"), &json!({ "to": B, "type": "text", "text": "first" }))
        .await
        .expect(200);
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG an image");
    let image = json!({ "to": B, "type": "image", "media": { "data": png, "mime_type": "image/png" } });
    let m = own.post(&path, &image).await.expect(202);
    let pool = c.pool().await;
    sqlx::query("ALTER TABLE media RENAME TO media_away").execute(&pool).await.unwrap();
    // Past its send time, it waits: neither sent nor failed. The sentinel: the worker
    // reached it and failed to read its media twice (so it waited and tried again).
    wait_for(Duration::from_secs(20), || async {
        (c.worker_metric(0, "paceline_queue_reads_failed_total", "").await >= 2.0).then_some(())
    })
    .await
    .expect("the worker tries the send and cannot read its media");
    let record = own.get(&format!("{path}/{}", m["id"].as_str().unwrap())).await.expect(200);
    sqlx::query("ALTER TABLE media_away RENAME TO media").execute(&pool).await.unwrap();
    assert!(matches!(record["status"].as_str(), Some("queued" | "in_flight")), "{record}");
    assert_eq!(inbox(&c, B).await["messages"].as_array().unwrap().len(), 1);
    let sent = wait_for(Duration::from_secs(15), || async {
        let r = own.get(&format!("{path}/{}", m["id"].as_str().unwrap())).await.body;
        (r["status"] == "sent").then_some(r)
    })
    .await
    .expect("sent once the table is back");
    assert_eq!(sent["error"], Value::Null, "{sent}");
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM messages WHERE id = $1")
        .bind(m["id"].as_str().unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(attempts, 1, "the failed reads spent no attempt");
    let got = inbox(&c, B).await;
    assert_eq!(got["messages"].as_array().unwrap().len(), 2, "{got}");
    assert_eq!(got["duplicates"], 0);
}
