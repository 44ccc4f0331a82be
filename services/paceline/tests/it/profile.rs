//! The account's own profile and privacy settings over netsim: read, change, and the
//! refusals (a value that does not fit its category changes nothing).

use harness::cluster::Cluster;
use serde_json::json;

use crate::bin;

const A: &str = "5511999992001";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_and_privacy_are_read_and_changed() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    let (inst, token) = c.paired_instance("profile", A).await;
    let id = inst["id"].as_str().unwrap().to_string();
    let own = c.api.client(Some(token));

    let p = own.get(&format!("/v1/instances/{id}/profile")).await.expect(200);
    assert_eq!(p["push_name"], json!(null));
    assert_eq!(p["picture_url"], json!(null));
    let p = own
        .patch(&format!("/v1/instances/{id}/profile"), &json!({ "push_name": " Shop ", "about": "open 9-18" }))
        .await
        .expect(200);
    assert_eq!(p["push_name"], "Shop");
    assert_eq!(p["about"], "open 9-18");
    own.patch(&format!("/v1/instances/{id}/profile"), &json!({ "push_name": "x".repeat(26) }))
        .await
        .expect_error(400, "validation_failed");
    own.patch(&format!("/v1/instances/{id}/profile"), &json!({ "about": "y".repeat(140) }))
        .await
        .expect_error(400, "validation_failed");

    let path = format!("/v1/instances/{id}/privacy");
    let before = own.get(&path).await.expect(200);
    assert_eq!(before["status"], "contacts");
    assert_eq!(before["last"], "all");
    let after = own.patch(&path, &json!({ "last": "contacts", "readreceipts": "none" })).await.expect(200);
    assert_eq!(after["last"], "contacts");
    assert_eq!(after["readreceipts"], "none");
    // A value that does not fit its category: 400, and the other change is not made.
    own.patch(&path, &json!({ "profile": "none", "online": "contacts" })).await.expect_error(400, "validation_failed");
    own.patch(&path, &json!({ "favourite_colour": "all" })).await.expect_error(400, "validation_failed");
    assert_eq!(own.get(&path).await.expect(200)["profile"], "all");
    // Not running: 409.
    let (other, _) = c.api.create_instance("idle").await;
    let oid = other["id"].as_str().unwrap();
    c.api.admin().get(&format!("/v1/instances/{oid}/privacy")).await.expect_error(409, "instance_not_connected");
}
