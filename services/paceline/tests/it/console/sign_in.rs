//! Guessing tokens at the console's sign-in: held after ten refusals a minute.

use reqwest::header::COOKIE;
use reqwest::StatusCode;

use super::{console_of, csrf_of, http, pair_of, set_cookie};

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
