//! The event outbox: an event row is written in the same transaction as the change it
//! describes (invariant 1); a relay publishes it to JetStream (the webhooks issue).

use chrono::Utc;
use sqlx::PgExecutor;

use crate::ids::{EventId, InstanceId};

/// Writes an event; returns its id. `data` is the event's payload.
pub async fn insert(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    kind: &str,
    data: serde_json::Value,
) -> Result<EventId, sqlx::Error> {
    let id = EventId::new();
    let payload = serde_json::json!({
        "id": id, "type": kind, "instance_id": instance, "created_at": Utc::now(), "data": data,
    });
    sqlx::query("INSERT INTO outbox (id, instance_id, type, payload) VALUES ($1, $2, $3, $4)")
        .bind(&id)
        .bind(instance)
        .bind(kind)
        .bind(payload)
        .execute(db)
        .await?;
    Ok(id)
}

/// Event types of an instance, newest first (tests and the delivery log read these).
pub async fn types_for(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<Vec<(String, serde_json::Value)>, sqlx::Error> {
    sqlx::query_as("SELECT type, payload FROM outbox WHERE instance_id = $1 ORDER BY created_at, id")
        .bind(instance)
        .fetch_all(db)
        .await
}

/// An event waiting to be published.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Pending {
    pub id: EventId,
    pub instance_id: InstanceId,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub payload: serde_json::Value,
}

/// Locks up to `limit` unpublished events, oldest first, skipping ones another relay
/// holds; the caller publishes them and marks them in the same transaction.
pub async fn lock_unpublished(
    tx: &mut sqlx::PgConnection,
    limit: i64,
) -> Result<Vec<Pending>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, instance_id, type, payload FROM outbox WHERE published_at IS NULL \
         ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(limit)
    .fetch_all(tx)
    .await
}

pub async fn mark_published(tx: &mut sqlx::PgConnection, ids: &[EventId]) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE outbox SET published_at = now() WHERE id = ANY($1)").bind(ids).execute(tx).await?;
    Ok(())
}
