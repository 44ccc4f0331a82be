//! Accepted POST {inst}/messages per second with 1 KB texts, and their latency, under
//! goose. Reads LOADTEST_TOKEN and LOADTEST_INSTANCE; goose's own flags (--host, --users,
//! --hatch-rate, --run-time) set the load. Prints one `accepted_per_sec=... p50_ms=...
//! p99_ms=...` line at the end for send-throughput.sh.

use std::sync::OnceLock;

use goose::prelude::*;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};

fn env(k: &str) -> &'static str {
    static VARS: OnceLock<(String, String)> = OnceLock::new();
    let (token, inst) = VARS.get_or_init(|| {
        (
            std::env::var("LOADTEST_TOKEN").expect("LOADTEST_TOKEN"),
            std::env::var("LOADTEST_INSTANCE").expect("LOADTEST_INSTANCE"),
        )
    });
    if k == "token" {
        token
    } else {
        inst
    }
}

fn body() -> &'static serde_json::Value {
    static BODY: OnceLock<serde_json::Value> = OnceLock::new();
    BODY.get_or_init(|| serde_json::json!({ "to": "5511999990002", "type": "text", "text": "x".repeat(1024) }))
}

async fn setup(user: &mut GooseUser) -> TransactionResult {
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {}", env("token"))).expect("header"));
    user.set_client_builder(reqwest::Client::builder().default_headers(headers)).await?;
    Ok(())
}

async fn send(user: &mut GooseUser) -> TransactionResult {
    let path = format!("/v1/instances/{}/messages", env("instance"));
    let _ = user.post_json(&path, body()).await?;
    Ok(())
}

/// The response time (µs) at `pct` percent from goose's (rounded) times histogram.
fn percentile(times: &std::collections::BTreeMap<u64, usize>, total: usize, pct: f64) -> u64 {
    let want = ((total as f64) * pct).ceil() as usize;
    let mut seen = 0;
    for (ms, n) in times {
        seen += n;
        if seen >= want {
            return *ms;
        }
    }
    times.keys().last().copied().unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), GooseError> {
    let metrics = GooseAttack::initialize()?
        .register_scenario(
            scenario!("Send")
                .register_transaction(transaction!(setup).set_on_start())
                .register_transaction(transaction!(send)),
        )
        .execute()
        .await?;
    let mut ok = 0usize;
    let mut failed = 0usize;
    let mut times = std::collections::BTreeMap::new();
    let mut total = 0usize;
    for agg in metrics.requests.values() {
        ok += agg.success_count;
        failed += agg.fail_count;
        for (us, n) in &agg.raw_data.times_us {
            *times.entry(*us).or_insert(0) += n;
            total += n;
        }
    }
    let secs = metrics.duration.max(1) as f64;
    println!(
        "accepted={ok} failed={failed} seconds={secs} accepted_per_sec={:.0} p50_ms={:.1} p99_ms={:.1}",
        ok as f64 / secs,
        percentile(&times, total, 0.50) as f64 / 1000.0,
        percentile(&times, total, 0.99) as f64 / 1000.0
    );
    Ok(())
}
