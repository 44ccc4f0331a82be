//! Evolution-format bodies with media in base64 (issue: a dispatcher's memory): built
//! only when their attempt starts, from the media as stored (never from the event's
//! `size`), within the pod's body budget, and at most two such webhooks an instance.

use std::time::Duration;

use base64::Engine;
use dispatcher::shape::{self, Budget, NotBuilt};
use harness::TestApi;
use serde_json::{json, Value};
use shared::db::media::{self, MediaBody};
use shared::db::webhooks::{Origin, Shape};
use shared::ids::InstanceId;

use crate::deliveries::{config, instance};

/// A `message.received` envelope whose image says `size: 0`, as while a download is
/// pending.
fn received(instance: &str, media_id: &str) -> Value {
    json!({
        "id": shared::ids::EventId::new(), "type": "message.received", "instance_id": instance,
        "created_at": chrono::Utc::now(),
        "data": {
            "id": "msg_0", "chat_jid": "5511999990001@s.whatsapp.net", "from_jid": "5511999990001@s.whatsapp.net",
            "from_me": false, "wa_message_id": "WA1", "type": "image", "timestamp": chrono::Utc::now(),
            "content": { "caption": "look", "media": { "id": media_id, "mime_type": "image/jpeg", "size": 0 } }
        }
    })
}

fn origin() -> Origin {
    Origin {
        shape: Shape {
            format: shared::db::webhooks::WebhookFormat::Evolution,
            by_events: false,
            base64: true,
            evolution_events: vec![],
        },
        instance_name: "bodies".into(),
        phone: None,
    }
}

fn soon(ms: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(ms)
}

#[tokio::test]
async fn base64_bodies_follow_the_stored_media_and_the_pods_budget() {
    let api = TestApi::start_with(config()).await;
    let (id, own) = instance(&api, "bodies").await;
    let inst = InstanceId::parse(&id).unwrap();
    let db = shared::db::connect(&api.config).await.unwrap();
    let quota = api.config.media.quota_bytes;
    // Bytes whose length is no multiple of 3 and spans chunks.
    let small: Vec<u8> = (0..(media::CHUNK + 1234)).map(|i| (i * 7 % 251) as u8).collect();
    let store = media::Store::postgres(db.clone());
    let (small_id, _) =
        media::store(&store, &inst, media::Direction::Outbound, "image/jpeg", None, MediaBody::Data(&small), quota)
            .await
            .unwrap();
    let large = vec![3u8; shape::BASE64_LIMIT as usize + 1];
    let (large_id, _) =
        media::store(&store, &inst, media::Direction::Outbound, "image/jpeg", None, MediaBody::Data(&large), quota)
            .await
            .unwrap();
    let budget = Budget::new(64 << 20);
    let server = "http://127.0.0.1:8787";
    let o = origin();

    // The small image comes whole, though the event said size 0; the body holds its
    // bytes of the budget until it is dropped.
    let env = received(&id, small_id.as_str());
    let built = shape::build(&store, server, "http://h/", &o, &env, &budget, soon(1000)).await.unwrap();
    let body: Value = serde_json::from_slice(&built.bytes).unwrap();
    assert_eq!(body["event"], "messages.upsert");
    let b64 = body["data"]["message"]["base64"].as_str().expect("base64 present");
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(b64).unwrap(), small);
    assert_eq!(budget.held(), built.bytes.len() as u64);
    drop(built);
    assert_eq!(budget.held(), 0);

    // Stored over the limit: no bytes, whatever the event's size said.
    let env = received(&id, large_id.as_str());
    let built = shape::build(&store, server, "http://h/", &o, &env, &budget, soon(1000)).await.unwrap();
    let body: Value = serde_json::from_slice(&built.bytes).unwrap();
    assert!(body["data"]["message"].get("base64").is_none(), "{}", body["data"]["message"]);
    assert!(built.bytes.len() < 10_000);

    // Another instance's media is never embedded.
    let (other, _) = instance(&api, "bodies-other").await;
    let env = received(&other, small_id.as_str());
    let built = shape::build(&store, server, "http://h/", &o, &env, &budget, soon(1000)).await.unwrap();
    let body: Value = serde_json::from_slice(&built.bytes).unwrap();
    assert!(body["data"]["message"].get("base64").is_none());

    // A full budget: the body waits until its deadline and is not built.
    let tight = Budget::new(8 << 20);
    let hog = tight.take(&inst, 3 << 20, soon(10)).await.unwrap();
    let env = received(&id, small_id.as_str());
    let r = shape::build(&store, server, "http://h/", &o, &env, &tight, soon(300)).await;
    assert_eq!(r.err(), Some(NotBuilt::Busy), "one instance holds at most half");
    drop(hog);
    let built = shape::build(&store, server, "http://h/", &o, &env, &tight, soon(300)).await.unwrap();
    assert!(built.bytes.len() > small.len());

    // At most two webhooks an instance carry base64.
    let evo = |n: u32| json!({ "url": format!("http://127.0.0.1:9/h{n}"), "format": "evolution", "base64": true });
    let hooks = format!("/v1/instances/{id}/webhooks");
    own.post(&hooks, &evo(1)).await.expect(201);
    let second = own.post(&hooks, &evo(2)).await.expect(201);
    let e = own.post(&hooks, &evo(3)).await.expect(400);
    assert!(e["error"]["message"].as_str().unwrap().contains("base64"), "{e}");
    let plain = own.post(&hooks, &json!({ "url": "http://127.0.0.1:9/h4", "format": "evolution" })).await.expect(201);
    let plain_url = format!("{hooks}/{}", plain["id"].as_str().unwrap());
    own.patch(&plain_url, &json!({ "base64": true })).await.expect(400);
    own.patch(&format!("{hooks}/{}", second["id"].as_str().unwrap()), &json!({ "base64": false })).await.expect(200);
    own.patch(&plain_url, &json!({ "base64": true })).await.expect(200);
}
