//! Labels of a business account over netsim and a real worker: made and applied through
//! the API and on the phone, each change one `label.updated`, chats and messages showing
//! their labels; a personal account's 409; bad input changing nothing.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use crate::bin;

const BIZ: &str = "5511977770001";
const CUSTOMER: &str = "5511977770002";
const PERSONAL: &str = "5511977770003";

async fn label_events(c: &Cluster, id: &str) -> Vec<Value> {
    let pool = c.pool().await;
    sqlx::query_scalar(
        "SELECT payload->'data' FROM outbox WHERE instance_id = $1 AND type = 'label.updated' ORDER BY created_at, id",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap()
}

/// Waits until the instance has `n` label events; returns them.
async fn wait_events(c: &Cluster, id: &str, n: usize) -> Vec<Value> {
    wait_for(Duration::from_secs(20), || async {
        let e = label_events(c, id).await;
        (e.len() >= n).then_some(e)
    })
    .await
    .unwrap_or_else(|| panic!("{n} label.updated events"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_from_the_api_and_the_phone_reach_chats_messages_and_events_once() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(BIZ, true).await;
    c.phone(CUSTOMER, false).await;
    c.phone(PERSONAL, false).await;
    let (inst, token) = c.paired_instance("shop", BIZ).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    let base = format!("/v1/instances/{id}/labels");

    // A customer writes in: a chat and a message in the log.
    c.netsim()
        .post(&format!("/control/phones/{CUSTOMER}/messages"), &json!({ "to": BIZ, "text": "one cake please" }))
        .await
        .expect(201);
    let chat = format!("{CUSTOMER}@s.whatsapp.net");
    let msgs = wait_for(Duration::from_secs(20), || async {
        let m = own.get(&format!("/v1/instances/{id}/chats/{CUSTOMER}/messages")).await.expect(200)["messages"].clone();
        (m.as_array().unwrap().len() == 1).then_some(m)
    })
    .await
    .expect("the customer's message is logged");
    let msg_id = msgs[0]["id"].as_str().unwrap().to_string();
    assert_eq!(msgs[0]["labels"], json!([]));

    // Bad input: 400 and nothing made.
    own.post(&base, &json!({ "name": " " })).await.expect_error(400, "validation_failed");
    own.post(&base, &json!({ "name": "x", "color": 20 })).await.expect_error(400, "validation_failed");
    own.post(&base, &json!({ "name": "x", "colour": 1 })).await.expect_error(400, "validation_failed");
    assert_eq!(own.get(&base).await.expect(200), json!({ "labels": [] }));

    // Through the API: made on the network, recorded, one event each.
    let paid = own.post(&base, &json!({ "name": "Paid", "color": 3 })).await.expect(201);
    assert_eq!(paid, json!({ "id": "1", "name": "Paid", "color": 3 }));
    let e = wait_events(&c, &id, 1).await;
    assert_eq!(e[0]["label"], json!({ "id": "1", "name": "Paid", "color": 3, "deleted": false }));
    assert_eq!(e[0]["change"], "edited");
    let renamed = own.patch(&format!("{base}/1"), &json!({ "name": "Paid in full" })).await.expect(200);
    assert_eq!(renamed, json!({ "id": "1", "name": "Paid in full", "color": 3 }));
    own.put(&format!("{base}/1/chats/{CUSTOMER}"), &json!({})).await.expect(204);
    own.put(&format!("{base}/1/messages/{msg_id}"), &json!({})).await.expect(204);
    // Again: already so, no new event.
    own.put(&format!("{base}/1/chats/{chat}"), &json!({})).await.expect(204);
    let e = wait_events(&c, &id, 4).await;
    assert_eq!(e[2]["change"], "applied");
    assert_eq!(e[2]["chat_jid"], chat);
    assert_eq!(e[2]["chats"], json!([chat]));
    assert_eq!(e[3]["wa_message_id"], msgs[0]["wa_message_id"]);
    let phone = c.netsim().get(&format!("/control/phones/{BIZ}/labels")).await.expect(200);
    assert_eq!(phone["labels"][0]["name"], "Paid in full");
    assert_eq!(phone["labels"][0]["chats"], json!([CUSTOMER]));
    assert_eq!(phone["labels"][0]["messages"][0]["message_id"], msgs[0]["wa_message_id"]);
    let shown = own.get(&format!("/v1/instances/{id}/chats/{CUSTOMER}")).await.expect(200);
    assert_eq!(shown["labels"], json!(["1"]));
    let listed = own.get(&format!("/v1/instances/{id}/chats")).await.expect(200);
    assert_eq!(listed["chats"][0]["labels"], json!(["1"]));
    let m = own.get(&format!("/v1/instances/{id}/chats/{CUSTOMER}/messages")).await.expect(200);
    assert_eq!(m["messages"][0]["labels"], json!(["1"]));

    // Unknown label, message or chat: 404 / 400, nothing changes.
    own.put(&format!("{base}/9/chats/{CUSTOMER}"), &json!({})).await.expect_error(404, "not_found");
    own.put(&format!("{base}/1/messages/{}", shared::ids::MessageId::new()), &json!({}))
        .await
        .expect_error(404, "not_found");
    own.put(&format!("{base}/1/chats/not-a-number"), &json!({})).await.expect_error(400, "validation_failed");
    own.patch(&format!("{base}/9"), &json!({ "color": 1 })).await.expect_error(404, "not_found");

    // On the phone: a new label, applied to the chat, then the API's label deleted there.
    c.netsim()
        .post(&format!("/control/phones/{BIZ}/labels"), &json!({ "label_id": "7", "name": "VIP", "color": 5 }))
        .await
        .expect(200);
    c.netsim()
        .post(
            &format!("/control/phones/{BIZ}/ops"),
            &json!({ "op": "label_chat", "label_id": "7", "jid": chat, "labeled": true }),
        )
        .await
        .expect(200);
    let e = wait_events(&c, &id, 6).await;
    assert_eq!(e[4]["label"], json!({ "id": "7", "name": "VIP", "color": 5, "deleted": false }));
    assert_eq!(e[5]["change"], "applied");
    let chat_labels = |c2: &harness::Client| {
        let c2 = c2.clone();
        let id = id.clone();
        async move { c2.get(&format!("/v1/instances/{id}/chats/{CUSTOMER}")).await.expect(200)["labels"].clone() }
    };
    assert_eq!(chat_labels(&own).await, json!(["1", "7"]));
    c.netsim()
        .post(&format!("/control/phones/{BIZ}/labels"), &json!({ "label_id": "1", "deleted": true }))
        .await
        .expect(200);
    let e = wait_events(&c, &id, 7).await;
    assert_eq!(e[6]["label"], json!({ "id": "1", "deleted": true }));
    assert_eq!(e[6]["change"], "deleted");
    let labels = own.get(&base).await.expect(200);
    assert_eq!(labels, json!({ "labels": [{ "id": "7", "name": "VIP", "color": 5 }] }));
    assert_eq!(chat_labels(&own).await, json!(["7"]));
    let m = own.get(&format!("/v1/instances/{id}/chats/{CUSTOMER}/messages")).await.expect(200);
    assert_eq!(m["messages"][0]["labels"], json!([]));

    // Through the API again: off the chat, then deleted; the next new label's id follows.
    own.delete(&format!("{base}/7/chats/{CUSTOMER}")).await.expect(204);
    own.delete(&format!("{base}/7")).await.expect(204);
    own.delete(&format!("{base}/7")).await.expect_error(404, "not_found");
    let e = wait_events(&c, &id, 9).await;
    assert_eq!(e.len(), 9, "one event per change: {e:?}");
    assert_eq!(own.get(&base).await.expect(200), json!({ "labels": [] }));
    assert_eq!(c.netsim().get(&format!("/control/phones/{BIZ}/labels")).await.expect(200), json!({ "labels": [] }));

    // A personal account: 409 on every label route, and its phone cannot make one either.
    let (p, ptoken) = c.paired_instance("personal", PERSONAL).await;
    let pid = p.id.as_str();
    let pown = c.api.client(Some(ptoken));
    pown.get(&format!("/v1/instances/{pid}/labels")).await.expect_error(409, "business_account_required");
    pown.post(&format!("/v1/instances/{pid}/labels"), &json!({ "name": "x" }))
        .await
        .expect_error(409, "business_account_required");
    pown.delete(&format!("/v1/instances/{pid}/labels/1/chats/{CUSTOMER}"))
        .await
        .expect_error(409, "business_account_required");
    c.netsim()
        .post(&format!("/control/phones/{PERSONAL}/labels"), &json!({ "label_id": "1", "name": "x" }))
        .await
        .expect_error(409, "business_account_required");
    assert!(label_events(&c, pid).await.is_empty());
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}
