//! Accounts: a provider's customers as tenants. Each account token reaches only its own
//! account and instances; quotas refuse at the limit and leave nothing half-made;
//! suspending holds sends (nothing lost) and refuses the token's writes; usage sums to
//! its instances' figures and keeps a deleted instance's; the export pages as JSON and
//! CSV.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use harness::webhooks::WebhookSink;
use harness::{Client, TestApi};
use serde_json::{json, Value};

use crate::bin;

/// Creates an account; returns its id and token.
pub(crate) async fn account(api: &TestApi, name: &str, quotas: Value) -> (String, Client) {
    let body = json!({ "name": name, "metadata": { "customer": name }, "quotas": quotas });
    let a = api.admin().post("/v1/accounts", &body).await.expect(201);
    assert!(a["token"].as_str().unwrap().starts_with("pl_acct_"));
    let id = a["account"]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("acct_"));
    (id, api.client(Some(a["token"].as_str().unwrap().to_string())))
}

/// Creates an instance with `by`'s token; returns its id.
pub(crate) async fn instance(by: &Client, name: &str) -> String {
    let body = by.post("/v1/instances", &json!({ "name": name })).await.expect(201);
    assert!(body["token"].as_str().unwrap().starts_with("pl_inst_"));
    body["instance"]["id"].as_str().unwrap().to_string()
}

fn ids(list: &Value) -> Vec<String> {
    list["instances"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn each_account_token_reaches_only_its_own_account_and_instances() {
    let api = TestApi::start().await;
    let (a, ta) = account(&api, "alpha", json!({})).await;
    let (b, tb) = account(&api, "beta", json!({})).await;
    let a1 = instance(&ta, "alpha-1").await;
    let a2 = instance(&ta, "alpha-2").await;
    let b1 = instance(&tb, "beta-1").await;
    let (loose, _) = api.create_instance("no-account").await;
    let loose = loose.id.to_string();

    let me = ta.get("/v1/me").await.expect(200);
    assert_eq!((me["kind"].as_str(), me["account_id"].as_str()), (Some("account"), Some(a.as_str())));
    assert_eq!(me["account_state"], "active");
    assert_eq!(ids(&ta.get("/v1/instances").await.expect(200)), vec![a1.clone(), a2.clone()]);
    assert_eq!(ids(&tb.get("/v1/instances").await.expect(200)), vec![b1.clone()]);
    // Asking for another account's list still lists one's own.
    assert_eq!(ids(&ta.get(&format!("/v1/instances?account_id={b}")).await.expect(200)).len(), 2);
    // The admin filters by account, and sees which account holds each instance.
    let listed = api.admin().get(&format!("/v1/instances?account_id={b}")).await.expect(200);
    assert_eq!(ids(&listed), vec![b1.clone()]);
    assert_eq!(listed["instances"][0]["account_id"], b.as_str());

    // Its own instances as their owner; another account's, or none's, 403.
    ta.get(&format!("/v1/instances/{a1}")).await.expect(200);
    ta.patch(&format!("/v1/instances/{a2}"), &json!({ "tags": ["vip"] })).await.expect(200);
    for other in [&b1, &loose] {
        ta.get(&format!("/v1/instances/{other}")).await.expect_error(403, "forbidden");
        ta.post(&format!("/v1/instances/{other}/messages"), &json!({ "to": "5511999990001", "text": "x" }))
            .await
            .expect_error(403, "forbidden");
    }
    ta.get("/v1/instances/inst_00000000000000000000000000000000").await.expect_error(403, "forbidden");
    // The account itself: read by its token, not another's; edited by the admin only.
    let got = ta.get(&format!("/v1/accounts/{a}")).await.expect(200);
    assert_eq!((got["instances"].as_i64(), got["metadata"]["customer"].as_str()), (Some(2), Some("alpha")));
    ta.get(&format!("/v1/accounts/{b}")).await.expect_error(403, "forbidden");
    ta.patch(&format!("/v1/accounts/{a}"), &json!({ "quotas": { "instances": 100 } }))
        .await
        .expect_error(403, "forbidden");
    ta.get("/v1/accounts").await.expect_error(403, "forbidden");
    // What only the admin sets stays the admin's.
    ta.patch(&format!("/v1/instances/{a1}"), &json!({ "unsafe_pacing": true })).await.expect_error(403, "forbidden");
    ta.post("/v1/instances", &json!({ "name": "alpha-proxy", "proxy_url": "http://p:1" }))
        .await
        .expect_error(403, "forbidden");
    ta.get("/v1/cluster").await.expect_error(403, "forbidden");
    ta.post("/v1/instances/bulk", &json!({ "action": "restart", "ids": [a1] })).await.expect_error(403, "forbidden");
    // An instance token stays what it was: its own instance only.
    let inst_token = api.admin().post("/v1/instances", &json!({ "name": "plain" })).await.expect(201);
    let plain = api.client(Some(inst_token["token"].as_str().unwrap().to_string()));
    plain.get("/v1/instances").await.expect_error(403, "forbidden");
    plain.get(&format!("/v1/accounts/{a}")).await.expect_error(403, "forbidden");

    // A move must name where to: an empty body moves nothing.
    api.admin().put(&format!("/v1/instances/{b1}/account"), &json!({})).await.expect_error(400, "validation_failed");
    tb.get(&format!("/v1/instances/{b1}")).await.expect(200);
    // The admin moves an instance between accounts; access follows at once.
    api.admin().put(&format!("/v1/instances/{b1}/account"), &json!({ "account_id": a })).await.expect(204);
    ta.get(&format!("/v1/instances/{b1}")).await.expect(200);
    tb.get(&format!("/v1/instances/{b1}")).await.expect_error(403, "forbidden");
    api.admin().put(&format!("/v1/instances/{b1}/account"), &json!({ "account_id": null })).await.expect(204);
    ta.get(&format!("/v1/instances/{b1}")).await.expect_error(403, "forbidden");
    api.admin()
        .put(&format!("/v1/instances/{b1}/account"), &json!({ "account_id": "acct_00000000000000000000000000000000" }))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn quotas_refuse_at_the_limit_and_leave_nothing_half_made() {
    let mut config = harness::test_config();
    config.allow_private_targets = true;
    let api = TestApi::start_with(config).await;
    let sink = WebhookSink::start().await;
    let (a, ta) = account(&api, "small", json!({ "instances": 2, "webhooks": 1 })).await;
    let first = instance(&ta, "small-1").await;
    // Concurrent creations: exactly the quota's worth succeeds.
    let tries: Vec<_> = (0..6)
        .map(|i| {
            let ta = ta.clone();
            tokio::spawn(async move { ta.post("/v1/instances", &json!({ "name": format!("small-race-{i}") })).await })
        })
        .collect();
    let mut made = 0;
    for t in tries {
        let r = t.await.unwrap();
        match r.status {
            201 => made += 1,
            _ => {
                let msg = r.expect_error(403, "quota_exceeded");
                assert!(msg.contains("2 instances"), "{msg}");
            }
        }
    }
    assert_eq!(made, 1, "one more fits under the quota of 2");
    let listed = ta.get("/v1/instances?count=true").await.expect(200);
    assert_eq!(listed["total"], 2);
    let names = api.admin().get("/v1/instances?name=small-race&count=true").await.expect(200);
    assert_eq!(names["total"], 1, "nothing past the quota was created");
    // The admin cannot move a third one in either.
    let (extra, _) = api.create_instance("outside").await;
    api.admin()
        .put(&format!("/v1/instances/{}/account", extra.id), &json!({ "account_id": a }))
        .await
        .expect_error(403, "quota_exceeded");
    // Raising the quota lets it in.
    let raised = api.admin().patch(&format!("/v1/accounts/{a}"), &json!({ "quotas": { "instances": 3 } })).await;
    assert_eq!(raised.expect(200)["quotas"]["instances"], 3);
    api.admin().put(&format!("/v1/instances/{}/account", extra.id), &json!({ "account_id": a })).await.expect(204);

    // Webhooks: one across the account's instances.
    let hook = |n: u16| json!({ "url": format!("{}/{n}", sink.url()) });
    ta.post(&format!("/v1/instances/{first}/webhooks"), &hook(1)).await.expect(201);
    let other = ids(&ta.get("/v1/instances").await.expect(200)).into_iter().find(|i| i != &first).unwrap();
    ta.post(&format!("/v1/instances/{other}/webhooks"), &hook(2)).await.expect_error(403, "quota_exceeded");
    let hooks: i64 = api.admin().get(&format!("/v1/instances/{other}/webhooks")).await.expect(200)["webhooks"]
        .as_array()
        .unwrap()
        .len() as i64;
    assert_eq!(hooks, 0);

    // Quotas out of range are refused and change nothing.
    let bad = api.admin().patch(&format!("/v1/accounts/{a}"), &json!({ "quotas": { "instances": -1 } })).await;
    bad.expect_error(400, "validation_failed");
    let bad = api.admin().patch(&format!("/v1/accounts/{a}"), &json!({ "quotas": { "lookups_per_day": 1e12 } })).await;
    bad.expect_error(400, "validation_failed");
    assert_eq!(api.admin().get(&format!("/v1/accounts/{a}")).await.expect(200)["quotas"]["instances"], 3);
    // `null` lifts one.
    let lifted = api.admin().patch(&format!("/v1/accounts/{a}"), &json!({ "quotas": { "webhooks": null } })).await;
    assert_eq!(lifted.expect(200)["quotas"]["webhooks"], Value::Null);
    ta.post(&format!("/v1/instances/{other}/webhooks"), &hook(2)).await.expect(201);
}

#[tokio::test]
async fn accounts_are_listed_edited_rotated_and_deleted_as_the_admin_says() {
    let api = TestApi::start().await;
    let admin = api.admin();
    let (a, ta) = account(&api, "Acme Ltd", json!({})).await;
    let (b, _) = account(&api, "Beta Co", json!({})).await;
    let page = admin.get("/v1/accounts?limit=1").await.expect(200);
    assert_eq!(page["accounts"][0]["id"], a.as_str());
    let cursor = page["next_cursor"].as_str().unwrap();
    let next = admin.get(&format!("/v1/accounts?limit=1&cursor={cursor}")).await.expect(200);
    assert_eq!(next["accounts"][0]["id"], b.as_str());
    assert_eq!(admin.get("/v1/accounts?name=acme").await.expect(200)["accounts"].as_array().unwrap().len(), 1);
    admin.post("/v1/accounts", &json!({ "name": "  " })).await.expect_error(400, "validation_failed");
    admin.post("/v1/accounts", &json!({ "name": "x", "metadata": [1] })).await.expect_error(400, "validation_failed");
    for bad in [
        json!({ "blob": "x".repeat(501) }),
        json!({ "nested": { "a": "b" } }),
        json!({ "bad key": "x" }),
        json!((0..51).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()),
    ] {
        admin
            .post("/v1/accounts", &json!({ "name": "x", "metadata": bad }))
            .await
            .expect_error(400, "validation_failed");
    }
    let quotas_as_array = json!({ "name": "x", "quotas": [null, 5] });
    admin.post("/v1/accounts", &quotas_as_array).await.expect_error(400, "validation_failed");
    admin.post("/v1/accounts", &json!({ "name": "tab\there" })).await.expect_error(400, "validation_failed");

    // Rotation: a second token, the first revoked; the revoked one stops at once.
    let made = ta.post(&format!("/v1/accounts/{a}/tokens"), &json!({ "name": "rotated" })).await.expect(201);
    let second = api.client(Some(made["token"].as_str().unwrap().to_string()));
    let listed = second.get(&format!("/v1/accounts/{a}/tokens")).await.expect(200);
    let tokens = listed["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 2);
    assert!(!listed.to_string().contains("pl_acct_"), "tokens are never listed");
    let first_id = tokens[0]["id"].as_str().unwrap();
    second.delete(&format!("/v1/accounts/{a}/tokens/{first_id}")).await.expect(204);
    ta.get("/v1/me").await.expect_error(401, "unauthorized");
    second.get("/v1/me").await.expect(200);

    // Deletion: refused while it holds instances, then with ?cascade=true.
    let inst = instance(&second, "acme-1").await;
    admin.delete(&format!("/v1/accounts/{a}")).await.expect_error(409, "conflict");
    second.get(&format!("/v1/instances/{inst}")).await.expect(200);
    admin.delete(&format!("/v1/accounts/{a}?cascade=true")).await.expect(204);
    admin.get(&format!("/v1/instances/{inst}")).await.expect_error(404, "instance_not_found");
    admin.get(&format!("/v1/accounts/{a}")).await.expect_error(404, "not_found");
    second.get("/v1/me").await.expect_error(401, "unauthorized");
    admin.delete(&format!("/v1/accounts/{b}")).await.expect(204);
}

/// A day's counts of `u`'s totals, by name.
fn total(u: &Value, k: &str) -> i64 {
    u["totals"][k].as_i64().unwrap_or_else(|| panic!("{k} in {u}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspension_holds_sends_and_usage_sums_to_the_instances() {
    const A: &str = "5511999996101";
    const B: &str = "5511999996102";
    const TO: &str = "5511999996109";
    let c = Cluster::start(bin(), 1, |cfg| {
        cfg.usage.rollup_interval = Duration::from_millis(100);
    })
    .await;
    let dispatcher = tokio::spawn(dispatcher::run(c.config.clone(), c.api.shutdown.clone()));
    for n in [A, B, TO] {
        c.phone(n, false).await;
    }
    let api = &c.api;
    let (acct, token) = account(api, "sends", json!({ "messages_per_day": 7 })).await;
    let mut insts = Vec::new();
    for (name, number) in [("sends-a", A), ("sends-b", B)] {
        let (inst, _) = c.paired_instance(name, number).await;
        let id = inst.id.to_string();
        c.unpaced(&id).await;
        api.admin().put(&format!("/v1/instances/{id}/account"), &json!({ "account_id": acct })).await.expect(204);
        insts.push(id);
    }
    let send = |i: usize, text: &str| {
        let path = format!("/v1/instances/{}/messages", insts[i]);
        let body = json!({ "to": TO, "type": "text", "text": text });
        let token = token.clone();
        async move { token.post(&path, &body).await }
    };
    let db = c.pool().await;
    let sent = |id: String| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM messages WHERE instance_id = $1 AND status = 'sent'")
                .bind(id)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    send(0, "before").await.expect(202);
    assert!(wait_for(Duration::from_secs(20), || async { (sent(insts[0].clone()).await == 1).then_some(()) })
        .await
        .is_some());

    // Suspended: the token reads but writes nothing; queued messages wait.
    api.admin().patch(&format!("/v1/accounts/{acct}"), &json!({ "state": "suspended" })).await.expect(200);
    assert_eq!(token.get("/v1/me").await.expect(200)["account_state"], "suspended");
    token.get(&format!("/v1/instances/{}", insts[0])).await.expect(200);
    send(0, "refused").await.expect_error(403, "forbidden");
    token.post("/v1/instances", &json!({ "name": "sends-c" })).await.expect_error(403, "forbidden");
    // The admin may still queue for them; nothing goes while suspended.
    let held = api.admin();
    for (i, id) in insts.iter().enumerate() {
        let path = format!("/v1/instances/{id}/messages");
        held.post(&path, &json!({ "to": TO, "type": "text", "text": format!("held {i}") })).await.expect(202);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(sent(insts[0].clone()).await, 1, "nothing goes while the account is suspended");
    assert_eq!(sent(insts[1].clone()).await, 0);

    // Resumed: everything queued goes, once.
    api.admin().patch(&format!("/v1/accounts/{acct}"), &json!({ "state": "active" })).await.expect(200);
    let both = wait_for(Duration::from_secs(20), || async {
        (sent(insts[0].clone()).await == 2 && sent(insts[1].clone()).await == 1).then_some(())
    })
    .await;
    assert!(both.is_some(), "the held messages go after the resume");

    // The daily quota: 7 messages a day across both instances (3 so far).
    for n in 0..4 {
        send(n % 2, &format!("quota {n}")).await.expect(202);
    }
    let over = send(1, "one too many").await;
    assert!(over.headers.get("retry-after").is_some(), "{:?}", over.headers);
    over.expect_error(429, "quota_exceeded");

    // Usage: the account's totals are the sum of its instances', exactly.
    let admin = api.admin();
    let settled = wait_for(Duration::from_secs(30), || async {
        let a = admin.get(&format!("/v1/accounts/{acct}/usage")).await.expect(200);
        let mut per = Vec::new();
        for i in &insts {
            per.push(admin.get(&format!("/v1/instances/{i}/usage")).await.expect(200));
        }
        let sum = |k: &str| per.iter().map(|u| total(u, k)).sum::<i64>();
        // (The admin's own reads here are still being counted: left out.)
        let keys = ["messages_queued", "messages_sent", "messages_failed", "requests_account", "lookups_new"];
        // Seven requests on its instances' routes with the account token: the sends
        // (one refused for the quota, after its instance was named) and one read.
        let done = total(&a, "messages_sent") == 7 && total(&a, "requests_account") == 7;
        (done && keys.iter().all(|k| total(&a, k) == sum(k))).then_some(a)
    })
    .await;
    let a = settled.expect("the account's usage sums to its instances'");
    assert_eq!(total(&a, "messages_queued"), 7);

    // The export: a line per instance and day, as JSON and CSV, paged.
    let today = chrono::Utc::now().date_naive();
    let q = format!("from={today}&to={today}");
    let page = token.get(&format!("/v1/accounts/{acct}/usage/export?{q}&limit=1")).await.expect(200);
    assert_eq!(page["lines"].as_array().unwrap().len(), 1);
    let cursor = page["next_cursor"].as_str().unwrap();
    let rest = token.get(&format!("/v1/accounts/{acct}/usage/export?{q}&limit=1&cursor={cursor}")).await.expect(200);
    assert!(rest["next_cursor"].is_null());
    let queued: i64 = [&page, &rest].iter().map(|p| p["lines"][0]["messages_queued"].as_i64().unwrap()).sum();
    assert_eq!(queued, 7);
    let csv = token.get(&format!("/v1/accounts/{acct}/usage/export?{q}&format=csv&limit=1")).await;
    assert_eq!(csv.status, 200, "{}", csv.text);
    assert!(csv.headers["content-type"].to_str().unwrap().starts_with("text/csv"));
    assert!(csv.headers["link"].to_str().unwrap().contains("rel=\"next\""));
    assert!(csv.text.starts_with("date,instance_id,instance_name,messages_queued,"), "{}", csv.text);
    assert_eq!(csv.text.lines().count(), 2);

    // A deleted instance's usage stays with the account.
    let before = total(&admin.get(&format!("/v1/accounts/{acct}/usage")).await.expect(200), "messages_sent");
    token.delete(&format!("/v1/instances/{}", insts[1])).await.expect(204);
    let after = admin.get(&format!("/v1/accounts/{acct}/usage")).await.expect(200);
    assert_eq!(total(&after, "messages_sent"), before, "a deleted instance's usage is kept");
    let lines = token.get(&format!("/v1/accounts/{acct}/usage/export?{q}")).await.expect(200);
    assert!(lines["lines"].as_array().unwrap().iter().any(|l| l["instance_id"].is_null()), "{lines}");
    dispatcher.abort();
}

#[tokio::test]
async fn media_and_lookup_quotas_count_across_the_accounts_instances() {
    use base64::Engine;
    let api = TestApi::start().await;
    let (_, token) = account(&api, "media", json!({ "media_bytes": 1500, "lookups_per_day": 2 })).await;
    let (one, two) = (instance(&token, "media-1").await, instance(&token, "media-2").await);
    let image = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 1000]);
    let send = |id: &str| {
        let body =
            json!({ "to": "5511999990001", "type": "image", "media": { "data": image, "mime_type": "image/png" } });
        let (token, path) = (token.clone(), format!("/v1/instances/{id}/messages"));
        async move { token.post(&path, &body).await }
    };
    send(&one).await.expect(202);
    // The second instance's media counts against the same account quota.
    send(&two).await.expect_error(413, "quota_exceeded");
    let db = shared::db::connect(&api.config).await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM media").fetch_one(&db).await.unwrap();
    assert_eq!(stored, 1, "the refused media was not kept");

    // Lookups: more numbers than the day has left is refused before any is looked up.
    let check = |numbers: Value| {
        let (token, path) = (token.clone(), format!("/v1/instances/{one}/check-numbers"));
        async move { token.post(&path, &json!({ "numbers": numbers })).await }
    };
    let over = check(json!(["5511999990001", "5511999990002", "5511999990003"])).await;
    let wait: u64 = over.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{wait}");
    over.expect_error(429, "quota_exceeded");
    // A lookup that fails (no session runs here) gives its share back: twice, the same.
    for _ in 0..2 {
        let r = check(json!(["5511999990001", "5511999990002"])).await;
        assert_eq!(r.body["error"]["code"], "instance_not_connected", "{}", r.text);
    }
}
