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
    #[sqlx(flatten)]
    pub shape: Shape,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// How a webhook's deliveries are shaped (README, "Coming from Evolution API").
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Shape {
    /// `paceline` (our envelope) or `evolution` (Evolution API v2's payloads).
    pub format: String,
    /// Evolution's `webhook_by_events`: the event's name appended to the URL.
    pub by_events: bool,
    /// Evolution's `webhook_base64`: received media's bytes in the payload.
    pub base64: bool,
    /// The Evolution event names `webhook/set` was given (`events` holds ours).
    pub evolution_events: Vec<String>,
}

impl Default for Shape {
    fn default() -> Self {
        Shape { format: "paceline".into(), by_events: false, base64: false, evolution_events: vec![] }
    }
}

impl Shape {
    pub fn is_evolution(&self) -> bool {
        self.format == "evolution"
    }
}

const COLUMNS: &str = "id, instance_id, url, events, secret, enabled, disabled_reason, format, by_events, base64, \
    evolution_events, created_at, updated_at";

/// Registers a webhook unless the instance has `max` already: `None` then. Concurrent
/// registrations take turns on the instance's row, so the count each one checks
/// includes every one committed before it: the limit holds however many race.
pub async fn insert(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    url: &str,
    events: &[String],
    shape: &Shape,
    secret: &str,
    max: i64,
) -> Result<Option<WebhookRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("SELECT 1 FROM instances WHERE id = $1 FOR UPDATE").bind(instance).execute(&mut *tx).await?;
    let row = sqlx::query_as(&format!(
        "INSERT INTO webhooks (id, instance_id, url, events, secret, format, by_events, base64, evolution_events) \
         SELECT $1, $2, $3, $4, $5, $7, $8, $9, $10 WHERE (SELECT count(*) FROM webhooks WHERE instance_id = $2) < $6 \
         RETURNING {COLUMNS}"
    ))
    .bind(WebhookId::new())
    .bind(instance)
    .bind(url)
    .bind(events)
    .bind(secret)
    .bind(max)
    .bind(&shape.format)
    .bind(shape.by_events)
    .bind(shape.base64)
    .bind(&shape.evolution_events)
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

/// A webhook's editable fields, as [`update`] writes them.
pub struct Edit<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub shape: &'a Shape,
    pub enabled: bool,
    /// Rotates the secret (the old one stays as the previous).
    pub new_secret: Option<&'a str>,
}

/// Sets the editable fields.
pub async fn update(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    id: &WebhookId,
    e: &Edit<'_>,
) -> Result<Option<WebhookRow>, sqlx::Error> {
    let shape = e.shape;
    sqlx::query_as(&format!(
        "UPDATE webhooks SET url = $3, events = $4, enabled = $5, \
         format = $7, by_events = $8, base64 = $9, evolution_events = $10, \
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
    .bind(e.url)
    .bind(e.events)
    .bind(e.enabled)
    .bind(e.new_secret)
    .bind(&shape.format)
    .bind(shape.by_events)
    .bind(shape.base64)
    .bind(&shape.evolution_events)
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
    #[sqlx(flatten)]
    pub origin: Origin,
}

/// What an Evolution-format payload says of its webhook and instance.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Origin {
    #[sqlx(flatten)]
    pub shape: Shape,
    pub instance_name: String,
    /// The account's number, once paired.
    pub phone: Option<String>,
}

impl ActiveHook {
    /// Whether the endpoint takes this event (an empty filter takes all); an
    /// Evolution-format one also needs Evolution to have the event, under one of the
    /// names it was given.
    pub fn wants(&self, kind: &str, data: &serde_json::Value) -> bool {
        if !(self.events.is_empty() || self.events.iter().any(|e| e == kind)) {
            return false;
        }
        let shape = &self.origin.shape;
        if !shape.is_evolution() {
            return true;
        }
        match crate::evolution::event_name(kind, data) {
            None => false,
            Some(dotted) => {
                shape.evolution_events.is_empty() || shape.evolution_events.contains(&crate::evolution::upper(dotted))
            }
        }
    }
}

/// The enabled endpoints of these instances.
pub async fn active_for(db: impl PgExecutor<'_>, instances: &[&str]) -> Result<Vec<ActiveHook>, sqlx::Error> {
    sqlx::query_as(
        "SELECT w.id, w.instance_id, w.url, w.events, w.secret, w.previous_secret, w.secret_rotated_at, \
                w.format, w.by_events, w.base64, w.evolution_events, i.name AS instance_name, i.phone \
         FROM webhooks w JOIN instances i ON i.id = w.instance_id \
         WHERE w.instance_id = ANY($1) AND w.enabled",
    )
    .bind(instances)
    .fetch_all(db)
    .await
}
