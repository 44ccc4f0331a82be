//! The Webhooks tab: an endpoint's log narrowed, a delivery's request and answers, a
//! failed delivery resent; endpoints added, edited, disabled, rotated and deleted; what a
//! read_only key sees of them.

use std::time::Duration;

use harness::cluster::wait_for;
use reqwest::header::COOKIE;
use reqwest::StatusCode;
use serde_json::json;

use super::{csrf_of, get, http, sign_in, NoRetries};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_is_resent_from_the_console() {
    // The first failure is final.
    let env = NoRetries::start().await;
    let (api, cfg, base) = (&env.api, env.cfg.clone(), env.base.clone());
    let sink = harness::webhooks::WebhookSink::start().await;
    sink.plan(&[(500, None)]);
    sink.answer_body("busy \u{1}<b>now</b> ");
    let (inst, token) = api.create_instance("console-hooks").await;
    let id = inst.id.to_string();
    let own = api.client(Some(token.clone()));
    // The endpoint's URL carries credentials: no log or page ever shows them.
    let with_credentials = sink.url().replace("http://", "http://shop:s3cret@");
    let masked = sink.url().replace("http://", "http://***@");
    let wh = crate::deliveries::hook(&own, &id, &with_credentials, &["message.queued"]).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    crate::deliveries::queue(&own, &id, "x").await;
    let deliveries = format!("/v1/instances/{id}/webhooks/{wh}/deliveries");
    let state_is = |want: &'static str| {
        let (own, deliveries) = (own.clone(), deliveries.clone());
        async move {
            let d = own.get(&deliveries).await.expect(200)["deliveries"][0].clone();
            (d["state"] == want).then_some(d)
        }
    };
    let failed = wait_for(Duration::from_secs(15), || state_is("failed")).await.expect("fails after one attempt");
    // The delivery in the API: the request its attempt made and the endpoint's answer.
    let detail = own.get(&format!("{deliveries}/{}", failed["id"].as_str().unwrap())).await.expect(200);
    let sent = &sink.received()[0];
    assert_eq!(detail["request"]["url"], masked.as_str());
    assert!(!detail.to_string().contains("s3cret"), "{detail}");
    assert_eq!(detail["request"]["headers"]["webhook-id"], failed["event_id"]);
    assert_eq!(
        detail["request"]["headers"]["webhook-timestamp"].as_str(),
        sent.headers.iter().find(|(k, _)| k == "webhook-timestamp").map(|(_, v)| v.as_str())
    );
    assert_eq!(detail["request"]["body"].as_str(), Some(sent.body.as_str()), "the body as sent");
    assert_eq!(
        (detail["request"]["bytes"].as_u64(), detail["request"]["truncated"].clone()),
        (Some(sent.body.len() as u64), json!(false))
    );
    let attempts = detail["attempt_log"].as_array().unwrap();
    assert_eq!(detail["attempts"], 1);
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (attempts[0]["status"].clone(), attempts[0]["response"].clone()),
        (json!(500), json!("busy \u{1}<b>now</b> "))
    );
    own.get(&format!("{deliveries}/dlv_00000000000000000000000000000000")).await.expect_error(404, "not_found");

    // The endpoint and its log, with a Resend on the failed delivery.
    let (session, _) = sign_in(&base, &token).await;
    let (st, page) = get(&base, &session, &format!("/i/{id}/webhooks")).await;
    assert_eq!(st, 200);
    assert!(page.contains(&masked) && page.contains(&format!("href=\"/i/{id}/webhooks/{wh}\"")), "{page}");
    let (st, page) = get(&base, &session, &format!("/i/{id}/webhooks/{wh}")).await;
    assert_eq!(st, 200);
    let action = format!("/i/{id}/webhooks/{wh}/deliveries/{}/resend", failed["id"].as_str().unwrap());
    assert!(page.contains("message.queued") && page.contains(&format!("action=\"{action}\"")), "{page}");
    // The delivery's page: the request as sent, the answer's start (escaped), a Resend.
    let (st, one) =
        get(&base, &session, &format!("/i/{id}/webhooks/{wh}/deliveries/{}", failed["id"].as_str().unwrap())).await;
    assert_eq!(st, 200, "{one}");
    assert!(one.contains(&format!("webhook-id: {}", failed["event_id"].as_str().unwrap())), "{one}");
    assert!(one.contains("answered <strong>500</strong>") && one.contains("busy \u{1}&lt;b&gt;now&lt;/b&gt;"), "{one}");
    assert!(one.contains(&format!("action=\"{action}\"")), "{one}");
    // Without the session's CSRF token nothing is resent; with it, the delivery goes again.
    let h = http();
    let res = h.post(format!("{base}{action}")).header(COOKIE, &session).form(&[("csrf", "x")]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = h
        .post(format!("{base}{action}"))
        .header(COOKIE, &session)
        .form(&[("csrf", csrf_of(&page))])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let done = wait_for(Duration::from_secs(15), || state_is("succeeded")).await.expect("the resend succeeds");
    assert_eq!(done["attempts"], 2);
    let (_, page) = get(&base, &session, &format!("/i/{id}/webhooks/{wh}")).await;
    assert!(page.contains("succeeded") && !page.contains("/resend\""), "nothing left to resend: {page}");

    // A read_only key sees the log and no Resend.
    let key = own
        .post(&format!("/v1/instances/{id}/api-keys"), &json!({ "name": "viewer", "scope": "read_only" }))
        .await
        .expect(201);
    sink.plan(&[(500, None)]);
    crate::deliveries::queue(&own, &id, "y").await;
    wait_for(Duration::from_secs(15), || state_is("failed")).await.expect("the second fails");
    let (ro, _) = sign_in(&base, key["token"].as_str().unwrap()).await;
    let (st, page) = get(&base, &ro, &format!("/i/{id}/webhooks/{wh}")).await;
    assert_eq!(st, 200);
    assert!(page.contains("failed") && !page.contains("/resend\""), "{page}");
    let (_, page) = get(&base, &ro, &format!("/i/{id}/webhooks")).await;
    assert!(!page.contains("/rotate\"") && !page.contains("Add an endpoint"), "no forms for a key: {page}");
    // The log narrowed by state, event type and time, on the page and in the API.
    let (_, page) = get(&base, &ro, &format!("/i/{id}/webhooks/{wh}?state=failed&since=hour")).await;
    assert!(page.contains("state-failed") && !page.contains("state-succeeded"), "{page}");
    let (_, page) = get(&base, &ro, &format!("/i/{id}/webhooks/{wh}?event=message.sent")).await;
    assert!(page.contains("No delivery matches."), "{page}");
    let log = |q: &str| {
        let (own, path) = (own.clone(), format!("{deliveries}?{q}"));
        async move { own.get(&path).await }
    };
    assert_eq!(log("state=succeeded").await.expect(200)["deliveries"].as_array().unwrap().len(), 1);
    assert_eq!(log("event=message.queued").await.expect(200)["deliveries"].as_array().unwrap().len(), 2);
    assert_eq!(log("since=2999-01-01T00:00:00Z").await.expect(200)["deliveries"], json!([]));
    let bad = log("event=message.nope").await;
    assert_eq!((bad.status, bad.body["error"]["field"].clone()), (400, json!("event")), "{}", bad.body);
    log("state=lost").await.expect_error(400, "validation_failed");

    // The owner manages endpoints: added (the secret shown once), refused with the API's
    // message, disabled and enabled, the secret rotated, deleted.
    let (_, page) = get(&base, &session, &format!("/i/{id}/webhooks")).await;
    let csrf = csrf_of(&page);
    let add = format!("{base}/i/{id}/webhooks");
    let form = [("csrf", csrf.as_str()), ("url", "ftp://example.com/"), ("events", ""), ("format", "paceline")];
    let res = h.post(&add).header(COOKIE, &session).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("id=\"webhook-error\""));
    let url = format!("{}/second", sink.url());
    let form = [
        ("csrf", csrf.as_str()),
        ("url", url.as_str()),
        ("events", "message.sent, message.queued"),
        ("format", "evolution"),
    ];
    let res = h.post(&add).header(COOKIE, &session).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let page = res.text().await.unwrap();
    let secret =
        page.split("id=\"new-secret\" type=\"text\" readonly value=\"").nth(1).and_then(|s| s.split('"').next());
    assert!(secret.is_some_and(|s| s.starts_with("whsec_")), "{page}");
    let hooks = own.get(&format!("/v1/instances/{id}/webhooks")).await.expect(200);
    let second = hooks["webhooks"].as_array().unwrap().iter().find(|w| w["url"] == url.as_str()).unwrap().clone();
    assert_eq!(
        (second["format"].clone(), second["events"].clone()),
        (json!("evolution"), json!(["message.queued", "message.sent"]))
    );
    assert!(second.get("secret").is_none(), "never listed");
    let hook = |what: &str| format!("{base}/i/{id}/webhooks/{}/{what}", second["id"].as_str().unwrap());
    let enabled = || async {
        own.get(&format!("/v1/instances/{id}/webhooks/{}", second["id"].as_str().unwrap())).await.expect(200)["enabled"]
            .clone()
    };
    let res = h.post(hook("disable")).header(COOKIE, &session).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(enabled().await, json!(false));
    h.post(hook("enable")).header(COOKIE, &session).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(enabled().await, json!(true));
    // Edited on its page: the API's refusal shown at the form, changing nothing; then saved.
    let bad = [("csrf", csrf.as_str()), ("url", "ftp://example.com/"), ("events", ""), ("format", "paceline")];
    let res = h.post(hook("edit")).header(COOKIE, &session).form(&bad).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let page = res.text().await.unwrap();
    assert!(page.contains("id=\"webhook-error\"") && page.contains("Edit this endpoint"), "{page}");
    let third = format!("{}/third", sink.url());
    let form = [("csrf", csrf.as_str()), ("url", third.as_str()), ("events", "message.sent"), ("format", "paceline")];
    let res = h.post(hook("edit")).header(COOKIE, &session).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let edited = own.get(&format!("/v1/instances/{id}/webhooks/{}", second["id"].as_str().unwrap())).await.expect(200);
    assert_eq!(
        (edited["url"].clone(), edited["events"].clone(), edited["format"].clone()),
        (json!(third), json!(["message.sent"]), json!("paceline"))
    );
    let res = h.post(hook("explode")).header(COOKIE, &session).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let res = h.post(hook("rotate")).header(COOKIE, &session).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    let rotated =
        page.split("id=\"new-secret\" type=\"text\" readonly value=\"").nth(1).and_then(|s| s.split('"').next());
    assert!(rotated.is_some_and(|r| r.starts_with("whsec_") && Some(r) != secret), "a new secret: {page}");
    let res = h.post(hook("delete")).header(COOKIE, &session).form(&[("csrf", "x")]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN, "not without the CSRF token");
    let res = h.post(hook("delete")).header(COOKIE, &session).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let hooks = own.get(&format!("/v1/instances/{id}/webhooks")).await.expect(200);
    assert_eq!(hooks["webhooks"].as_array().unwrap().len(), 1, "deleted");
    // Saving the edit form with the URL as shown (masked) keeps the stored credentials.
    let (_, page) = get(&base, &session, &format!("/i/{id}/webhooks/{wh}")).await;
    assert!(page.contains(&format!("name=\"url_shown\" value=\"{masked}\"")), "{page}");
    let form = [
        ("csrf", csrf.as_str()),
        ("url", masked.as_str()),
        ("url_shown", masked.as_str()),
        ("events", "message.queued, message.sent"),
        ("format", "paceline"),
    ];
    let edit = format!("{base}/i/{id}/webhooks/{wh}/edit");
    let res = h.post(&edit).header(COOKIE, &session).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let db = shared::db::connect(&cfg).await.unwrap();
    let stored: (String, Vec<String>) =
        sqlx::query_as("SELECT url, events FROM webhooks WHERE id = $1").bind(&wh).fetch_one(&db).await.unwrap();
    assert_eq!(stored, (with_credentials.clone(), vec!["message.queued".to_string(), "message.sent".to_string()]));
    env.stop().await;
}
