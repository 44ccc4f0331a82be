//! A run over every instance with a tag, from the fleet: 100 instances a step, each step
//! one form; without a script each is a click on Continue, and in a real browser the
//! page's script sends them by itself, showing the progress and each failure.

use std::time::Duration;

use harness::browser::{Browser, Locator};
use harness::cluster::wait_for;
use reqwest::header::{ACCEPT, COOKIE};
use reqwest::StatusCode;

use super::{accessible, console_of, csrf_of, get, http, sign_in};

/// Instances with the tag `wave`; the first already has 32 tags (adding one fails).
const WAVE: i64 = 250;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_a_tag_shows_its_progress_and_failures() {
    let api = harness::TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    sqlx::query(
        "INSERT INTO instances (id, name, token_hash, min_interval_ms, max_per_minute, tags) \
         SELECT 'inst_' || lpad(to_hex(g), 32, '0'), 'wave-' || g, 'seeded-' || g, 2000, 20, \
             CASE WHEN g = 1 THEN ARRAY['wave'] || ARRAY(SELECT 't' || n FROM generate_series(1, 31) n) \
                  ELSE ARRAY['wave'] END \
         FROM generate_series(1, $1) g",
    )
    .bind(WAVE)
    .execute(&db)
    .await
    .unwrap();
    let base = console_of(&api.config, api.addr).await;
    let admin_token = api.config.admin_token.clone().unwrap();
    let (admin, _) = sign_in(&base, &admin_token).await;
    let h = http();
    let tagged = |tag: &'static str| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM instances WHERE tags @> ARRAY[$1]")
                .bind(tag)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };

    // The fleet filtered by a tag offers the run; one step without a script.
    let (_, fleet) = get(&base, &admin, "/fleet?tag=wave").await;
    assert!(fleet.contains("id=\"bulk-tag\""), "{fleet}");
    let csrf = csrf_of(&fleet);
    let run = format!("{base}/fleet/bulk/tag");
    let form = |confirm: &'static str| {
        vec![
            ("csrf", csrf.clone()),
            ("tag", "wave".into()),
            ("action", "add_tag".into()),
            ("value", "vip".into()),
            ("confirm", confirm.into()),
        ]
    };
    let res = h.post(&run).header(COOKIE, &admin).form(&form("")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST, "not without the confirmation");
    let mut forged = form("yes");
    forged[0].1 = "x".into();
    let res = h.post(&run).header(COOKIE, &admin).form(&forged).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert_eq!(tagged("vip").await, 0, "refused forms change nothing");
    let res = h.post(&run).header(COOKIE, &admin).form(&form("yes")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let step = res.text().await.unwrap();
    assert!(step.contains("id=\"run-next\"") && step.contains("<span id=\"run-done\">100</span> of 250"), "{step}");
    assert!(step.contains("<span id=\"run-failed\">1</span>") && step.contains("at most 32 tags"), "{step}");
    assert_eq!(tagged("vip").await, 99);
    // The next step as the page's script sends it: the form's fields, JSON back.
    let cursor = step.split("name=\"cursor\" value=\"").nth(1).and_then(|s| s.split('"').next()).unwrap().to_string();
    let mut next = form("yes");
    next.extend([("cursor", cursor), ("total", "250".into()), ("succeeded", "99".into()), ("failed", "1".into())]);
    let res = h.post(&run).header(COOKIE, &admin).header(ACCEPT, "application/json").form(&next).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let p: serde_json::Value = res.json().await.unwrap();
    assert_eq!(
        (p["succeeded"].as_u64(), p["failed"].as_u64(), p["total"].as_u64()),
        (Some(199), Some(1), Some(250)),
        "{p}"
    );
    assert!(p["next_cursor"].is_string() && p["failures"] == serde_json::json!([]), "{p}");
    // A bad value is the API's 400, as JSON to the script.
    let mut bad = form("yes");
    bad[3].1 = " ".into();
    let res = h.post(&run).header(COOKIE, &admin).header(ACCEPT, "application/json").form(&bad).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);

    // In a browser the script runs the whole run: remove the tag from every instance.
    let b = Browser::start().await;
    b.client.goto(&format!("{base}/")).await.unwrap();
    b.client.find(Locator::Css("#token")).await.unwrap().send_keys(&admin_token).await.unwrap();
    b.client.find(Locator::Css("main form button")).await.unwrap().click().await.unwrap();
    b.wait_for_element("#bulk", Duration::from_secs(10)).await.expect("the fleet");
    b.client.goto(&format!("{base}/fleet?tag=wave")).await.unwrap();
    b.client.find(Locator::Css("#tag-run-action")).await.unwrap().select_by_value("remove_tag").await.unwrap();
    b.client.find(Locator::Css("#tag-run-value")).await.unwrap().send_keys("vip").await.unwrap();
    b.client.find(Locator::Css("#bulk-tag input[name=confirm]")).await.unwrap().click().await.unwrap();
    b.client.find(Locator::Css("#bulk-tag button[type=submit]")).await.unwrap().click().await.unwrap();
    let summary = wait_for(Duration::from_secs(60), || async {
        let t = b.client.find(Locator::Css("#run-summary")).await.ok()?.text().await.ok()?;
        t.contains("Finished.").then_some(t)
    })
    .await
    .expect("the run finishes by itself");
    assert!(summary.starts_with("250 of 250 done: 250 succeeded, 0 failed."), "{summary}");
    let bar = b.client.execute("return document.getElementById('run-progress').value", vec![]).await.unwrap();
    assert_eq!(bar, serde_json::json!(250), "the bar is full");
    assert!(b.client.find(Locator::Css("#run-next")).await.is_err(), "nothing left to continue");
    assert_eq!(tagged("vip").await, 0, "removed from all");
    b.screenshot("console-bulk-run").await;
    accessible(&b, "bulk run").await;
    b.close().await;
}
