//! Ban risk's evaluator: every paired instance's risk each `risk.interval_ms`
//! (docs/ban-risk.md; the scoring itself is `shared::risk`, which the worker's pacing
//! reads too). The dispatcher role runs it: dispatchers claim due instances with `SKIP LOCKED`, so pods share the work; each evaluation
//! is stored on the instance, and a change of level writes `instance.risk` in the same
//! transaction; at a critical risk, or after a temporary ban, the queue is paused
//! (`instance.paused`) until `POST {inst}/queue/resume`. Metrics: the scores as a histogram
//! across instances (by instance only with `metrics.per_instance`), and level changes by level.

use std::time::Duration;

pub const SCORE: &str = "paceline_instance_risk_score";
pub const SCORE_INSTANCE: &str = "paceline_instance_risk_score_by_instance";
pub const CHANGES: &str = "paceline_instance_risk_changes_total";
pub const PAUSES: &str = "paceline_instance_queue_pauses_total";
const BATCH: i64 = 100;

pub fn describe() {
    metrics::describe_histogram!(SCORE, "instances' ban-risk scores (0-100), one sample per evaluation");
    metrics::describe_gauge!(SCORE_INSTANCE, "each instance's ban-risk score (metrics_per_instance only)");
    metrics::describe_counter!(CHANGES, "instances whose ban-risk level moved, by the level reached");
    metrics::describe_counter!(PAUSES, "queues paused by policy, by reason (risk_critical, temporary_ban)");
}

/// What the loop does besides measuring.
#[derive(Clone)]
pub struct Policy {
    /// Tells an instance's worker that its pacing or pause changed.
    pub nats: async_nats::Client,
    pub subjects: shared::bus::Subjects,
    /// The deployment's policies (each instance's `risk_policy` overrides them).
    pub deployment: shared::risk::Policy,
    pub per_instance_metrics: bool,
}

pub async fn run(db: sqlx::PgPool, every: Duration, policy: Policy, shutdown: shared::Shutdown) {
    describe();
    let tick = (every / 4).clamp(Duration::from_millis(100), Duration::from_secs(15));
    // Where this pod's pass over the instances is (by id); each tick begins a new pass.
    let mut after = String::new();
    loop {
        while !shutdown.is_cancelled() {
            match round(&db, every, &mut after, &policy).await {
                Ok(n) if n == BATCH as usize => continue,
                Ok(_) => {
                    after.clear();
                    break;
                }
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

async fn round(db: &sqlx::PgPool, every: Duration, after: &mut String, p: &Policy) -> Result<usize, sqlx::Error> {
    let due = shared::db::risk::claim_due(db, every, after, BATCH).await?;
    if let Some((last, _)) = due.last() {
        *after = last.to_string();
    }
    for (id, own) in &due {
        let policy = p.deployment.with(own.as_ref().map(|o| &o.0));
        let signals = shared::db::risk::signals(db, id).await?;
        let a = shared::risk::assess(&signals, &policy.thresholds);
        metrics::histogram!(SCORE).record(a.score);
        if p.per_instance_metrics {
            metrics::gauge!(SCORE_INSTANCE, "instance" => id.to_string()).set(a.score);
        }
        let reasons = a.contributions.iter().filter(|c| c.points > 0.0).take(3).map(|c| c.signal.to_string()).collect();
        let mut changed = false;
        if shared::db::risk::record(db, id, a.score, a.level, reasons, &a.recommendation).await?.is_some() {
            metrics::counter!(CHANGES, "level" => a.level.as_str()).increment(1);
            changed = true;
        }
        let critical = a.level == shared::risk::Level::Critical;
        if policy.auto_pause && (critical || signals.temp_bans_7d > 0) {
            if let Some(reason) = shared::db::risk::auto_pause(db, id, critical, a.score, a.level).await? {
                metrics::counter!(PAUSES, "reason" => reason.clone()).increment(1);
                tracing::warn!(instance = %id, reason, "the instance's queue is paused");
                changed = true;
            }
        }
        if changed {
            // The worker reads its pacing and pause at once (else within 5 s).
            if let Err(e) = p.nats.publish(p.subjects.instance_queue(id), shared::bus::RULES_CHANGED.into()).await {
                tracing::debug!(error = %e, "telling the worker failed");
            }
        }
    }
    Ok(due.len())
}

/// An instance's ban risk now.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RiskOut {
    /// 0-100.
    pub score: f64,
    pub level: shared::risk::Level,
    /// What to do, in words.
    pub recommendation: String,
    /// Every signal's part of the score, largest first.
    pub contributions: Vec<shared::risk::Contribution>,
    pub signals: shared::risk::Signals,
    /// The levels in force (`policy.thresholds`).
    pub thresholds: shared::risk::Thresholds,
    /// The policies in force: the deployment's, with the instance's `risk_policy` applied.
    pub policy: shared::risk::Policy,
    pub computed_at: chrono::DateTime<chrono::Utc>,
}

/// The instance's ban risk now, computed from Postgres under the policies in force.
pub async fn assess(ctx: crate::Ctx<'_>) -> crate::Result<RiskOut> {
    let db = &ctx.core.db;
    let own = shared::db::instances::get(db, ctx.instance).await?.ok_or(crate::Error::InstanceNotFound)?.risk_policy;
    let policy = ctx.core.config.risk_policy().with(own.as_ref().map(|p| &p.0));
    let signals = shared::db::risk::signals(db, ctx.instance).await?;
    let a = shared::risk::assess(&signals, &policy.thresholds);
    Ok(RiskOut {
        score: a.score,
        level: a.level,
        recommendation: a.recommendation,
        contributions: a.contributions,
        signals,
        thresholds: policy.thresholds,
        policy,
        computed_at: chrono::Utc::now(),
    })
}

/// Pauses the instance's queue by hand (`manual`): nothing is sent until a resume; 409
/// `conflict` when it is paused already.
pub async fn pause(ctx: crate::Ctx<'_>) -> crate::Result<()> {
    if !shared::db::instances::exists(&ctx.core.db, ctx.instance).await? {
        return Err(crate::Error::InstanceNotFound);
    }
    if !shared::db::risk::pause_by_hand(&ctx.core.db, ctx.instance).await? {
        return Err(crate::Error::refused(shared::ErrorCode::Conflict, "the queue is paused already"));
    }
    crate::instances::rules_changed(ctx.core, ctx.instance).await;
    Ok(())
}

/// Resumes a paused queue; 409 `conflict` when it is not paused.
pub async fn resume(ctx: crate::Ctx<'_>) -> crate::Result<()> {
    if !shared::db::instances::exists(&ctx.core.db, ctx.instance).await? {
        return Err(crate::Error::InstanceNotFound);
    }
    if shared::db::risk::resume(&ctx.core.db, ctx.instance).await?.is_none() {
        return Err(crate::Error::refused(shared::ErrorCode::Conflict, "the queue is not paused"));
    }
    crate::instances::rules_changed(ctx.core, ctx.instance).await;
    Ok(())
}
