//! The `webhooks` table: endpoints of an instance. Every query is scoped by instance, so
//! another instance's webhook is simply not found.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::ids::{InstanceId, WebhookId};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookRow {
    pub id: WebhookId,
    pub instance_id: InstanceId,
    pub url: String,
    pub events: Vec<String>,
    pub secret: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, instance_id, url, events, secret, enabled, disabled_reason, created_at, updated_at";

/// Registers a webhook unless the instance has `max` already: `None` then. Concurrent
/// registrations take turns on the instance's row, so the count each one checks
/// includes every one committed before it: the limit holds however many race.
pub async fn insert(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    url: &str,
    events: &[String],
    secret: &str,
    max: i64,
) -> Result<Option<WebhookRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("SELECT 1 FROM instances WHERE id = $1 FOR UPDATE").bind(instance).execute(&mut *tx).await?;
    let row = sqlx::query_as(&format!(
        "INSERT INTO webhooks (id, instance_id, url, events, secret) \
         SELECT $1, $2, $3, $4, $5 WHERE (SELECT count(*) FROM webhooks WHERE instance_id = $2) < $6 \
         RETURNING {COLUMNS}"
    ))
    .bind(WebhookId::new())
    .bind(instance)
    .bind(url)
    .bind(events)
    .bind(secret)
    .bind(max)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row)
}

pub async fn get(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &WebhookId,
) -> Result<Option<WebhookRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM webhooks WHERE instance_id = $1 AND id = $2"))
        .bind(instance)
        .bind(id)
        .fetch_optional(db)
        .await
}

pub async fn list(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<Vec<WebhookRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM webhooks WHERE instance_id = $1 ORDER BY id"))
        .bind(instance)
        .fetch_all(db)
        .await
}

/// Sets the editable fields; `new_secret` rotates (the old one stays as the previous).
pub async fn update(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &WebhookId,
    url: &str,
    events: &[String],
    enabled: bool,
    new_secret: Option<&str>,
) -> Result<Option<WebhookRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "UPDATE webhooks SET url = $3, events = $4, enabled = $5, \
         disabled_reason = CASE WHEN $5 THEN NULL ELSE disabled_reason END, \
         failure_streak = CASE WHEN $5 AND NOT enabled THEN 0 ELSE failure_streak END, \
         failing_since = CASE WHEN $5 AND NOT enabled THEN NULL ELSE failing_since END, \
         previous_secret = CASE WHEN $6::text IS NULL THEN previous_secret ELSE secret END, \
         secret_rotated_at = CASE WHEN $6::text IS NULL THEN secret_rotated_at ELSE now() END, \
         secret = COALESCE($6, secret), updated_at = now() \
         WHERE instance_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ))
    .bind(instance)
    .bind(id)
    .bind(url)
    .bind(events)
    .bind(enabled)
    .bind(new_secret)
    .fetch_optional(db)
    .await
}

pub async fn delete(db: impl PgExecutor<'_>, instance: &InstanceId, id: &WebhookId) -> Result<bool, sqlx::Error> {
    let r = sqlx::query("DELETE FROM webhooks WHERE instance_id = $1 AND id = $2")
        .bind(instance)
        .bind(id)
        .execute(db)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// An enabled endpoint with what signing a delivery needs (the dispatcher's view).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActiveHook {
    pub id: WebhookId,
    pub instance_id: InstanceId,
    pub url: String,
    pub events: Vec<String>,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub secret_rotated_at: Option<DateTime<Utc>>,
}

impl ActiveHook {
    /// Whether the endpoint takes events of type `kind` (an empty filter takes all).
    pub fn wants(&self, kind: &str) -> bool {
        self.events.is_empty() || self.events.iter().any(|e| e == kind)
    }
}

/// The enabled endpoints of these instances.
pub async fn active_for(db: impl PgExecutor<'_>, instances: &[&str]) -> Result<Vec<ActiveHook>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, instance_id, url, events, secret, previous_secret, secret_rotated_at FROM webhooks \
         WHERE instance_id = ANY($1) AND enabled",
    )
    .bind(instances)
    .fetch_all(db)
    .await
}
