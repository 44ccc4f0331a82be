//! Rolls finished deliveries up into the daily usage counts (`db::usage`) every
//! `usage.rollup_interval_ms`, in batches. Every dispatcher pod runs it; rows are claimed
//! with `SKIP LOCKED` and marked counted in the statement that counts them, so pods share
//! the work and nothing is counted twice. (Events are counted by the relay as it
//! publishes them.)

use std::time::Duration;

const BATCH: i64 = 5_000;

pub async fn run(db: sqlx::PgPool, every: Duration, shutdown: shared::Shutdown) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        while !shutdown.is_cancelled() {
            match shared::db::usage::roll_up_deliveries(&db, BATCH).await {
                Ok(n) if n == BATCH as u64 => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "rolling delivery usage up failed; trying again next round");
                    break;
                }
            }
        }
    }
}
