//! Retention of events and the delivery log. JetStream keeps events for
//! `bus::EVENTS_RETENTION` (7 days); past that an event can no longer be resumed from
//! (SSE) nor resent, so its outbox row and its deliveries go too. Rows are found by age
//! through their primary keys (UUIDv7 ids sort by creation time), so pruning needs no
//! index of its own and costs the write path nothing.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::ids::{DeliveryId, EventId};

/// What one pruning pass removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Deliveries still pending past the cutoff, failed first (their event is going).
    pub failed: u64,
    pub deliveries: u64,
    pub events: u64,
}

/// Removes, in batches of `batch`, what was created before `cutoff`: deliveries (a
/// pending one is failed first), then published outbox rows. Unpublished rows stay,
/// whatever their age: they are events not told yet. Returns what a pass removed; call
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
    let deliveries = sqlx::query("DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries WHERE id < $1 AND state <> 'pending' LIMIT $2)")
        .bind(&dlv)
        .bind(batch)
        .execute(db)
        .await?
        .rows_affected();
    let events = sqlx::query("DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE id < $1 AND published_at IS NOT NULL LIMIT $2)")
        .bind(&evt)
        .bind(batch)
        .execute(db)
        .await?
        .rows_affected();
    Ok(Pruned { failed, deliveries, events })
}
