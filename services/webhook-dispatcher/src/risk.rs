//! Evaluates every paired instance's ban risk each `risk_interval_ms` (README, "Ban
//! risk"): dispatchers claim due instances with `SKIP LOCKED`, so pods share the work;
//! each evaluation is stored on the instance, and a change of level writes
//! `instance.risk` in the same transaction. Metrics: the scores as a histogram across
//! instances (by instance only with `metrics_per_instance`), and level changes by level.

use std::time::Duration;

use serde_json::json;
use shared::risk::Thresholds;

pub const SCORE: &str = "paceline_instance_risk_score";
pub const SCORE_INSTANCE: &str = "paceline_instance_risk_score_by_instance";
pub const CHANGES: &str = "paceline_instance_risk_changes_total";
const BATCH: i64 = 100;

pub fn describe() {
    metrics::describe_histogram!(SCORE, "instances' ban-risk scores (0-100), one sample per evaluation");
    metrics::describe_gauge!(SCORE_INSTANCE, "each instance's ban-risk score (metrics_per_instance only)");
    metrics::describe_counter!(CHANGES, "instances whose ban-risk level moved, by the level reached");
}

pub async fn run(
    db: sqlx::PgPool,
    every: Duration,
    thresholds: Thresholds,
    per_instance: bool,
    shutdown: shared::Shutdown,
) {
    describe();
    let tick = (every / 4).clamp(Duration::from_millis(100), Duration::from_secs(15));
    loop {
        while !shutdown.is_cancelled() {
            match round(&db, every, &thresholds, per_instance).await {
                Ok(n) if n == BATCH as usize => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "evaluating ban risk failed; trying again next round");
                    break;
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
    }
}

async fn round(db: &sqlx::PgPool, every: Duration, t: &Thresholds, per_instance: bool) -> Result<usize, sqlx::Error> {
    let due = shared::db::risk::claim_due(db, every, BATCH).await?;
    for id in &due {
        let signals = shared::db::risk::signals(db, id).await?;
        let a = shared::risk::assess(&signals, t);
        metrics::histogram!(SCORE).record(a.score);
        if per_instance {
            metrics::gauge!(SCORE_INSTANCE, "instance" => id.to_string()).set(a.score);
        }
        let reasons: Vec<&str> = a.contributions.iter().filter(|c| c.points > 0.0).take(3).map(|c| c.signal).collect();
        let event =
            json!({ "score": a.score, "level": a.level, "reasons": reasons, "recommendation": a.recommendation });
        if shared::db::risk::record(db, id, a.score, a.level, event).await?.is_some() {
            metrics::counter!(CHANGES, "level" => a.level.as_str()).increment(1);
        }
    }
    Ok(due.len())
}
