//! Hosted pairing links in a real browser (headless Chromium through ChromeDriver): the
//! page shows the QR code, netsim scans the payload read from the page, and the page
//! turns to success by itself; a used, an expired and a revoked link show no QR and pair
//! nothing; pairing by phone number gives a code that links the phone. Also /docs,
//! loaded in the browser, lists the routes.

use std::time::Duration;

use harness::browser::{Browser, Locator};
use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use crate::bin;

const A: &str = "5511999994001";
const B: &str = "5511999994002";

async fn link(c: &Cluster, id: &str) -> String {
    let l = c
        .api
        .admin()
        .post(&format!("/v1/instances/{id}/pairing-links"), &json!({ "expires_in": "2h" }))
        .await
        .expect(201);
    let url = l["url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("http://{}/pair/pl_pair_", c.api.addr)), "{url}");
    url
}

async fn text(b: &Browser) -> String {
    b.client.find(Locator::Css("main")).await.unwrap().text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customer_pairs_through_the_hosted_page() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    let (inst, token) = c.api.create_instance("hosted").await;
    let id = inst.id.to_string();
    // Only the admin makes and revokes links.
    let own = c.api.client(Some(token));
    own.post(&format!("/v1/instances/{id}/pairing-links"), &json!({})).await.expect_error(403, "forbidden");
    c.api
        .admin()
        .post(&format!("/v1/instances/{id}/pairing-links"), &json!({ "expires_in": "8d" }))
        .await
        .expect_error(400, "validation_failed");
    let url = link(&c, &id).await;

    let b = Browser::start().await;
    b.client.goto(&url).await.unwrap();
    // The page connected the instance; the script shows the QR once the network gives one.
    let code = wait_for(Duration::from_secs(30), || async {
        let qr = b.client.find(Locator::Css("#qr")).await.ok()?;
        qr.attr("data-code").await.ok().flatten().filter(|c| !c.is_empty())
    })
    .await
    .expect("the page shows a QR code");
    let page = b.client.source().await.unwrap();
    assert!(!page.contains("pl_inst_") && !page.contains("pl_admin_"), "the page shows no token");
    b.screenshot("pairing-page-qr").await;
    c.netsim().post("/control/scan", &json!({ "code": code, "number": A })).await.expect(200);
    let paired = wait_for(Duration::from_secs(30), || async {
        let p = b.client.find(Locator::Css("#paired")).await.ok()?;
        p.is_displayed().await.ok().filter(|shown| *shown)
    })
    .await;
    assert!(paired.is_some(), "the page turns to success");
    let shot = b.screenshot("pairing-page-connected").await;
    assert!(std::fs::metadata(&shot).unwrap().len() > 1000);
    c.wait_state(&id, "connected", Duration::from_secs(10)).await;
    // Used: the page says so and shows no QR.
    b.client.goto(&url).await.unwrap();
    assert!(text(&b).await.contains("already used"));
    assert!(b.client.find(Locator::Css("#qr")).await.is_err());

    // An expired link: no QR, and the instance is not started.
    let (other, _) = c.api.create_instance("hosted-2").await;
    let oid = other.id.to_string();
    let expired = link(&c, &oid).await;
    sqlx::query("UPDATE pairing_links SET expires_at = now() - interval '1 second' WHERE instance_id = $1")
        .bind(&oid)
        .execute(&c.pool().await)
        .await
        .unwrap();
    b.client.goto(&expired).await.unwrap();
    assert!(text(&b).await.contains("expired"));
    assert!(b.client.find(Locator::Css("#qr")).await.is_err());
    let o = c.api.admin().get(&format!("/v1/instances/{oid}")).await.expect(200);
    assert_eq!(o["state"], "disconnected", "an expired link starts nothing");

    // A revoked link: the open page turns to the reason by itself, and no longer pairs.
    let revoked = link(&c, &oid).await;
    b.client.goto(&revoked).await.unwrap();
    let code = wait_for(Duration::from_secs(30), || async {
        let qr = b.client.find(Locator::Css("#qr")).await.ok()?;
        qr.attr("data-code").await.ok().flatten().filter(|c| !c.is_empty())
    })
    .await
    .expect("a QR before the revocation");
    c.api.admin().delete(&format!("/v1/instances/{oid}/pairing-links")).await.expect(204);
    let ended = wait_for(Duration::from_secs(10), || async {
        let e = b.client.find(Locator::Css("#ended")).await.ok()?;
        e.is_displayed().await.ok().filter(|shown| *shown)
    })
    .await;
    assert!(ended.is_some(), "the page says the link was withdrawn");
    assert!(text(&b).await.contains("withdrawn"));
    b.client.goto(&revoked).await.unwrap();
    assert!(b.client.find(Locator::Css("#qr")).await.is_err());
    let _ = code;

    // /docs in the same browser: Swagger UI renders the routes.
    b.client.goto(&c.api.url("/docs/")).await.unwrap();
    let ops = wait_for(Duration::from_secs(30), || async {
        let n = b.client.find_all(Locator::Css(".opblock")).await.ok()?.len();
        (n >= 50).then_some(n)
    })
    .await;
    assert!(ops.is_some(), "Swagger UI lists the operations");
    b.screenshot("docs").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosted_page_pairs_by_phone_number_without_javascript() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(B, false).await;
    let (inst, _) = c.api.create_instance("by-number").await;
    let id = inst.id.to_string();
    let url = link(&c, &id).await;
    // Another link, never opened: pairing through the first uses it up too.
    let unopened = link(&c, &id).await;
    let http = reqwest::Client::new();
    // The first load starts the session; the form works once it shows a QR.
    let page = http.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["cache-control"], "no-store");
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("script-src 'self'"));
    c.wait_state(&id, "qr_pending", Duration::from_secs(20)).await;
    // Five codes in ten minutes; the sixth is refused. The last one pairs.
    let mut code = String::new();
    for _ in 0..5 {
        let html = http.post(format!("{url}/code")).form(&[("phone", "+55 11 99999-4002")]).send().await.unwrap();
        assert_eq!(html.status(), 200);
        let html = html.text().await.unwrap();
        code = html
            .split("id=\"pairing-code\" class=\"code\">")
            .nth(1)
            .and_then(|s| s.split('<').next())
            .expect("the page shows a pairing code")
            .to_string();
    }
    let more = http.post(format!("{url}/code")).form(&[("phone", "+55 11 99999-4002")]).send().await.unwrap();
    assert_eq!(more.status(), 429);
    assert_eq!(code.chars().filter(|c| c.is_ascii_alphanumeric()).count(), 8, "{code}");
    c.netsim().post("/control/enter-code", &json!({ "number": B, "pairing_code": code })).await.expect(200);
    c.wait_state(&id, "connected", Duration::from_secs(20)).await;
    let spare = http.get(&unopened).send().await.unwrap();
    assert_eq!(spare.status(), 410);
    assert!(spare.text().await.unwrap().contains("already used"));
    let status: Value = http.get(format!("{url}/status")).send().await.unwrap().json().await.unwrap();
    assert_eq!(status["paired"], true);
    assert!(status.get("token").is_none());
    // Not a number: 400 with the page; an unknown link: 404.
    let bad = http.post(format!("{url}/code")).form(&[("phone", "call me")]).send().await.unwrap();
    assert_eq!(bad.status(), 410, "the link was used meanwhile");
    let unknown = http.get(c.api.url("/pair/pl_pair_nosuchlink")).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
}
