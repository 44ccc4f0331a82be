//! Inbound durability over netsim and real worker processes: netsim delivers a message
//! to the device until the worker acknowledges it, which the worker does once the
//! message is logged, so a worker that dies in between loses nothing; a long history
//! sync comes a chunk at a time, each acknowledged once logged.

use crate::bin;
use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

const A: &str = "5511987770001";
const B: &str = "5511987770002";

/// `from` sends a text to `to` through netsim; returns its network id.
async fn phone_text(c: &Cluster, from: &str, to: &str, text: &str) -> String {
    c.phone_text(from, to, text).await
}

/// The queue of `number`'s one linked device on netsim.
async fn queue(c: &Cluster, number: &str) -> Value {
    let q = c.netsim().get(&format!("/control/phones/{number}/queues")).await.expect(200);
    assert_eq!(q["devices"].as_array().map(Vec::len), Some(1), "{q}");
    q["devices"][0].clone()
}

async fn logged(pool: &sqlx::PgPool, id: &str, wa: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM log_messages WHERE instance_id = $1 AND wa_message_id = $2")
        .bind(id)
        .bind(wa)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_whose_worker_dies_before_logging_it_is_logged_once_by_the_next_owner() {
    let c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, _token) = c.paired_instance("inbound", A).await;
    let id = inst.id.to_string();
    let pool = c.pool().await;
    // Logged, then acknowledged: netsim holds nothing for the device.
    let before = phone_text(&c, B, A, "before").await;
    wait_for(Duration::from_secs(20), || async {
        (logged(&pool, &id, &before).await == 1 && queue(&c, A).await["unacked"] == 0).then_some(())
    })
    .await
    .expect("the first message logged and acknowledged");

    // The log refuses writes for now: the owner receives the next message and waits.
    let locker = c.pool().await;
    let mut blocker = locker.begin().await.unwrap();
    sqlx::query("LOCK TABLE log_messages IN ACCESS EXCLUSIVE MODE").execute(&mut *blocker).await.unwrap();
    let (epoch, _, _) = c.ownership(&id).await;
    let owner = c.owner().await.expect("an owner");
    let in_flight = phone_text(&c, B, A, "in flight").await;
    wait_for(Duration::from_secs(20), || async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO log_messages%'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        (waiting > 0).then_some(())
    })
    .await
    .expect("the owner's log write waits on the lock");
    assert_eq!(queue(&c, A).await["unacked"], 1, "delivered, not acknowledged");

    // It dies before its write lands; the other worker takes the instance over.
    c.signal(owner, "KILL");
    blocker.rollback().await.unwrap();
    wait_for(Duration::from_secs(30), || async {
        let (e, state, _) = c.ownership(&id).await;
        (e > epoch && state == "connected").then_some(())
    })
    .await
    .expect("taken over");
    // netsim delivered it again on the new owner's connect: logged once, acknowledged.
    wait_for(Duration::from_secs(20), || async {
        (logged(&pool, &id, &in_flight).await == 1 && queue(&c, A).await["unacked"] == 0).then_some(())
    })
    .await
    .expect("the in-flight message logged by the new owner, and acknowledged");
    let received: Vec<Value> = sqlx::query_scalar(
        "SELECT payload FROM outbox WHERE instance_id = $1 AND type = 'message.received' ORDER BY created_at",
    )
    .bind(&id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let ids: Vec<&str> = received.iter().filter_map(|p| p["data"]["wa_message_id"].as_str()).collect();
    assert_eq!(ids, [before.as_str(), in_flight.as_str()], "each message's event once");
    assert_eq!(logged(&pool, &id, &before).await, 1, "the first is not logged again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_history_sync_is_logged_a_chunk_at_a_time() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    // The recent message, sent in bulk beside one the network refuses (no such account).
    let bulk = json!({ "messages": [
        { "from": B, "to": A, "text": "recent" },
        { "from": "5511987770099", "to": A, "text": "nobody" },
    ] });
    let r = c.netsim().post("/control/messages", &bulk).await.expect(201);
    assert_eq!((r["ids"][0].is_string(), r["ids"][1].is_null(), r["refused"].as_u64()), (true, true, Some(1)));
    // 2,400 archived messages from 50 contacts before the recent one: five chunks.
    c.netsim().post(&format!("/control/phones/{A}/archive"), &json!({ "messages": 2_400 })).await.expect(200);
    let bad = c.netsim().post(&format!("/control/phones/{A}/archive"), &json!({ "messages": 2_000_000 })).await;
    bad.expect(400);
    let (inst, _token) = c.paired_instance("history", A).await;
    let id = inst.id.to_string();
    let pool = c.pool().await;
    let count = || async {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM log_messages WHERE instance_id = $1 AND source = 'history'")
                .bind(&id)
                .fetch_one(&pool)
                .await
                .unwrap();
        n
    };
    wait_for(Duration::from_secs(60), || async {
        (count().await == 2_401 && queue(&c, A).await["history_chunk"].is_null()).then_some(())
    })
    .await
    .expect("the history landed and the sync ended");
    let chats: i64 = sqlx::query_scalar("SELECT count(*) FROM chats WHERE instance_id = $1")
        .bind(&id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(chats, 51, "the archive's 50 contacts and the recent sender");
    let unread: i64 = sqlx::query_scalar("SELECT COALESCE(sum(unread_count), 0) FROM chats WHERE instance_id = $1")
        .bind(&id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(unread, 0, "history does not count as unread");
}
