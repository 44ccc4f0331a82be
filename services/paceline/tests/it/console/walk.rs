//! Every page an instance's own token, a `read_only` key and a `send_only` key can open,
//! walked in headless Chromium 360 px wide: each tab (and an endpoint's page, a failed
//! delivery's page and a chat), with axe-core and a screenshot each, nothing wider than
//! the window, and no form on any of them that the token may not send. The instance's
//! token resends the failed delivery from its page. The admin's walk is the pairing
//! test's.

use std::time::Duration;

use harness::browser::{Browser, Locator};
use harness::cluster::wait_for;
use serde_json::json;

use super::{accessible, NoRetries};

/// Who walks, and which forms (by their action) each may be offered.
#[derive(Clone, Copy, Debug)]
enum Walker {
    Instance,
    ReadOnly,
    SendOnly,
}

impl Walker {
    fn may(self, id: &str, action: &str) -> bool {
        match self {
            // Everything on its own instance, except the admin's hosted links.
            Walker::Instance => {
                action == "/sign-out" || (action.starts_with(&format!("/i/{id}/")) && !action.contains("/links"))
            }
            Walker::ReadOnly => action == "/sign-out",
            Walker::SendOnly => action == "/sign-out" || action == format!("/i/{id}/queue/send"),
        }
    }

    fn tabs(self) -> usize {
        match self {
            Walker::Instance => 8,
            Walker::ReadOnly => 7,
            Walker::SendOnly => 1,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_token_walks_its_pages_and_is_offered_only_what_it_may_do() {
    // The first failure is final (the endpoint refuses connections).
    let env = NoRetries::start().await;
    let (api, base) = (&env.api, env.base.clone());
    let (inst, token) = api.create_instance("console-walk").await;
    let id = inst.id.to_string();
    let own = api.client(Some(token.clone()));
    // Something on each page: an endpoint, a queued message, a chat in the local log.
    let hook =
        crate::deliveries::hook(&own, &id, "http://127.0.0.1:9/hook", &[]).await["id"].as_str().unwrap().to_string();
    crate::deliveries::queue(&own, &id, "x").await;
    let db = shared::db::connect(&api.config).await.unwrap();
    sqlx::query(
        "INSERT INTO chats (instance_id, jid, name, last_message_at) VALUES ($1, '5511900000001@s.whatsapp.net', 'A chat', now())",
    )
    .bind(&id)
    .execute(&db)
    .await
    .unwrap();
    let log = format!("/v1/instances/{id}/webhooks/{hook}/deliveries");
    let failed = wait_for(Duration::from_secs(20), || async {
        let d = own.get(&log).await.expect(200)["deliveries"][0].clone();
        (d["state"] == "failed").then_some(d)
    })
    .await
    .expect("the delivery fails: nothing listens there");
    let delivery = format!("/i/{id}/webhooks/{hook}/deliveries/{}", failed["id"].as_str().unwrap());
    let read_only = api.create_key(&own, &id, "read_only").await;
    let send_only = api.create_key(&own, &id, "send_only").await;

    let b = Browser::start().await;
    b.client.set_window_size(360, 800).await.unwrap();
    for (walker, token) in [(Walker::Instance, &token), (Walker::ReadOnly, &read_only), (Walker::SendOnly, &send_only)]
    {
        b.client.goto(&format!("{base}/")).await.unwrap();
        b.client.find(Locator::Css("#token")).await.unwrap().send_keys(token).await.unwrap();
        b.client.find(Locator::Css("main form button")).await.unwrap().click().await.unwrap();
        b.wait_for_element("nav.tabs", Duration::from_secs(10)).await.expect("an instance's page");
        let tabs: Vec<String> = b
            .client
            .execute("return [...document.querySelectorAll('nav.tabs a')].map(a => a.getAttribute('href'))", vec![])
            .await
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        assert_eq!(tabs.len(), walker.tabs(), "{walker:?}: {tabs:?}");
        let mut pages = tabs.clone();
        if tabs.iter().any(|t| t.ends_with("/webhooks")) {
            pages.push(format!("/i/{id}/webhooks/{hook}"));
            pages.push(delivery.clone());
        }
        if tabs.iter().any(|t| t.ends_with("/chats")) {
            pages.push(format!("/i/{id}/chats/5511900000001%40s.whatsapp.net"));
        }
        for path in &pages {
            b.client.goto(&format!("{base}{path}")).await.unwrap();
            let h1 =
                b.wait_for_element("main h1", Duration::from_secs(10)).await.expect("a page").text().await.unwrap();
            assert!(
                !["Not allowed", "Not found", "Something went wrong"].contains(&h1.as_str()),
                "{walker:?} {path}: {h1}"
            );
            let actions = b
                .client
                .execute(
                    "return [...document.querySelectorAll('form[method=post]')].map(f => f.getAttribute('action'))",
                    vec![],
                )
                .await
                .unwrap();
            for a in actions.as_array().unwrap() {
                let a = a.as_str().unwrap();
                assert!(walker.may(&id, a), "{walker:?} is offered {a} on {path}");
            }
            let proxy = b.client.find(Locator::Css("[name=proxy_url]")).await;
            assert!(proxy.is_err(), "the proxy is the admin's ({walker:?} on {path})");
            // What sticks out past the window's right edge (none may).
            let wide = b
                .client
                .execute(
                    "return [...document.querySelectorAll('body *')]\
                     .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.scroll'))\
                     .map(e => e.tagName + '#' + e.id + '.' + e.className)",
                    vec![],
                )
                .await
                .unwrap();
            assert_eq!(wide, json!([]), "{walker:?} {path}: nothing wider than 360 px");
            let source = b.client.source().await.unwrap();
            assert!(["pl_admin_", "pl_inst_", "pl_key_"].iter().all(|t| !source.contains(t)), "no token in {path}");
            let name = path.trim_start_matches(&format!("/i/{id}")).trim_start_matches('/');
            let name = name.split('/').next().filter(|n| !n.is_empty()).unwrap_or("overview");
            let more = match path.matches('/').count() {
                0..=3 => "",
                4 => "-one",
                _ => "-delivery",
            };
            b.screenshot(&format!("console-{}-{name}{more}", format!("{walker:?}").to_lowercase())).await;
            accessible(&b, &format!("{walker:?} {path}")).await;
        }
        if matches!(walker, Walker::Instance) {
            // The failed delivery resent from its page: attempted again.
            b.client.goto(&format!("{base}{delivery}")).await.unwrap();
            b.client.find(Locator::Css("form[action$='/resend'] button")).await.unwrap().click().await.unwrap();
            b.wait_for_element("#endpoint", Duration::from_secs(10)).await.expect("back on the endpoint's page");
            let detail = format!("{log}/{}", failed["id"].as_str().unwrap());
            wait_for(Duration::from_secs(20), || async {
                let d = own.get(&detail).await.expect(200);
                (d["state"] == "failed" && d["attempts"] == 2).then_some(())
            })
            .await
            .expect("attempted again");
        }
        b.client.find(Locator::Css("form[action='/sign-out'] button")).await.unwrap().click().await.unwrap();
        b.wait_for_element("#token", Duration::from_secs(10)).await.expect("signed out");
    }
    b.close().await;
    env.stop().await;
}
