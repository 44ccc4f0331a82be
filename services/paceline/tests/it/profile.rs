//! The account's own profile and privacy settings over netsim: read, change, and the
//! refusals (a value that does not fit its category changes nothing); the profile
//! picture set from data or a URL (under the SSRF guard) and removed.

use base64::Engine;
use harness::cluster::Cluster;
use harness::{jpeg, media_server};
use serde_json::json;

use crate::bin;

const A: &str = "5511999992001";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_and_privacy_are_read_and_changed() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    let (inst, token) = c.paired_instance("profile", A).await;
    let id = inst.id.to_string();
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
    let oid = other.id.as_str();
    c.api.admin().get(&format!("/v1/instances/{oid}/privacy")).await.expect_error(409, "instance_not_connected");
}

/// A cluster with an instance paired with `A`: (cluster, instance id, its client).
async fn paired(name: &str, tweak: impl FnOnce(&mut shared::Config)) -> (Cluster, String, harness::Client) {
    let c = Cluster::start(bin(), 1, tweak).await;
    c.phone(A, false).await;
    let (inst, token) = c.paired_instance(name, A).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    (c, id, own)
}

/// Media rows the instance holds.
async fn media_rows(c: &Cluster, id: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM media WHERE instance_id = $1")
        .bind(id)
        .fetch_one(&c.pool().await)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profile_picture_is_set_from_data_or_a_url_and_removed() {
    let server = media_server().await;
    let (c, id, own) = paired("picture", |_| {}).await;
    let path = format!("/v1/instances/{id}/profile/picture");
    let put = |body: serde_json::Value| {
        let (own, path) = (&own, &path);
        async move { own.put(path, &body).await }
    };
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let picture = |p: serde_json::Value| async move {
        let url = p["picture_url"].as_str().expect("a picture").to_string();
        reqwest::get(url).await.unwrap().bytes().await.unwrap().to_vec()
    };

    // From data.
    let data = jpeg(2000);
    let p = put(json!({ "media": { "data": b64(&data), "mime_type": "image/jpeg" } })).await.expect(200);
    assert_eq!(picture(p).await, data);
    // Refused, and nothing changes: not a JPEG, another type, both sources, a private URL.
    put(json!({ "media": { "data": b64(b"\x89PNG...."), "mime_type": "image/jpeg" } }))
        .await
        .expect_error(400, "validation_failed");
    put(json!({ "media": { "data": b64(&data), "mime_type": "image/png" } }))
        .await
        .expect_error(400, "validation_failed");
    put(json!({ "media": { "data": b64(&data), "url": "https://example.com/a.jpg", "mime_type": "image/jpeg" } }))
        .await
        .expect_error(400, "validation_failed");
    put(json!({ "media": { "url": format!("http://{server}/jpeg/10") } })).await.expect_error(400, "validation_failed");
    put(json!({ "media": { "data": b64(&jpeg(5 * 1024 * 1024)), "mime_type": "image/jpeg" } }))
        .await
        .expect_error(413, "media_too_large");
    let p = own.get(&format!("/v1/instances/{id}/profile")).await.expect(200);
    assert_eq!(picture(p).await, data);

    // Removed.
    let p = own.delete(&path).await.expect(200);
    assert_eq!(p["picture_url"], json!(null));
    // The picture is stored only for the change.
    assert_eq!(media_rows(&c, &id).await, 0);
    // Not running: 409, before anything is stored.
    let (other, _) = c.api.create_instance("idle").await;
    let oid = other.id.as_str();
    c.api
        .admin()
        .send(
            c.api
                .admin()
                .request(reqwest::Method::PUT, &format!("/v1/instances/{oid}/profile/picture"))
                .json(&json!({ "media": { "data": b64(&data), "mime_type": "image/jpeg" } })),
        )
        .await
        .expect_error(409, "instance_not_connected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_url_is_fetched_through_the_guard() {
    let server = media_server().await;
    let (c, id, own) = paired("picture-url", |cfg| cfg.allow_private_targets = true).await;
    let path = format!("/v1/instances/{id}/profile/picture");
    let put = |body: serde_json::Value| {
        let (own, path) = (&own, &path);
        async move { own.put(path, &body).await }
    };
    let p = put(json!({ "media": { "url": format!("http://{server}/jpeg/3000") } })).await.expect(200);
    let got = reqwest::get(p["picture_url"].as_str().unwrap()).await.unwrap().bytes().await.unwrap();
    assert_eq!(&got[..], &jpeg(3000)[..]);
    // Downloaded, but not a JPEG: refused before the session is asked, the stored copy gone.
    put(json!({ "media": { "url": format!("http://{server}/file/100") } }))
        .await
        .expect_error(400, "validation_failed");
    put(json!({ "media": { "url": format!("http://{server}/missing") } }))
        .await
        .expect_error(422, "media_fetch_failed");
    // Over 5 MiB, downloaded or sent: 413 (a body over the route's limit before any slot).
    let over = 5 * 1024 * 1024 + 1;
    put(json!({ "media": { "url": format!("http://{server}/jpeg/{over}") } }))
        .await
        .expect_error(413, "media_too_large");
    // A body over the route's cap is refused without being read: the answer is 413, or,
    // when the server closes before the client has written it all, a broken pipe.
    let huge = base64::engine::general_purpose::STANDARD.encode(jpeg(6 * 1024 * 1024));
    let sent =
        own.request(reqwest::Method::PUT, &path).json(&json!({ "media": { "data": huge, "mime_type": "image/jpeg" } }));
    match sent.send().await {
        Ok(r) => assert_eq!(r.status(), 413),
        Err(e) => assert!(e.is_request(), "{e}"),
    }
    assert_eq!(media_rows(&c, &id).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_business_profile_is_a_business_accounts_own() {
    const BIZ: &str = "5511999992009";
    let (c, personal, own) = paired("personal", |_| {}).await;
    c.phone(BIZ, true).await;
    let profile = json!({ "description": "Bakery", "category": "Food", "email": "hi@bakery.example", "website": "https://bakery.example" });
    c.netsim()
        .patch(&format!("/control/phones/{BIZ}/profile"), &json!({ "business_profile": profile }))
        .await
        .expect(200);
    let (biz, token) = c.paired_instance("bakery", BIZ).await;
    let bid = biz.id.as_str();
    let p = c.api.client(Some(token)).get(&format!("/v1/instances/{bid}/business/profile")).await.expect(200);
    assert_eq!(p["jid"], format!("{BIZ}@s.whatsapp.net"));
    assert_eq!(p["description"], "Bakery");
    assert_eq!(p["category"], "Food");
    assert_eq!(p["website"], "https://bakery.example");
    assert_eq!(p["address"], json!(null));
    // A personal account: 409; one never paired: 409 instance_not_connected.
    own.get(&format!("/v1/instances/{personal}/business/profile")).await.expect_error(409, "business_account_required");
    let (idle, _) = c.api.create_instance("idle").await;
    c.api
        .admin()
        .get(&format!("/v1/instances/{}/business/profile", idle.id.as_str()))
        .await
        .expect_error(409, "instance_not_connected");
}
