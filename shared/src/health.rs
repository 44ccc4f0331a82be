//! The probes a process serves on its metrics listener, where kubelet needs no token:
//! `/healthz` (alive) and `/readyz` (every role this process runs has started and reaches
//! its backends). Each role registers one check per backend once it has connected; until
//! every expected role has, and from the moment shutdown starts, the process is not
//! ready. [`watch`] runs the same checks for the metrics: `paceline_backend_up` and
//! `paceline_backend_check_failures_total`, by role and backend.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

/// A backend check: it answers.
pub type Check = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

/// How long one check may take before it counts as failed.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// 1 while a role reaches a backend, 0 while it does not.
pub const BACKEND_UP: &str = "paceline_backend_up";
/// Failed backend checks, by role and backend.
pub const BACKEND_FAILURES: &str = "paceline_backend_check_failures_total";

struct Entry {
    role: &'static str,
    backend: &'static str,
    check: Check,
    /// Whether the role is ready only while it answers (else it is reported only).
    decides: bool,
}

fn entries() -> &'static Mutex<Vec<Entry>> {
    static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    &ENTRIES
}

/// Registers (or replaces) `role`'s checks of its backends: the role has started.
pub fn register(role: &'static str, checks: Vec<(&'static str, Check)>) {
    let mut all = entries().lock().expect("health checks");
    all.retain(|e| e.role != role);
    all.extend(checks.into_iter().map(|(backend, check)| Entry { role, backend, check, decides: true }));
}

/// Adds a check of `role` that is reported (`paceline_backend_up`) but does not make the
/// role unready: a backend only some work needs (the media bucket), whose outage that
/// work waits out, while everything else goes on.
pub fn report(role: &'static str, backend: &'static str, check: Check) {
    let mut all = entries().lock().expect("health checks");
    all.retain(|e| !(e.role == role && e.backend == backend));
    all.push(Entry { role, backend, check, decides: false });
}

/// The media bucket answers (reported, not deciding readiness).
pub fn media_store(store: crate::db::media::Store) -> Check {
    Arc::new(move || {
        let store = store.clone();
        Box::pin(async move { store.reachable().await.is_ok() })
    })
}

/// Postgres answers `SELECT 1`.
pub fn postgres(pool: sqlx::PgPool) -> (&'static str, Check) {
    (
        "postgres",
        Arc::new(move || {
            let pool = pool.clone();
            Box::pin(async move { sqlx::query("SELECT 1").execute(&pool).await.is_ok() })
        }),
    )
}

/// Redis answers `PING`.
pub fn redis(pool: deadpool_redis::Pool) -> (&'static str, Check) {
    (
        "redis",
        Arc::new(move || {
            let pool = pool.clone();
            Box::pin(async move { crate::kv::is_ready(&pool).await })
        }),
    )
}

/// NATS is connected and flushes.
pub fn nats(client: async_nats::Client) -> (&'static str, Check) {
    (
        "nats",
        Arc::new(move || {
            let client = client.clone();
            Box::pin(async move { crate::bus::is_ready(&client).await })
        }),
    )
}

/// Runs every check of `role` (only those deciding readiness with `deciding`):
/// (backend, answered).
async fn run(role: &str, deciding: bool) -> Option<Vec<(&'static str, bool)>> {
    let checks: Vec<(&'static str, Check)> = {
        let all = entries().lock().expect("health checks");
        all.iter()
            .filter(|e| e.role == role && (e.decides || !deciding))
            .map(|e| (e.backend, e.check.clone()))
            .collect()
    };
    if checks.is_empty() {
        return None;
    }
    let runs = checks.iter().map(|(backend, check)| async move {
        (*backend, tokio::time::timeout(CHECK_TIMEOUT, check()).await.unwrap_or(false))
    });
    Some(futures::future::join_all(runs).await)
}

/// Each expected role's state: `None` not started, `Some(ok)` whether every backend answers.
pub async fn readiness(roles: &[&'static str]) -> Vec<(&'static str, Option<bool>)> {
    let mut out = Vec::new();
    for role in roles {
        out.push((*role, run(role, true).await.map(|r| r.iter().all(|(_, ok)| *ok))));
    }
    out
}

/// Checks every backend of `roles` each `every`, for the metrics, until `stop`.
pub async fn watch(roles: Vec<&'static str>, every: Duration, stop: crate::Shutdown) {
    metrics::describe_gauge!(
        BACKEND_UP,
        "1 while the role reaches the backend (postgres, redis, nats, media_store), 0 while not"
    );
    metrics::describe_counter!(BACKEND_FAILURES, "failed backend checks, by role and backend");
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        for role in &roles {
            for (backend, ok) in run(role, false).await.unwrap_or_default() {
                metrics::gauge!(BACKEND_UP, "role" => *role, "backend" => backend).set(if ok { 1.0 } else { 0.0 });
                if !ok {
                    metrics::counter!(BACKEND_FAILURES, "role" => *role, "backend" => backend).increment(1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(ok: bool) -> Check {
        Arc::new(move || Box::pin(async move { ok }))
    }

    #[tokio::test]
    async fn a_role_is_ready_once_registered_and_while_every_backend_answers() {
        assert_eq!(readiness(&["probe-a"]).await, [("probe-a", None)]);
        register("probe-a", vec![("postgres", answer(true)), ("nats", answer(true))]);
        register("probe-b", vec![("postgres", answer(true)), ("redis", answer(false))]);
        assert_eq!(readiness(&["probe-a", "probe-b"]).await, [("probe-a", Some(true)), ("probe-b", Some(false))]);
        // Registering again replaces the role's checks.
        register("probe-b", vec![("postgres", answer(true))]);
        assert_eq!(readiness(&["probe-b"]).await, [("probe-b", Some(true))]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_that_hangs_counts_as_failed() {
        register("probe-slow", vec![("redis", Arc::new(|| Box::pin(std::future::pending())))]);
        assert_eq!(readiness(&["probe-slow"]).await, [("probe-slow", Some(false))]);
    }
}
