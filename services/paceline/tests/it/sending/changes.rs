//! Changes to messages already sent, through `/v1`: one of the account's own texts
//! edited, one deleted for everyone (the recipient's phone shows both); someone else's
//! message, or one that never reached the network, is 404 and changes nothing. And the
//! account's presence, set for everyone.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use super::{failed_message, inbox, A, B};
use crate::bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_messages_are_edited_and_deleted_for_everyone() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("changes", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let path = format!("/v1/instances/{id}/messages");
    let wait = format!("{path}?wait=true&timeout=20s");
    let hello = own.post(&wait, &json!({ "to": B, "type": "text", "text": "hello" })).await.expect(200);
    let bye = own.post(&wait, &json!({ "to": B, "type": "text", "text": "bye" })).await.expect(200);
    let (hello_id, bye_id) = (hello["id"].as_str().unwrap(), bye["id"].as_str().unwrap());

    // Bad input first: refused, and nothing changes on B's phone.
    own.patch(&format!("{path}/{hello_id}"), &json!({ "text": " \n " })).await.expect_error(400, "validation_failed");
    own.patch(&format!("{path}/{hello_id}"), &json!({ "text": "x".repeat(4097) }))
        .await
        .expect_error(400, "validation_failed");
    let copy = |all: &Value, wa: &Value| all["messages"].as_array().unwrap().iter().find(|m| m["id"] == *wa).cloned();
    let before = inbox(&c, B).await;
    assert_eq!(copy(&before, &hello["wa_message_id"]).unwrap()["body"]["text"], "hello");

    own.patch(&format!("{path}/{hello_id}"), &json!({ "text": "hello (edited)" })).await.expect(204);
    own.post(&format!("{path}/{bye_id}/revoke"), &json!({})).await.expect(204);
    let after = inbox(&c, B).await;
    let edited = copy(&after, &hello["wa_message_id"]).expect("the edited copy");
    assert_eq!(
        (edited["body"]["text"].as_str(), edited["body"]["edited"].as_bool()),
        (Some("hello (edited)"), Some(true))
    );
    assert_eq!(copy(&after, &bye["wa_message_id"]).expect("the revoked copy")["body"], json!({ "revoked": true }));

    // B's message is in A's log, but not A's own: 404, for either change.
    c.netsim().post(&format!("/control/phones/{B}/messages"), &json!({ "to": A, "text": "mine" })).await.expect(201);
    let theirs = wait_for(Duration::from_secs(10), || async {
        let m = own.get(&format!("/v1/instances/{id}/chats/{B}/messages")).await.expect(200);
        m["messages"].as_array()?.iter().find(|m| m["from_me"] == false)?["id"].as_str().map(str::to_string)
    })
    .await
    .expect("B's message is logged");
    own.patch(&format!("{path}/{theirs}"), &json!({ "text": "not mine" })).await.expect_error(404, "not_found");
    own.post(&format!("{path}/{theirs}/revoke"), &json!({})).await.expect_error(404, "not_found");
    // A message that failed never reached the network: nothing to change.
    let failed = failed_message(&own, &path).await;
    own.post(&format!("{path}/{failed}/revoke"), &json!({})).await.expect_error(404, "not_found");
    let last = inbox(&c, B).await;
    assert_eq!(last["messages"], after["messages"], "nothing more reached B");

    // Presence, for everyone.
    let presence = format!("/v1/instances/{id}/presence");
    own.put(&presence, &json!({ "available": true })).await.expect(204);
    assert_eq!(c.netsim().get(&format!("/control/phones/{A}")).await.expect(200)["presence"], "available");
    own.put(&presence, &json!({ "available": false })).await.expect(204);
    assert_eq!(c.netsim().get(&format!("/control/phones/{A}")).await.expect(200)["presence"], "unavailable");
    own.put(&presence, &json!({ "available": "yes" })).await.expect_error(400, "validation_failed");
}
