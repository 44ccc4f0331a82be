//! A webhook receiver for the delivery benchmarks. `POST /fast` (and `/fast/<anything>`,
//! so many endpoints can share one sink) answers 200 at once and
//! records how long after the event's `created_at` it arrived, by event type and by the
//! minute of arrival, and which event ids it has seen (a repeat counts as a duplicate);
//! `POST /hang` never answers. `GET /stats` reports the count and latency percentiles
//! since the last `POST /reset`; `GET /stats/minutes` the same per minute of arrival.
//! Prints `port=<n>` once listening.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

#[derive(Default)]
struct Stats {
    latencies_ms: Vec<f64>,
    first: Option<std::time::Instant>,
    last: Option<std::time::Instant>,
    by_type: BTreeMap<String, u64>,
    ids: HashSet<String>,
    duplicates: u64,
    /// Unix minute of arrival -> latencies of what arrived in it.
    minutes: BTreeMap<i64, Vec<f64>>,
}

type Shared = Arc<Mutex<Stats>>;

async fn fast(State(s): State<Shared>, body: String) -> &'static str {
    let now = chrono::Utc::now();
    let event = serde_json::from_str::<Value>(&body).unwrap_or(Value::Null);
    let created =
        event.get("created_at").and_then(Value::as_str).and_then(|c| c.parse::<chrono::DateTime<chrono::Utc>>().ok());
    let mut st = s.lock().unwrap();
    let t = std::time::Instant::now();
    st.first.get_or_insert(t);
    st.last = Some(t);
    if let Some(id) = event.get("id").and_then(Value::as_str) {
        if !st.ids.insert(id.to_string()) {
            st.duplicates += 1;
        }
    }
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("?").to_string();
    *st.by_type.entry(kind).or_default() += 1;
    if let Some(c) = created {
        let ms = (now - c).num_microseconds().unwrap_or(0) as f64 / 1000.0;
        st.latencies_ms.push(ms);
        st.minutes.entry(now.timestamp() / 60).or_default().push(ms);
    }
    "ok"
}

async fn hang() -> &'static str {
    std::future::pending::<()>().await;
    "never"
}

/// p50, p99 and max of `l`, sorting it.
fn quantiles(l: &mut [f64]) -> (f64, f64, f64) {
    l.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| if l.is_empty() { 0.0 } else { l[((l.len() - 1) as f64 * p).round() as usize] };
    (pct(0.5), pct(0.99), l.last().copied().unwrap_or(0.0))
}

async fn stats(State(s): State<Shared>) -> String {
    let st = s.lock().unwrap();
    let mut l = st.latencies_ms.clone();
    let (p50, p99, max) = quantiles(&mut l);
    let span = match (st.first, st.last) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    let out = json!({
        "count": l.len(),
        "span_s": (span * 1000.0).round() / 1000.0,
        "p50_ms": (p50 * 10.0).round() / 10.0,
        "p99_ms": (p99 * 10.0).round() / 10.0,
        "max_ms": (max * 10.0).round() / 10.0,
        "by_type": st.by_type,
        "unique": st.ids.len(),
        "duplicates": st.duplicates,
    });
    format!("{out}\n")
}

async fn minutes(State(s): State<Shared>) -> String {
    let st = s.lock().unwrap();
    let rows: Vec<Value> = st
        .minutes
        .iter()
        .map(|(m, l)| {
            let mut l = l.clone();
            let (p50, p99, max) = quantiles(&mut l);
            json!({ "minute": m * 60, "count": l.len(), "p50_ms": p50, "p99_ms": p99, "max_ms": max })
        })
        .collect();
    format!("{}\n", Value::from(rows))
}

async fn reset(State(s): State<Shared>) -> &'static str {
    *s.lock().unwrap() = Stats::default();
    "reset"
}

#[tokio::main]
async fn main() {
    let state: Shared = Arc::default();
    let app = Router::new()
        .route("/fast", post(fast))
        .route("/fast/{endpoint}", post(fast))
        .route("/hang", post(hang))
        .route("/stats", get(stats))
        .route("/stats/minutes", get(minutes))
        .route("/reset", post(reset))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("port={}", listener.local_addr().unwrap().port());
    axum::serve(listener, app).await.unwrap();
}
