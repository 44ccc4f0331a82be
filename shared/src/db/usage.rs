//! Daily usage per instance (`usage_daily`). Message and media counts are added by the
//! outbox relay from the events of the fenced transitions, in the transaction that
//! records them published; delivery counts are rolled up from the delivery records, each batch
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

/// What one published event adds to its instance's day (`None`: nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct EventUsage {
    pub instance_id: String,
    pub day: NaiveDate,
    /// `queued`, `sent`, `failed`, `expired` or `received`.
    pub kind: &'static str,
    /// Media bytes a received message carried (stored ones; still downloading: 0).
    pub bytes_received: i64,
    /// A sent message's id: its media bytes are read from the message.
    pub sent_id: Option<String>,
}

impl EventUsage {
    /// Reads an event's usage from its payload (`{"created_at", "data"}`). Every value is
    /// type-checked, so no payload can fail the relay's transaction; messages from the
    /// account's own phone are not "received".
    pub fn of(instance: &str, kind: &str, payload: &serde_json::Value) -> Option<EventUsage> {
        let d = &payload["data"];
        let kind = match kind {
            "message.queued" => "queued",
            "message.sent" => "sent",
            "message.failed" if d["error"].as_str().is_some_and(|e| e.starts_with("message_expired")) => "expired",
            "message.failed" => "failed",
            "message.received" if d["from_me"] != serde_json::Value::Bool(true) => "received",
            _ => return None,
        };
        let day = payload["created_at"]
            .as_str()
            .and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
            .unwrap_or_else(chrono::Utc::now)
            .date_naive();
        let bytes_received = match (kind, d["content"]["media"]["size"].as_f64()) {
            ("received", Some(n)) => n.clamp(0.0, 1e15).round() as i64,
            _ => 0,
        };
        let sent_id = (kind == "sent").then(|| d["id"].as_str().map(str::to_string)).flatten();
        Some(EventUsage { instance_id: instance.to_string(), day, kind, bytes_received, sent_id })
    }
}

/// Adds the usage of published events, in the relay's transaction that records them
/// published, to the day of their creation: the page's own values, so no event is read
/// again. Media bytes sent are those of the messages that went out.
pub async fn count_events(tx: &mut sqlx::PgConnection, events: &[EventUsage]) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&EventUsage) -> String| events.iter().map(f).collect::<Vec<_>>();
    sqlx::query(
        "WITH k AS ( \
             SELECT * FROM UNNEST($1::text[], $2::date[], $3::text[], $4::bigint[], $5::text[]) \
                 AS k(instance_id, day, kind, rbytes, sent_id) \
         ), agg AS ( \
             SELECT k.instance_id, k.day, \
                 count(*) FILTER (WHERE k.kind = 'queued') AS queued, \
                 count(*) FILTER (WHERE k.kind = 'sent') AS sent, \
                 count(*) FILTER (WHERE k.kind = 'failed') AS failed, \
                 count(*) FILTER (WHERE k.kind = 'expired') AS expired, \
                 count(*) FILTER (WHERE k.kind = 'received') AS received, \
                 coalesce(sum(CASE WHEN jsonb_typeof(m.content->'media'->'size') = 'number' THEN greatest(least((m.content->'media'->>'size')::numeric, 1e15), 0)::bigint END), 0) AS bytes_sent, \
                 coalesce(sum(k.rbytes), 0) AS bytes_received \
             FROM k LEFT JOIN messages m ON m.id = k.sent_id \
             GROUP BY 1, 2 \
         ) \
         INSERT INTO usage_daily (instance_id, day, messages_queued, messages_sent, messages_failed, \
             messages_expired, messages_received, media_bytes_sent, media_bytes_received) \
         SELECT instance_id, day, queued, sent, failed, expired, received, bytes_sent, bytes_received FROM agg \
         WHERE EXISTS (SELECT 1 FROM instances i WHERE i.id = agg.instance_id) \
         ORDER BY instance_id, day \
         ON CONFLICT (instance_id, day) DO UPDATE SET \
             messages_queued = usage_daily.messages_queued + EXCLUDED.messages_queued, \
             messages_sent = usage_daily.messages_sent + EXCLUDED.messages_sent, \
             messages_failed = usage_daily.messages_failed + EXCLUDED.messages_failed, \
             messages_expired = usage_daily.messages_expired + EXCLUDED.messages_expired, \
             messages_received = usage_daily.messages_received + EXCLUDED.messages_received, \
             media_bytes_sent = usage_daily.media_bytes_sent + EXCLUDED.media_bytes_sent, \
             media_bytes_received = usage_daily.media_bytes_received + EXCLUDED.media_bytes_received",
    )
    .bind(col(|e| e.instance_id.clone()))
    .bind(events.iter().map(|e| e.day).collect::<Vec<_>>())
    .bind(col(|e| e.kind.to_string()))
    .bind(events.iter().map(|e| e.bytes_received).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.sent_id.clone()).collect::<Vec<_>>())
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

#[cfg(test)]
mod tests {
    use super::EventUsage;
    use serde_json::json;

    fn of(kind: &str, data: serde_json::Value) -> Option<EventUsage> {
        EventUsage::of("inst_a", kind, &json!({ "created_at": "2026-11-27T23:59:59Z", "data": data }))
    }

    #[test]
    fn each_counted_event_names_its_kind_day_and_bytes() {
        let q = of("message.queued", json!({ "id": "msg_1" })).unwrap();
        assert_eq!((q.kind, q.day.to_string(), q.sent_id), ("queued", "2026-11-27".into(), None));
        assert_eq!(of("message.sent", json!({ "id": "msg_1" })).unwrap().sent_id.as_deref(), Some("msg_1"));
        assert_eq!(of("message.failed", json!({ "error": "message_expired: late" })).unwrap().kind, "expired");
        assert_eq!(of("message.failed", json!({ "error": "recipient_invalid" })).unwrap().kind, "failed");
        assert_eq!(of("message.failed", json!({})).unwrap().kind, "failed");
        let r = of("message.received", json!({ "content": { "media": { "size": 1234 } } })).unwrap();
        assert_eq!((r.kind, r.bytes_received), ("received", 1234));
        assert!(of("message.received", json!({ "from_me": true })).is_none(), "the account's own phone");
        assert!(of("instance.state", json!({})).is_none());
    }

    #[test]
    fn hostile_payloads_count_within_bounds() {
        let size = |v: serde_json::Value| of("message.received", json!({ "content": { "media": { "size": v } } }));
        assert_eq!(size(json!(-5)).unwrap().bytes_received, 0);
        assert_eq!(size(json!(1e300)).unwrap().bytes_received, 1_000_000_000_000_000);
        assert_eq!(size(json!("12")).unwrap().bytes_received, 0, "only a number counts");
        assert_eq!(of("message.sent", json!({ "id": 7 })).unwrap().sent_id, None);
        let no_time = EventUsage::of("inst_a", "message.queued", &json!({ "created_at": 5 })).unwrap();
        assert_eq!(no_time.day, chrono::Utc::now().date_naive(), "an unreadable time counts today");
        assert_eq!(of("message.received", json!({ "from_me": "true" })).unwrap().kind, "received");
    }
}
