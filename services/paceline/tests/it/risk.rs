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
    let c = Cluster::start(bin(), 1, |cfg| cfg.risk.interval = Duration::from_millis(300)).await;
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
    let shop = inst.id.to_string();
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
    assert_eq!(r["signals"]["chats_answered_7d"], 12, "people who wrote first are conversations");
    assert_eq!(r["score"], 0.0, "{r}");
    assert_eq!(r["recommendation"], "Risk is low.");

    // A blast: one text to strangers, half of them without an account.
    let (inst, _) = c.paired_instance("blast", BLAST).await;
    let blast = inst.id.to_string();
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
        // (An evaluation during the burst may have seen part of it: wait for the whole.)
        (i["risk"]["level"] == "elevated" && i["risk"]["score"] == 42.5).then_some(i)
    })
    .await
    .expect("the record shows the elevated risk");
    assert_eq!(shown["risk"]["score"], 42.5);
    // Adaptive pacing: elevated halves the (unpaced) per-minute cap.
    assert_eq!(shown["effective_pacing"]["max_per_minute"], 50000, "{shown}");
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

const PACED: &str = "5511944440003";
const RECKLESS: &str = "5511944440004";

/// The record's `queue_paused`, once a policy pauses the queue (within 30 s).
async fn queue_paused(c: &Cluster, id: &str) -> Option<Value> {
    let admin = c.api.admin();
    wait_for(Duration::from_secs(30), || async {
        let i = admin.get(&format!("/v1/instances/{id}")).await.expect(200);
        i.get("queue_paused").filter(|p| !p.is_null()).cloned()
    })
    .await
}

/// Counts of the instance's messages by status.
async fn statuses(pool: &sqlx::PgPool, id: &str) -> std::collections::HashMap<String, i64> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM messages WHERE instance_id = $1 GROUP BY status")
            .bind(id)
            .fetch_all(pool)
            .await
            .unwrap();
    rows.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_risk_pauses_the_queue_before_the_networks_ban_and_resume_loses_nothing() {
    let c = Cluster::start(bin(), 1, |cfg| {
        cfg.risk.interval = Duration::from_millis(300);
        // Strict levels, and pacing left alone, so the test is short; first contacts are
        // not held at high (the next test holds them), so the pause alone is seen here.
        (cfg.risk.elevated, cfg.risk.high, cfg.risk.critical) = (10.0, 20.0, 40.0);
        cfg.risk.slowdown = 1.0;
        cfg.risk.hold_first_contacts = false;
    })
    .await;
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    // The network bans an account past 12 first contacts an hour.
    c.netsim().post("/control/faults", &json!({ "first_contact_ban": 12 })).await.expect(200);
    c.phone(PACED, false).await;
    c.phone(RECKLESS, false).await;
    let strangers: Vec<String> = (0..16).map(|i| format!("55119444430{i:02}")).collect();
    for n in &strangers {
        c.phone(n, false).await;
    }
    let pool = c.pool().await;
    let admin = c.api.admin();

    // Paced at 5 a second: half the sends to numbers without an account, half to strangers.
    let (inst, token) = c.paired_instance("paced", PACED).await;
    let id = inst.id.to_string();
    admin
        .patch(
            &format!("/v1/instances/{id}"),
            &json!({ "unsafe_pacing": true, "min_interval_ms": 200, "max_per_minute": 100000 }),
        )
        .await
        .expect(200);
    let own = c.api.client(Some(token));
    for i in 0..32 {
        let to = if i % 2 == 0 { strangers[i / 2].clone() } else { format!("55119444440{i:02}") };
        let m = json!({ "to": to, "type": "text", "text": format!("Deal #{i} for you") });
        own.post(&format!("/v1/instances/{id}/messages"), &m).await.expect(202);
    }
    let paused = queue_paused(&c, &id).await.expect("the queue pauses");
    assert_eq!(paused["reason"], "risk_critical");
    let event: Value =
        sqlx::query_scalar("SELECT payload->'data' FROM outbox WHERE instance_id = $1 AND type = 'instance.paused'")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(event["reason"], "risk_critical");
    assert_eq!(event["level"], "critical");
    // The worker reads the pause within 5 s; after that nothing more goes out.
    let since: chrono::DateTime<chrono::Utc> = paused["since"].as_str().unwrap().parse().unwrap();
    wait_for(Duration::from_secs(20), || async {
        (chrono::Utc::now() > since + chrono::Duration::seconds(8)).then_some(())
    })
    .await
    .unwrap();
    let late: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM messages WHERE instance_id = $1 AND COALESCE(sent_at, updated_at) > $2 AND status <> 'queued'",
    )
    .bind(&id)
    .bind(since + chrono::Duration::seconds(6))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(late, 0, "nothing goes out while paused");
    let before = statuses(&pool, &id).await;
    assert!(before.get("queued").copied().unwrap_or(0) > 0, "messages stay queued: {before:?}");
    let first_contacts = before.get("sent").copied().unwrap_or(0);
    assert!(first_contacts <= 12, "paused before the network's ban ({first_contacts} first contacts)");
    let banned: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE instance_id = $1 AND type = 'instance.state' AND payload->'data'->>'reason' LIKE 'temporarily%'",
    )
    .bind(&id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(banned, 0);

    // Resumed (after the window the network counts, here by lifting its limit): every
    // message finishes (sent, or failed for its missing account), none lost; no new
    // automatic pause for an hour.
    c.netsim().post("/control/faults", &json!({})).await.expect(200);
    own.post(&format!("/v1/instances/{id}/queue/resume"), &json!({})).await.expect(204);
    own.post(&format!("/v1/instances/{id}/queue/resume"), &json!({})).await.expect_error(409, "conflict");
    let done = wait_for(Duration::from_secs(60), || async {
        let s = statuses(&pool, &id).await;
        (s.get("sent").copied().unwrap_or(0) + s.get("failed").copied().unwrap_or(0) == 32).then_some(s)
    })
    .await
    .expect("everything finishes after resume");
    assert_eq!((done.get("sent").copied(), done.get("failed").copied()), (Some(16), Some(16)), "{done:?}");
    let inbox: usize = {
        let mut n = 0;
        for s in &strangers {
            let v = c.netsim().get(&format!("/control/phones/{s}/inbox")).await.expect(200);
            n += v["messages"].as_array().unwrap().iter().filter(|m| m["from"] == PACED).count();
        }
        n
    };
    assert_eq!(inbox, 16, "each stranger got its message once");
    let resumed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE instance_id = $1 AND type = 'instance.resumed'")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(resumed, 1);

    // An account that races past the network's limit gets a temporary ban; its queue is
    // paused for it, with the reason. (Few sends, so its risk alone stays below critical
    // and the reason is the ban's.)
    c.netsim().post("/control/faults", &json!({ "first_contact_ban": 3 })).await.expect(200);
    let (inst, _) = c.paired_instance("reckless", RECKLESS).await;
    let rid = inst.id.to_string();
    c.unpaced(&rid).await;
    for n in strangers.iter().take(5) {
        let m = json!({ "to": n, "type": "text", "text": "hello stranger" });
        admin.post(&format!("/v1/instances/{rid}/messages"), &m).await.expect(202);
    }
    let paused = queue_paused(&c, &rid).await.expect("the ban pauses the queue");
    assert_eq!(paused["reason"], "temporary_ban");
    let r = admin.get(&format!("/v1/instances/{rid}/risk")).await.expect(200);
    assert_eq!(r["signals"]["temp_bans_7d"], 1, "{r}");
    stop.cancel();
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}

const HOLDER: &str = "5511944440005";

/// The statuses of the instance's messages to each of `to`, in order.
async fn status_to(pool: &sqlx::PgPool, id: &str, to: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for n in to {
        let s: String = sqlx::query_scalar("SELECT status FROM messages WHERE instance_id = $1 AND to_jid LIKE $2")
            .bind(id)
            .bind(format!("{n}@%"))
            .fetch_one(pool)
            .await
            .unwrap();
        out.push(s);
    }
    out
}

/// Waits until the instance's message to `to` is sent.
async fn sent_to(pool: &sqlx::PgPool, id: &str, to: &str) {
    wait_for(Duration::from_secs(30), || async { (status_to(pool, id, &[to]).await[0] == "sent").then_some(()) })
        .await
        .unwrap_or_else(|| panic!("the message to {to} is sent"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_a_high_risk_first_contacts_wait_while_replies_go_under_the_instances_own_policy() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.risk.interval = Duration::from_millis(300)).await;
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    const FRIEND: &str = "5511944445001";
    let strangers = ["5511944445010", "5511944445011", "5511944445012"];
    for n in [HOLDER, FRIEND].iter().chain(&strangers) {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("holder", HOLDER).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let admin = c.api.admin();
    let path = format!("/v1/instances/{id}");

    // The instance's own policy: its token may make the deployment's stricter, not looser.
    own.patch(&path, &json!({ "risk_policy": { "auto_pause": false } })).await.expect_error(403, "forbidden");
    own.patch(&path, &json!({ "risk_policy": { "critical": 90 } })).await.expect_error(403, "forbidden");
    // (High below the deployment's elevated of 25: the levels would cross.)
    own.patch(&path, &json!({ "risk_policy": { "high": 10 } })).await.expect_error(400, "validation_failed");
    own.patch(&path, &json!({ "risk_policy": { "hihg": 10 } })).await.expect_error(400, "validation_failed");
    let i = own.patch(&path, &json!({ "risk_policy": { "elevated": 5, "high": 10 } })).await.expect(200);
    assert_eq!(i["risk_policy"], json!({ "elevated": 5.0, "high": 10.0 }), "{i}");
    let r = own.get(&format!("{path}/risk")).await.expect(200);
    assert_eq!(r["policy"]["thresholds"], json!({ "elevated": 5.0, "high": 10.0, "critical": 75.0 }), "{r}");
    assert_eq!(
        (r["policy"]["slowdown"].as_f64(), r["policy"]["hold_first_contacts"].as_bool()),
        (Some(2.0), Some(true))
    );
    assert_eq!(r["thresholds"], r["policy"]["thresholds"]);

    // A friend writes in; then ten sends to numbers without an account make the risk 30:
    // high by this instance's levels (elevated by the deployment's).
    c.netsim()
        .post(&format!("/control/phones/{FRIEND}/messages"), &json!({ "to": HOLDER, "text": "are you open?" }))
        .await
        .expect(201);
    let pool = c.pool().await;
    wait_for(Duration::from_secs(30), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM log_messages WHERE instance_id = $1 AND NOT from_me")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
        (n == 1).then_some(())
    })
    .await
    .expect("the friend's message arrives");
    for i in 0..10 {
        let m = json!({ "to": format!("55119444450{i:02}"), "type": "text", "text": format!("offer {i}") });
        own.post(&format!("{path}/messages"), &m).await.expect(202);
    }
    finished(&c, &id, 10).await;
    let record = wait_for(Duration::from_secs(20), || async {
        let i = admin.get(&path).await.expect(200);
        (i["risk"]["level"] == "high").then_some(i)
    })
    .await
    .expect("the instance's levels make the risk high");
    assert_eq!(record["risk"]["score"], 30.0, "{record}");
    assert_eq!(record["effective_pacing"]["first_contacts_held"], true, "{record}");
    assert!(record.get("queue_paused").is_none(), "high is not critical: {record}");

    // Three first contacts queued before a reply to the friend: the reply goes, they wait.
    for n in &strangers {
        own.post(&format!("{path}/messages"), &json!({ "to": n, "type": "text", "text": "hello, new here?" }))
            .await
            .expect(202);
    }
    own.post(&format!("{path}/messages"), &json!({ "to": FRIEND, "type": "text", "text": "yes, until 6" }))
        .await
        .expect(202);
    sent_to(&pool, &id, FRIEND).await;
    assert_eq!(status_to(&pool, &id, &strangers).await, ["queued", "queued", "queued"], "first contacts wait");

    // A stranger who writes in is no longer one: its message goes, the others still wait.
    c.netsim()
        .post(&format!("/control/phones/{}/messages", strangers[1]), &json!({ "to": HOLDER, "text": "who is this?" }))
        .await
        .expect(201);
    sent_to(&pool, &id, strangers[1]).await;
    assert_eq!(status_to(&pool, &id, &strangers).await, ["queued", "sent", "queued"]);

    // The admin turns the hold off for this instance: the rest goes, each once, in order.
    let i = admin
        .patch(&path, &json!({ "risk_policy": { "elevated": 5, "high": 10, "hold_first_contacts": false } }))
        .await
        .expect(200);
    assert_eq!(i["risk_policy"]["hold_first_contacts"], false);
    sent_to(&pool, &id, strangers[2]).await;
    assert_eq!(status_to(&pool, &id, &strangers).await, ["sent", "sent", "sent"]);
    let (a, b): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) = sqlx::query_as(
        "SELECT (SELECT sent_at FROM messages WHERE instance_id = $1 AND to_jid LIKE $2), \
                (SELECT sent_at FROM messages WHERE instance_id = $1 AND to_jid LIKE $3)",
    )
    .bind(&id)
    .bind(format!("{}@%", strangers[0]))
    .bind(format!("{}@%", strangers[2]))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(a <= b, "released in queue order");
    for n in &strangers {
        let v = c.netsim().get(&format!("/control/phones/{n}/inbox")).await.expect(200);
        let got = v["messages"].as_array().unwrap().iter().filter(|m| m["from"] == HOLDER).count();
        assert_eq!(got, 1, "{n} got its message once");
    }
    let shown = admin.get(&path).await.expect(200);
    assert_eq!(shown["effective_pacing"]["first_contacts_held"], false);
    // Back to the deployment's policies.
    let i = admin.patch(&path, &json!({ "risk_policy": null })).await.expect(200);
    assert!(i.get("risk_policy").is_none(), "{i}");
    stop.cancel();
}

/// The evaluator's storage: claims walk the paired instances in id order a page at a
/// time, and an evaluation that moves nothing writes nothing (no row version, no event);
/// one that moves the level writes the row and `instance.risk` with the level before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluations_walk_the_instances_by_id_and_write_only_what_moved() {
    use shared::db::risk::{claim_due, record};
    use shared::risk::Level;
    let c = harness::test_config();
    let api = harness::TestApi::start_with(c.clone()).await;
    let admin = api.admin();
    let mut ids = Vec::new();
    for name in ["walk-a", "walk-b", "walk-c"] {
        let created = admin.post("/v1/instances", &json!({ "name": name })).await.expect(201);
        ids.push(created["instance"]["id"].as_str().unwrap().to_string());
    }
    let db = shared::db::connect(&c).await.unwrap();
    // Two paired, one never paired (never evaluated).
    let mut paired = ids[..2].to_vec();
    paired.sort();
    sqlx::query("UPDATE instances SET paired_at = now() WHERE id = ANY($1)").bind(&paired).execute(&db).await.unwrap();
    let every = Duration::from_secs(60);
    let page = |after: String| {
        let db = db.clone();
        async move {
            claim_due(&db, every, &after, 1)
                .await
                .unwrap()
                .into_iter()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(page(String::new()).await, vec![paired[0].clone()]);
    assert_eq!(page(paired[0].clone()).await, vec![paired[1].clone()]);
    assert!(page(paired[1].clone()).await.is_empty(), "the pass is over");
    assert!(page(String::new()).await.is_empty(), "both were evaluated a moment ago");

    let id = shared::ids::InstanceId::parse(&paired[0]).unwrap();
    let version = || async {
        let (xmin, events): (String, i64) = sqlx::query_as(
            "SELECT i.xmin::text, (SELECT count(*) FROM outbox WHERE instance_id = i.id AND type = 'instance.risk') \
             FROM instances i WHERE id = $1",
        )
        .bind(&paired[0])
        .fetch_one(&db)
        .await
        .unwrap();
        (xmin, events)
    };
    // The first evaluation stores the score; `low` is where every instance starts.
    assert_eq!(record(&db, &id, 12.0, Level::Low, vec![], "carry on").await.unwrap(), None);
    let (first, events) = version().await;
    assert_eq!(events, 0);
    assert_eq!(record(&db, &id, 12.0, Level::Low, vec![], "carry on").await.unwrap(), None);
    assert_eq!(version().await, (first.clone(), 0), "the same evaluation again writes nothing");
    let moved = record(&db, &id, 61.0, Level::High, vec!["first_contacts".into()], "slow down").await.unwrap();
    assert_eq!(moved.as_deref(), Some("low"));
    let (after, events) = version().await;
    assert_ne!(after, first);
    assert_eq!(events, 1);
    let event: Value =
        sqlx::query_scalar("SELECT payload FROM outbox WHERE instance_id = $1 AND type = 'instance.risk'")
            .bind(&paired[0])
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(event["data"]["previous_level"], "low");
    assert_eq!(event["data"]["level"], "high");
    assert_eq!(event["data"]["reasons"], json!(["first_contacts"]));
    let stored: (f32, String) = sqlx::query_as("SELECT risk_score, risk_level FROM instances WHERE id = $1")
        .bind(&paired[0])
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(stored, (61.0, "high".to_string()));
    // A deleted instance records nothing.
    admin.delete(&format!("/v1/instances/{}", paired[1])).await.expect(204);
    let gone = shared::ids::InstanceId::parse(&paired[1]).unwrap();
    assert_eq!(record(&db, &gone, 90.0, Level::Critical, vec![], "stop").await.unwrap(), None);
}
