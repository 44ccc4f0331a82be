//! An account's webhooks and event stream: every event of every instance of the account
//! (each naming its instance), each delivered once and signed, with the delivery log and
//! resend of any webhook; the stream resumes after `Last-Event-ID`; another instance's
//! events, and another account's token, never get in.

use std::time::Duration;

use harness::cluster::wait_for;
use harness::webhooks::{verify_with_standardwebhooks, SseReader, WebhookSink};
use harness::TestApi;
use serde_json::json;

use crate::accounts::{account, instance};

/// The account of an account token.
async fn account_of(token: &harness::Client) -> String {
    token.get("/v1/me").await.expect(200)["account_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_webhook_and_stream_get_each_of_its_instances_events_once_signed() {
    let c = crate::deliveries::config();
    let api = TestApi::start_with(c.clone()).await;
    let stop = shared::Shutdown::new();
    let dispatcher = tokio::spawn(dispatcher::run(c, stop.clone()));
    let (acct, token) = account(&api, "events", json!({})).await;
    let (_, stranger) = account(&api, "stranger", json!({})).await;
    let sink = WebhookSink::start().await;
    let events = ["instance.created", "instance.deleted"];
    let hook = token
        .post(&format!("/v1/accounts/{acct}/webhooks"), &json!({ "url": sink.url(), "events": events }))
        .await
        .expect(201);
    let (hook_id, secret) = (hook["id"].as_str().unwrap().to_string(), hook["secret"].as_str().unwrap().to_string());
    stranger.get(&format!("/v1/accounts/{acct}/webhooks")).await.expect_error(403, "forbidden");
    stranger.get(&format!("/v1/accounts/{acct}/webhooks/{hook_id}")).await.expect_error(403, "forbidden");
    let listed = api.admin().get(&format!("/v1/accounts/{acct}/webhooks")).await.expect(200);
    assert_eq!(listed["webhooks"][0]["id"], hook_id.as_str());
    assert!(listed["webhooks"][0].get("secret").is_none(), "secrets are shown once");

    let open = |last: Option<String>| {
        let mut rb = token.request(reqwest::Method::GET, &format!("/v1/accounts/{acct}/events"));
        if let Some(l) = last {
            rb = rb.header("last-event-id", l);
        }
        async move {
            let res = rb.send().await.unwrap();
            assert_eq!(res.status(), 200);
            SseReader::new(res)
        }
    };
    let mut sse = open(None).await;
    let stranger_stream = stranger.get(&format!("/v1/accounts/{acct}/events")).await;
    assert_eq!(stranger_stream.status, 403);

    // Two instances of the account come and one goes; one outside it comes too.
    let a = instance(&token, "events-a").await;
    let b = instance(&token, "events-b").await;
    api.create_instance("events-outside").await;
    token.delete(&format!("/v1/instances/{b}")).await.expect(204);
    let want = [("instance.created", &a), ("instance.created", &b), ("instance.deleted", &b)];

    // The webhook: each once, signed, naming its instance and the account.
    let got = wait_for(Duration::from_secs(20), || async {
        let r = sink.received();
        (r.len() >= want.len()).then_some(r)
    })
    .await
    .expect("the account's webhook hears of its instances");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = if sink.received().len() > got.len() { sink.received() } else { got };
    assert_eq!(got.len(), want.len(), "each once, and nothing of the outside instance: {got:?}");
    let mut seen: Vec<(String, String)> = Vec::new();
    for r in &got {
        verify_with_standardwebhooks(&secret, r).expect("the reference verifier accepts our signature");
        let body = r.json();
        assert_eq!(body["data"]["account_id"], acct.as_str());
        seen.push((body["type"].as_str().unwrap().to_string(), body["instance_id"].as_str().unwrap().to_string()));
    }
    seen.sort();
    let mut expected: Vec<(String, String)> = want.iter().map(|(t, i)| (t.to_string(), i.to_string())).collect();
    expected.sort();
    assert_eq!(seen, expected);
    let ids: std::collections::BTreeSet<String> = got.iter().map(|r| r.json()["id"].as_str().unwrap().into()).collect();
    assert_eq!(ids.len(), want.len(), "no event twice");

    // The delivery log: every instance's deliveries together, each succeeded once.
    let log = wait_for(Duration::from_secs(10), || async {
        let l = token.get(&format!("/v1/accounts/{acct}/webhooks/{hook_id}/deliveries")).await.expect(200);
        let ok = l["deliveries"].as_array().unwrap().iter().filter(|d| d["state"] == "succeeded").count();
        (ok == want.len()).then_some(l)
    })
    .await
    .expect("the log records each delivery");
    let first = log["deliveries"][0]["id"].as_str().unwrap();
    let detail = token.get(&format!("/v1/accounts/{acct}/webhooks/{hook_id}/deliveries/{first}")).await.expect(200);
    assert_eq!(detail["attempt_log"].as_array().unwrap().len(), 1);
    let resend = format!("/v1/accounts/{acct}/webhooks/{hook_id}/deliveries/{first}/resend");
    token.post(&resend, &json!({})).await.expect_error(409, "conflict");

    // The stream: the same three, in order; then a resume after the first.
    let mut items = Vec::new();
    while items.len() < want.len() {
        let item = sse.next(Duration::from_secs(10)).await.expect("the account's stream carries its events");
        if item.id.is_some() {
            items.push(item);
        }
    }
    let kinds: Vec<&str> = items.iter().map(|i| i.event.as_deref().unwrap()).collect();
    assert_eq!(kinds, ["instance.created", "instance.created", "instance.deleted"]);
    for (item, (_, inst)) in items.iter().zip(want) {
        let v: serde_json::Value = serde_json::from_str(&item.data).unwrap();
        assert_eq!(v["instance_id"], inst.as_str());
    }
    assert!(sse.next(Duration::from_millis(700)).await.is_none(), "nothing of the outside instance");
    let mut resumed = open(items[0].id.clone()).await;
    for expect in &items[1..] {
        let item = resumed.next(Duration::from_secs(10)).await.expect("the resume carries the rest");
        assert_eq!(item.id, expect.id);
    }

    // The admin moves `a` to the other account: the other account's stream gets `a`'s
    // events from the move on, and none from before, even resumed from before it.
    let other_acct = account_of(&stranger).await;
    api.admin().put(&format!("/v1/instances/{a}/account"), &json!({ "account_id": other_acct })).await.expect(204);
    let mut theirs = {
        let rb = stranger.request(reqwest::Method::GET, &format!("/v1/accounts/{other_acct}/events"));
        SseReader::new(rb.header("last-event-id", items[0].id.clone().unwrap()).send().await.unwrap())
    };
    assert!(theirs.next(Duration::from_millis(1500)).await.is_none(), "nothing of `a` from before the move");
    let queued = stranger
        .post(&format!("/v1/instances/{a}/messages"), &json!({ "to": "5511999990001", "type": "text", "text": "x" }))
        .await
        .expect(202);
    let item = theirs.next(Duration::from_secs(10)).await.expect("`a`'s events after the move");
    assert_eq!(item.event.as_deref(), Some("message.queued"));
    assert!(item.data.contains(queued["id"].as_str().unwrap()));
    let mut ours = open(None).await;
    assert!(ours.next(Duration::from_millis(1500)).await.is_none(), "the old account hears nothing of `a` now");

    // Another account's instances stay out of it, and the webhook can be edited and removed.
    let p = token.patch(&format!("/v1/accounts/{acct}/webhooks/{hook_id}"), &json!({ "rotate_secret": true })).await;
    assert!(p.expect(200)["secret"].as_str().unwrap().starts_with("whsec_"));
    token.delete(&format!("/v1/accounts/{acct}/webhooks/{hook_id}")).await.expect(204);
    token.get(&format!("/v1/accounts/{acct}/webhooks/{hook_id}")).await.expect_error(404, "not_found");
    stop.cancel();
    dispatcher.await.unwrap().unwrap();
}

/// Events still unread when their instance moves or goes reach the account that held the
/// instance when they were made, and never the next one: the dispatcher starts only after
/// an instance was moved and another deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_read_late_reach_the_account_that_held_their_instance() {
    let c = crate::deliveries::config();
    let api = TestApi::start_with(c.clone()).await;
    let (first, first_token) = account(&api, "held-first", json!({})).await;
    let (second, _) = account(&api, "held-second", json!({})).await;
    let events = json!(["instance.created", "instance.deleted", "message.queued"]);
    let mut sinks = Vec::new();
    for acct in [&first, &second] {
        let sink = WebhookSink::start().await;
        let body = json!({ "url": sink.url(), "events": events });
        api.admin().post(&format!("/v1/accounts/{acct}/webhooks"), &body).await.expect(201);
        sinks.push(sink);
    }
    let moved = instance(&first_token, "held-moved").await;
    let gone = instance(&first_token, "held-gone").await;
    api.admin().put(&format!("/v1/instances/{moved}/account"), &json!({ "account_id": second })).await.expect(204);
    let after = json!({ "to": "5511999990001", "type": "text", "text": "after the move" });
    api.admin().post(&format!("/v1/instances/{moved}/messages"), &after).await.expect(202);
    api.admin().delete(&format!("/v1/instances/{gone}")).await.expect(204);

    let stop = shared::Shutdown::new();
    let dispatcher = tokio::spawn(dispatcher::run(c, stop.clone()));
    let heard = |sink: &WebhookSink, n: usize| {
        let sink = sink.clone();
        async move {
            let got = wait_for(Duration::from_secs(20), || async {
                let r = sink.received();
                (r.len() >= n).then_some(r)
            })
            .await
            .expect("the webhook hears its events");
            let mut seen: Vec<(String, String)> = got
                .iter()
                .map(|r| {
                    let b = r.json();
                    (b["type"].as_str().unwrap().to_string(), b["instance_id"].as_str().unwrap().to_string())
                })
                .collect();
            seen.sort();
            seen
        }
    };
    let mut want_first = [("instance.created", &moved), ("instance.created", &gone), ("instance.deleted", &gone)];
    want_first.sort();
    let want_first: Vec<(String, String)> = want_first.iter().map(|(t, i)| (t.to_string(), i.to_string())).collect();
    assert_eq!(heard(&sinks[0], 3).await, want_first, "the first account hears what its instances made in it");
    assert_eq!(
        heard(&sinks[1], 1).await,
        [("message.queued".to_string(), moved.clone())],
        "the second hears only what the moved instance made after joining it"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sinks[0].received().len(), 3, "nothing twice");
    assert_eq!(sinks[1].received().len(), 1, "nothing from before the move");
    stop.cancel();
    dispatcher.await.unwrap().unwrap();
}
