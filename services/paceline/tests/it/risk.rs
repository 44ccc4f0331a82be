//! Ban risk on netsim: a conversational account (contacts write first, it answers) stays
//! low; a burst of the same text to strangers and to numbers without an account raises the
//! score, with the signals and contributions that explain it.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use crate::bin;

const SHOP: &str = "5511944440001";
const BLAST: &str = "5511944440002";

async fn risk(c: &Cluster, id: &str) -> Value {
    c.api.admin().get(&format!("/v1/instances/{id}/risk")).await.expect(200)
}

fn points(r: &Value, signal: &str) -> f64 {
    r["contributions"].as_array().unwrap().iter().find(|c| c["signal"] == signal).unwrap()["points"].as_f64().unwrap()
}

/// Waits until `n` of the instance's messages are finished (sent or failed).
async fn finished(c: &Cluster, id: &str, n: i64) {
    let pool = c.pool().await;
    wait_for(Duration::from_secs(60), || async {
        let done: i64 =
            sqlx::query_scalar("SELECT count(*) FROM messages WHERE instance_id = $1 AND status IN ('sent', 'failed')")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
        (done >= n).then_some(())
    })
    .await
    .expect("the sends finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_stays_low_and_a_spam_burst_raises_the_risk() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.risk_interval = Duration::from_millis(300)).await;
    // A dispatcher evaluates every paired instance's risk each 300 ms.
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    c.phone(SHOP, false).await;
    c.phone(BLAST, false).await;
    let contacts: Vec<String> = (0..12).map(|i| format!("55119444410{i:02}")).collect();
    for n in &contacts {
        c.phone(n, false).await;
    }

    // A shop answering the people who wrote to it.
    let (inst, token) = c.paired_instance("shop", SHOP).await;
    let shop = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&shop).await;
    for n in &contacts {
        c.netsim()
            .post(&format!("/control/phones/{n}/messages"), &json!({ "to": SHOP, "text": "hello?" }))
            .await
            .expect(201);
    }
    let own = c.api.client(Some(token));
    let pool = c.pool().await;
    wait_for(Duration::from_secs(30), || async {
        let got: i64 = sqlx::query_scalar("SELECT count(*) FROM log_messages WHERE instance_id = $1 AND NOT from_me")
            .bind(&shop)
            .fetch_one(&pool)
            .await
            .unwrap();
        (got == contacts.len() as i64).then_some(())
    })
    .await
    .expect("the contacts' messages arrive");
    for (i, n) in contacts.iter().enumerate() {
        let m = json!({ "to": n, "type": "text", "text": format!("Hi! Order {i} ships today.") });
        own.post(&format!("/v1/instances/{shop}/messages"), &m).await.expect(202);
    }
    finished(&c, &shop, contacts.len() as i64).await;
    let r = risk(&c, &shop).await;
    assert_eq!(r["level"], "low", "{r}");
    assert_eq!(r["signals"]["sends_24h"], 12);
    assert_eq!(r["signals"]["first_contacts_24h"], 0);
    assert_eq!(r["recommendation"], "Risk is low.");

    // A blast: one text to strangers, half of them without an account.
    let (inst, _) = c.paired_instance("blast", BLAST).await;
    let blast = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&blast).await;
    let admin = c.api.admin();
    let targets: Vec<String> =
        contacts.iter().take(6).cloned().chain((0..6).map(|i| format!("55119444420{i:02}"))).collect();
    for n in &targets {
        let m = json!({ "to": n, "type": "text", "text": "BIG SALE! 90% off, click now" });
        admin.post(&format!("/v1/instances/{blast}/messages"), &m).await.expect(202);
    }
    finished(&c, &blast, targets.len() as i64).await;
    let r = risk(&c, &blast).await;
    assert_eq!(r["signals"]["sends_24h"], 12, "{r}");
    assert_eq!(r["signals"]["invalid_numbers_24h"], 6);
    assert_eq!(r["signals"]["first_contacts_24h"], 6);
    assert_eq!(r["signals"]["max_chats_per_content_24h"], 6);
    assert_eq!(points(&r, "invalid_number_ratio"), 30.0);
    assert_eq!(points(&r, "first_contact_ratio"), 12.5);
    assert_eq!(r["score"], 42.5);
    assert_eq!(r["level"], "elevated");
    assert_eq!(r["contributions"][0]["signal"], "invalid_number_ratio");
    let rec = r["recommendation"].as_str().unwrap();
    assert!(rec.starts_with("Risk is elevated") && rec.contains("check numbers"), "{rec}");
    // The account's age is known from its pairing.
    assert!(r["signals"]["age_days"].as_f64().unwrap() < 0.01);

    // The dispatchers' evaluation: on the instance record, and instance.risk when the level moves.
    let admin = c.api.admin();
    let shown = wait_for(Duration::from_secs(20), || async {
        let i = admin.get(&format!("/v1/instances/{blast}")).await.expect(200);
        (i["risk"]["level"] == "elevated").then_some(i)
    })
    .await
    .expect("the record shows the elevated risk");
    assert_eq!(shown["risk"]["score"], 42.5);
    let event: Value =
        sqlx::query_scalar("SELECT payload->'data' FROM outbox WHERE instance_id = $1 AND type = 'instance.risk'")
            .bind(&blast)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((event["level"].as_str(), event["previous_level"].as_str()), (Some("elevated"), Some("low")));
    assert_eq!(event["reasons"][0], "invalid_number_ratio");
    let quiet = admin.get(&format!("/v1/instances/{shop}")).await.expect(200);
    assert_eq!(quiet["risk"]["level"], "low", "{quiet}");
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE instance_id = $1 AND type = 'instance.risk'")
            .bind(&shop)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(events, 0, "a level that never moved is not announced");
    stop.cancel();
}
