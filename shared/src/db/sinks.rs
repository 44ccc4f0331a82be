//! Event sinks (migrations 0041, 0043): an instance's events (or those of every instance
//! of an account) published into a message broker
//! (RabbitMQ) from the events stream, by a cursor on its sequence that moves only after
//! the broker confirmed. A sink is delivered by one dispatcher pod at a time, under a
//! claim (`locked_by`, `locked_until`) renewed while it runs; a cursor moves only under
//! that claim and the generation the pod read, so a pod that lost its claim, or read
//! settings since changed, moves nothing.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

pub use crate::db::webhooks::Owner;
use crate::db::webhooks::WebhookFormat;
use crate::ids::{AccountId, InstanceId};

/// The only kind of sink so far.
pub const RABBITMQ: &str = "rabbitmq";

/// A sink as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SinkRow {
    /// The owner's id: the instance's or the account's.
    pub owner_id: String,
    /// The instance whose events it carries (none for an account's).
    pub instance_id: Option<InstanceId>,
    /// The account whose instances' events it carries (none for an instance's).
    pub account_id: Option<AccountId>,
    pub kind: String,
    pub enabled: bool,
    pub url_sealed: Option<Vec<u8>>,
    pub url_shown: Option<String>,
    pub private_host: Option<String>,
    pub exchange: String,
    pub queue: Option<String>,
    pub events: Vec<String>,
    pub format: WebhookFormat,
    pub evolution_events: Vec<String>,
    pub cursor_seq: i64,
    pub generation: i64,
    pub delivered: i64,
    pub last_delivered_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub failing_since: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str =
    "owner_id, instance_id, account_id, kind, enabled, url_sealed, url_shown, private_host, exchange, queue, events, \
    format, evolution_events, cursor_seq, generation, delivered, last_delivered_at, last_error, failing_since, \
    created_at, updated_at";

impl SinkRow {
    /// Who it belongs to (the table's check makes it one of the two).
    pub fn owner(&self) -> Option<Owner> {
        match (&self.instance_id, &self.account_id) {
            (Some(i), _) => Some(Owner::Instance(i.clone())),
            (None, Some(a)) => Some(Owner::Account(a.clone())),
            (None, None) => None,
        }
    }
}

/// The sink of `owner` (an instance's or an account's id).
pub async fn get(db: impl PgExecutor<'_>, owner: &str, kind: &str) -> Result<Option<SinkRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM event_sinks WHERE owner_id = $1 AND kind = $2"))
        .bind(owner)
        .bind(kind)
        .fetch_optional(db)
        .await
}

/// What [`put`] stores.
pub struct Put<'a> {
    pub enabled: bool,
    pub url_sealed: Option<&'a [u8]>,
    pub url_shown: Option<&'a str>,
    pub private_host: Option<&'a str>,
    pub exchange: &'a str,
    pub queue: Option<&'a str>,
    pub events: &'a [String],
    pub format: WebhookFormat,
    pub evolution_events: &'a [String],
    /// Where a new sink starts: the stream's last sequence now (events from now on).
    pub start_seq: i64,
}

/// Creates or replaces an instance's or an account's sink; a replaced one keeps its
/// cursor (nothing already published is published again, nothing not yet published is
/// skipped) and gets a new generation. False when the owner does not exist.
pub async fn put(db: &PgPool, owner: &Owner, kind: &str, p: Put<'_>) -> Result<bool, sqlx::Error> {
    let (column, table) = match owner {
        Owner::Instance(_) => ("instance_id", "instances"),
        Owner::Account(_) => ("account_id", "accounts"),
    };
    let res = sqlx::query(&format!(
        "INSERT INTO event_sinks (owner_id, {column}, kind, enabled, url_sealed, url_shown, private_host, exchange, \
         queue, events, format, evolution_events, cursor_seq) \
         SELECT id, id, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM {table} WHERE id = $1 \
         ON CONFLICT (owner_id, kind) DO UPDATE SET enabled = EXCLUDED.enabled, url_sealed = EXCLUDED.url_sealed, \
         url_shown = EXCLUDED.url_shown, private_host = EXCLUDED.private_host, exchange = EXCLUDED.exchange, \
         queue = EXCLUDED.queue, events = EXCLUDED.events, format = EXCLUDED.format, \
         evolution_events = EXCLUDED.evolution_events, generation = nextval('event_sink_generation'), \
         last_error = NULL, failing_since = NULL, updated_at = now()"
    ))
    .bind(owner.as_str())
    .bind(kind)
    .bind(p.enabled)
    .bind(p.url_sealed)
    .bind(p.url_shown)
    .bind(p.private_host)
    .bind(p.exchange)
    .bind(p.queue)
    .bind(p.events)
    .bind(p.format)
    .bind(p.evolution_events)
    .bind(p.start_seq)
    .execute(db)
    .await?;
    Ok(res.rows_affected() == 1)
}

pub async fn delete(db: impl PgExecutor<'_>, id: &str, kind: &str) -> Result<bool, sqlx::Error> {
    let res = sqlx::query("DELETE FROM event_sinks WHERE owner_id = $1 AND kind = $2")
        .bind(id)
        .bind(kind)
        .execute(db)
        .await?;
    Ok(res.rows_affected() == 1)
}

/// Claims up to `limit` enabled sinks no pod holds (or whose holder's claim lapsed) for
/// `pod`, until `lock_ms` from now.
pub async fn claim(db: &PgPool, pod: &str, lock_ms: i64, limit: i64) -> Result<Vec<SinkRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "UPDATE event_sinks SET locked_by = $1, locked_until = now() + make_interval(secs => $2::float8 / 1000) \
         WHERE (owner_id, kind) IN (SELECT owner_id, kind FROM event_sinks \
           WHERE enabled AND (locked_until IS NULL OR locked_until < now()) \
           ORDER BY locked_until NULLS FIRST LIMIT $3 FOR UPDATE SKIP LOCKED) \
         RETURNING {COLUMNS}"
    ))
    .bind(pod)
    .bind(lock_ms as f64)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// Renews `pod`'s claim on a sink, under the generation it runs; false when the claim is
/// no longer its, the settings changed or the sink was turned off or removed.
pub async fn renew(
    db: &PgPool,
    id: &str,
    kind: &str,
    pod: &str,
    generation: i64,
    lock_ms: i64,
) -> Result<bool, sqlx::Error> {
    let res = sqlx::query(
        "UPDATE event_sinks SET locked_until = now() + make_interval(secs => $5::float8 / 1000) \
         WHERE owner_id = $1 AND kind = $2 AND locked_by = $3 AND generation = $4 AND enabled",
    )
    .bind(id)
    .bind(kind)
    .bind(pod)
    .bind(generation)
    .bind(lock_ms as f64)
    .execute(db)
    .await?;
    Ok(res.rows_affected() == 1)
}

/// Moves the cursor to `seq` after `published` more events were confirmed, under `pod`'s
/// claim and `generation`; clears the failure. False when the claim is no longer its.
#[allow(clippy::too_many_arguments)]
pub async fn advance(
    db: &PgPool,
    id: &str,
    kind: &str,
    pod: &str,
    generation: i64,
    seq: i64,
    published: i64,
) -> Result<bool, sqlx::Error> {
    let res = sqlx::query(
        "UPDATE event_sinks SET cursor_seq = GREATEST(cursor_seq, $5), delivered = delivered + $6, \
         last_delivered_at = CASE WHEN $6 > 0 THEN now() ELSE last_delivered_at END, \
         last_error = NULL, failing_since = NULL \
         WHERE owner_id = $1 AND kind = $2 AND locked_by = $3 AND generation = $4 \
           AND locked_until > now()",
    )
    .bind(id)
    .bind(kind)
    .bind(pod)
    .bind(generation)
    .bind(seq)
    .bind(published)
    .execute(db)
    .await?;
    Ok(res.rows_affected() == 1)
}

/// Records a failure (without secrets: the caller's text names no credential), under
/// `pod`'s claim and the generation it runs.
pub async fn failed(
    db: &PgPool,
    id: &str,
    kind: &str,
    pod: &str,
    generation: i64,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE event_sinks SET last_error = $5, failing_since = COALESCE(failing_since, now()) \
         WHERE owner_id = $1 AND kind = $2 AND locked_by = $3 AND generation = $4",
    )
    .bind(id)
    .bind(kind)
    .bind(pod)
    .bind(generation)
    .bind(error)
    .execute(db)
    .await
    .map(drop)
}

/// Gives a claim back (a pod stopping), so another pod takes the sink at once.
pub async fn release(db: &PgPool, id: &str, kind: &str, pod: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE event_sinks SET locked_by = NULL, locked_until = NULL \
         WHERE owner_id = $1 AND kind = $2 AND locked_by = $3",
    )
    .bind(id)
    .bind(kind)
    .bind(pod)
    .execute(db)
    .await
    .map(drop)
}

/// How many enabled sinks there are, and how many of them are failing, for the gauges.
pub async fn counts(db: impl PgExecutor<'_>) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE failing_since IS NOT NULL) FROM event_sinks WHERE enabled")
        .fetch_one(db)
        .await
}

/// When each instance was in the account: (instance, joined, left; none while it still
/// is), from the instances it holds and those that left it (`account_departures`). An
/// event is the account's when its instance was in it at the event's time.
pub async fn memberships(
    db: impl PgExecutor<'_>,
    account: &AccountId,
) -> Result<Vec<(InstanceId, DateTime<Utc>, Option<DateTime<Utc>>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, COALESCE(account_joined_at, created_at), NULL::timestamptz FROM instances WHERE account_id = $1 \
         UNION ALL SELECT instance_id, joined_at, left_at FROM account_departures WHERE account_id = $1",
    )
    .bind(account)
    .fetch_all(db)
    .await
}
