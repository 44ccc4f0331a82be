//! Prunes events and deliveries past `bus::EVENTS_RETENTION` (`db::retention`), every
//! few minutes, in batches so no statement holds locks for long. Every dispatcher pod
//! runs it; the deletes are idempotent, so pods overlapping costs only a little work.

use std::time::Duration;

use shared::db::retention;

const EVERY: Duration = Duration::from_secs(600);
const FIRST_AFTER: Duration = Duration::from_secs(60);
const BATCH: i64 = 5_000;

pub async fn run(db: sqlx::PgPool, shutdown: shared::Shutdown) {
    let mut wait = FIRST_AFTER;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = EVERY;
        let cutoff = chrono::Utc::now() - shared::bus::EVENTS_RETENTION;
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            match retention::prune(&db, cutoff, BATCH).await {
                Ok(p) => {
                    if p.failed + p.deliveries + p.events > 0 {
                        tracing::info!(
                            failed = p.failed,
                            deliveries = p.deliveries,
                            events = p.events,
                            "pruned past retention"
                        );
                    }
                    if p.failed < BATCH as u64 && p.deliveries < BATCH as u64 && p.events < BATCH as u64 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pruning events past retention failed");
                    break;
                }
            }
        }
    }
}
