//! The console (`paceline console`), a client of `/v1` with the signed-in user's token:
//! over plain HTTP, its sign-in, sealed session cookie, CSRF checks, CSP and what each
//! kind of token may see and do; in a real browser (headless Chromium), an admin signs in,
//! finds an instance in the fleet, connects it and pairs it by scanning the QR code the
//! page shows with a netsim phone, then reads a received message on the Chats tab;
//! axe-core (npm) finds no serious or critical violation on any page it passes.

use std::time::Duration;

use harness::browser::{Browser, Locator};
use harness::cluster::{wait_for, Cluster};
use reqwest::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use reqwest::StatusCode;
use serde_json::json;

use crate::bin;

mod account;
mod admin;
mod bulk;
mod sign_in;
mod walk;
mod webhooks;

const PHONE: &str = "5511999995001";
const FRIEND: &str = "5511999995002";

/// Runs axe-core in the page: no serious or critical violation.
async fn accessible(b: &Browser, page: &str) {
    let found = b.serious_accessibility_violations().await;
    assert!(found.is_empty(), "axe-core on the {page} page: {found:#?}");
}

/// The console of `c`, in process, on a free port.
async fn console(c: &Cluster) -> String {
    console_of(&c.config, c.api.addr).await
}

/// A console for the API at `api`, in process, on a free port.
async fn console_of(config: &shared::Config, api: std::net::SocketAddr) -> String {
    let mut config = config.clone();
    config.console.api_url = url::Url::parse(&format!("http://{api}")).unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(console::run(config, l, shared::Shutdown::new()));
    format!("http://{addr}")
}

/// An API whose webhook deliveries fail for good at the first refusal (no retries), its
/// dispatcher, and a console for it.
struct NoRetries {
    api: harness::TestApi,
    cfg: shared::Config,
    base: String,
    stop: shared::Shutdown,
    dispatcher: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl NoRetries {
    async fn start() -> NoRetries {
        let mut cfg = crate::deliveries::config();
        cfg.webhooks.retry_span = Duration::from_millis(0);
        let api = harness::TestApi::start_with(cfg.clone()).await;
        let stop = shared::Shutdown::new();
        let dispatcher = tokio::spawn(dispatcher::run(cfg.clone(), stop.clone()));
        let base = console_of(&cfg, api.addr).await;
        NoRetries { api, cfg, base, stop, dispatcher }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.dispatcher.await.unwrap().unwrap();
    }
}

/// A client that follows no redirect (the test reads each one).
fn http() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// `name=value` of the `Set-Cookie` named `name`, with its attributes.
fn set_cookie(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

fn pair_of(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_string()
}

/// The hidden CSRF field of the page's first form.
fn csrf_of(html: &str) -> String {
    html.split("name=\"csrf\" value=\"").nth(1).and_then(|s| s.split('"').next()).expect("a csrf field").to_string()
}

/// Signs in with `token`: the session cookie (`pl_console=...`) and where it went.
async fn sign_in(base: &str, token: &str) -> (String, String) {
    let h = http();
    let form = h.get(format!("{base}/")).send().await.unwrap();
    let pre = pair_of(&set_cookie(&form, "pl_console_signin").expect("the sign-in form's cookie"));
    let csrf = csrf_of(&form.text().await.unwrap());
    let res = h
        .post(format!("{base}/"))
        .header(COOKIE, pre)
        .form(&[("csrf", csrf.as_str()), ("token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER, "signed in");
    let set = set_cookie(&res, "pl_console").expect("a session cookie");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "{attr} in {set}");
    }
    assert!(!set.contains(token), "the cookie is sealed");
    let to = res.headers()[LOCATION].to_str().unwrap().to_string();
    (pair_of(&set), to)
}

/// A page as the session `cookie` sees it: its status and HTML.
async fn get(base: &str, cookie: &str, path: &str) -> (StatusCode, String) {
    let res = http().get(format!("{base}{path}")).header(COOKIE, cookie).send().await.unwrap();
    assert!(res.headers().get(CONTENT_SECURITY_POLICY).is_some(), "every page sends the CSP");
    let status = res.status();
    let html = res.text().await.unwrap();
    for secret in ["pl_admin_", "pl_inst_", "pl_key_", "pl_acct_"] {
        assert!(!html.contains(secret), "a page never contains a token ({secret} on {path})");
    }
    (status, html)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_signs_in_and_each_token_sees_and_does_only_what_it_may() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let base = console(&c).await;
    let (shop, shop_token) = c.api.create_instance("console-shop").await;
    let (other, _) = c.api.create_instance("console-other").await;
    let (shop_id, other_id) = (shop.id.to_string(), other.id.to_string());
    let admin_token = c.config.admin_token.clone().unwrap();

    // The sign-in page: one token field, the CSP, a sign-in cookie for its CSRF token.
    let h = http();
    let health = h.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "the chart's probes");
    let form = h.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(form.status(), 200);
    assert_eq!(form.headers()[CONTENT_SECURITY_POLICY], console::CSP);
    assert!(console::CSP.contains("script-src 'self'") && !console::CSP.contains("unsafe"));
    let pre = pair_of(&set_cookie(&form, "pl_console_signin").unwrap());
    let html = form.text().await.unwrap();
    assert_eq!(html.matches("<input").count(), 2, "the token and the CSRF field: {html}");
    // Without the form's CSRF token, or with a token the API refuses: no session.
    let forged =
        h.post(format!("{base}/")).form(&[("csrf", "x"), ("token", admin_token.as_str())]).send().await.unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(set_cookie(&forged, "pl_console").is_none_or(|c| c.starts_with("pl_console=;")));
    let csrf = csrf_of(&html);
    let wrong = h
        .post(format!("{base}/"))
        .header(COOKIE, &pre)
        .form(&[("csrf", csrf.as_str()), ("token", "pl_admin_notthetokenatallnotthetoken")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.text().await.unwrap().contains("not accepted"));

    // The admin: the fleet, filtered by state; every instance's page.
    let (admin, home) = sign_in(&base, &admin_token).await;
    assert_eq!(home, "/fleet");
    let (st, fleet) = get(&base, &admin, "/fleet").await;
    assert_eq!(st, 200);
    assert!(fleet.contains("console-shop") && fleet.contains("console-other"), "{fleet}");
    let (_, connected) = get(&base, &admin, "/fleet?state=connected").await;
    assert!(!connected.contains("console-shop"), "the filter reaches the API");
    let (st, page) = get(&base, &admin, &format!("/i/{other_id}")).await;
    assert_eq!(st, 200);
    assert!(page.contains("action=\"/i/") && page.contains("/connect\""), "the admin may connect: {page}");
    // A form without the session's CSRF token changes nothing.
    let res = h
        .post(format!("{base}/i/{other_id}/connect"))
        .header(COOKIE, &admin)
        .form(&[("csrf", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let o = c.api.admin().get(&format!("/v1/instances/{other_id}")).await.expect(200);
    assert_eq!(o["state"], "disconnected", "a forged form connects nothing");
    // No session, or a tampered one: back to signing in.
    let res = h.get(format!("{base}/fleet")).send().await.unwrap();
    assert_eq!((res.status(), res.headers()[LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, "/"));
    assert!(
        res.headers().get(SET_COOKIE).is_none(),
        "a request without the cookie (a link from another site) clears nothing"
    );
    let tampered = admin.replacen("pl_console=", "pl_console=AA", 1);
    let res = h.get(format!("{base}/fleet")).header(COOKIE, tampered).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(&res, "pl_console").unwrap().contains("Max-Age=0"), "a bad session cookie is cleared");

    // An instance token: its own instance, not the fleet, not another instance.
    let (own, home) = sign_in(&base, &shop_token).await;
    assert_eq!(home, format!("/i/{shop_id}"));
    assert_eq!(get(&base, &own, "/fleet").await.0, StatusCode::FORBIDDEN);
    let (st, page) = get(&base, &own, &format!("/i/{other_id}")).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "the API refuses another instance: {page}");
    let (st, page) = get(&base, &own, &format!("/i/{shop_id}")).await;
    assert_eq!(st, 200);
    assert!(page.contains("/connect\""), "its own token may connect");

    // The instance's token makes a read_only key on the API keys tab: its token is shown
    // on the answer to the form, once, and never on the list.
    let (_, keys) = get(&base, &own, &format!("/i/{shop_id}/keys")).await;
    assert!(keys.contains("No API keys.") && !keys.contains("Hosted pairing links"), "links are the admin's: {keys}");
    let form = [("csrf", csrf_of(&keys)), ("name", "viewer".into()), ("scope", "read_only".into())];
    let res = h.post(format!("{base}/i/{shop_id}/keys")).header(COOKIE, &own).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let created = res.text().await.unwrap();
    let key_token = created
        .split("id=\"new-token\" type=\"text\" readonly value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap();
    assert!(key_token.starts_with("pl_key_"), "{created}");
    let (_, keys) = get(&base, &own, &format!("/i/{shop_id}/keys")).await;
    assert!(keys.contains("viewer") && keys.contains("read only"), "{keys}");
    // The API's own validation, shown on the page: a name it refuses creates nothing.
    let bad = [("csrf", csrf_of(&keys)), ("name", " ".into()), ("scope", "read_only".into())];
    let res = h.post(format!("{base}/i/{shop_id}/keys")).header(COOKIE, &own).form(&bad).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("name must be"), "the API's message");
    let listed =
        c.api.client(Some(shop_token.clone())).get(&format!("/v1/instances/{shop_id}/api-keys")).await.expect(200);
    assert_eq!(listed["keys"].as_array().unwrap().len(), 1);
    let key = listed["keys"][0].clone();

    // A read_only key: its instance, and no button but signing out.
    let (ro, _) = sign_in(&base, key_token).await;
    let (st, page) = get(&base, &ro, &format!("/i/{shop_id}")).await;
    assert_eq!(st, 200);
    assert_eq!(page.matches("<button").count(), 1, "only sign-out: {page}");
    assert!(page.contains("API key (read only)"));
    // It reads the queue and the risk, with no send form and no pause.
    let (st, q) = get(&base, &ro, &format!("/i/{shop_id}/queue")).await;
    assert_eq!(st, 200);
    assert!(q.contains("Nothing waiting") && !q.contains("/queue/send"), "{q}");
    let (st, r) = get(&base, &ro, &format!("/i/{shop_id}/risk")).await;
    assert_eq!(st, 200);
    assert!(!r.contains("/risk/pause") && !r.contains("/keys\""), "no pause, no keys tab: {r}");

    // Signing out clears the cookie; it needs the session's CSRF token.
    let csrf = csrf_of(&page);
    let res = h.post(format!("{base}/sign-out")).header(COOKIE, &ro).form(&[("csrf", "x")]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res =
        h.post(format!("{base}/sign-out")).header(COOKIE, &ro).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(&res, "pl_console").unwrap().contains("Max-Age=0"));
    // A copy of the cookie opens nothing after signing out (on any console pod).
    let other_pod = console(&c).await;
    for console in [&base, &other_pod] {
        let res = h.get(format!("{console}/i/{shop_id}")).header(COOKIE, &ro).send().await.unwrap();
        assert_eq!((res.status(), res.headers()[LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, "/"));
    }
    let (ro, _) = sign_in(&base, key_token).await;
    let (st, _) = get(&base, &ro, &format!("/i/{shop_id}")).await;
    assert_eq!(st, 200, "signing in again is a new session");

    // A send_only key starts on the queue's send form: the only tab it may open.
    let send_only = c.api.create_key(&c.api.client(Some(shop_token.clone())), &shop_id, "send_only").await;
    let (so, home) = sign_in(&base, &send_only).await;
    assert_eq!(home, format!("/i/{shop_id}/queue"));
    let (st, q) = get(&base, &so, &home).await;
    assert_eq!(st, 200);
    assert!(q.contains(&format!("action=\"/i/{shop_id}/queue/send\"")) && !q.contains("Overview"), "{q}");
    assert_eq!(get(&base, &so, &format!("/i/{shop_id}")).await.0, StatusCode::FORBIDDEN);
    // The API's refusal shows at the form, with what was typed; a good one is queued.
    let send = format!("{base}/i/{shop_id}/queue/send");
    let bad = [("csrf", csrf_of(&q)), ("to", "5511900000001".into()), ("body", r#"{"type": "text"}"#.into())];
    let res = h.post(&send).header(COOKIE, &so).form(&bad).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let page = res.text().await.unwrap();
    assert!(page.contains("id=\"send-error\"") && page.contains("5511900000001"), "{page}");
    let not_json = [("csrf", csrf_of(&q)), ("to", "5511900000001".into()), ("body", "hello".into())];
    let res = h.post(&send).header(COOKIE, &so).form(&not_json).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("must be a JSON object"));
    let good =
        [("csrf", csrf_of(&q)), ("to", "5511900000001".into()), ("body", r#"{"type": "text", "text": "hi"}"#.into())];
    let res = h.post(&send).header(COOKIE, &so).form(&good).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let depth = c.api.admin().get(&format!("/v1/instances/{shop_id}")).await.expect(200)["queue_depth"].clone();
    assert_eq!(depth, 1, "queued once");

    // The live events stream: an instance's own, through its session; not another's.
    let res = h.get(format!("{base}/i/{other_id}/events/stream")).header(COOKIE, &own).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = h.get(format!("{base}/i/{shop_id}/events/stream")).header(COOKIE, &own).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()[CONTENT_TYPE], "text/event-stream");
    drop(res);
    let res = h.get(format!("{base}/i/{shop_id}/events/stream")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "no session, no stream");

    // Revoked on the keys tab, the key's session ends at its next page.
    let (_, keys) = get(&base, &own, &format!("/i/{shop_id}/keys")).await;
    let revoke = format!("/i/{shop_id}/keys/{}/revoke", key["id"].as_str().unwrap());
    assert!(keys.contains(&format!("action=\"{revoke}\"")), "{keys}");
    let res =
        h.post(format!("{base}{revoke}")).header(COOKIE, &own).form(&[("csrf", csrf_of(&keys))]).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let res = wait_for(Duration::from_secs(10), || async {
        let r = h.get(format!("{base}/i/{shop_id}")).header(COOKIE, &ro).send().await.ok()?;
        (r.status() == StatusCode::SEE_OTHER).then_some(r)
    })
    .await
    .expect("the revoked key's session ends (the API's token cache lasts 5 s)");
    assert_eq!(res.headers()[LOCATION], "/");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_pairs_an_instance_from_the_console_in_a_browser() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    // The relay publishes events to the stream the live events page follows.
    let stop = shared::Shutdown::new();
    let dispatcher = tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    c.phone(PHONE, false).await;
    c.phone(FRIEND, false).await;
    let base = console(&c).await;
    let (inst, _) = c.api.create_instance("console-pairing").await;
    let id = inst.id.to_string();

    let b = Browser::start().await;
    b.client.goto(&format!("{base}/")).await.unwrap();
    b.screenshot("console-sign-in").await;
    accessible(&b, "sign-in").await;
    b.client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(c.config.admin_token.as_deref().unwrap())
        .await
        .unwrap();
    b.client.find(Locator::Css("main form button")).await.unwrap().click().await.unwrap();
    // The fleet lists it; its link opens its page.
    let link =
        b.wait_for_element(&format!("a[href='/i/{id}']"), Duration::from_secs(10)).await.expect("the fleet lists it");
    b.screenshot("console-fleet").await;
    accessible(&b, "fleet").await;
    link.click().await.unwrap();
    let connect =
        b.wait_for_element("form[action$='/connect'] button", Duration::from_secs(10)).await.expect("Connect");
    connect.click().await.unwrap();
    // The page shows the network's QR code (refreshed by its script); a phone scans it.
    let code = wait_for(Duration::from_secs(30), || async {
        let qr = b.client.find(Locator::Css("img#qr")).await.ok()?;
        qr.attr("data-code").await.ok().flatten().filter(|c| !c.is_empty())
    })
    .await
    .expect("the page shows a QR code");
    b.screenshot("console-pairing").await;
    accessible(&b, "pairing").await;
    let source = b.client.source().await.unwrap();
    assert!(!source.contains("pl_admin_") && !source.contains("pl_inst_"), "no token in the page");
    c.netsim().post("/control/scan", &json!({ "code": code, "number": PHONE })).await.expect(200);
    // The page turns to the paired instance, with its number, by itself.
    let paired = wait_for(Duration::from_secs(30), || async {
        let s = b.client.find(Locator::Css("#state")).await.ok()?;
        s.attr("data-state").await.ok().flatten().filter(|s| s == "connected")?;
        let text = b.client.find(Locator::Css("main")).await.ok()?.text().await.ok()?;
        text.contains(PHONE).then_some(())
    })
    .await;
    assert!(paired.is_some(), "the page shows the instance connected with its number");
    b.screenshot("console-connected").await;
    accessible(&b, "instance").await;
    // Its state history, newest first.
    let history = b.client.find(Locator::Css("#state-history")).await.unwrap().prop("textContent").await.unwrap();
    let history = history.unwrap_or_default();
    assert!(history.contains("→ connected") && history.contains("qr pending"), "{history}");

    // The live events page follows the stream: a friend writes, and the event appears.
    b.client.goto(&format!("{base}/i/{id}/events")).await.unwrap();
    wait_for(Duration::from_secs(10), || async {
        let t = b.client.find(Locator::Css("#stream-state")).await.ok()?.text().await.ok()?;
        t.starts_with("Connected").then_some(())
    })
    .await
    .expect("the page connects to the stream");
    // A friend writes; the chat and its message are on the Chats tab.
    c.netsim()
        .post(&format!("/control/phones/{FRIEND}/messages"), &json!({ "to": PHONE, "text": "hello <console>" }))
        .await
        .expect(201);
    wait_for(Duration::from_secs(20), || async {
        let t = b.client.find(Locator::Css("#events")).await.ok()?.text().await.ok()?;
        (t.contains("message.received") && t.contains("hello <console>")).then_some(())
    })
    .await
    .expect("the event appears live");
    b.screenshot("console-events").await;
    accessible(&b, "live events").await;
    let chats = format!("{base}/i/{id}/chats");
    let link = wait_for(Duration::from_secs(30), || async {
        b.client.goto(&chats).await.ok()?;
        b.client.find(Locator::Css(&format!("a[href='/i/{id}/chats/{FRIEND}%40s.whatsapp.net']"))).await.ok()
    })
    .await
    .expect("the chat is listed");
    b.screenshot("console-chats").await;
    accessible(&b, "chats").await;
    link.click().await.unwrap();
    let text = b
        .wait_for_element("ol.messages .text", Duration::from_secs(10))
        .await
        .expect("a message")
        .text()
        .await
        .unwrap();
    assert_eq!(text, "hello <console>", "shown as text, escaped");
    b.screenshot("console-chat").await;
    accessible(&b, "chat").await;

    // The queue's form sends a message; it reaches the friend's chat.
    b.client.goto(&format!("{base}/i/{id}/queue")).await.unwrap();
    accessible(&b, "queue").await;
    b.client.find(Locator::Css("#to")).await.unwrap().send_keys(FRIEND).await.unwrap();
    b.client.find(Locator::Css("form[action$='/queue/send'] button")).await.unwrap().click().await.unwrap();
    b.wait_for_element("#queued", Duration::from_secs(10)).await.expect("back on the queue");
    b.screenshot("console-queue").await;
    let chat = format!("{base}/i/{id}/chats/{FRIEND}%40s.whatsapp.net");
    wait_for(Duration::from_secs(30), || async {
        b.client.goto(&chat).await.ok()?;
        let t = b.client.find(Locator::Css("ol.messages")).await.ok()?.text().await.ok()?;
        t.contains("hello from the console").then_some(())
    })
    .await
    .expect("the message is in the chat");
    // Risk: the queue paused and resumed by hand.
    b.client.goto(&format!("{base}/i/{id}/risk")).await.unwrap();
    accessible(&b, "risk").await;
    // The page the form leads to shows the queue's state (read once the new page is there).
    let queue_state = |want: &'static str| {
        let b = &b;
        async move {
            let t = b.client.find(Locator::Css("#queue-state")).await.ok()?.text().await.ok()?;
            t.starts_with(want).then_some(t)
        }
    };
    b.client.find(Locator::Css("form[action$='/risk/pause'] button")).await.unwrap().click().await.unwrap();
    wait_for(Duration::from_secs(10), || queue_state("paused (manual)")).await.expect("paused by hand");
    b.screenshot("console-risk").await;
    b.client.find(Locator::Css("form[action$='/risk/resume'] button")).await.unwrap().click().await.unwrap();
    wait_for(Duration::from_secs(10), || queue_state("sending")).await.expect("resumed");

    // The Webhooks and API keys tabs; a key made in the browser shows its token once.
    b.client.goto(&format!("{base}/i/{id}/webhooks")).await.unwrap();
    accessible(&b, "webhooks").await;
    b.client.goto(&format!("{base}/i/{id}/keys")).await.unwrap();
    accessible(&b, "keys").await;
    b.client.find(Locator::Css("#key-name")).await.unwrap().send_keys("crm").await.unwrap();
    b.client.find(Locator::Css("form[action$='/keys'] button")).await.unwrap().click().await.unwrap();
    let token = b.wait_for_element("#new-token", Duration::from_secs(10)).await.expect("the new key's token");
    assert!(token.prop("value").await.unwrap().unwrap_or_default().starts_with("pl_key_"));
    b.screenshot("console-key-created").await;
    accessible(&b, "key created").await;
    // Usage: a chart drawn on the server, one pair of bars a day, and the totals.
    b.client.goto(&format!("{base}/i/{id}/usage")).await.unwrap();
    let bars = b.client.find_all(Locator::Css("svg.chart > g > rect")).await.unwrap().len();
    assert_eq!(bars, 60, "30 days of sent and received");
    b.screenshot("console-usage").await;
    accessible(&b, "usage").await;
    // The cluster: the one worker, holding this instance.
    b.client.goto(&format!("{base}/cluster")).await.unwrap();
    let workers =
        b.wait_for_element("#workers", Duration::from_secs(10)).await.expect("the workers").text().await.unwrap();
    assert!(workers.contains("wk_"), "{workers}");
    b.screenshot("console-cluster").await;
    accessible(&b, "cluster").await;
    b.close().await;
    stop.cancel();
    dispatcher.await.unwrap().unwrap();
}
