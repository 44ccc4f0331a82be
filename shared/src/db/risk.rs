//! An instance's ban-risk signals, read from what Postgres already keeps: the queue's
//! finished messages (sends and failures), the local log (who wrote first, who answered,
//! what was delivered) and the outbox (temporary bans and logouts, kept 7 days). No
//! process memory: any pod computes the same signals.

use crate::events::{Event, InstancePausedEventData, InstanceResumedEventData, InstanceRiskEventData};
use crate::ids::InstanceId;
use crate::risk::Signals;

/// The signals of `instance` now, in one statement (the evaluator reads them for every
/// paired instance every `risk.interval_ms`: one round trip each).
pub async fn signals(db: &sqlx::PgPool, instance: &InstanceId) -> Result<Signals, sqlx::Error> {
    let r: SignalsRow = sqlx::query_as(
        // Sends and failures the network answered (expiry is not the network's answer).
        "SELECT * FROM (WITH done AS ( \
                 SELECT m.status, m.error, m.to_jid, COALESCE(m.sent_at, m.updated_at) AS at \
                 FROM messages m \
                 WHERE m.instance_id = $1 AND m.updated_at > now() - interval '7 days' \
                   AND m.status IN ('sent', 'failed') AND COALESCE(m.error, '') NOT LIKE 'message_expired%') \
             SELECT count(*) FILTER (WHERE at > now() - interval '1 hour') AS sends_1h, \
                    count(*) FILTER (WHERE at > now() - interval '24 hours') AS sends_24h, \
                    count(*) FILTER (WHERE at > now() - interval '24 hours' AND status = 'failed') AS failed, \
                    count(*) FILTER (WHERE at > now() - interval '24 hours' AND error LIKE 'invalid_number%') \
                      AS invalid, \
                    (SELECT count(*) FROM messages r WHERE r.instance_id = $1 \
                       AND r.rate_limited_at > now() - interval '24 hours') \
                    + count(*) FILTER (WHERE at > now() - interval '24 hours' AND error LIKE 'rate_limited%') \
                      AS limited, \
                    count(*) FILTER (WHERE at > now() - interval '24 hours' AND status = 'sent' AND NOT EXISTS ( \
                        SELECT 1 FROM log_messages l WHERE l.instance_id = $1 AND l.chat_jid = done.to_jid \
                          AND NOT l.from_me AND l.ts < done.at)) AS first, \
                    count(*) FILTER (WHERE at <= now() - interval '24 hours' AND status = 'sent') AS before \
             FROM done) sends, \
         /* Chats messaged in 7 days and whether they wrote in that time (a conversation, who \
            ever began it); sends older than 30 minutes still not delivered. */ \
         (WITH sent AS ( \
             SELECT chat_jid, min(ts) AS first FROM log_messages \
             WHERE instance_id = $1 AND source = 'queue' AND ts > now() - interval '7 days' GROUP BY chat_jid), \
         late AS ( \
             SELECT status FROM log_messages WHERE instance_id = $1 AND source = 'queue' \
               AND ts > now() - interval '24 hours' AND ts <= now() - interval '30 minutes') \
         SELECT (SELECT count(*) FROM sent) AS messaged, \
                (SELECT count(*) FROM sent WHERE EXISTS (SELECT 1 FROM log_messages l WHERE l.instance_id = $1 \
                     AND l.chat_jid = sent.chat_jid AND NOT l.from_me AND l.ts > now() - interval '7 days')) \
                  AS answered, \
                (SELECT count(*) FROM late WHERE status = 'sent') AS undelivered, \
                (SELECT count(*) FROM late) AS deliverable) chats, \
         (SELECT COALESCE(max(n), 0) AS same_content FROM ( \
             SELECT count(DISTINCT to_jid) AS n FROM messages \
             WHERE instance_id = $1 AND status = 'sent' AND updated_at > now() - interval '24 hours' \
             GROUP BY md5(content::text)) c) content, \
         (SELECT (SELECT EXTRACT(EPOCH FROM now() - paired_at)::float8 / 86400 FROM instances WHERE id = $1) AS age, \
                count(*) FILTER (WHERE type = 'instance.state') AS bans, \
                count(*) FILTER (WHERE type = 'instance.logged_out') AS logouts \
         FROM outbox WHERE instance_id = $1 AND created_at > now() - interval '7 days' \
           AND (type = 'instance.logged_out' \
                OR (type = 'instance.state' AND payload->'data'->>'reason' LIKE 'temporarily banned%'))) network",
    )
    .bind(instance)
    .fetch_one(db)
    .await?;
    Ok(Signals {
        sends_1h: r.sends_1h,
        sends_24h: r.sends_24h,
        failed_24h: r.failed,
        invalid_numbers_24h: r.invalid,
        rate_limited_24h: r.limited,
        first_contacts_24h: r.first,
        daily_sends_before: r.before as f64 / 6.0,
        chats_messaged_7d: r.messaged,
        chats_answered_7d: r.answered,
        undelivered_24h: r.undelivered,
        deliverable_24h: r.deliverable,
        max_chats_per_content_24h: r.same_content,
        age_days: r.age,
        temp_bans_7d: r.bans,
        logouts_7d: r.logouts,
    })
}

#[derive(sqlx::FromRow)]
struct SignalsRow {
    sends_1h: i64,
    sends_24h: i64,
    failed: i64,
    invalid: i64,
    limited: i64,
    first: i64,
    before: i64,
    messaged: i64,
    answered: i64,
    undelivered: i64,
    deliverable: i64,
    same_content: i64,
    age: Option<f64>,
    bans: i64,
    logouts: i64,
}

/// An instance due for evaluation, with its own policies.
pub type Due = (InstanceId, Option<sqlx::types::Json<crate::risk::PolicyOverrides>>);

/// Claims up to `limit` paired instances after `after` (by id) whose last evaluation is
/// older than `every`, marking them evaluated now so other dispatchers take others. The
/// evaluator walks the instances in id order, a page at a time along the primary key
/// (`after` the last id it got, "" to begin a pass): each pass reads each row once, where
/// picking the stalest first would sort every paired instance for each page. In id order
/// (the database's), so the last is the next page's `after`.
pub async fn claim_due(
    db: &sqlx::PgPool,
    every: std::time::Duration,
    after: &str,
    limit: i64,
) -> Result<Vec<Due>, sqlx::Error> {
    sqlx::query_as(
        "WITH c AS (UPDATE instances SET risk_at = now() WHERE id IN ( \
             SELECT id FROM instances WHERE id > $2 AND paired_at IS NOT NULL \
               AND (risk_at IS NULL OR risk_at < now() - make_interval(secs => $1)) \
             ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) \
           RETURNING id, risk_policy) \
         SELECT id, risk_policy FROM c ORDER BY id",
    )
    .bind(every.as_secs_f64())
    .bind(after)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Records an evaluation in one statement, writing the row only when the score or the
/// level moved (the claim stamped the evaluation's time); when the level moved (an
/// instance never evaluated counts as `low`), writes `instance.risk` (with the `reasons`
/// and the `recommendation`) in the same statement. Returns the previous level when it
/// moved.
pub async fn record(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    score: f64,
    level: crate::risk::Level,
    reasons: Vec<String>,
    recommendation: &str,
) -> Result<Option<String>, sqlx::Error> {
    let event = Event::Risk(InstanceRiskEventData {
        score,
        level: level.as_str().into(),
        // Filled in by the statement from the row's level before it.
        previous_level: String::new(),
        reasons,
        recommendation: recommendation.into(),
    });
    let (id, payload) = crate::db::outbox::envelope(instance, &event, chrono::Utc::now());
    sqlx::query_scalar(
        "WITH old AS (SELECT id, COALESCE(risk_level, 'low') AS level FROM instances WHERE id = $1 FOR NO KEY UPDATE), \
              upd AS (UPDATE instances i SET risk_score = $2, risk_level = $3 FROM old \
                      WHERE i.id = old.id AND (i.risk_score IS DISTINCT FROM $2 OR i.risk_level IS DISTINCT FROM $3) \
                      RETURNING old.level), \
              moved AS (SELECT level FROM upd WHERE level <> $3), \
              ev AS (INSERT INTO outbox (id, instance_id, type, payload) \
                     SELECT $4, $1, $5, jsonb_set($6::jsonb, '{data,previous_level}', to_jsonb(moved.level)) FROM moved) \
         SELECT level FROM moved",
    )
    .bind(instance)
    .bind(score as f32)
    .bind(level.as_str())
    .bind(id)
    .bind(event.kind())
    .bind(payload)
    .fetch_optional(db)
    .await
}

/// Pauses the queue by policy, unless it is paused already: after a temporary ban the
/// network gave since the last resume, or (when `critical`) at a critical risk, unless a
/// resume came within the hour. Writes `instance.paused` (with the evaluation's `score`
/// and `level`) in the same transaction; returns the reason when it paused.
pub async fn auto_pause(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    critical: bool,
    score: f64,
    level: crate::risk::Level,
) -> Result<Option<String>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let reason: Option<String> = sqlx::query_scalar(
        "WITH i AS (SELECT id, queue_resumed_at FROM instances WHERE id = $1 AND queue_paused_reason IS NULL FOR UPDATE), \
              ban AS (SELECT EXISTS (SELECT 1 FROM outbox o, i WHERE o.instance_id = $1 \
                  AND o.created_at > now() - interval '7 days' \
                  AND (o.type = 'instance.logged_out' \
                       OR (o.type = 'instance.state' AND o.payload->'data'->>'reason' LIKE 'temporarily banned%')) \
                  AND o.type <> 'instance.logged_out' \
                  AND o.created_at > COALESCE(i.queue_resumed_at, '-infinity'::timestamptz)) AS b) \
         UPDATE instances SET \
             queue_paused_reason = CASE WHEN (SELECT b FROM ban) THEN 'temporary_ban' ELSE 'risk_critical' END, \
             queue_paused_at = now() \
         FROM i WHERE instances.id = i.id AND ((SELECT b FROM ban) \
             OR ($2 AND (i.queue_resumed_at IS NULL OR i.queue_resumed_at < now() - interval '1 hour'))) \
         RETURNING queue_paused_reason",
    )
    .bind(instance)
    .bind(critical)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(r) = &reason {
        let event = Event::Paused(InstancePausedEventData { reason: r.clone(), score, level: level.as_str().into() });
        crate::db::outbox::insert(&mut *tx, instance, &event).await?;
    }
    tx.commit().await?;
    Ok(reason)
}

/// Pauses the queue by hand (`manual`) unless it is paused already, with its
/// `instance.paused` event (the last evaluation's score and level) in the same
/// transaction; false when it was paused already.
pub async fn pause_by_hand(db: &sqlx::PgPool, instance: &InstanceId) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let paused: Option<(Option<f32>, Option<String>)> = sqlx::query_as(
        "UPDATE instances SET queue_paused_reason = 'manual', queue_paused_at = now() \
         WHERE id = $1 AND queue_paused_reason IS NULL RETURNING risk_score, risk_level",
    )
    .bind(instance)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((score, level)) = paused else { return Ok(false) };
    let event = Event::Paused(InstancePausedEventData {
        reason: "manual".into(),
        score: f64::from(score.unwrap_or(0.0)),
        level: level.unwrap_or_else(|| crate::risk::Level::Low.as_str().into()),
    });
    crate::db::outbox::insert(&mut *tx, instance, &event).await?;
    tx.commit().await?;
    Ok(true)
}

/// Resumes a paused queue (holding off the next automatic pause for an hour), with its
/// `instance.resumed` event; returns the reason it was paused for, or `None` when it was not.
pub async fn resume(db: &sqlx::PgPool, instance: &InstanceId) -> Result<Option<String>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let reason: Option<String> = sqlx::query_scalar(
        "UPDATE instances i SET queue_paused_reason = NULL, queue_paused_at = NULL, queue_resumed_at = now() \
         FROM (SELECT id, queue_paused_reason AS was FROM instances WHERE id = $1 FOR UPDATE) old \
         WHERE i.id = old.id AND old.was IS NOT NULL RETURNING old.was",
    )
    .bind(instance)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(r) = &reason {
        let event = Event::Resumed(InstanceResumedEventData { paused_for: r.clone() });
        crate::db::outbox::insert(&mut *tx, instance, &event).await?;
    }
    tx.commit().await?;
    Ok(reason)
}
