//! An account's token in the console: its own fleet (no bulk actions, no cluster), its
//! instances' pages, and nothing of another account's instances or of those in no
//! account.

use reqwest::header::COOKIE;
use reqwest::StatusCode;
use serde_json::json;

use super::{console_of, csrf_of, get, http, sign_in};
use crate::accounts::{account, instance};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_token_sees_its_own_fleet_and_nothing_else() {
    let api = harness::TestApi::start().await;
    let base = console_of(&api.config, api.addr).await;
    let (_, ours) = account(&api, "Console Acct", json!({})).await;
    let mine = instance(&ours, "acct-shop").await;
    let (_, theirs) = account(&api, "Other Acct", json!({})).await;
    let other = instance(&theirs, "other-shop").await;
    let (loose, _) = api.create_instance("acct-loose").await;

    let (cookie, to) = sign_in(&base, ours.token.as_deref().unwrap()).await;
    assert_eq!(to, "/fleet", "an account starts at its fleet");
    let (status, html) = get(&base, &cookie, "/fleet").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("acct-shop"), "its instance is listed");
    assert!(!html.contains("other-shop") && !html.contains("acct-loose"), "no one else's");
    assert!(html.contains("account Console Acct"), "it says who signed in");
    assert!(!html.contains("With the instances ticked"), "no bulk action: the bulk route is the admin's");
    assert!(!html.contains("href=\"/cluster\""), "no cluster");

    let (status, html) = get(&base, &cookie, &format!("/i/{mine}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("acct-shop"));
    for elsewhere in [other.as_str(), loose.id.as_str()] {
        let (status, _) = get(&base, &cookie, &format!("/i/{elsewhere}")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "another account's instance, or none's");
    }
    let (status, _) = get(&base, &cookie, "/cluster").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let csrf = csrf_of(&get(&base, &cookie, "/fleet").await.1);
    let res = http()
        .post(format!("{base}/fleet/bulk"))
        .header(COOKIE, &cookie)
        .form(&[("csrf", csrf.as_str()), ("action", "restart"), ("id", mine.as_str()), ("confirm", "yes")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert_eq!(api.admin().get(&format!("/v1/instances/{mine}")).await.expect(200)["state"], "disconnected");
}
