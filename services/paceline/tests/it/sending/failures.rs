//! The failure codes a send ends with, `wait=true`'s answers, and expiry.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::json;

use super::{inbox, A, B};
use crate::bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_wait_and_expiry() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("fails", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    // No account: 400 invalid_number with wait, the same reason on GET without.
    let path = format!("/v1/instances/{id}/messages");
    own.post(&format!("{path}?wait=true"), &json!({ "to": "5511999990404", "type": "text", "text": "x" }))
        .await
        .expect_error(400, "invalid_number");
    let m = own.post(&path, &json!({ "to": "5511999990405", "type": "text", "text": "y" })).await.expect(202);
    let failed = wait_for(Duration::from_secs(10), || async {
        let r = own.get(&format!("{path}/{}", m["id"].as_str().unwrap())).await.body;
        (r["status"] == "failed").then_some(r)
    })
    .await
    .unwrap();
    assert!(failed["error"].as_str().unwrap().starts_with("invalid_number: "), "{failed}");
    assert!(!failed["error"].as_str().unwrap().contains("5511999990405"));

    // Transient network errors are retried: with every send failing, the message ends
    // failed with the last reason after its attempts.
    c.netsim().post("/control/faults", &json!({ "error_rate": 1.0 })).await.expect(200);
    let r =
        own.post(&format!("{path}?wait=true&timeout=60s"), &json!({ "to": B, "type": "text", "text": "doomed" })).await;
    r.expect_error(502, "worker_error");
    c.netsim().post("/control/faults", &json!({ "error_rate": 0.0 })).await.expect(200);

    // Expiry: a message whose expiry passes while waiting answers 410.
    let (idle, idle_token) = c.api.create_instance("idle").await;
    let idle_id = idle.id.to_string();
    let idle_client = c.api.client(Some(idle_token));
    let db = c.pool().await;
    let waiter = tokio::spawn({
        let idle_client = idle_client.clone();
        let p = format!("/v1/instances/{idle_id}/messages?wait=true&timeout=30s");
        async move { idle_client.post(&p, &json!({ "to": B, "type": "text", "text": "late", "expires_after": "1m" })).await }
    });
    // Time passes (the row's expiry is moved instead of waiting a minute).
    wait_for(Duration::from_secs(5), || async {
        let r = sqlx::query("UPDATE messages SET expires_at = now() - interval '1 second' WHERE instance_id = $1")
            .bind(&idle_id)
            .execute(&db)
            .await
            .unwrap();
        (r.rows_affected() == 1).then_some(())
    })
    .await
    .unwrap();
    waiter.await.unwrap().expect_error(410, "message_expired");
    // Nothing of it reached the network.
    assert!(inbox(&c, B).await["messages"].as_array().unwrap().iter().all(|m| m["text"] != "late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remaining_failure_codes() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.netsim.request_timeout = Duration::from_millis(400)).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("codes", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let path = format!("/v1/instances/{id}/messages?wait=true&timeout=60s");

    // forbidden: the recipient blocked us; permanent, no retry.
    c.netsim().post(&format!("/control/phones/{B}/block"), &json!({ "number": A })).await.expect(200);
    own.post(&path, &json!({ "to": B, "type": "text", "text": "blocked" })).await.expect_error(403, "forbidden");
    c.netsim().post(&format!("/control/phones/{B}/unblock"), &json!({ "number": A })).await.expect(200);

    // worker_timeout: the network never answers in time; after its attempts the message
    // is failed, and the error table says sending again later may succeed.
    c.netsim().post("/control/faults", &json!({ "latency_ms": 1000 })).await.expect(200);
    let r = own.post(&path, &json!({ "to": B, "type": "text", "text": "slow" })).await;
    assert_eq!(r.body["error"]["retryable"], true, "{}", r.text);
    r.expect_error(504, "worker_timeout");
    c.netsim().post("/control/faults", &json!({ "latency_ms": 0 })).await.expect(200);

    // instance_not_connected: queued messages of an instance that logged out fail, not
    // linger; not retryable until it is paired again.
    own.post(&path, &json!({ "to": B, "type": "text", "text": "still fine" })).await.expect(200);
    c.netsim().post(&format!("/control/phones/{A}/logout"), &json!({})).await.expect(200);
    c.wait_state(&id, "logged_out", Duration::from_secs(10)).await;
    let r = own.post(&path, &json!({ "to": B, "type": "text", "text": "after logout" })).await;
    assert_eq!(r.body["error"]["retryable"], false, "{}", r.text);
    let msg = r.expect_error(409, "instance_not_connected");
    assert!(msg.contains("logged out"), "{msg}");
}
