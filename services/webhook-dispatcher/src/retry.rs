//! The retry scanner: claims deliveries that came due (retries, resends, and claims a
//! crashed pod left behind) and hands them to the executor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shared::db::deliveries;

use crate::executor::{secrets_of, Executor, Job};
use crate::metrics as m;
use crate::shape;

const BATCH: i64 = 500;
const TICK: Duration = Duration::from_millis(500);
const GAUGES_EVERY: Duration = Duration::from_secs(5);

/// Runs the scanner until `shutdown`.
pub async fn run(db: sqlx::PgPool, exec: Executor, shutdown: shared::Shutdown) {
    let mut gauges_at = Instant::now();
    while !shutdown.is_cancelled() {
        let n = match scan_once(&db, &exec).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "claiming due webhook deliveries failed");
                0
            }
        };
        if gauges_at.elapsed() >= GAUGES_EVERY {
            gauges_at = Instant::now();
            exec.prune_idle();
            if let Ok((retrying, disabled)) = deliveries::gauges(&db).await {
                metrics::gauge!(m::RETRY_QUEUE).set(retrying as f64);
                metrics::gauge!(m::DISABLED_ENDPOINTS).set(disabled as f64);
            }
        }
        if n < BATCH as usize {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(TICK) => {}
            }
        }
    }
}

async fn scan_once(db: &sqlx::PgPool, exec: &Executor) -> Result<usize, sqlx::Error> {
    let s = exec.settings();
    let due = deliveries::claim_due(db, &s.worker_id, s.lock.as_millis() as u64, BATCH).await?;
    let claimed_at = Instant::now();
    let n = due.len();
    for d in due {
        let created = d.payload.get("created_at").and_then(|c| c.as_str()).and_then(|c| c.parse().ok());
        let envelope = Arc::new(d.payload);
        let origin = Arc::new(d.origin);
        let job = Job {
            id: d.id,
            claim_id: d.claim_id,
            webhook_id: d.webhook_id,
            event_id: d.event_id.to_string(),
            url: shape::target(&d.url, &origin, &envelope),
            secrets: secrets_of(d.secret, d.previous_secret, d.secret_rotated_at),
            body: shape::body(&d.url, &origin, &envelope, None),
            attempts: d.attempts,
            retry_until: d.retry_until,
            event_created: created,
            claimed_at,
        };
        exec.submit(job).await;
    }
    Ok(n)
}
