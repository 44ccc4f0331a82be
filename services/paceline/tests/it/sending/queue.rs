//! The queue's timing: pacing measured at the recipient, the network's rate limit
//! waited out, a draining pod's waiting callers, and the sweep for a lost wake-up.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use super::{inbox, A, B};
use crate::bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_intervals_are_honoured_at_the_recipient() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("paced", A).await;
    let id = inst.id.to_string();
    // The floor: 1 s apart (plus up to 25% jitter), in order.
    c.api
        .admin()
        .patch(&format!("/v1/instances/{id}"), &json!({ "min_interval_ms": 1000, "max_per_minute": 60 }))
        .await
        .expect(200);
    let own = c.api.client(Some(token));
    for i in 0..5 {
        own.post(&format!("/v1/instances/{id}/messages"), &json!({ "to": B, "type": "text", "text": format!("p{i}") }))
            .await
            .expect(202);
    }
    let msgs = wait_for(Duration::from_secs(30), || async {
        let got = inbox(&c, B).await;
        let m = got["messages"].as_array().unwrap().clone();
        (m.len() == 5).then_some(m)
    })
    .await
    .expect("all five arrive");
    let times: Vec<chrono::DateTime<chrono::Utc>> =
        msgs.iter().map(|m| m["received_at"].as_str().unwrap().parse().unwrap()).collect();
    let texts: Vec<&str> = msgs.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["p0", "p1", "p2", "p3", "p4"], "queue order kept");
    let gaps: Vec<i64> = times.windows(2).map(|w| (w[1] - w[0]).num_milliseconds()).collect();
    println!("gaps between sends at the recipient (ms): {gaps:?}");
    assert!(gaps.iter().all(|g| *g >= 1000), "{gaps:?}");
}

/// A `wait=true` call on a pod that starts draining answers at once with 202 and the
/// queued message, instead of holding the pod's shutdown for its whole timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_pod_ends_wait_calls_with_202() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("drain-wait", A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    // One send a minute: the second waits for the first's interval.
    own.patch(&format!("/v1/instances/{id}"), &json!({ "min_interval_ms": 60_000, "max_per_minute": 1 }))
        .await
        .expect(200);
    let path = format!("/v1/instances/{id}/messages?wait=true&timeout=2m");
    own.post(&path, &json!({ "to": B, "type": "text", "text": "first" })).await.expect(200);
    let waiting = tokio::spawn({
        let own = own.clone();
        async move { own.post(&path, &json!({ "to": B, "type": "text", "text": "second" })).await }
    });
    // The second is queued behind the pacer; its caller waits.
    let queued = wait_for(Duration::from_secs(10), || async {
        let v: Value = c.api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
        (v["queue_depth"] == 1).then_some(())
    })
    .await;
    assert!(queued.is_some(), "the second message waits in the queue");
    assert!(!waiting.is_finished());
    c.api.shutdown.cancel();
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("answered at once").unwrap();
    assert_eq!(answer.status, 202, "{}", answer.text);
    assert_eq!(answer.body["status"], "queued");
}

/// A message whose NATS wake-up never came (written straight to Postgres here) is found
/// by the worker's sweep and sent, though the idle queue itself looks only every 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_without_its_wake_up_is_found_by_the_sweep() {
    use shared::db::messages::{enqueue, NewMessage, Queued};
    use shared::message::{Content, Outbound};
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("sweep", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    // The queue has looked and found nothing: it is idle.
    own.post(&format!("/v1/instances/{id}/messages?wait=true"), &json!({ "to": B, "type": "text", "text": "first" }))
        .await
        .expect(200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pool = c.pool().await;
    let msg = shared::ids::MessageId::new();
    let queued = enqueue(
        &pool,
        &[NewMessage {
            id: msg.clone(),
            instance_id: shared::ids::InstanceId::parse(&id).unwrap(),
            to_jid: shared::jid::Jid::user(B),
            message: Outbound {
                content: Content::Text { text: "no wake-up".into(), link_preview: false },
                reply_to: None,
                mentions: vec![],
            },
            client_message_id: None,
            content_hash: "sweep-test".into(),
            wa_message_id: format!("3EB0{}", uuid::Uuid::new_v4().simple()).to_uppercase()[..22].to_string(),
            expires_at: chrono::Utc::now() + chrono::Duration::hours(1),
        }],
    )
    .await
    .unwrap();
    assert!(matches!(queued[0], Queued::New(_)));
    let sent = wait_for(Duration::from_secs(10), || async {
        let v: Value = own.get(&format!("/v1/instances/{id}/messages/{msg}")).await.expect(200);
        (v["status"] == "sent").then_some(())
    })
    .await;
    assert!(sent.is_some(), "the sweep found it well before the 30 s idle poll");
}

/// The queue never answers 429: a send the network refuses for its rate (netsim's cap on
/// new contacts) waits and goes once the network takes it again, and `wait=true`
/// answers 202 meanwhile. The refusal still counts as the `rate_limited` risk signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_rate_limit_is_waited_out_never_answered_429() {
    const C: &str = "5511999990003";
    let c = Cluster::start(bin(), 1, |_| {}).await;
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("limited", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    c.netsim()
        .post("/control/faults", &json!({ "first_contact_cap": 1, "first_contact_window_secs": 2 }))
        .await
        .expect(200);
    let path = format!("/v1/instances/{id}/messages?wait=true&timeout=2s");
    own.post(&path, &json!({ "to": B, "type": "text", "text": "first" })).await.expect(200);
    let r = own.post(&path, &json!({ "to": C, "type": "text", "text": "second" })).await;
    assert_ne!(r.status, 429, "{}", r.text);
    let m = r.expect(202);
    assert_eq!(m["status"], "in_flight", "still trying: {m}");
    let sent = wait_for(Duration::from_secs(30), || async {
        let m = own.get(&format!("/v1/instances/{id}/messages/{}", m["id"].as_str().unwrap())).await.expect(200);
        (m["status"] == "sent").then_some(m)
    })
    .await
    .expect("sent once the network takes it");
    assert!(sent.get("error").is_none(), "{sent}");
    let inbox = c.netsim().get(&format!("/control/phones/{C}/inbox")).await.expect(200);
    assert_eq!(inbox["messages"].as_array().unwrap().iter().filter(|m| m["text"] == "second").count(), 1);
    let pool = c.pool().await;
    let signals = shared::db::risk::signals(&pool, &shared::ids::InstanceId::parse(&id).unwrap()).await.unwrap();
    assert_eq!(signals.rate_limited_24h, 1, "the refusal is a risk signal");
}
