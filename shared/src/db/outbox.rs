//! The event outbox: an event row is written in the same transaction as the change it
//! describes (invariant 1); a relay publishes it to JetStream (the webhooks issue).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::events::Event;
use crate::ids::{EventId, InstanceId};

/// A new event's id and body (what webhooks receive and the stream shows), made `at`.
pub fn envelope(instance: &InstanceId, event: &Event, at: DateTime<Utc>) -> (EventId, serde_json::Value) {
    let id = EventId::new();
    let payload = serde_json::json!({
        "id": id, "type": event.kind(), "instance_id": instance, "created_at": at, "data": event.data(),
    });
    (id, payload)
}

/// Writes an event; returns its id.
pub async fn insert(db: impl PgExecutor<'_>, instance: &InstanceId, event: &Event) -> Result<EventId, sqlx::Error> {
    let kind = event.kind();
    let (id, payload) = envelope(instance, event, Utc::now());
    sqlx::query("INSERT INTO outbox (id, instance_id, type, payload) VALUES ($1, $2, $3, $4)")
        .bind(&id)
        .bind(instance)
        .bind(kind)
        .bind(payload)
        .execute(db)
        .await?;
    Ok(id)
}

/// Writes several events in one statement (each with its instance).
pub async fn insert_many(db: impl PgExecutor<'_>, events: Vec<(&InstanceId, Event)>) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let (mut ids, mut instances, mut kinds, mut payloads) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (instance, event) in events {
        let (id, payload) = envelope(instance, &event, Utc::now());
        ids.push(id.to_string());
        instances.push(instance.to_string());
        kinds.push(event.kind().to_string());
        payloads.push(payload);
    }
    sqlx::query(
        "INSERT INTO outbox (id, instance_id, type, payload) \
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::jsonb[])",
    )
    .bind(ids)
    .bind(instances)
    .bind(kinds)
    .bind(payloads)
    .execute(db)
    .await?;
    Ok(())
}

/// Event types of an instance, newest first (tests and the delivery log read these).
pub async fn types_for(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
) -> Result<Vec<(String, serde_json::Value)>, sqlx::Error> {
    sqlx::query_as("SELECT type, payload FROM outbox WHERE instance_id = $1 ORDER BY created_at, id")
        .bind(instance)
        .fetch_all(db)
        .await
}

/// An instance's `instance.state` events, newest first, before `(created_at, id)`
/// (`outbox_states_idx`): (id, when, payload).
pub async fn states(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    before: Option<(DateTime<Utc>, EventId)>,
    limit: i64,
) -> Result<Vec<(EventId, DateTime<Utc>, serde_json::Value)>, sqlx::Error> {
    let (at, id) = before.unzip();
    sqlx::query_as(
        "SELECT id, created_at, payload FROM outbox WHERE instance_id = $1 AND type = 'instance.state' \
           AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3)) \
         ORDER BY created_at DESC, id DESC LIMIT $4",
    )
    .bind(instance)
    .bind(at)
    .bind(id)
    .bind(limit)
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
pub async fn lock_unpublished(tx: &mut sqlx::PgConnection, limit: i64) -> Result<Vec<Pending>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, instance_id, type, payload FROM outbox WHERE published_at IS NULL \
         ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(limit)
    .fetch_all(tx)
    .await
}

/// Marks events published with the stream sequence JetStream acked for each. A repeat
/// (JetStream's de-duplication answered for an earlier copy) keeps the sequence already
/// recorded.
pub async fn mark_published(tx: &mut sqlx::PgConnection, acks: &[(EventId, u64, bool)]) -> Result<(), sqlx::Error> {
    let ids: Vec<&str> = acks.iter().map(|a| a.0.as_str()).collect();
    let seqs: Vec<i64> = acks.iter().map(|a| a.1 as i64).collect();
    let dups: Vec<bool> = acks.iter().map(|a| a.2).collect();
    sqlx::query(
        "UPDATE outbox o SET published_at = now(), \
             stream_seq = CASE WHEN v.dup THEN COALESCE(o.stream_seq, v.seq) ELSE v.seq END \
         FROM UNNEST($1::text[], $2::bigint[], $3::bool[]) AS v(id, seq, dup) WHERE o.id = v.id",
    )
    .bind(&ids)
    .bind(&seqs)
    .bind(&dups)
    .execute(tx)
    .await?;
    Ok(())
}

/// Where the real-time stream resumes after `event`: `Some(Some(seq))` once published,
/// `Some(None)` while it waits for the relay, `None` for an unknown event (or another
/// instance's, when `instance` is given).
pub async fn stream_seq(
    db: impl PgExecutor<'_>,
    event: &EventId,
    instance: Option<&InstanceId>,
) -> Result<Option<Option<i64>>, sqlx::Error> {
    sqlx::query_scalar("SELECT stream_seq FROM outbox WHERE id = $1 AND ($2::text IS NULL OR instance_id = $2)")
        .bind(event)
        .bind(instance)
        .fetch_optional(db)
        .await
}

/// Writes an event only while `epoch` still owns the instance (a worker's events are
/// fenced like its other writes). Returns whether it was written.
pub async fn insert_fenced(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    epoch: i64,
    event: &Event,
) -> Result<bool, sqlx::Error> {
    let kind = event.kind();
    let (id, payload) = envelope(instance, event, Utc::now());
    let r = sqlx::query(
        "INSERT INTO outbox (id, instance_id, type, payload) \
         SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM instances WHERE id = $2 AND owner_epoch = $5)",
    )
    .bind(&id)
    .bind(instance)
    .bind(kind)
    .bind(payload)
    .bind(epoch)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}
