//! The cluster-wide large-body semaphore: slots shared by two API processes, a client
//! that waits too long, and a crashed pod's slot expiring.

use crate::bin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use harness::cluster::{wait_for, ApiProc};
use harness::{test_config, Client, TestApi};
use serde_json::json;

/// A 1.5 MB message body, streamed slowly (about `secs` seconds) so it holds its slot.
fn slow_body(secs: f64) -> reqwest::Body {
    let data = "A".repeat(1536 * 1024);
    let json = serde_json::to_vec(&json!({ "to": "5511999990001", "type": "document",
        "media": { "data": data, "mime_type": "application/pdf" } }))
    .unwrap();
    let pieces: Vec<bytes::Bytes> = json.chunks(json.len() / 20 + 1).map(bytes::Bytes::copy_from_slice).collect();
    let pause = Duration::from_secs_f64(secs / pieces.len() as f64);
    let stream = futures::stream::unfold(pieces.into_iter(), move |mut it| async move {
        let next = it.next()?;
        tokio::time::sleep(pause).await;
        Some((Ok::<_, std::io::Error>(next), it))
    });
    reqwest::Body::wrap_stream(stream)
}

async fn post_large(client: &Client, path: &str, secs: f64) -> harness::Resp {
    client.send(client.request(reqwest::Method::POST, path).body(slow_body(secs))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_cap_large_sends_across_two_api_processes() {
    let mut config = test_config();
    config.large_body.slots = 3;
    let a = ApiProc::start(bin(), &config).await;
    let b = ApiProc::start(bin(), &config).await;
    let admin = config.admin_token.clone();
    // Four instances: each may hold one slot at a time, so the three fill up.
    let mut senders = Vec::new();
    for n in 0..4 {
        let inst =
            a.client(admin.clone()).post("/v1/instances", &json!({ "name": format!("big-{n}") })).await.expect(201);
        let token = inst["token"].as_str().unwrap().to_string();
        senders.push((token, format!("/v1/instances/{}/messages", inst["instance"]["id"].as_str().unwrap())));
    }

    let redis = shared::kv::connect(&config).unwrap();
    let key = shared::kv::Keys::new(&config).large_body_slots();
    let max_seen = Arc::new(AtomicUsize::new(0));
    let done = tokio_util::sync::CancellationToken::new();
    let watcher = tokio::spawn({
        let (redis, key, max_seen, done) = (redis.clone(), key.clone(), max_seen.clone(), done.clone());
        async move {
            while !done.is_cancelled() {
                let mut conn = redis.get().await.unwrap();
                let n: usize = redis::cmd("ZCARD").arg(&key).query_async(&mut conn).await.unwrap();
                max_seen.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (token, path) = senders[i % 4].clone();
        let client = if i % 2 == 0 { a.client(Some(token)) } else { b.client(Some(token)) };
        tasks.push(tokio::spawn(async move { post_large(&client, &path, 0.6).await.status }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    done.cancel();
    watcher.await.unwrap();
    assert!(statuses.iter().all(|s| *s == 202), "{statuses:?}");
    let max = max_seen.load(Ordering::SeqCst);
    println!("most large-body slots held at once across both APIs: {max} of 3");
    assert!(max <= 3, "never more than the slots");
    assert_eq!(max, 3, "the slots were used in full");
    // Small bodies never wait for a slot.
    let (token, path) = senders[0].clone();
    a.client(Some(token))
        .post(&path, &json!({ "to": "5511999990001", "type": "text", "text": "small" }))
        .await
        .expect(202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_too_long_gives_503_and_a_crashed_pods_slot_expires() {
    let mut config = test_config();
    config.large_body.slots = 1;
    config.large_body.wait = std::time::Duration::from_millis(300);
    config.large_body.slot_ttl = std::time::Duration::from_millis(1_500);
    let api = TestApi::start_with(config.clone()).await;
    let (inst, token) = api.create_instance("wait").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));

    // One slow large send holds the only slot; the next gives up with 503.
    let holder = tokio::spawn({
        let (own, path) = (own.clone(), path.clone());
        async move { post_large(&own, &path, 2.0).await.status }
    });
    let redis = shared::kv::connect(&config).unwrap();
    let key = shared::kv::Keys::new(&config).large_body_slots();
    wait_for(Duration::from_secs(5), || async {
        let mut conn = redis.get().await.unwrap();
        let n: usize = redis::cmd("ZCARD").arg(&key).query_async(&mut conn).await.unwrap();
        (n == 1).then_some(())
    })
    .await
    .expect("the first send holds the slot");
    let r = post_large(&own, &path, 0.0).await;
    assert!(r.headers.get("retry-after").is_some());
    assert_eq!(r.body["error"]["retryable"], true);
    r.expect_error(503, "rate_limited");
    assert_eq!(holder.await.unwrap(), 202);

    // A slot left by a pod that died (never renewed) frees itself after its TTL.
    let mut conn = redis.get().await.unwrap();
    let expiry = chrono::Utc::now().timestamp_millis() + 2_000;
    let _: i64 = redis::cmd("ZADD").arg(&key).arg(expiry).arg("crashed-pod").query_async(&mut conn).await.unwrap();
    // While its lease runs, it holds the slot like any other holder...
    post_large(&own, &path, 0.0).await.expect_error(503, "rate_limited");
    // (A caller without a valid token is refused first, never waiting for a slot.)
    post_large(&api.anon(), &path, 0.0).await.expect_error(401, "unauthorized");
    drop(api);
    // ...and once it lapses, a waiting send gets the slot.
    let mut patient = config.clone();
    patient.large_body.wait = std::time::Duration::from_millis(10_000);
    let api = TestApi::start_with(patient).await;
    let (inst, token) = api.create_instance("after-crash").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let r = post_large(&api.client(Some(token)), &path, 0.0).await;
    assert_eq!(r.status, 202, "{}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_holds_one_slot_and_a_stalled_body_gives_it_back() {
    let mut config = test_config();
    config.large_body.slots = 3;
    config.large_body.wait = std::time::Duration::from_millis(20_000);
    config.large_body.read_timeout = std::time::Duration::from_millis(1_500);
    let api = TestApi::start_with(config.clone()).await;
    let (greedy, greedy_token) = api.create_instance("greedy").await;
    let (other, other_token) = api.create_instance("other").await;
    let greedy_path = format!("/v1/instances/{}/messages", greedy.id.as_str());
    let other_path = format!("/v1/instances/{}/messages", other.id.as_str());
    let redis = shared::kv::connect(&config).unwrap();
    let key = shared::kv::Keys::new(&config).large_body_slots();
    let held = || async {
        let mut conn = redis.get().await.unwrap();
        let n: usize = redis::cmd("ZCARD").arg(&key).query_async(&mut conn).await.unwrap();
        n
    };

    // Three slow uploads from one instance: one holds a slot, two wait for it.
    let own = api.client(Some(greedy_token));
    let mut slow = Vec::new();
    for _ in 0..3 {
        let (own, path) = (own.clone(), greedy_path.clone());
        slow.push(tokio::spawn(async move { post_large(&own, &path, 1.0).await.status }));
    }
    wait_for(Duration::from_secs(5), || async { (held().await == 1).then_some(()) }).await.expect("one slot taken");
    // Another instance's large send still finds a free slot at once.
    let started = std::time::Instant::now();
    let r = post_large(&api.client(Some(other_token)), &other_path, 0.0).await;
    assert_eq!(r.status, 202, "{}", r.text);
    assert!(started.elapsed() < Duration::from_secs(5), "it did not wait for the greedy instance");
    for t in slow {
        assert_eq!(t.await.unwrap(), 202, "the greedy instance's sends went one at a time");
    }

    // A body that stalls past the read deadline is cut off (408) and its slot freed.
    let stalled = post_large(&own, &greedy_path, 6.0).await;
    stalled.expect_error(408, "request_timeout");
    assert_eq!(held().await, 0, "the slot went back");
}
