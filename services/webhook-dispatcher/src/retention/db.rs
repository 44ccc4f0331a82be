//! Retention of events and the delivery log. JetStream keeps events for
//! `bus::EVENTS_RETENTION` (7 days); past that an event can no longer be resumed from
//! (SSE) nor resent, so its outbox row and its deliveries go too. Rows are found by age
//! through their primary keys (UUIDv7 ids sort by creation time), so pruning needs no
//! index of its own and costs the write path nothing.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use shared::ids::{DeliveryId, EventId};

/// What one pruning pass removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Deliveries still pending past the cutoff, failed first (their event is going).
    pub failed: u64,
    pub deliveries: u64,
    pub events: u64,
}

/// Removes, in batches of `batch`, what was created before `cutoff`: deliveries (a
/// pending one is failed first), then published outbox rows no delivery refers to any
/// more (with their publication records). Unpublished rows stay, whatever their age: they are events not told yet. Returns what a pass removed; call
/// again while a count equals `batch`.
pub async fn prune(db: &PgPool, cutoff: DateTime<Utc>, batch: i64) -> Result<Pruned, sqlx::Error> {
    let (dlv, evt) = (DeliveryId::bound_at(cutoff), EventId::bound_at(cutoff));
    let failed = sqlx::query(
        "UPDATE webhook_deliveries SET state = 'failed', last_error = 'expired: the event is past its retention', \
             next_attempt_at = NULL, locked_by = NULL, locked_until = NULL, claim_id = NULL, updated_at = now() \
         WHERE id IN (SELECT id FROM webhook_deliveries WHERE id < $1 AND state = 'pending' LIMIT $2)",
    )
    .bind(&dlv)
    .bind(batch)
    .execute(db)
    .await?
    .rows_affected();
    let deliveries = delete_older(db, "webhook_deliveries", "state <> 'pending'", &dlv, batch).await?;
    // An event stays while a delivery refers to it (one made late, or resent), so no
    // delivery is ever left without its payload; it goes once they have.
    let events = prune_events(db, &evt, batch).await?;
    // An instance's past membership of an account matters while its events may still be
    // read; past their retention, none can.
    sqlx::query("DELETE FROM account_departures WHERE left_at < $1").bind(cutoff).execute(db).await?;
    Ok(Pruned { failed, deliveries, events })
}

/// Deletes up to `batch` published events with ids below `bound` that no delivery refers
/// to, with their publication records. Published: recorded by the relay, or a row without
/// a transaction id (older than migration 0044, which gave every row still unpublished
/// one, so an earlier relay had published it).
async fn prune_events(db: &PgPool, bound: &str, batch: i64) -> Result<u64, sqlx::Error> {
    let n: i64 = sqlx::query_scalar(
        "WITH gone AS ( \
             DELETE FROM outbox WHERE id IN ( \
                 SELECT o.id FROM outbox o WHERE o.id < $1 \
                   AND (o.xid IS NULL OR EXISTS (SELECT 1 FROM outbox_published p WHERE p.event_id = o.id)) \
                   AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = o.id) \
                 LIMIT $2) \
             RETURNING id), \
         marks AS (DELETE FROM outbox_published WHERE event_id IN (SELECT id FROM gone)) \
         SELECT count(*) FROM gone",
    )
    .bind(bound)
    .bind(batch)
    .fetch_one(db)
    .await?;
    Ok(n as u64)
}

/// Deletes up to `batch` rows of `table` with ids below `bound` that match `condition`.
async fn delete_older(db: &PgPool, table: &str, condition: &str, bound: &str, batch: i64) -> Result<u64, sqlx::Error> {
    let sql =
        format!("DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE id < $1 AND {condition} LIMIT $2)");
    Ok(sqlx::query(&sql).bind(bound).bind(batch).execute(db).await?.rows_affected())
}
