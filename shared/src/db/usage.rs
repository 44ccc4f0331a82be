//! Daily usage per instance (`usage_daily`). Queued messages are counted by the
//! statement that accepts them (`db::messages::enqueue`); the other message and media
//! counts are added by the outbox relay from the events of the fenced transitions, in
//! the transaction that records them published; delivery counts are rolled up from the delivery records, each batch
//! marking its rows counted in the statement that adds them. Either way every row counts
//! exactly once whichever dispatcher handles it, and a crash loses nothing. Number
//! lookups and API requests are added where they happen.

use chrono::NaiveDate;
use serde::Serialize;
use sqlx::PgExecutor;

use crate::ids::InstanceId;

/// One day's counts (or a total).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Counts {
    pub messages_queued: i64,
    pub messages_sent: i64,
    /// Failed for any reason but expiry.
    pub messages_failed: i64,
    /// Not sent before `expires_after`.
    pub messages_expired: i64,
    pub messages_received: i64,
    pub media_bytes_sent: i64,
    pub media_bytes_received: i64,
    /// Numbers the network was asked about.
    pub lookups_new: i64,
    /// Numbers answered from the cache.
    pub lookups_cached: i64,
    pub deliveries_succeeded: i64,
    pub deliveries_failed: i64,
    pub requests_admin: i64,
    pub requests_instance: i64,
    pub requests_api_key: i64,
    /// Requests made with an account token.
    #[serde(default)]
    pub requests_account: i64,
    /// Replies the AI attendant queued.
    pub attendant_replies: i64,
    /// Tokens the attendant's provider reported using (prompt and completion).
    pub attendant_tokens: i64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.messages_queued += o.messages_queued;
        self.messages_sent += o.messages_sent;
        self.messages_failed += o.messages_failed;
        self.messages_expired += o.messages_expired;
        self.messages_received += o.messages_received;
        self.media_bytes_sent += o.media_bytes_sent;
        self.media_bytes_received += o.media_bytes_received;
        self.lookups_new += o.lookups_new;
        self.lookups_cached += o.lookups_cached;
        self.deliveries_succeeded += o.deliveries_succeeded;
        self.deliveries_failed += o.deliveries_failed;
        self.requests_admin += o.requests_admin;
        self.requests_instance += o.requests_instance;
        self.requests_api_key += o.requests_api_key;
        self.requests_account += o.requests_account;
        self.attendant_replies += o.attendant_replies;
        self.attendant_tokens += o.attendant_tokens;
    }
}

/// The count columns of `usage_daily` (and `account_usage_retired`), in [`Counts`]
/// order.
pub const COLUMNS: &str = "messages_queued, messages_sent, messages_failed, messages_expired, messages_received, \
    media_bytes_sent, media_bytes_received, lookups_new, lookups_cached, deliveries_succeeded, deliveries_failed, \
    requests_admin, requests_instance, requests_api_key, requests_account, attendant_replies, attendant_tokens";

/// [`COLUMNS`], each summed under its own name.
pub static SUMS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    COLUMNS.split(", ").map(|c| format!("sum({c})::bigint AS {c}")).collect::<Vec<_>>().join(", ")
});

/// [`COLUMNS`] of the table aliased `alias`.
pub fn qualified(alias: &str) -> String {
    COLUMNS.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

/// A day's row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DayRow {
    pub day: NaiveDate,
    #[sqlx(flatten)]
    pub counts: Counts,
}

/// The days of `instance` from `from` to `to` (inclusive) that have any counts.
pub async fn days(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<DayRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT day, {COLUMNS} FROM usage_daily WHERE instance_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day"
    ))
    .bind(instance)
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// Adds today's number lookups of an instance.
pub async fn add_lookups(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    new: i64,
    cached: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO usage_daily (instance_id, day, lookups_new, lookups_cached) \
         SELECT $1, (now() AT TIME ZONE 'UTC')::date, $2, $3 WHERE EXISTS (SELECT 1 FROM instances WHERE id = $1) \
         ON CONFLICT (instance_id, day) DO UPDATE SET lookups_new = usage_daily.lookups_new + EXCLUDED.lookups_new, \
             lookups_cached = usage_daily.lookups_cached + EXCLUDED.lookups_cached",
    )
    .bind(instance)
    .bind(new)
    .bind(cached)
    .execute(db)
    .await
    .map(drop)
}

/// Adds today's API requests of instances, by token kind: `(instance, [admin, instance
/// token, api key, account token])`.
pub async fn add_requests(db: impl PgExecutor<'_>, rows: &[(InstanceId, [i64; 4])]) -> Result<(), sqlx::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    // Rows in one order on every pod, so concurrent flushes never deadlock.
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let ids: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let kind = |k: usize| rows.iter().map(|r| r.1[k]).collect::<Vec<i64>>();
    sqlx::query(
        "INSERT INTO usage_daily (instance_id, day, requests_admin, requests_instance, requests_api_key, \
             requests_account) \
         SELECT r.id, (now() AT TIME ZONE 'UTC')::date, r.a, r.i, r.k, r.c \
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) AS r(id, a, i, k, c) \
         WHERE EXISTS (SELECT 1 FROM instances WHERE id = r.id) \
         ON CONFLICT (instance_id, day) DO UPDATE SET \
             requests_admin = usage_daily.requests_admin + EXCLUDED.requests_admin, \
             requests_instance = usage_daily.requests_instance + EXCLUDED.requests_instance, \
             requests_api_key = usage_daily.requests_api_key + EXCLUDED.requests_api_key, \
             requests_account = usage_daily.requests_account + EXCLUDED.requests_account",
    )
    .bind(&ids)
    .bind(kind(0))
    .bind(kind(1))
    .bind(kind(2))
    .bind(kind(3))
    .execute(db)
    .await
    .map(drop)
}

/// Adds the usage of these outbox events, in the relay's transaction that records them
/// published, to the day of their creation (`message.queued` is not among them: the
/// accept counted it). Media bytes sent are those of the messages
/// that went out (`message.sent`); received, those a `message.received` carried (stored
/// ones; media still being downloaded counts 0). Messages from the account's own phone
/// are not "received". Every value read from a payload is type-checked first, so no
/// payload can fail the relay's transaction.
pub async fn count_events(tx: &mut sqlx::PgConnection, ids: &[&str]) -> Result<(), sqlx::Error> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "WITH k AS ( \
             SELECT o.instance_id, o.type, o.created_at, o.payload->'data' AS d FROM outbox o WHERE o.id = ANY($1) \
         ), agg AS ( \
             SELECT k.instance_id, (k.created_at AT TIME ZONE 'UTC')::date AS day, \
                 count(*) FILTER (WHERE k.type = 'message.sent') AS sent, \
                 count(*) FILTER (WHERE k.type = 'message.failed' AND coalesce(k.d->>'error', '') NOT LIKE 'message_expired%') AS failed, \
                 count(*) FILTER (WHERE k.type = 'message.failed' AND k.d->>'error' LIKE 'message_expired%') AS expired, \
                 count(*) FILTER (WHERE k.type = 'message.received' AND k.d->'from_me' IS DISTINCT FROM 'true'::jsonb) AS received, \
                 coalesce(sum(CASE WHEN jsonb_typeof(m.content->'media'->'size') = 'number' THEN greatest(least((m.content->'media'->>'size')::numeric, 1e15), 0)::bigint END) FILTER (WHERE k.type = 'message.sent'), 0) AS bytes_sent, \
                 coalesce(sum(CASE WHEN jsonb_typeof(k.d->'content'->'media'->'size') = 'number' \
                     THEN greatest(least((k.d->'content'->'media'->>'size')::numeric, 1e15), 0)::bigint END) \
                     FILTER (WHERE k.type = 'message.received' AND k.d->'from_me' IS DISTINCT FROM 'true'::jsonb), 0) AS bytes_received \
             FROM k LEFT JOIN messages m ON k.type = 'message.sent' AND m.id = k.d->>'id' \
             GROUP BY 1, 2 \
         ) \
         INSERT INTO usage_daily (instance_id, day, messages_sent, messages_failed, \
             messages_expired, messages_received, media_bytes_sent, media_bytes_received) \
         SELECT instance_id, day, sent, failed, expired, received, bytes_sent, bytes_received FROM agg \
         WHERE sent + failed + expired + received > 0 AND EXISTS (SELECT 1 FROM instances i WHERE i.id = agg.instance_id) \
         ORDER BY instance_id, day \
         ON CONFLICT (instance_id, day) DO UPDATE SET \
             messages_sent = usage_daily.messages_sent + EXCLUDED.messages_sent, \
             messages_failed = usage_daily.messages_failed + EXCLUDED.messages_failed, \
             messages_expired = usage_daily.messages_expired + EXCLUDED.messages_expired, \
             messages_received = usage_daily.messages_received + EXCLUDED.messages_received, \
             media_bytes_sent = usage_daily.media_bytes_sent + EXCLUDED.media_bytes_sent, \
             media_bytes_received = usage_daily.media_bytes_received + EXCLUDED.media_bytes_received",
    )
    .bind(ids)
    .execute(tx)
    .await
    .map(drop)
}

/// Rolls up to `limit` finished, uncounted deliveries into the day they finished; how
/// many. A resent delivery is counted again when it finishes again.
pub async fn roll_up_deliveries(db: impl PgExecutor<'_>, limit: i64) -> Result<u64, sqlx::Error> {
    let n: i64 = sqlx::query_scalar(
        "WITH batch AS ( \
             SELECT id FROM webhook_deliveries WHERE state <> 'pending' AND NOT usage_counted \
             ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED \
         ), marked AS ( \
             UPDATE webhook_deliveries d SET usage_counted = true FROM batch b WHERE d.id = b.id \
             RETURNING d.instance_id, d.state, d.updated_at \
         ), agg AS ( \
             SELECT instance_id, (updated_at AT TIME ZONE 'UTC')::date AS day, \
                 count(*) FILTER (WHERE state = 'succeeded') AS ok, count(*) FILTER (WHERE state = 'failed') AS bad, \
                 count(*) AS n \
             FROM marked GROUP BY 1, 2 \
         ), added AS ( \
             INSERT INTO usage_daily (instance_id, day, deliveries_succeeded, deliveries_failed) \
             SELECT instance_id, day, ok, bad FROM agg WHERE EXISTS (SELECT 1 FROM instances i WHERE i.id = agg.instance_id) \
             ORDER BY instance_id, day \
             ON CONFLICT (instance_id, day) DO UPDATE SET \
                 deliveries_succeeded = usage_daily.deliveries_succeeded + EXCLUDED.deliveries_succeeded, \
                 deliveries_failed = usage_daily.deliveries_failed + EXCLUDED.deliveries_failed \
         ) \
         SELECT coalesce(sum(n), 0)::bigint FROM agg",
    )
    .bind(limit)
    .fetch_one(db)
    .await?;
    Ok(n as u64)
}
