//! Invariant 2 at the repository level: once a newer epoch claimed an instance, every
//! write under an older epoch is refused and changes nothing.

use harness::TestApi;
use serde_json::json;
use shared::db::instances::InstanceState;
use shared::ids::InstanceId;
use worker::db::sessions;

#[tokio::test]
async fn writes_under_an_old_epoch_are_refused() {
    let api = TestApi::start().await;
    let (inst, _) = api.create_instance("fenced").await;
    let id = InstanceId::parse(inst.id.as_str()).unwrap();
    let db = shared::db::connect(&api.config).await.unwrap();
    // Not wanted to run: nobody may claim it.
    assert!(sessions::claim(&db, &id, 1, "wk_a").await.unwrap().is_none());
    api.admin().post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);

    let a = sessions::claim(&db, &id, 1, "wk_a").await.unwrap().unwrap();
    assert!(sessions::set_state(&db, &id, a.owner_epoch, InstanceState::Connecting, None).await.unwrap());
    // A lost Redis counter (epoch 1 again) still yields a higher epoch.
    let b = sessions::claim(&db, &id, 1, "wk_b").await.unwrap().unwrap();
    assert!(b.owner_epoch > a.owner_epoch);
    assert!(sessions::set_linked(
        &db,
        &id,
        b.owner_epoch,
        Some(&json!({"session": "s"})),
        "5511999990001",
        false,
        None
    )
    .await
    .unwrap());

    // The ex-owner's writes all bounce.
    assert!(!sessions::set_state(&db, &id, a.owner_epoch, InstanceState::Disconnected, None).await.unwrap());
    assert!(!sessions::set_linked(&db, &id, a.owner_epoch, None, "5511999990009", true, None).await.unwrap());
    assert!(!sessions::set_ended(&db, &id, a.owner_epoch, InstanceState::LoggedOut).await.unwrap());
    let now = api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
    assert_eq!(now["state"], "connected");
    assert_eq!(now["phone"], "5511999990001");
    assert_eq!(now["account_type"], "personal");
}

/// Sessions stopped together (a worker shutting down) are written in one transaction,
/// each fenced on its own epoch: the stale one is untouched, the others end
/// `disconnected` with their `instance.state` event, and the answers keep the input order.
/// A batch claim takes every instance that should run, each at an epoch above the last
/// and its state `connecting` with one `instance.state` where it moved; an instance no
/// longer to run is left out.
#[tokio::test]
async fn a_batch_claim_takes_only_instances_that_should_run_each_at_a_newer_epoch() {
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    let mut ids = Vec::new();
    for name in ["batch-a", "batch-b", "batch-c"] {
        let (inst, _) = api.create_instance(name).await;
        ids.push(InstanceId::parse(inst.id.as_str()).unwrap());
    }
    for id in &ids[..2] {
        api.admin().post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    }
    let a = sessions::claim(&db, &ids[0], 1, "wk_a").await.unwrap().unwrap();
    assert!(sessions::set_state(&db, &ids[0], a.owner_epoch, InstanceState::Connected, None).await.unwrap());
    let states_before = shared::db::outbox::types_for(&db, &ids[0]).await.unwrap().len();
    // ids[2] was never asked to connect; a lost Redis counter (epoch 1) still moves on.
    let batch: Vec<(InstanceId, i64)> = ids.iter().map(|id| (id.clone(), 1)).collect();
    let claims = sessions::claim_many(&db, &batch, "wk_b").await.unwrap();
    let claimed: Vec<&InstanceId> = claims.iter().map(|(id, _)| id).collect();
    assert_eq!(claimed.len(), 2);
    assert!(claimed.contains(&&ids[0]) && claimed.contains(&&ids[1]));
    for (id, c) in &claims {
        assert_eq!(c.state, InstanceState::Connecting);
        if id == &ids[0] {
            assert!(c.owner_epoch > a.owner_epoch);
        }
    }
    // The old owner is fenced out; the row names the new one.
    assert!(!sessions::set_state(&db, &ids[0], a.owner_epoch, InstanceState::Disconnected, None).await.unwrap());
    let owner: Option<String> = sqlx::query_scalar("SELECT owner_worker FROM instances WHERE id = $1")
        .bind(&ids[0])
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(owner.as_deref(), Some("wk_b"));
    // connected → connecting is one new event (newest first).
    let events = shared::db::outbox::types_for(&db, &ids[0]).await.unwrap();
    assert_eq!(events.len(), states_before + 1);
    let newest = events.iter().rev().find(|(t, _)| t == "instance.state").unwrap();
    assert_eq!(newest.1["data"]["previous_state"], "connected");
    assert_eq!(newest.1["data"]["state"], "connecting");
    let (state, epoch): (String, i64) = sqlx::query_as("SELECT state, owner_epoch FROM instances WHERE id = $1")
        .bind(&ids[2])
        .fetch_one(&db)
        .await
        .unwrap();
    assert_ne!(state, "connecting", "an instance not to run is not claimed");
    assert_eq!(epoch, 0);
}

#[tokio::test]
async fn a_batch_of_stopped_sessions_is_fenced_per_instance() {
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    let mut stops = Vec::new();
    for name in ["stop-a", "stop-b", "stop-c"] {
        let (inst, _) = api.create_instance(name).await;
        let id = InstanceId::parse(inst.id.as_str()).unwrap();
        api.admin().post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
        let epoch = sessions::claim(&db, &id, 1, "wk_a").await.unwrap().unwrap().owner_epoch;
        assert!(sessions::set_state(&db, &id, epoch, InstanceState::Connected, None).await.unwrap());
        stops.push((id, epoch));
    }
    // The middle one moved on to another worker.
    sessions::claim(&db, &stops[1].0, 1, "wk_b").await.unwrap().unwrap();
    let written = sessions::set_stopped_many(&db, &stops).await.unwrap();
    assert_eq!(written, vec![true, false, true]);
    for (k, (id, _)) in stops.iter().enumerate() {
        let now = api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
        assert_eq!(now["state"], if k == 1 { "connecting" } else { "disconnected" }, "instance {k}");
        let last: serde_json::Value = sqlx::query_scalar(
            "SELECT payload FROM outbox WHERE instance_id = $1 AND type = 'instance.state' \
             ORDER BY created_at DESC, id DESC LIMIT 1",
        )
        .bind(id)
        .fetch_one(&db)
        .await
        .unwrap();
        assert_eq!(last["data"]["state"], if k == 1 { "connecting" } else { "disconnected" }, "instance {k}");
    }
    // Stopping again is applied (the epoch still owns the row) and changes nothing.
    let again = sessions::set_stopped_many(&db, &stops[..1]).await.unwrap();
    assert_eq!(again, vec![true]);
}

/// The worker's batched ends of sends: one transaction over several instances, each
/// fenced on its own epoch. The stale one's message is untouched; the others end with
/// their events, log rows and chats, in input order.
#[tokio::test]
async fn a_batch_of_sends_ended_together_is_fenced_per_instance() {
    use shared::db::messages::{self, Finishing, Outcome};
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    let mut owned = Vec::new();
    for name in ["batch-a", "batch-b", "batch-c"] {
        let (id, mid, epoch, _) = claimed_with_its_send_in_flight(&api, &db, name).await;
        owned.push((id, mid, epoch));
    }
    // b was taken over by another worker since: its old owner can take nothing more.
    sessions::claim(&db, &owned[1].0, 1, "wk_b").await.unwrap().unwrap();
    assert!(messages::start_head(&db, &owned[1].0, owned[1].2, false).await.unwrap().is_none());
    let items: Vec<Finishing> = owned
        .iter()
        .enumerate()
        .map(|(k, (id, mid, epoch))| Finishing {
            id: mid,
            instance: id,
            epoch: *epoch,
            outcome: if k == 2 { Outcome::Failed { code: "network_error", detail: "gone" } } else { Outcome::Sent },
        })
        .collect();
    let rows = messages::finish_many(&db, &items).await.unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[0].as_ref().map(|r| (r.id.clone(), r.status)),
        Some((owned[0].1.clone(), messages::MessageStatus::Sent))
    );
    assert!(rows[1].is_none(), "the stale epoch's end is refused");
    assert_eq!(rows[2].as_ref().map(|r| r.status), Some(messages::MessageStatus::Failed));
    let status = |k: usize| {
        let (id, mid) = (owned[k].0.clone(), owned[k].1.clone());
        let admin = api.admin();
        async move { admin.get(&format!("/v1/instances/{id}/messages/{mid}")).await.expect(200)["status"].clone() }
    };
    assert_eq!(status(0).await, "sent");
    assert_eq!(status(1).await, "in_flight", "untouched");
    assert_eq!(status(2).await, "failed");
    let types = |k: usize| {
        let (db, id) = (db.clone(), owned[k].0.clone());
        async move { shared::db::outbox::types_for(&db, &id).await.unwrap().into_iter().map(|(t, _)| t).collect::<Vec<_>>() }
    };
    let a = types(0).await;
    assert!(a.contains(&"message.sent".to_string()) && a.contains(&"chat.updated".to_string()), "{a:?}");
    let b = types(1).await;
    assert!(!b.contains(&"message.sent".to_string()) && !b.contains(&"chat.updated".to_string()), "{b:?}");
    let c = types(2).await;
    assert!(c.contains(&"message.failed".to_string()) && !c.contains(&"chat.updated".to_string()), "{c:?}");
    // The sent one is in the local log and its chat, from the API.
    let chats = api.admin().get(&format!("/v1/instances/{}/chats", owned[0].0)).await.expect(200);
    assert_eq!(chats["chats"].as_array().unwrap().len(), 1, "{chats}");
    let none = api.admin().get(&format!("/v1/instances/{}/chats", owned[1].0)).await.expect(200);
    assert_eq!(none["chats"].as_array().unwrap().len(), 0, "{none}");
}

/// Receipts in one batch: a message's delivered and read are applied in order, each its
/// own event; a receipt under a stale epoch changes nothing.
#[tokio::test]
async fn a_batch_of_receipts_applies_each_step_once_and_fences_stale_ones() {
    use shared::db::log::{apply_receipts, Receipt, ReceiptIn};
    use shared::db::messages::{self, Finishing, Outcome};
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    let mut sent = Vec::new();
    for name in ["rc-a", "rc-b"] {
        let (id, mid, epoch, wa_message_id) = claimed_with_its_send_in_flight(&api, &db, name).await;
        let f = Finishing { id: &mid, instance: &id, epoch, outcome: Outcome::Sent };
        messages::finish_many(&db, &[f]).await.unwrap();
        sent.push((id, epoch, wa_message_id));
    }
    // b changes hands: its old owner's receipt must bounce.
    sessions::claim(&db, &sent[1].0, 1, "wk_b").await.unwrap().unwrap();
    let r = |k: usize, receipt| ReceiptIn {
        instance: sent[k].0.clone(),
        epoch: sent[k].1,
        wa_message_id: sent[k].2.clone(),
        receipt,
        at: chrono::Utc::now(),
    };
    let batch = [r(0, Receipt::Delivered), r(0, Receipt::Read), r(1, Receipt::Delivered), r(0, Receipt::Delivered)];
    assert_eq!(apply_receipts(&db, &batch).await.unwrap(), [true, true, false, false]);
    let types: Vec<String> = shared::db::outbox::types_for(&db, &sent[0].0)
        .await
        .unwrap()
        .into_iter()
        .map(|(t, _)| t)
        .filter(|t| t == "message.delivered" || t == "message.read")
        .collect();
    assert_eq!(types, ["message.delivered", "message.read"]);
    let b = shared::db::outbox::types_for(&db, &sent[1].0).await.unwrap();
    assert!(!b.iter().any(|(t, _)| t == "message.delivered"), "{b:?}");
}

/// A new instance, connected, with one text queued, claimed by `wk_a`, its send taken in
/// flight: (instance, message, epoch, the message's network id).
async fn claimed_with_its_send_in_flight(
    api: &TestApi,
    db: &sqlx::PgPool,
    name: &str,
) -> (InstanceId, shared::ids::MessageId, i64, String) {
    let (inst, token) = api.create_instance(name).await;
    let id = InstanceId::parse(inst.id.as_str()).unwrap();
    let own = api.client(Some(token));
    own.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    let m = own
        .post(&format!("/v1/instances/{id}/messages"), &json!({ "to": "5511999990001", "type": "text", "text": name }))
        .await
        .expect(202);
    let epoch = sessions::claim(db, &id, 1, "wk_a").await.unwrap().unwrap().owner_epoch;
    let mid = shared::ids::MessageId::parse(m["id"].as_str().unwrap()).unwrap();
    let started = shared::db::messages::start_head(db, &id, epoch, false).await.unwrap().expect("in flight");
    assert_eq!(started.id, mid);
    (id, mid, epoch, started.wa_message_id)
}

/// Queue heads taken together (many instances due at once) in one statement, each fenced
/// on its own epoch: every owner gets its own oldest message in flight, a stale epoch and
/// an empty queue get nothing, change nothing and are told apart (only a stale epoch ends
/// the session), the answers keep the input order, and
/// a head taken again is the same message, one attempt more.
#[tokio::test]
async fn a_batch_of_queue_heads_is_taken_per_instance_and_fenced() {
    use shared::db::messages;
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    let mut jobs = Vec::new();
    let mut first = Vec::new();
    for (k, name) in ["head-a", "head-b", "head-c", "head-empty"].into_iter().enumerate() {
        let (inst, token) = api.create_instance(name).await;
        let id = InstanceId::parse(inst.id.as_str()).unwrap();
        let own = api.client(Some(token));
        let mut ids = Vec::new();
        for n in 0..if k == 3 { 0 } else { 2 } {
            let body = json!({ "to": "5511999990001", "type": "text", "text": format!("{name} {n}") });
            ids.push(own.post(&format!("/v1/instances/{id}/messages"), &body).await.expect(202)["id"].clone());
        }
        first.push(ids.first().cloned());
        api.admin().post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
        let epoch = sessions::claim(&db, &id, 1, "wk_a").await.unwrap().unwrap().owner_epoch;
        jobs.push((id, epoch, false));
    }
    // b moved on to another worker.
    sessions::claim(&db, &jobs[1].0, 1, "wk_b").await.unwrap().unwrap();
    let seen = |s: &messages::Start| match s {
        messages::Start::Started(m) => json!([m.id, m.attempts]),
        messages::Start::Empty => json!("empty"),
        messages::Start::Fenced => json!("fenced"),
    };
    let taken: Vec<_> = messages::start_heads(&db, &jobs).await.unwrap().iter().map(seen).collect();
    assert_eq!(
        taken,
        vec![json!([first[0], 1]), json!("fenced"), json!([first[2], 1]), json!("empty")],
        "each owner's oldest message, in input order; a stale epoch told from an empty queue"
    );
    for (k, (id, _, _)) in jobs.iter().enumerate() {
        let states: Vec<String> = sqlx::query_scalar("SELECT status FROM messages WHERE instance_id = $1 ORDER BY seq")
            .bind(id)
            .fetch_all(&db)
            .await
            .unwrap();
        let expect: &[&str] = match k {
            1 => &["queued", "queued"],
            3 => &[],
            _ => &["in_flight", "queued"],
        };
        assert_eq!(states, expect, "instance {k}");
    }
    let again: Vec<_> = messages::start_heads(&db, &jobs[..1]).await.unwrap().iter().map(seen).collect();
    assert_eq!(again, [json!([first[0], 2])], "the same message, one attempt more");
}
