//! A webhook receiver for the delivery benchmark. `POST /fast` answers 200 at once and
//! records how long after the event's `created_at` it arrived; `POST /hang` never answers.
//! `GET /stats` reports the count and latency percentiles since the last `POST /reset`.
//! Prints `port=<n>` once listening.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;

#[derive(Default)]
struct Stats {
    latencies_ms: Vec<f64>,
    first: Option<std::time::Instant>,
    last: Option<std::time::Instant>,
}

type Shared = Arc<Mutex<Stats>>;

async fn fast(State(s): State<Shared>, body: String) -> &'static str {
    let now = chrono::Utc::now();
    let created = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("created_at")?.as_str()?.parse::<chrono::DateTime<chrono::Utc>>().ok());
    let mut st = s.lock().unwrap();
    let t = std::time::Instant::now();
    st.first.get_or_insert(t);
    st.last = Some(t);
    if let Some(c) = created {
        st.latencies_ms.push((now - c).num_microseconds().unwrap_or(0) as f64 / 1000.0);
    }
    "ok"
}

async fn hang() -> &'static str {
    std::future::pending::<()>().await;
    "never"
}

async fn stats(State(s): State<Shared>) -> String {
    let st = s.lock().unwrap();
    let mut l = st.latencies_ms.clone();
    l.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| if l.is_empty() { 0.0 } else { l[((l.len() - 1) as f64 * p).round() as usize] };
    let span = match (st.first, st.last) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    format!(
        "{{\"count\": {}, \"span_s\": {:.3}, \"p50_ms\": {:.1}, \"p99_ms\": {:.1}, \"max_ms\": {:.1}}}\n",
        l.len(),
        span,
        pct(0.5),
        pct(0.99),
        l.last().copied().unwrap_or(0.0)
    )
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
        .route("/hang", post(hang))
        .route("/stats", get(stats))
        .route("/reset", post(reset))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("port={}", listener.local_addr().unwrap().port());
    axum::serve(listener, app).await.unwrap();
}
