//! Guessing tokens at the console's sign-in: held after ten refusals a minute. An
//! instance's IP allow-list sees the user behind the console when the API trusts it.

use reqwest::header::COOKIE;
use reqwest::StatusCode;

use super::{console_of, csrf_of, http, pair_of, set_cookie};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_tokens_is_held_after_ten_refusals() {
    let api = harness::TestApi::start().await;
    let base = console_of(&api.config, api.addr).await;
    let h = http();
    let form = h.get(format!("{base}/")).send().await.unwrap();
    let pre = pair_of(&set_cookie(&form, "pl_console_signin").unwrap());
    let csrf = csrf_of(&form.text().await.unwrap());
    let try_token = |token: String| {
        let (h, pre, csrf, base) = (h.clone(), pre.clone(), csrf.clone(), base.clone());
        async move {
            h.post(format!("{base}/"))
                .header(COOKIE, pre)
                .form(&[("csrf", csrf), ("token", token)])
                .send()
                .await
                .unwrap()
        }
    };
    for i in 0..10 {
        let res = try_token(format!("pl_admin_guess{i:032}")).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    // The eleventh attempt within the minute is held, even with the right token.
    let res = try_token(api.config.admin_token.clone().unwrap()).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert!(set_cookie(&res, "pl_console").is_none_or(|c| c.starts_with("pl_console=;")), "no session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_list_sees_the_user_behind_a_trusted_console() {
    // The API trusts loopback (the console's address here); so does the console, for the
    // test's requests that say whose they are.
    let mut config = harness::test_config();
    config.api.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    let api = harness::TestApi::start_with(config).await;
    let base = console_of(&api.config, api.addr).await;
    let created = api
        .admin()
        .post("/v1/instances", &json!({ "name": "allow-listed", "ip_allowlist": ["203.0.113.7/32"] }))
        .await
        .expect(201);
    let (id, token) = (created["instance"]["id"].as_str().unwrap(), created["token"].as_str().unwrap());
    let h = http();
    let sign_in_from = |from: &'static str| {
        let (h, base, token) = (h.clone(), base.clone(), token.to_string());
        async move {
            let form = h.get(format!("{base}/")).send().await.unwrap();
            let pre = pair_of(&set_cookie(&form, "pl_console_signin").unwrap());
            let csrf = csrf_of(&form.text().await.unwrap());
            h.post(format!("{base}/"))
                .header(COOKIE, pre)
                .header("x-forwarded-for", from)
                .form(&[("csrf", csrf), ("token", token)])
                .send()
                .await
                .unwrap()
        }
    };
    let res = sign_in_from("198.51.100.1").await;
    assert_ne!(res.status(), StatusCode::SEE_OTHER, "not from an address the list leaves out");
    assert!(set_cookie(&res, "pl_console").is_none_or(|c| c.starts_with("pl_console=;")), "no session");
    let res = sign_in_from("203.0.113.7").await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER, "the user's address is on the list");
    let session = pair_of(&set_cookie(&res, "pl_console").unwrap());
    let page = |from: Option<&'static str>| {
        let (h, base, session) = (h.clone(), base.clone(), session.clone());
        let path = format!("/i/{id}");
        async move {
            let mut req = h.get(format!("{base}{path}")).header(COOKIE, session);
            if let Some(f) = from {
                req = req.header("x-forwarded-for", f);
            }
            req.send().await.unwrap().status()
        }
    };
    assert_eq!(page(Some("203.0.113.7")).await, StatusCode::OK);
    assert_eq!(page(Some("198.51.100.1")).await, StatusCode::FORBIDDEN, "the API checks each page's user");
    assert_eq!(page(None).await, StatusCode::FORBIDDEN, "the console's own address is not on the list");
}
