//! The admin's forms in the console: an instance's settings (the API's refusals at their
//! fields), a phone pairing code, deletion behind the typed name; the fleet's filters and
//! counts, bulk actions with each instance's result, and the cluster.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use reqwest::header::{COOKIE, LOCATION};
use reqwest::StatusCode;
use serde_json::json;

use super::{console, csrf_of, get, http, sign_in};
use crate::bin;

/// A phone that asks for a pairing code.
const PAIR_BY_CODE: &str = "5511977770009";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_edits_deletes_and_acts_on_many_instances() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let base = console(&c).await;
    let (other, _) = c.api.create_instance("console-other").await;
    c.api.create_instance("console-shop").await;
    let other_id = other.id.to_string();
    let (admin, _) = sign_in(&base, c.config.admin_token.as_deref().unwrap()).await;
    let h = http();

    // Settings: the API's refusal shows at its field, with what was typed; nothing changes.
    let settings = format!("{base}/i/{other_id}/settings");
    let (_, page) = get(&base, &admin, &format!("/i/{other_id}")).await;
    let csrf = csrf_of(&page);
    let typed = |min: &str, per_minute: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("name", "console-other".to_string()),
            ("tags", "vip, blue".to_string()),
            ("ip_allowlist", String::new()),
            ("min_interval_ms", min.to_string()),
            ("max_per_minute", per_minute.to_string()),
            ("time_zone", "UTC".to_string()),
            ("window_start", "09:00".to_string()),
            ("window_end", "18:00".to_string()),
            ("proxy_url", String::new()),
        ]
    };
    let res = h.post(&settings).header(COOKIE, &admin).form(&typed("10", "20")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let page = res.text().await.unwrap();
    assert!(page.contains("id=\"set-min_interval_ms-error\"") && page.contains("unsafe_pacing"), "{page}");
    assert!(page.contains("value=\"vip, blue\""), "what was typed stays: {page}");
    let res = h.post(&settings).header(COOKIE, &admin).form(&typed("2000", "lots")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("id=\"set-max_per_minute-error\""));
    let o = c.api.admin().get(&format!("/v1/instances/{other_id}")).await.expect(200);
    assert_eq!(o["tags"], json!([]), "a refused form changes nothing");
    // The API names the field in its envelope, for any client.
    let r = c.api.admin().patch(&format!("/v1/instances/{other_id}"), &json!({ "min_interval_ms": 10 })).await;
    assert_eq!((r.status, r.body["error"]["field"].clone()), (400, json!("min_interval_ms")), "{}", r.body);
    let res = h.post(&settings).header(COOKIE, &admin).form(&typed("3000", "20")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let o = c.api.admin().get(&format!("/v1/instances/{other_id}")).await.expect(200);
    assert_eq!(o["tags"], json!(["blue", "vip"]));
    assert_eq!(
        (o["min_interval_ms"].clone(), o["send_window"].clone()),
        (json!(3000), json!({ "start": "09:00", "end": "18:00" }))
    );

    // Hosted pairing links (the admin's, on the API keys tab): made, shown, revoked.
    let (_, keys) = get(&base, &admin, &format!("/i/{other_id}/keys")).await;
    assert!(keys.contains("Hosted pairing links"), "{keys}");
    let form = [("csrf", csrf_of(&keys)), ("expires_in", "24h".to_string())];
    let res = h.post(format!("{base}/i/{other_id}/links")).header(COOKIE, &admin).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let page = res.text().await.unwrap();
    let link = page.split("id=\"new-link\" type=\"text\" readonly value=\"").nth(1).and_then(|s| s.split('"').next());
    let link = link.expect("the link is shown").to_string();
    assert!(link.contains("/pair/pl_pair_"), "{link}");
    assert_eq!(reqwest::get(&link).await.unwrap().status(), 200, "the link's page opens");
    let res = h
        .post(format!("{base}/i/{other_id}/links/revoke"))
        .header(COOKIE, &admin)
        .form(&[("csrf", csrf_of(&keys))])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("id=\"links-revoked\""));
    assert_ne!(reqwest::get(&link).await.unwrap().status(), 200, "a revoked link opens nothing");

    // A phone pairing code while the instance waits for a scan.
    c.phone(PAIR_BY_CODE, false).await;
    let (waiting, _) = c.api.create_instance("console-code").await;
    let waiting = waiting.id.to_string();
    c.api.admin().post(&format!("/v1/instances/{waiting}/connect"), &json!({})).await.expect(202);
    wait_for(Duration::from_secs(20), || async {
        let i = c.api.admin().get(&format!("/v1/instances/{waiting}")).await.body;
        (i["state"] == "qr_pending").then_some(())
    })
    .await
    .expect("it waits for a scan");
    let (_, page) = get(&base, &admin, &format!("/i/{waiting}")).await;
    let form = [("csrf", csrf_of(&page)), ("phone", PAIR_BY_CODE.to_string())];
    let res =
        h.post(format!("{base}/i/{waiting}/pairing-code")).header(COOKIE, &admin).form(&form).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("id=\"pairing-code\""), "{page}");

    // Deleting needs the instance's name typed: a wrong one deletes nothing.
    let delete = format!("{base}/i/{waiting}/delete");
    let res = h
        .post(&delete)
        .header(COOKIE, &admin)
        .form(&[("csrf", csrf.as_str()), ("confirm", "console")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("nothing was deleted"));
    c.api.admin().get(&format!("/v1/instances/{waiting}")).await.expect(200);
    let res = h
        .post(&delete)
        .header(COOKIE, &admin)
        .form(&[("csrf", csrf.as_str()), ("confirm", "console-code")])
        .send()
        .await
        .unwrap();
    assert_eq!((res.status(), res.headers()[LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, "/fleet"));
    c.api.admin().get(&format!("/v1/instances/{waiting}")).await.expect_error(404, "instance_not_found");

    // The fleet: counts by state, a name filter (any case), each row's queue and worker.
    let (st, fleet) = get(&base, &admin, "/fleet?name=OTHER").await;
    assert_eq!(st, 200);
    assert!(fleet.contains("console-other") && !fleet.contains(">console-shop<"), "{fleet}");
    assert!(fleet.contains("aria-label=\"instances by state\"") && fleet.contains(" in all"), "{fleet}");
    let listed = c.api.admin().get("/v1/instances?name=oThEr&risk=low").await.expect(200);
    assert_eq!(listed["instances"], json!([]), "never evaluated: no risk level");
    c.api.admin().get("/v1/instances?risk=dire").await.expect_error(400, "validation_failed");
    // Bulk actions: refused without the confirmation, then each instance's result.
    let (bulk_a, _) = c.api.create_instance("console-bulk-a").await;
    let bulk_a = bulk_a.id.to_string();
    let (_, fleet) = get(&base, &admin, "/fleet").await;
    let mut form = vec![("csrf", csrf_of(&fleet)), ("action", "connect".to_string())];
    for id in [&other_id, &bulk_a] {
        form.push(("id", id.clone()));
    }
    let res = h.post(format!("{base}/fleet/bulk")).header(COOKIE, &admin).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let o = c.api.admin().get(&format!("/v1/instances/{bulk_a}")).await.expect(200);
    assert_eq!(o["state"], "disconnected", "nothing done without the confirmation");
    form.push(("confirm", "yes".to_string()));
    form.push(("label", format!("{bulk_a}:console-bulk-a")));
    let res = h.post(format!("{base}/fleet/bulk")).header(COOKIE, &admin).form(&form).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("2 succeeded, 0 failed") && page.contains(">console-bulk-a<"), "{page}");
    // The cluster: the worker holds both once it takes them.
    let cluster = wait_for(Duration::from_secs(45), || async {
        let c = c.api.admin().get("/v1/cluster").await.expect(200);
        (c["workers"].as_array()?.first()?["instances"].as_i64()? >= 2).then_some(c)
    })
    .await
    .expect("the worker holds both");
    assert_eq!(cluster["workers"].as_array().unwrap().len(), 1, "{cluster}");
    assert_eq!(cluster["instances"]["unleased"], 0, "{cluster}");
    assert!(cluster["instances"]["by_state"]["disconnected"].as_i64().is_some(), "every state: {cluster}");
    let worker = cluster["workers"][0]["id"].as_str().unwrap().to_string();
    let (st, page) = get(&base, &admin, "/cluster").await;
    assert_eq!(st, 200);
    assert!(page.contains(&worker), "{page}");
    let (_, fleet) = get(&base, &admin, "/fleet?name=console-bulk-a").await;
    assert!(fleet.contains(&worker), "the fleet names the worker holding it: {fleet}");
}
