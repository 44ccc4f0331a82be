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
