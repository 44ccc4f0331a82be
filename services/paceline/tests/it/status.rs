//! Statuses over netsim: one posted through the queue reaches the account's contacts
//! once; a contact's status comes in on `status@broadcast`, is listed, and is a
//! `status.received` event.

use std::time::Duration;

use base64::Engine;

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use crate::bin;

const A: &str = "5511999993001";
const B: &str = "5511999993002";
const C: &str = "5511999993003";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_go_out_to_contacts_and_come_in() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("status", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    // B is a contact (A saved it); C is a stranger.
    c.netsim().post(&format!("/control/phones/{A}/contacts"), &json!({ "number": B, "name": "Bea" })).await.expect(200);

    // Out: queued, paced, with a message record; B gets it once, C not at all.
    let m = own
        .post(&format!("/v1/instances/{id}/status"), &json!({ "type": "text", "text": "open today" }))
        .await
        .expect(202);
    assert_eq!(m["to"], "status@broadcast");
    assert_eq!(m["status"], "queued");
    let path = format!("/v1/instances/{id}/messages/{}", m["id"].as_str().unwrap());
    let sent = wait_for(Duration::from_secs(20), || async {
        let v: Value = own.get(&path).await.expect(200);
        (v["status"] == "sent").then_some(v)
    })
    .await
    .expect("the status is sent");
    let inbox = |n: &'static str| {
        let c = &c;
        async move {
            let v: Value = c.netsim().get(&format!("/control/phones/{n}/inbox")).await.expect(200);
            v["messages"].as_array().unwrap().clone()
        }
    };
    let got = inbox(B).await;
    let copies: Vec<&Value> = got.iter().filter(|x| x["id"] == sent["wa_message_id"]).collect();
    assert_eq!(copies.len(), 1, "{got:?}");
    assert_eq!(copies[0]["group"], "status@broadcast");
    assert!(inbox(C).await.is_empty(), "a stranger sees no status");
    // Bad input: 400, nothing queued.
    own.post(&format!("/v1/instances/{id}/status"), &json!({ "type": "image", "text": "no media" }))
        .await
        .expect_error(400, "validation_failed");
    own.post(&format!("/v1/instances/{id}/status"), &json!({ "type": "poll" }))
        .await
        .expect_error(400, "validation_failed");

    // An image over the 1 MB default body limit goes through the large-send gate.
    let png = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 1_500_000]);
    let img = own
        .post(
            &format!("/v1/instances/{id}/status"),
            &json!({ "type": "image", "media": { "data": png, "mime_type": "image/png" }, "caption": "new stock" }),
        )
        .await
        .expect(202);
    let img_path = format!("/v1/instances/{id}/messages/{}", img["id"].as_str().unwrap());
    wait_for(Duration::from_secs(20), || async {
        (own.get(&img_path).await.expect(200)["status"] == "sent").then_some(())
    })
    .await
    .expect("the image status is sent");

    // In: B saves A and posts a status.
    c.netsim()
        .post(&format!("/control/phones/{B}/contacts"), &json!({ "number": A, "name": "Shop" }))
        .await
        .expect(200);
    let posted: Value = c
        .netsim()
        .post(&format!("/control/phones/{B}/messages"), &json!({ "to": "status@broadcast", "text": "B's news" }))
        .await
        .expect(201);
    let list = wait_for(Duration::from_secs(20), || async {
        let v: Value = own.get(&format!("/v1/instances/{id}/status")).await.expect(200);
        let msgs = v["messages"].as_array().unwrap().clone();
        msgs.iter().any(|x| x["wa_message_id"] == posted["id"]).then_some(msgs)
    })
    .await
    .expect("the contact's status is listed");
    let st = list.iter().find(|x| x["wa_message_id"] == posted["id"]).unwrap();
    assert_eq!(st["chat_jid"], "status@broadcast");
    assert_eq!(st["from_jid"], format!("{B}@s.whatsapp.net"));
    let db = c.pool().await;
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM outbox WHERE instance_id = $1 AND type = 'status.received' AND payload->'data'->>'wa_message_id' = $2",
    )
    .bind(&id)
    .bind(posted["id"].as_str().unwrap())
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(n, 1);
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}
