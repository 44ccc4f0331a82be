//! The outbox relay: events committed with their change reach JetStream under their own
//! id, and publishing one again (as after a crash before marking it) adds nothing.

use std::time::Duration;

use futures::StreamExt;
use harness::cluster::wait_for;
use harness::TestApi;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_jetstream_once_under_their_id() {
    let api = TestApi::start().await;
    let dispatcher = tokio::spawn(dispatcher::run(api.config.clone(), api.shutdown.clone()));
    let (inst, token) = api.create_instance("ev").await;
    let id = inst.id.to_string();
    let m = api
        .client(Some(token))
        .post(&format!("/v1/instances/{id}/messages"), &json!({ "to": "5511999990001", "type": "text", "text": "x" }))
        .await
        .expect(202);
    let db = shared::db::connect(&api.config).await.unwrap();
    let published = || async {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM outbox o JOIN outbox_published p ON p.event_id = o.id WHERE o.instance_id = $1",
        )
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
        // The instance's creation and the message's queueing.
        (n == 2).then_some(())
    };
    wait_for(Duration::from_secs(10), published).await.expect("the relay publishes the events");

    let nats = shared::bus::connect(&api.config, "test").await.unwrap();
    let js = async_nats::jetstream::new(nats);
    let subjects = shared::bus::Subjects::new(&api.config);
    let mut stream = js.get_stream(subjects.events_stream()).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 2);
    let consumer = stream.create_consumer(async_nats::jetstream::consumer::pull::Config::default()).await.unwrap();
    let mut msgs = consumer.fetch().max_messages(10).expires(Duration::from_secs(2)).messages().await.unwrap();
    let created = msgs.next().await.unwrap().unwrap();
    let body: serde_json::Value = serde_json::from_slice(&created.payload).unwrap();
    assert_eq!((body["type"].as_str(), body["data"]["name"].as_str()), (Some("instance.created"), Some("ev")));
    let msg = msgs.next().await.unwrap().unwrap();
    let body: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap();
    assert_eq!(body["type"], "message.queued");
    assert_eq!(body["data"]["id"], m["id"]);
    assert!(msg.subject.as_str().ends_with(&format!(".events.{id}.message.queued")));
    let msg_id =
        msg.headers.as_ref().and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID)).map(|v| v.as_str().to_string());
    assert_eq!(msg_id.as_deref(), body["id"].as_str(), "published under the event's id");

    // As if the relay died after publishing but before moving its position: it publishes
    // again, and the stream keeps one copy.
    sqlx::query(
        "WITH e AS (DELETE FROM outbox_published WHERE event_id IN (SELECT id FROM outbox WHERE instance_id = $1)) \
         UPDATE outbox_relay SET done = format('%s:%s:', x.m, x.m)::pg_snapshot, batch = NULL, after_xid = NULL, \
             after_id = NULL \
         FROM (SELECT min(xid) AS m FROM outbox WHERE instance_id = $1) x",
    )
    .bind(&id)
    .execute(&db)
    .await
    .unwrap();
    wait_for(Duration::from_secs(10), published).await.expect("published again");
    assert_eq!(stream.info().await.unwrap().state.messages, 2, "de-duplicated by Nats-Msg-Id");
    api.shutdown.cancel();
    dispatcher.await.unwrap().unwrap();
}

/// Waits until the instance's events so far (its `instance.created`) are published, so a
/// stream opened now starts after them.
pub(crate) async fn settled(api: &TestApi, id: &str) {
    let db = shared::db::connect(&api.config).await.unwrap();
    let done = wait_for(Duration::from_secs(10), || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox o WHERE o.instance_id = $1 \
               AND NOT EXISTS (SELECT 1 FROM outbox_published p WHERE p.event_id = o.id)",
        )
        .bind(id)
        .fetch_one(&db)
        .await
        .unwrap();
        (n == 0).then_some(())
    })
    .await;
    assert!(done.is_some(), "the instance's events so far are published");
}

/// The real-time stream: items in order as they happen, filtered by type, and a
/// reconnect with `Last-Event-ID` resumes right after it, with no gap and no repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_resumes_after_last_event_id_without_gaps() {
    use harness::webhooks::SseReader;
    let api = TestApi::start().await;
    let dispatcher = tokio::spawn(dispatcher::run(api.config.clone(), api.shutdown.clone()));
    let (inst, token) = api.create_instance("sse").await;
    let id = inst.id.to_string();
    settled(&api, &id).await;
    let own = api.client(Some(token));
    let open = |query: &str, last: Option<&str>| {
        let mut rb = own.request(reqwest::Method::GET, &format!("/v1/instances/{id}/events{query}"));
        if let Some(l) = last {
            rb = rb.header("last-event-id", l);
        }
        async move {
            let res = rb.send().await.unwrap();
            assert_eq!(res.status(), 200);
            assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
            SseReader::new(res)
        }
    };
    let queue = |text: String| {
        let own = own.clone();
        let id = id.clone();
        async move {
            own.post(
                &format!("/v1/instances/{id}/messages"),
                &json!({ "to": "5511999990001", "type": "text", "text": text }),
            )
            .await
            .expect(202)
        }
    };
    let mut sse = open("", None).await;
    let mut seen = Vec::new();
    for i in 0..3 {
        let m = queue(format!("m{i}")).await;
        let item = sse.next(Duration::from_secs(10)).await.expect("an event");
        assert_eq!(item.event.as_deref(), Some("message.queued"));
        let ev: serde_json::Value = serde_json::from_str(&item.data).unwrap();
        assert_eq!(ev["data"]["id"], m["id"]);
        assert_eq!(item.id.as_deref(), ev["id"].as_str());
        seen.push(item.id.unwrap());
    }
    drop(sse);
    // Missed while disconnected.
    let mut missed = Vec::new();
    for i in 3..6 {
        missed.push(queue(format!("m{i}")).await["id"].as_str().unwrap().to_string());
    }
    let mut sse = open("", Some(&seen[2])).await;
    for want in &missed {
        let item = sse.next(Duration::from_secs(10)).await.expect("a missed event");
        let ev: serde_json::Value = serde_json::from_str(&item.data).unwrap();
        assert_eq!(ev["data"]["id"].as_str(), Some(want.as_str()));
        seen.push(item.id.unwrap());
    }
    // The sentinel: the next item is a new event, so nothing was repeated before it.
    let sentinel = queue("sentinel".into()).await;
    let item = sse.next(Duration::from_secs(10)).await.expect("the sentinel's event");
    let ev: serde_json::Value = serde_json::from_str(&item.data).unwrap();
    assert_eq!(ev["data"]["id"], sentinel["id"], "nothing repeated before the sentinel");
    drop(sse);

    // From the first event, only message.queued, with the query form of the id.
    let mut sse = open(&format!("?types=message.queued&last_event_id={}", seen[0]), None).await;
    for want in &seen[1..] {
        let item = sse.next(Duration::from_secs(10)).await.expect("an event");
        assert_eq!(item.id.as_deref(), Some(want.as_str()));
    }
    drop(sse);
    // A filter that matches none of them.
    let mut sse = open("?types=message.sent", Some(&seen[0])).await;
    assert!(sse.next(Duration::from_millis(700)).await.is_none());
    drop(sse);

    // The admin stream sees them too; an instance token may not open it.
    let res =
        api.admin().request(reqwest::Method::GET, "/v1/events").header("last-event-id", &seen[4]).send().await.unwrap();
    let mut all = SseReader::new(res);
    assert_eq!(all.next(Duration::from_secs(10)).await.unwrap().id.as_deref(), Some(seen[5].as_str()));
    own.get("/v1/events").await.expect_error(403, "forbidden");
    // An id this stream never had resumes from the id's own time: made now, nothing
    // before it comes; what happens after it does.
    let unknown = shared::ids::EventId::new().to_string();
    let mut sse = open("", Some(&unknown)).await;
    let after = queue("after".into()).await;
    let item = sse.next(Duration::from_secs(10)).await.expect("the event after it");
    let ev: serde_json::Value = serde_json::from_str(&item.data).unwrap();
    assert_eq!(ev["data"]["id"], after["id"], "nothing from before the id's time");
    drop(sse);
    // A Last-Event-ID that is no event id is refused.
    let bad = own.request(reqwest::Method::GET, &format!("/v1/instances/{id}/events")).header("last-event-id", "nope");
    own.send(bad).await.expect_error(400, "validation_failed");
    // One older than the retention was pruned: the stream starts at the oldest event
    // kept (from the id's own time) and says that some were missed.
    let mut sse = open("?types=message.queued", Some("evt_00000000000000000000000000000000")).await;
    let first = sse.next(Duration::from_secs(10)).await.expect("the gap comment");
    assert!(first.comment.as_deref().unwrap_or_default().contains("no longer retained"), "{first:?}");
    assert_eq!(
        sse.next(Duration::from_secs(10)).await.expect("the oldest event").id.as_deref(),
        Some(seen[0].as_str())
    );
    drop(sse);
    own.get(&format!("/v1/instances/{id}/events?types=nope")).await.expect_error(400, "validation_failed");
    api.shutdown.cancel();
    dispatcher.await.unwrap().unwrap();
}

/// Open streams are capped per instance (across pods) and per pod; a closed one gives
/// its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_are_capped_per_instance_and_per_pod() {
    use harness::webhooks::SseReader;
    let mut config = harness::test_config();
    config.events.streams_per_instance = 2;
    config.events.streams_per_pod = 3;
    let api = TestApi::start_with(config).await;
    let (a, a_token) = api.create_instance("sse-a").await;
    let (b, b_token) = api.create_instance("sse-b").await;
    let stream = |token: &str, id: &str| {
        let c = api.client(Some(token.to_string()));
        let rb = c.request(reqwest::Method::GET, &format!("/v1/instances/{id}/events"));
        async move { rb.send().await.unwrap() }
    };
    let (a_id, b_id) = (a.id.as_str(), b.id.as_str());
    let a1 = stream(&a_token, a_id).await;
    let a2 = stream(&a_token, a_id).await;
    assert_eq!((a1.status().as_u16(), a2.status().as_u16()), (200, 200));
    let r = stream(&a_token, a_id).await;
    assert_eq!(r.status(), 429, "a third stream of one instance");
    assert!(r.headers().contains_key("retry-after"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    let b1 = stream(&b_token, b_id).await;
    assert_eq!(b1.status(), 200, "another instance has its own places");
    assert_eq!(stream(&b_token, b_id).await.status(), 429, "but the pod is full");
    // The admin's stream counts against the pod too.
    let all = api.admin().request(reqwest::Method::GET, "/v1/events").send().await.unwrap();
    assert_eq!(all.status(), 429);
    // Closing one gives its place back.
    drop(SseReader::new(a1));
    let again = harness::cluster::wait_for(Duration::from_secs(10), || async {
        let r = stream(&a_token, a_id).await;
        (r.status() == 200).then_some(r)
    })
    .await;
    assert!(again.is_some(), "the closed stream's place was given back");
    drop((a2, b1));
}

/// A stream ends when its access does: the instance deleted, or its allow-list no
/// longer letting the client in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_end_when_their_access_ends() {
    use harness::webhooks::SseReader;
    let api = TestApi::start().await;
    let open = |token: Option<String>, id: String| {
        let c = api.client(token);
        let rb = c.request(reqwest::Method::GET, &format!("/v1/instances/{id}/events"));
        async move {
            let res = rb.send().await.unwrap();
            assert_eq!(res.status(), 200);
            SseReader::new(res)
        }
    };
    // Narrowing the allow-list away from the client ends its stream...
    let (inst, token) = api.create_instance("sse-allow").await;
    let id = inst.id.to_string();
    let mut own = open(Some(token.clone()), id.clone()).await;
    let mut admins = open(api.config.admin_token.clone(), id.clone()).await;
    assert!(!own.ends_within(Duration::from_millis(300)).await, "open while allowed");
    api.admin().patch(&format!("/v1/instances/{id}"), &json!({ "ip_allowlist": ["203.0.113.0/24"] })).await.expect(200);
    assert!(own.ends_within(Duration::from_secs(10)).await, "ended when the allow-list excluded the client");
    // ...the admin's stream of the instance stays, until the instance is deleted.
    assert!(!admins.ends_within(Duration::from_millis(300)).await);
    let (other, other_token) = api.create_instance("sse-delete").await;
    let other_id = other.id.to_string();
    let mut theirs = open(Some(other_token), other_id.clone()).await;
    api.admin().delete(&format!("/v1/instances/{id}")).await;
    api.admin().delete(&format!("/v1/instances/{other_id}")).await;
    assert!(admins.ends_within(Duration::from_secs(10)).await, "the admin's stream ended with the instance");
    assert!(theirs.ends_within(Duration::from_secs(10)).await, "the token's stream ended with its instance");
}

/// Instance state changes are events, written with the change (fenced like it).
#[tokio::test]
async fn state_changes_write_their_events() {
    use shared::db::instances::InstanceState;
    use worker::db::sessions;
    let api = TestApi::start().await;
    let (inst, _) = api.create_instance("state-ev").await;
    let id = shared::ids::InstanceId::parse(inst.id.as_str()).unwrap();
    let db = shared::db::connect(&api.config).await.unwrap();
    shared::db::instances::request_run(&db, &id).await.unwrap();
    let c = sessions::claim(&db, &id, 1, "wk").await.unwrap().unwrap();
    let exp = chrono::Utc::now();
    assert!(sessions::set_state(&db, &id, c.owner_epoch, InstanceState::QrPending, Some(("QR1", exp))).await.unwrap());
    assert!(sessions::set_state(&db, &id, c.owner_epoch, InstanceState::QrPending, Some(("QR2", exp))).await.unwrap());
    assert!(sessions::set_linked(&db, &id, c.owner_epoch, None, "5511999990001", true, None).await.unwrap());
    // A stale epoch writes neither the change nor its events.
    assert!(!sessions::set_ended(&db, &id, c.owner_epoch - 1, InstanceState::Banned).await.unwrap());
    assert!(sessions::set_ended(&db, &id, c.owner_epoch, InstanceState::LoggedOut).await.unwrap());
    let events = shared::db::outbox::types_for(&db, &id).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "instance.created",
            "instance.state",
            "instance.state",
            "instance.qr_updated",
            "instance.qr_updated",
            "instance.state",
            "instance.connected",
            "instance.state",
            "instance.logged_out"
        ]
    );
    let events = &events[1..];
    assert_eq!(events[0].1["data"], json!({ "state": "connecting", "previous_state": "disconnected" }));
    assert_eq!(events[1].1["data"], json!({ "state": "qr_pending", "previous_state": "connecting" }));
    assert_eq!(events[3].1["data"]["qr"], "QR2");
    assert_eq!(events[5].1["data"], json!({ "phone": "5511999990001", "account_type": "business" }));
    assert_eq!(events[6].1["data"], json!({ "state": "logged_out", "previous_state": "connected" }));
}

/// Pairing is the owner's: a `read_only` key's stream leaves out the QR events (and may
/// not ask for them), while the instance's token sees them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_event_stream_leaves_out_the_pairing_qr() {
    use harness::webhooks::SseReader;
    let api = TestApi::start().await;
    let dispatcher = tokio::spawn(dispatcher::run(api.config.clone(), api.shutdown.clone()));
    let (inst, token) = api.create_instance("sse-qr").await;
    let id = inst.id.to_string();
    settled(&api, &id).await;
    let own = api.client(Some(token));
    let key = api.create_key(&own, &id, "read_only").await;
    let reader = api.client(Some(key));
    reader.get(&format!("/v1/instances/{id}/qr")).await.expect_error(403, "forbidden");
    reader.get(&format!("/v1/instances/{id}/events?types=instance.qr_updated")).await.expect_error(403, "forbidden");
    let open = |c: &harness::Client| {
        let rb = c.request(reqwest::Method::GET, &format!("/v1/instances/{id}/events"));
        async move { SseReader::new(rb.send().await.unwrap()) }
    };
    let (mut as_key, mut as_owner) = (open(&reader).await, open(&own).await);
    let db = shared::db::connect(&api.config).await.unwrap();
    let iid = shared::ids::InstanceId::parse(&id).unwrap();
    use shared::events::{Event, InstanceStateEventData, QrUpdatedEventData};
    let qr = Event::QrUpdated(QrUpdatedEventData { qr: "2@secret-pairing".into(), expires_at: chrono::Utc::now() });
    shared::db::outbox::insert(&db, &iid, &qr).await.unwrap();
    let state =
        InstanceStateEventData { state: "qr_pending".into(), previous_state: "disconnected".into(), reason: None };
    shared::db::outbox::insert(&db, &iid, &Event::InstanceState(state)).await.unwrap();
    let first = as_owner.next(Duration::from_secs(10)).await.expect("the owner's first event");
    assert_eq!(first.event.as_deref(), Some("instance.qr_updated"));
    let first = as_key.next(Duration::from_secs(10)).await.expect("the key's first event");
    assert_eq!(first.event.as_deref(), Some("instance.state"), "the QR is left out");
    assert!(!first.data.contains("secret-pairing"));
    api.shutdown.cancel();
    dispatcher.await.unwrap().unwrap();
}

/// One relay round without NATS: the next page of at most `limit`, recorded published
/// (sequence 1 each) as the relay does. Returns the page's event ids.
async fn relay_round(db: &sqlx::PgPool, limit: i64) -> Vec<String> {
    use shared::db::outbox;
    let mut tx = db.begin().await.unwrap();
    let at = outbox::lock_position(&mut tx).await.unwrap().expect("no other relay");
    let page = outbox::page(&mut tx, &at, limit).await.unwrap();
    let acks: Vec<_> = page.iter().map(|e| (e.id.clone(), 1)).collect();
    let last = if page.len() as i64 == limit { page.last() } else { None };
    outbox::published(&mut tx, &at, &acks, last).await.unwrap();
    tx.commit().await.unwrap();
    page.iter().map(|e| e.id.to_string()).collect()
}

/// Writes an event of the relay test's own; returns its id.
async fn insert_test_event(c: &mut sqlx::PgConnection) -> String {
    let id = shared::ids::EventId::new().to_string();
    sqlx::query("INSERT INTO outbox (id, instance_id, type, payload) VALUES ($1, 'inst_relay', 'test', '{}')")
        .bind(&id)
        .execute(c)
        .await
        .unwrap();
    id
}

/// The relay's batches are told apart by snapshots, not by marks on the events: every
/// committed event is published exactly once, in pages, however long the transaction
/// that wrote it stayed open and whatever order transactions commit in; an aborted one
/// never is, and one relay publishes at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_publishes_each_committed_event_once_whatever_order_they_commit_in() {
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    // Whatever the set-up wrote is published first.
    while !relay_round(&db, 500).await.is_empty() {}
    assert!(relay_round(&db, 500).await.is_empty());
    let insert = |db: sqlx::PgPool| async move {
        let mut c = db.acquire().await.unwrap();
        insert_test_event(&mut c).await
    };
    // A transaction opened first and left open: its event has the smallest id.
    let mut long = db.begin().await.unwrap();
    let late = insert_test_event(&mut long).await;
    let mut aborted = db.begin().await.unwrap();
    let gone = insert_test_event(&mut aborted).await;
    let (b, c, d) = (insert(db.clone()).await, insert(db.clone()).await, insert(db.clone()).await);
    // A page at a time, in commit order; the open transaction's event is not there.
    assert_eq!(relay_round(&db, 2).await, [b.clone(), c.clone()]);
    // A second relay waits while one holds the position.
    let mut holder = db.begin().await.unwrap();
    assert!(shared::db::outbox::lock_position(&mut holder).await.unwrap().is_some());
    let mut other = db.begin().await.unwrap();
    assert!(shared::db::outbox::lock_position(&mut other).await.unwrap().is_none(), "one relay at a time");
    holder.rollback().await.unwrap();
    other.rollback().await.unwrap();
    assert_eq!(relay_round(&db, 2).await, std::slice::from_ref(&d));
    assert!(relay_round(&db, 2).await.is_empty(), "nothing twice");
    // The long transaction commits after those batches; the other is rolled back.
    long.commit().await.unwrap();
    aborted.rollback().await.unwrap();
    let e = insert(db.clone()).await;
    assert_eq!(relay_round(&db, 500).await, [late.clone(), e.clone()], "the late commit comes in the next batch");
    assert!(relay_round(&db, 500).await.is_empty());
    let recorded: Vec<String> = sqlx::query_scalar(
        "SELECT o.id FROM outbox o JOIN outbox_published p ON p.event_id = o.id \
         WHERE o.instance_id = 'inst_relay' ORDER BY o.id",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    let mut all = vec![late, b, c, d, e];
    all.sort();
    assert_eq!(recorded, all, "each recorded once; the aborted {gone} never");
    // A position from another database's transactions (a logical restore) is told, not
    // trusted: every event after it would look published.
    sqlx::query("UPDATE outbox_relay SET done = '4000000000000:4000000000000:'").execute(&db).await.unwrap();
    let mut tx = db.begin().await.unwrap();
    assert!(shared::db::outbox::lock_position(&mut tx).await.unwrap().unwrap().ahead);
}

/// An upgrade to the snapshot relay (migration 0044) loses nothing: an event an earlier
/// relay published keeps its stream sequence, one it had not yet published is the new
/// relay's first page, and both it and a row written afterwards carry the epoch in the old
/// column, so an earlier build's relay still running leaves them alone (publishing and
/// counting nothing twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_not_yet_published_at_the_upgrade_are_published_by_the_new_relay() {
    let config = harness::test_config();
    let db = shared::db::connect(&config).await.unwrap();
    let before = sqlx::migrate::Migrator {
        migrations: std::borrow::Cow::Owned(shared::db::MIGRATOR.iter().filter(|m| m.version < 44).cloned().collect()),
        ignore_missing: false,
        locking: true,
        no_tx: false,
    };
    before.run(&db).await.unwrap();
    let (told, untold) = (shared::ids::EventId::new(), shared::ids::EventId::new());
    sqlx::query(
        "INSERT INTO outbox (id, instance_id, type, payload, published_at, stream_seq) \
         VALUES ($1, 'inst_up', 'test', '{}', now(), 7), ($2, 'inst_up', 'test', '{}', NULL, NULL)",
    )
    .bind(&told)
    .bind(&untold)
    .execute(&db)
    .await
    .unwrap();
    shared::db::MIGRATOR.run(&db).await.unwrap();
    use shared::db::outbox::stream_seq;
    assert_eq!(stream_seq(&db, &told, None).await.unwrap(), Some(Some(7)));
    assert_eq!(stream_seq(&db, &untold, None).await.unwrap(), Some(None), "waiting for the relay");
    assert_eq!(relay_round(&db, 500).await, [untold.to_string()]);
    assert!(relay_round(&db, 500).await.is_empty());
    let mut c = db.acquire().await.unwrap();
    let new = insert_test_event(&mut c).await;
    let old_relay_sees: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE published_at IS NULL").fetch_one(&db).await.unwrap();
    assert_eq!(old_relay_sees, 0, "an earlier build's relay leaves the rows of this one alone, old and new");
    assert_eq!(relay_round(&db, 500).await, [new]);
}
