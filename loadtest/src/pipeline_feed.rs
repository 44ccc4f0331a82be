//! The load generator of loadtest/pipeline.sh: keeps every instance's queue fed at its
//! floor. Reads `inst token` lines from FEED_FILE; queues HEAD texts on each instance at
//! once (so a queue never runs dry while its next text is on its way), then POSTs one
//! text per instance every INTERVAL_MS for DURATION_S, open loop, the instances' ticks
//! spread evenly over the interval. At most CONCURRENCY (default 4096) requests are in
//! flight: above the instances, so the feed is open loop (each instance waits only on
//! its own previous text).
//! Prints a progress line to stderr every 10 s, and one JSON summary on stdout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Semaphore;

fn var(k: &str, default: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| default.to_string())
}

struct Feed {
    client: reqwest::Client,
    api: String,
    recipient: String,
    gate: Semaphore,
    accepted: AtomicU64,
    /// Answers other than 202 by status (0: no answer within the timeout).
    failed: Mutex<BTreeMap<u16, u64>>,
    latencies_ms: Mutex<Vec<f64>>,
}

impl Feed {
    async fn send(&self, inst: &str, token: &str, text: String) {
        let _permit = self.gate.acquire().await.expect("gate open");
        let body = serde_json::to_vec(&json!({ "to": self.recipient, "type": "text", "text": text })).expect("json");
        let t = Instant::now();
        let res = self
            .client
            .post(format!("{}/v1/instances/{inst}/messages", self.api))
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        let status = match res {
            Ok(r) => {
                let s = r.status().as_u16();
                let _ = r.bytes().await;
                s
            }
            Err(_) => 0,
        };
        if status == 202 {
            self.accepted.fetch_add(1, Ordering::Relaxed);
            self.latencies_ms.lock().unwrap().push(t.elapsed().as_secs_f64() * 1000.0);
        } else {
            *self.failed.lock().unwrap().entry(status).or_default() += 1;
        }
    }
}

#[tokio::main]
async fn main() {
    let lines = std::fs::read_to_string(var("FEED_FILE", "feed.txt")).expect("FEED_FILE");
    let instances: Vec<(String, String)> =
        lines.lines().filter_map(|l| l.split_once(' ').map(|(a, b)| (a.to_string(), b.trim().to_string()))).collect();
    let interval = Duration::from_millis(var("INTERVAL_MS", "1000").parse().expect("INTERVAL_MS"));
    let duration = Duration::from_secs(var("DURATION_S", "600").parse().expect("DURATION_S"));
    let head: usize = var("HEAD", "5").parse().expect("HEAD");
    let feed = Arc::new(Feed {
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(4096)
            .build()
            .expect("client"),
        api: var("API", "http://127.0.0.1:8787"),
        recipient: var("RECIPIENT", "5511900000000"),
        gate: Semaphore::new(var("CONCURRENCY", "4096").parse().expect("CONCURRENCY")),
        accepted: AtomicU64::new(0),
        failed: Mutex::default(),
        latencies_ms: Mutex::default(),
    });

    // The head: HEAD texts on every instance, queued before the clock starts.
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (inst, token) in instances.iter().cloned() {
        let feed = feed.clone();
        tasks.spawn(async move {
            for k in 0..head {
                feed.send(&inst, &token, format!("{inst} head {k}")).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let head_accepted = feed.accepted.load(Ordering::Relaxed);
    eprintln!("    head: {head_accepted} texts queued in {:.1}s", t0.elapsed().as_secs_f64());

    // The feed: one text per instance per interval, the instances' phases spread evenly.
    let start = tokio::time::Instant::now();
    let end = start + duration;
    let n = instances.len().max(1) as u32;
    for (i, (inst, token)) in instances.iter().cloned().enumerate() {
        let feed = feed.clone();
        let phase = interval * i as u32 / n;
        tasks.spawn(async move {
            let mut tick = tokio::time::interval_at(start + phase, interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut k = 0u64;
            loop {
                let at = tick.tick().await;
                // Behind its ticks (the API slower than the pace), an instance catches up
                // in a burst, but never past the feed's end.
                if at >= end || tokio::time::Instant::now() >= end {
                    break;
                }
                feed.send(&inst, &token, format!("{inst} feed {k}")).await;
                k += 1;
            }
        });
    }
    let progress = {
        let feed = feed.clone();
        tokio::spawn(async move {
            let mut last = feed.accepted.load(Ordering::Relaxed);
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let now = feed.accepted.load(Ordering::Relaxed);
                let failed: u64 = feed.failed.lock().unwrap().values().sum();
                eprintln!(
                    "    feed: {:.0}s, {}/s accepted over the last 10 s, {} failed so far",
                    start.elapsed().as_secs_f64(),
                    (now - last) / 10,
                    failed
                );
                last = now;
            }
        })
    };
    while tasks.join_next().await.is_some() {}
    progress.abort();
    let fed_for = start.elapsed().as_secs_f64();
    let accepted = feed.accepted.load(Ordering::Relaxed);
    let mut l = feed.latencies_ms.lock().unwrap().clone();
    l.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| if l.is_empty() { 0.0 } else { l[((l.len() - 1) as f64 * p).round() as usize] };
    let failed: BTreeMap<String, u64> = feed.failed.lock().unwrap().iter().map(|(k, v)| (k.to_string(), *v)).collect();
    println!(
        "{}",
        json!({
            "instances": instances.len(),
            "head": head_accepted,
            "accepted": accepted,
            "fed_for_s": fed_for,
            "fed_per_s": (accepted - head_accepted) as f64 / fed_for,
            "failed": failed,
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
        })
    );
}
