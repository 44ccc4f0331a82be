//! `webhook_deliveries`: one event for one webhook, and the delivery log the API lists.
//!
//! A dispatcher pod owns a delivery while `locked_by` is its id and `locked_until` has not
//! passed. It claims deliveries when it creates them (fan-out) or when they come due (the
//! retry scanner), and every outcome it writes is conditional on still holding the claim,
//! so two pods never attempt one delivery at the same time and a late answer from a pod
//! whose claim lapsed changes nothing.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};

use crate::db::outbox;
use crate::events::{Event, WebhookDisabledEventData};
use crate::ids::{DeliveryId, EventId, InstanceId, WebhookId};

/// The delivery log's columns (what the API shows).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeliveryRow {
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub event_id: EventId,
    pub event_type: String,
    pub state: DeliveryState,
    pub attempts: i32,
    pub response_status: Option<i32>,
    pub latency_ms: Option<i32>,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

const LOG_COLUMNS: &str = "id, webhook_id, event_id, event_type, state, attempts, response_status, latency_ms, \
     last_error, next_attempt_at, created_at, updated_at, delivered_at";

/// A delivery to create for an event (fan-out).
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub webhook_id: WebhookId,
    pub instance_id: InstanceId,
    pub event_id: EventId,
    pub event_type: String,
}

/// Creates deliveries already claimed by `worker` for `lock`; an event a webhook
/// already has a delivery for (the event came again) is skipped. Returns the created
/// ones as (delivery, webhook, event, retry_until, claim).
pub async fn insert_claimed(
    db: impl PgExecutor<'_>,
    rows: &[NewDelivery],
    worker: &str,
    lock: std::time::Duration,
    retry_span: std::time::Duration,
) -> Result<Vec<(DeliveryId, WebhookId, EventId, DateTime<Utc>, String)>, sqlx::Error> {
    let (lock_ms, retry_span_ms) = (lock.as_millis() as u64, retry_span.as_millis() as u64);
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<DeliveryId> = rows.iter().map(|_| DeliveryId::new()).collect();
    let webhooks: Vec<&str> = rows.iter().map(|r| r.webhook_id.as_str()).collect();
    let instances: Vec<&str> = rows.iter().map(|r| r.instance_id.as_str()).collect();
    let events: Vec<&str> = rows.iter().map(|r| r.event_id.as_str()).collect();
    let types: Vec<&str> = rows.iter().map(|r| r.event_type.as_str()).collect();
    sqlx::query_as(
        "INSERT INTO webhook_deliveries (id, webhook_id, instance_id, event_id, event_type, next_attempt_at, \
             retry_until, locked_by, locked_until, claim_id) \
         SELECT v.id, v.wh, v.inst, v.ev, v.ty, now(), now() + $7 * interval '1 millisecond', $6, \
             now() + $8 * interval '1 millisecond', gen_random_uuid()::text \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS v(id, wh, inst, ev, ty) \
         WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.id = v.wh) \
         ON CONFLICT (webhook_id, event_id) DO NOTHING \
         RETURNING id, webhook_id, event_id, retry_until, claim_id",
    )
    .bind(&ids)
    .bind(&webhooks)
    .bind(&instances)
    .bind(&events)
    .bind(&types)
    .bind(worker)
    .bind(retry_span_ms as f64)
    .bind(lock_ms as f64)
    .fetch_all(db)
    .await
}

/// A claimed delivery with what an attempt needs.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Due {
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub instance_id: InstanceId,
    pub event_id: EventId,
    pub attempts: i32,
    pub retry_until: DateTime<Utc>,
    pub claim_id: String,
    pub url: String,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub secret_rotated_at: Option<DateTime<Utc>>,
    pub payload: serde_json::Value,
    #[sqlx(flatten)]
    pub origin: crate::db::webhooks::Origin,
}

/// Claims up to `limit` pending deliveries that are due and not claimed (or whose claim
/// lapsed), of enabled webhooks, oldest due first.
pub async fn claim_due(
    db: impl PgExecutor<'_>,
    worker: &str,
    lock_ms: u64,
    limit: i64,
) -> Result<Vec<Due>, sqlx::Error> {
    sqlx::query_as(
        "WITH c AS ( \
             UPDATE webhook_deliveries d SET locked_by = $1, locked_until = now() + $2 * interval '1 millisecond', \
                 claim_id = gen_random_uuid()::text \
             FROM (SELECT id FROM webhook_deliveries dd \
                   WHERE state = 'pending' AND next_attempt_at <= now() \
                     AND (locked_until IS NULL OR locked_until < now()) \
                     AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = dd.webhook_id AND w.enabled) \
                   ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) s \
             WHERE d.id = s.id \
             RETURNING d.id, d.webhook_id, d.instance_id, d.event_id, d.attempts, d.retry_until, d.claim_id) \
         SELECT c.id, c.webhook_id, c.instance_id, c.event_id, c.attempts, c.retry_until, c.claim_id, \
             w.url, w.secret, w.previous_secret, w.secret_rotated_at, o.payload, \
             w.format, w.by_events, w.base64, w.evolution_events, \
             coalesce(i.name, o.payload->'data'->>'name', '') AS instance_name, i.phone \
         FROM c JOIN webhooks w ON w.id = c.webhook_id JOIN outbox o ON o.id = c.event_id \
             LEFT JOIN instances i ON i.id = c.instance_id",
    )
    .bind(worker)
    .bind(lock_ms as f64)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// A delivery's state: `pending` (to be attempted, or retried at `next_attempt_at`),
/// `succeeded`, or `failed` for good (then it may be resent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum DeliveryState {
    Pending,
    Succeeded,
    Failed,
}

impl std::fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Succeeded => "succeeded",
            DeliveryState::Failed => "failed",
        })
    }
}

/// What became of one claimed delivery.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub id: DeliveryId,
    /// The claim the attempt was made under.
    pub claim_id: String,
    pub webhook_id: WebhookId,
    /// `pending` (retry at `next_attempt_at`), `succeeded` or `failed`.
    pub state: DeliveryState,
    /// False when the delivery was put back without an attempt (its endpoint's queue was
    /// full): attempts and the last answer stay as they were.
    pub attempted: bool,
    pub response_status: Option<i32>,
    pub latency_ms: Option<i32>,
    pub error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The endpoint answered 410 Gone: disable it.
    pub gone: bool,
    /// The attempt as the log keeps it (none when not attempted).
    pub logged: Option<Attempt>,
    /// The start of the body the attempt sent ([`REQUEST_EXCERPT`] bytes at most).
    pub request_excerpt: Option<String>,
}

/// Most attempts a delivery's log keeps (the latest).
pub const ATTEMPTS_KEPT: usize = 10;
/// Most bytes of the sent body a delivery keeps (its latest attempt's).
pub const REQUEST_EXCERPT: usize = 4096;
/// Most bytes of an endpoint's answer an attempt keeps.
pub const RESPONSE_EXCERPT: usize = 1024;

/// One attempt of a delivery, as its log keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attempt {
    /// When it started.
    pub at: DateTime<Utc>,
    /// Where it went.
    pub url: String,
    /// The endpoint's HTTP status (none when it did not answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    pub latency_ms: Option<i32>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The size of the body sent.
    pub request_bytes: u64,
    /// The start of the endpoint's answer ([`RESPONSE_EXCERPT`] bytes at most, invalid
    /// UTF-8 replaced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
}

/// The start of `bytes` as text: at most `max` bytes, cut at a character boundary,
/// invalid UTF-8 and NULs replaced (Postgres text refuses NUL).
pub fn excerpt(bytes: &[u8], max: usize) -> String {
    let head = &bytes[..bytes.len().min(max)];
    let cut = head.len() < bytes.len();
    let mut s = String::with_capacity(head.len());
    let mut chunks = head.utf8_chunks().peekable();
    while let Some(c) = chunks.next() {
        s.push_str(c.valid());
        // Bytes left over at the cut are a character cut in two, not bad input.
        let split_at_cut = cut && chunks.peek().is_none();
        if !c.invalid().is_empty() && !split_at_cut {
            s.push('\u{fffd}');
        }
    }
    let mut s = s.replace('\0', "\u{fffd}");
    // A replacement is 3 bytes where the bad byte was 1: still at most `max`.
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// What the endpoint rules decided after a batch of outcomes.
#[derive(Debug, Default)]
pub struct Disabled {
    /// (webhook, instance, reason) of each endpoint disabled now.
    pub webhooks: Vec<(WebhookId, InstanceId, String)>,
}

/// Writes a batch of outcomes of `worker`'s claims in one transaction: the deliveries,
/// each endpoint's failure streak, and the endpoints to disable (410 Gone, or failing
/// `disable_failures` attempts in a row for `disable_after`). A disabled endpoint's
/// pending deliveries fail, and a `webhook.disabled` event is written for it.
pub async fn record(
    db: &sqlx::PgPool,
    worker: &str,
    outcomes: &[Outcome],
    disable_failures: u32,
    disable_after: std::time::Duration,
) -> Result<Disabled, sqlx::Error> {
    let disable_after_ms = disable_after.as_millis() as u64;
    let mut tx = db.begin().await?;
    let ids: Vec<&str> = outcomes.iter().map(|o| o.id.as_str()).collect();
    let claims: Vec<&str> = outcomes.iter().map(|o| o.claim_id.as_str()).collect();
    let states: Vec<DeliveryState> = outcomes.iter().map(|o| o.state).collect();
    let inc: Vec<i32> = outcomes.iter().map(|o| o.attempted as i32).collect();
    let status: Vec<Option<i32>> = outcomes.iter().map(|o| o.response_status).collect();
    let latency: Vec<Option<i32>> = outcomes.iter().map(|o| o.latency_ms).collect();
    let errors: Vec<Option<&str>> = outcomes.iter().map(|o| o.error.as_deref()).collect();
    let next: Vec<Option<DateTime<Utc>>> = outcomes.iter().map(|o| o.next_attempt_at).collect();
    let logged: Vec<Option<serde_json::Value>> =
        outcomes.iter().map(|o| o.logged.as_ref().map(|a| serde_json::to_value(a).expect("json"))).collect();
    let sent: Vec<Option<&str>> = outcomes.iter().map(|o| o.request_excerpt.as_deref()).collect();
    let applied: Vec<(DeliveryId,)> = sqlx::query_as(
        "UPDATE webhook_deliveries d SET state = v.state, attempts = d.attempts + v.inc, \
             response_status = CASE WHEN v.inc = 1 THEN v.status ELSE d.response_status END, \
             latency_ms = CASE WHEN v.inc = 1 THEN v.latency ELSE d.latency_ms END, \
             last_error = CASE WHEN v.inc = 1 THEN v.err ELSE d.last_error END, \
             next_attempt_at = v.next, locked_by = NULL, locked_until = NULL, claim_id = NULL, updated_at = now(), \
             delivered_at = CASE WHEN v.state = 'succeeded' THEN now() ELSE d.delivered_at END, \
             attempt_log = CASE WHEN v.logged IS NULL THEN d.attempt_log \
                 WHEN jsonb_array_length(d.attempt_log) < $10 THEN d.attempt_log || jsonb_build_array(v.logged) ELSE \
                 (SELECT jsonb_agg(e ORDER BY n) FROM jsonb_array_elements(d.attempt_log || jsonb_build_array(v.logged)) \
                      WITH ORDINALITY AS t(e, n) WHERE n > jsonb_array_length(d.attempt_log) + 1 - $10) END, \
             last_request = CASE WHEN v.logged IS NULL THEN d.last_request ELSE v.sent END \
         FROM UNNEST($1::text[], $2::text[], $3::int[], $4::int[], $5::int[], $6::text[], $7::timestamptz[], $9::text[], \
                 $11::jsonb[], $12::text[]) \
             AS v(id, state, inc, status, latency, err, next, claim, logged, sent) \
         WHERE d.id = v.id AND d.locked_by = $8 AND d.claim_id = v.claim AND d.state = 'pending' RETURNING d.id",
    )
    .bind(&ids)
    .bind(&states)
    .bind(&inc)
    .bind(&status)
    .bind(&latency)
    .bind(&errors)
    .bind(&next)
    .bind(worker)
    .bind(&claims)
    .bind(ATTEMPTS_KEPT as i32)
    .bind(&logged)
    .bind(&sent)
    .fetch_all(&mut *tx)
    .await?;
    let applied: std::collections::HashSet<&str> = applied.iter().map(|a| a.0.as_str()).collect();

    // Each endpoint's streak (outcomes that applied only): a success in the batch resets
    // it; failures add up.
    let mut per_hook: std::collections::BTreeMap<&str, (bool, i32, bool)> = Default::default();
    for o in outcomes.iter().filter(|o| o.attempted && applied.contains(o.id.as_str())) {
        let e = per_hook.entry(o.webhook_id.as_str()).or_default();
        if o.state == DeliveryState::Succeeded {
            e.0 = true;
        } else {
            e.1 += 1;
        }
        e.2 |= o.gone;
    }
    let mut disabled = Disabled::default();
    if !per_hook.is_empty() {
        let hooks: Vec<&str> = per_hook.keys().copied().collect();
        let ok: Vec<bool> = per_hook.values().map(|v| v.0).collect();
        let fails: Vec<i32> = per_hook.values().map(|v| v.1).collect();
        sqlx::query(
            "UPDATE webhooks w SET \
                 failure_streak = CASE WHEN v.ok THEN 0 ELSE w.failure_streak + v.fails END, \
                 failing_since = CASE WHEN v.ok THEN NULL ELSE COALESCE(w.failing_since, now()) END \
             FROM UNNEST($1::text[], $2::bool[], $3::int[]) AS v(id, ok, fails) WHERE w.id = v.id",
        )
        .bind(&hooks)
        .bind(&ok)
        .bind(&fails)
        .execute(&mut *tx)
        .await?;
        let gone: Vec<&str> = per_hook.iter().filter(|(_, v)| v.2).map(|(k, _)| *k).collect();
        let rows: Vec<(WebhookId, InstanceId, String)> = sqlx::query_as(
            "UPDATE webhooks SET enabled = FALSE, updated_at = now(), disabled_reason = CASE WHEN id = ANY($2) \
                 THEN 'the endpoint answered 410 Gone' \
                 ELSE 'the endpoint failed ' || failure_streak || ' attempts in a row' END \
             WHERE id = ANY($1) AND enabled AND (id = ANY($2) OR \
                 (failure_streak >= $3 AND failing_since <= now() - $4 * interval '1 millisecond')) \
             RETURNING id, instance_id, disabled_reason",
        )
        .bind(&hooks)
        .bind(&gone)
        .bind(disable_failures as i32)
        .bind(disable_after_ms as f64)
        .fetch_all(&mut *tx)
        .await?;
        for (hook, instance, reason) in &rows {
            fail_pending(&mut tx, hook, "the endpoint was disabled").await?;
            let event =
                Event::WebhookDisabled(WebhookDisabledEventData { webhook_id: hook.clone(), reason: reason.clone() });
            outbox::insert(&mut *tx, instance, &event).await?;
        }
        disabled.webhooks = rows;
    }
    tx.commit().await?;
    Ok(disabled)
}

/// Fails every pending delivery of a webhook (it was disabled).
pub async fn fail_pending(db: &mut PgConnection, webhook: &WebhookId, why: &str) -> Result<u64, sqlx::Error> {
    let r = sqlx::query(
        "UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL, locked_by = NULL, locked_until = NULL, claim_id = NULL, \
             last_error = COALESCE(last_error || '; ', '') || $2, updated_at = now() \
         WHERE webhook_id = $1 AND state = 'pending'",
    )
    .bind(webhook)
    .bind(why)
    .execute(db)
    .await?;
    Ok(r.rows_affected())
}

/// Gives up `worker`'s claims (shutdown): another pod may take them at once.
pub async fn release(db: impl PgExecutor<'_>, worker: &str) -> Result<u64, sqlx::Error> {
    let r = sqlx::query(
        "UPDATE webhook_deliveries SET locked_by = NULL, locked_until = NULL, claim_id = NULL WHERE locked_by = $1 AND state = 'pending'",
    )
    .bind(worker)
    .execute(db)
    .await?;
    Ok(r.rows_affected())
}

/// A page of a webhook's delivery log, newest first, after `before` (a delivery id).
/// What the delivery log is narrowed to.
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    pub state: Option<DeliveryState>,
    pub event_type: Option<String>,
    /// Made at or after this time.
    pub since: Option<DateTime<Utc>>,
}

/// A page of a webhook's delivery log, newest first, before `before`, narrowed by `f`
/// (`webhook_deliveries_log_idx`). The log functions take the webhook alone: their
/// callers found it among the caller's own first (an account's webhook logs the
/// deliveries of all its instances' events).
pub async fn list(
    db: impl PgExecutor<'_>,
    webhook: &WebhookId,
    before: Option<&DeliveryId>,
    f: &LogFilter,
    limit: i64,
) -> Result<Vec<DeliveryRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {LOG_COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1 \
         AND ($2::text IS NULL OR id < $2) AND ($4::text IS NULL OR state = $4) \
         AND ($5::text IS NULL OR event_type = $5) AND ($6::timestamptz IS NULL OR created_at >= $6) \
         ORDER BY id DESC LIMIT $3"
    ))
    .bind(webhook)
    .bind(before)
    .bind(limit)
    .bind(f.state)
    .bind(&f.event_type)
    .bind(f.since)
    .fetch_all(db)
    .await
}

pub async fn get(
    db: impl PgExecutor<'_>,
    webhook: &WebhookId,
    id: &DeliveryId,
) -> Result<Option<DeliveryRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {LOG_COLUMNS} FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2"))
        .bind(id)
        .bind(webhook)
        .fetch_optional(db)
        .await
}

/// A delivery with its attempts and the start of what its latest attempt sent.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeliveryDetail {
    #[sqlx(flatten)]
    pub row: DeliveryRow,
    /// Oldest first, the latest [`ATTEMPTS_KEPT`].
    pub attempt_log: sqlx::types::Json<Vec<Attempt>>,
    pub last_request: Option<String>,
}

pub async fn detail(
    db: impl PgExecutor<'_>,
    webhook: &WebhookId,
    id: &DeliveryId,
) -> Result<Option<DeliveryDetail>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {LOG_COLUMNS}, attempt_log, last_request FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2"
    ))
    .bind(id)
    .bind(webhook)
    .fetch_optional(db)
    .await
}

/// Queues a `failed` delivery again, due now, with a fresh retry span. `None` when it is
/// not failed (the caller tells a missing delivery from a wrong state with `get`).
pub async fn resend(
    db: impl PgExecutor<'_>,
    webhook: &WebhookId,
    id: &DeliveryId,
    retry_span: std::time::Duration,
) -> Result<Option<DeliveryRow>, sqlx::Error> {
    let retry_span_ms = retry_span.as_millis() as u64;
    sqlx::query_as(&format!(
        "UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = now(), \
             retry_until = now() + $3 * interval '1 millisecond', locked_by = NULL, locked_until = NULL, claim_id = NULL, updated_at = now(), \
             usage_counted = false \
         WHERE id = $1 AND webhook_id = $2 AND state = 'failed' RETURNING {LOG_COLUMNS}"
    ))
    .bind(id)
    .bind(webhook)
    .bind(retry_span_ms as f64)
    .fetch_optional(db)
    .await
}

/// The webhook backlog: deliveries pending, those due now, those waiting for a retry,
/// and when the oldest pending one was made (`webhook_deliveries_due_idx`).
pub async fn backlog(db: impl PgExecutor<'_>) -> Result<(i64, i64, i64, Option<DateTime<Utc>>), sqlx::Error> {
    sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE next_attempt_at <= now()), count(*) FILTER (WHERE attempts > 0), \
                min(created_at) \
         FROM webhook_deliveries WHERE state = 'pending'",
    )
    .fetch_one(db)
    .await
}

/// Gauges: deliveries waiting for a retry (pending after at least one attempt), and
/// disabled endpoints.
pub async fn gauges(db: impl PgExecutor<'_>) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM webhook_deliveries WHERE state = 'pending' AND attempts > 0), \
                (SELECT count(*) FROM webhooks WHERE NOT enabled)",
    )
    .fetch_one(db)
    .await
}

#[cfg(test)]
mod tests {
    use super::excerpt;

    #[test]
    fn excerpts_are_text_cut_at_a_character() {
        assert_eq!(excerpt(b"hello", 10), "hello");
        assert_eq!(excerpt(b"hello", 3), "hel");
        assert_eq!(excerpt("aé".as_bytes(), 2), "a", "é is two bytes: not cut in two");
        assert_eq!(excerpt(b"a\xffb", 10), "a\u{fffd}b");
        assert_eq!(excerpt(b"a\0b", 10), "a\u{fffd}b");
        assert_eq!(excerpt(b"\xff\xff\xff\xff", 4), "\u{fffd}", "never longer than asked");
    }
}
