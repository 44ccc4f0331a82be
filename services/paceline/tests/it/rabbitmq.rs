//! Event sinks into a real RabbitMQ (Debian's rabbitmq-server, started by the test
//! command; a node of the test's own where the test takes it down), read with the real
//! `pika` client: the settings and their refusals, events in order and persistent, a
//! broker stopped mid-stream losing none, and Evolution's `rabbitmq/set` with Evolution's
//! exchange, queues and payloads.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use harness::rabbitmq::{self, Node, Received};
use serde_json::{json, Value};

use crate::bin;

const SHOP: &str = "5511966610001";
const ANA: &str = "5511966610002";

async fn say(c: &Cluster, text: &str) {
    let body = json!({ "to": SHOP, "text": text });
    c.netsim().post(&format!("/control/phones/{ANA}/messages"), &body).await.expect(201);
}

/// Waits until `queue` exists and holds at least `n` messages.
async fn holds(url: &str, queue: &str, n: u64) {
    let len = || {
        let (u, q) = (url.to_string(), queue.to_string());
        async move { tokio::task::spawn_blocking(move || rabbitmq::queue_len(&u, &q)).await.unwrap() }
    };
    wait_for(Duration::from_secs(60), || async { len().await.filter(|have| *have >= n).map(drop) })
        .await
        .unwrap_or_else(|| panic!("{queue} holds {n} messages"));
}

async fn consume(url: &str, queue: &str, want: usize) -> Vec<Received> {
    let (url, queue) = (url.to_string(), queue.to_string());
    tokio::task::spawn_blocking(move || rabbitmq::consume(&url, &queue, want, 60)).await.unwrap()
}

/// The texts of the `message.received` events among `got`, in the order they came.
fn texts(got: &[Received]) -> Vec<String> {
    got.iter()
        .filter(|m| m.body["type"] == "message.received")
        .map(|m| m.body["data"]["content"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_rabbitmq_in_order_persistent_and_a_stopped_broker_loses_none() {
    let node = std::sync::Arc::new(tokio::task::spawn_blocking(Node::private).await.unwrap());
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let stop = shared::Shutdown::new();
    let dispatcher = tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    c.phone(SHOP, false).await;
    c.phone(ANA, false).await;
    let (inst, token) = c.paired_instance("shop", SHOP).await;
    let id = inst.id.to_string();
    let (own, admin) = (c.api.client(Some(token)), c.api.admin());
    let path = format!("/v1/instances/{id}/rabbitmq");

    // Settings and their refusals: nothing set, a bad address, a private one (only the
    // admin may allow it), an unknown event; the deployment has no broker of its own.
    own.get(&path).await.expect_error(404, "not_found");
    own.put(&path, &json!({ "url": "http://example.com" })).await.expect_error(400, "validation_failed");
    own.put(&path, &json!({})).await.expect_error(400, "validation_failed");
    own.put(&path, &json!({ "url": node.url })).await.expect_error(400, "validation_failed");
    let private = json!({ "url": node.url, "allow_private_targets": true });
    own.put(&path, &private).await.expect_error(403, "forbidden");
    let bad = json!({ "url": node.url, "allow_private_targets": true, "events": ["nope"] });
    admin.put(&path, &bad).await.expect_error(400, "validation_failed");
    own.get(&path).await.expect_error(404, "not_found");
    let body =
        json!({ "url": node.url, "allow_private_targets": true, "events": ["message.received", "message.sent"] });
    let set = admin.put(&path, &body).await;
    assert!(!set.text.contains("guest:guest"), "the credentials are never shown: {}", set.text);
    let set = set.expect(200);
    assert_eq!(set["queue"], format!("paceline.{id}"));
    assert_eq!(set["exchange"], "paceline.events");
    assert!(set["url"].as_str().unwrap().starts_with("amqp://127.0.0.1:"), "{set}");
    // The owner may change the rest and keeps the admin's allowance for that host.
    let kept = json!({ "allow_private_targets": true, "events": ["message.received", "message.sent"] });
    let set = own.put(&path, &kept).await.expect(200);
    assert_eq!(set["allow_private_targets"], true);

    // Received messages and an API send, in order, persistent, keyed by the event.
    for i in 1..=10 {
        say(&c, &format!("m{i}")).await;
    }
    own.post(&format!("/v1/instances/{id}/messages"), &json!({ "to": ANA, "type": "text", "text": "reply" }))
        .await
        .expect(202);
    let queue = format!("paceline.{id}");
    holds(&node.url, &queue, 11).await;
    let got = consume(&node.url, &queue, 11).await;
    assert_eq!(texts(&got), (1..=10).map(|i| format!("m{i}")).collect::<Vec<_>>(), "in order, each once");
    assert!(got.iter().any(|m| m.body["type"] == "message.sent"), "only the events asked for, and those");
    for m in &got {
        let kind = m.body["type"].as_str().unwrap();
        assert!(["message.received", "message.sent"].contains(&kind), "{kind}");
        assert_eq!(m.routing_key, format!("{id}.{kind}"));
        assert_eq!((m.exchange.as_str(), m.delivery_mode), ("paceline.events", Some(2)));
        assert_eq!(m.message_id.as_deref(), m.body["id"].as_str());
        assert_eq!(m.content_type.as_deref(), Some("application/json"));
        assert_eq!(m.headers["instance_id"], id.as_str());
    }

    // The broker stops mid-stream: the sink says so, and nothing is lost once it is back.
    let n = node.clone();
    tokio::task::spawn_blocking(move || n.stop()).await.unwrap();
    for i in 11..=20 {
        say(&c, &format!("m{i}")).await;
    }
    let failing = wait_for(Duration::from_secs(60), || async {
        let s = own.get(&path).await.expect(200);
        s["last_error"].is_string().then_some(s)
    })
    .await
    .expect("the sink tells it is failing");
    assert!(failing["failing_since"].is_string());
    assert!(!failing.to_string().contains("guest"), "{failing}");
    let n = node.clone();
    tokio::task::spawn_blocking(move || n.start()).await.unwrap();
    let want: Vec<String> = (11..=20).map(|i| format!("m{i}")).collect();
    let mut got = Vec::new();
    while !want.iter().all(|w| texts(&got).contains(w)) {
        let more = consume(&node.url, &queue, 10).await;
        assert!(!more.is_empty(), "everything comes after the restart: {:?}", texts(&got));
        got.extend(more);
    }
    // At least once: a batch the broker took but never confirmed may come again, from
    // its start; in their first arrivals, the events are in order.
    let mut after: Vec<String> = Vec::new();
    for t in texts(&got) {
        if !after.contains(&t) {
            after.push(t);
        }
    }
    assert_eq!(after, want, "none lost, in order");
    let healed = wait_for(Duration::from_secs(30), || async {
        let s = own.get(&path).await.expect(200);
        s["last_error"].is_null().then_some(s)
    })
    .await
    .expect("the sink recovers");
    assert!(healed["delivered"].as_i64().unwrap() >= 21, "{healed}");

    // Removed, then made again (a new generation: the old sink's task moves nothing): the
    // events from then on, once each.
    own.delete(&path).await.expect(204);
    own.get(&path).await.expect_error(404, "not_found");
    // Into a queue of its own: only the new sink publishes there (the removed one's task,
    // until it sees it is gone, may still publish into the old queue).
    let fresh = format!("again.{id}");
    let mut again = body.clone();
    again["queue"] = json!(fresh);
    admin.put(&path, &again).await.expect(200);
    say(&c, "m21").await;
    holds(&node.url, &fresh, 1).await;
    assert_eq!(texts(&consume(&node.url, &fresh, 1).await), vec!["m21".to_string()]);
    stop.cancel();
    dispatcher.await.unwrap().unwrap();
    drop(node);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evolutions_rabbitmq_set_publishes_evolutions_payloads_to_its_queues() {
    let url = rabbitmq::amqp_url();
    let broker = url.clone();
    let c = Cluster::start(bin(), 1, move |cfg| cfg.rabbitmq.url = Some(broker)).await;
    let stop = shared::Shutdown::new();
    let dispatcher = tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    c.phone(SHOP, false).await;
    c.phone(ANA, false).await;
    // A name of this run's own: the tests' broker keeps its queues across tests.
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000;
    let name = format!("evo-shop-{stamp}");
    let (inst, token) = c.paired_instance(&name, SHOP).await;
    let evo = c.api.anon().with_header("apikey", &token);
    evo.get(&format!("/rabbitmq/find/{name}")).await.expect(200).as_null().expect("none set");
    // On the deployment's broker, shared by every tenant, the exchange and queue are the
    // deployment's, whatever a tenant names.
    let own = c.api.client(Some(token.clone()));
    let path = format!("/v1/instances/{}/rabbitmq", inst.id);
    let mine = own.put(&path, &json!({ "exchange": "someone-else", "queue": "someone-else.messages.upsert" })).await;
    let mine = mine.expect(200);
    assert_eq!((mine["exchange"].as_str(), mine["url"].clone()), (Some("paceline.events"), Value::Null), "{mine}");
    assert_eq!(mine["queue"], format!("paceline.{}", inst.id));
    let bad = json!({ "rabbitmq": { "enabled": true, "events": ["NOPE"] } });
    evo.post(&format!("/rabbitmq/set/{name}"), &bad).await.expect_error(400, "validation_failed");
    let set = json!({ "rabbitmq": { "enabled": true, "events": ["MESSAGES_UPSERT"] } });
    let r = evo.post(&format!("/rabbitmq/set/{name}"), &set).await.expect(200);
    assert_eq!(r["rabbitmq"], json!({ "enabled": true, "events": ["MESSAGES_UPSERT"] }));
    let found = evo.get(&format!("/rabbitmq/find/{name}")).await.expect(200);
    assert_eq!(found, json!({ "enabled": true, "events": ["MESSAGES_UPSERT"] }));

    say(&c, "hello evolution").await;
    // Evolution's queue for the event: `<instance>.<event>`, declared by the sink.
    let queue = &format!("{name}.messages.upsert");
    holds(&url, queue, 1).await;
    let got = consume(&url, queue, 1).await;
    let m: &Value = &got[0].body;
    assert_eq!((got[0].exchange.as_str(), got[0].routing_key.as_str()), (name.as_str(), "messages.upsert"));
    assert_eq!((m["event"].as_str(), m["instance"].as_str()), (Some("messages.upsert"), Some(name.as_str())));
    assert_eq!(m["data"]["message"]["conversation"], "hello evolution");
    assert_eq!(m["data"]["key"]["fromMe"], false);
    // No webhook's `destination`, and never a token (Evolution sends the instance's key).
    assert!(m.get("destination").is_none() && m["apikey"].is_null(), "{m}");
    stop.cancel();
    dispatcher.await.unwrap().unwrap();
}

/// A new account: its id and a client with its token.
async fn account(c: &Cluster, name: &str) -> (String, harness::Client) {
    let a = c.api.admin().post("/v1/accounts", &json!({ "name": name })).await.expect(201);
    let token = a["token"].as_str().unwrap().to_string();
    (a["account"]["id"].as_str().unwrap().to_string(), c.api.client(Some(token)))
}

/// An account's sink: the events of every instance while it is in the account, routed
/// under the account, in one queue; an instance outside it (or moved out) is not in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accounts_sink_carries_its_instances_events_while_they_are_its() {
    let url = rabbitmq::amqp_url();
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let stop = shared::Shutdown::new();
    let dispatcher = tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    let (one, two, outside) = ("5511966620001", "5511966620002", "5511966620003");
    for n in [one, two, outside, ANA] {
        c.phone(n, false).await;
    }
    let admin = c.api.admin();
    let (acct, token) = account(&c, "sink-shops").await;
    let (_, stranger) = account(&c, "sink-stranger").await;
    let mut ids = Vec::new();
    for (name, number) in [("acct-one", one), ("acct-two", two), ("not-acct", outside)] {
        ids.push(c.paired_instance(name, number).await.0.id.to_string());
    }
    for id in &ids[..2] {
        admin.put(&format!("/v1/instances/{id}/account"), &json!({ "account_id": acct })).await.expect(204);
    }
    let path = format!("/v1/accounts/{acct}/rabbitmq");
    let body = json!({ "url": url, "allow_private_targets": true, "events": ["message.received"] });
    token.get(&path).await.expect_error(404, "not_found");
    token.put(&path, &body).await.expect_error(403, "forbidden");
    stranger.put(&path, &json!({ "url": url })).await.expect_error(403, "forbidden");
    admin
        .put("/v1/accounts/acct_00000000000000000000000000000000/rabbitmq", &body)
        .await
        .expect_error(404, "not_found");
    let set = admin.put(&path, &body).await.expect(200);
    let queue = format!("paceline.{acct}");
    assert_eq!(set["queue"], queue.as_str());
    assert_eq!(token.get(&path).await.expect(200)["allow_private_targets"], true);

    let send = |to: &'static str, text: &'static str| {
        let net = c.netsim();
        async move {
            net.post(&format!("/control/phones/{ANA}/messages"), &json!({ "to": to, "text": text })).await.expect(201);
        }
    };
    send(outside, "x1").await;
    send(one, "a1").await;
    send(two, "b1").await;
    holds(&url, &queue, 2).await;
    let mut got = consume(&url, &queue, 2).await;
    // Two instances' events: each instance's are in order, but the two are received by
    // separate sessions, so which lands first is the network's (CI saw b1 before a1).
    got.sort_by_key(|m| texts(std::slice::from_ref(m)));
    assert_eq!(texts(&got), ["a1", "b1"], "the account's instances' events, and no other's");
    for (m, id) in got.iter().zip(&ids) {
        assert_eq!(m.routing_key, format!("{acct}.{id}.message.received"));
        assert_eq!(m.headers["instance_id"], id.as_str());
    }

    // Moved out: its later events are no longer the account's.
    admin.put(&format!("/v1/instances/{}/account", ids[1]), &json!({ "account_id": null })).await.expect(204);
    send(two, "b2").await;
    send(one, "a2").await;
    let mut later = Vec::new();
    while !texts(&later).contains(&"a2".to_string()) {
        let more = consume(&url, &queue, 1).await;
        assert!(!more.is_empty(), "a2 comes: {:?}", texts(&later));
        later.extend(more);
    }
    assert_eq!(texts(&later), ["a2"], "b2 was made after its instance left");
    token.delete(&path).await.expect(204);
    token.get(&path).await.expect_error(404, "not_found");
    stop.cancel();
    dispatcher.await.unwrap().unwrap();
}
