//! Webhook registration's rules: the URL a tenant may register, the event types, the
//! payload format, and the limits per owner (an instance, or an account receiving the
//! events of all its instances); and (`ops`) the operations every door performs on an
//! owner's webhooks and their delivery log. The delivery itself is the dispatcher's.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::deliveries::{Attempt, DeliveryDetail, DeliveryRow, DeliveryState};
pub use shared::db::webhooks::WebhookFormat;
use shared::db::webhooks::{self, Owner, WebhookRow};
use shared::fetch::FetchError;
use shared::ids::{DeliveryId, EventId, WebhookId};
use utoipa::ToSchema;

use crate::{Core, Error, Result};

mod ops;
pub use ops::*;

/// Most endpoints per instance (or account).
pub const MAX_WEBHOOKS: i64 = 20;
/// Most endpoints per instance that carry received media in base64 (each delivery of
/// a media message then holds up to 14 MB in a dispatcher).
pub const MAX_BASE64_WEBHOOKS: i64 = 2;

/// Registers a webhook within its owner's limits (and its account's quota).
pub async fn insert(
    core: &Core,
    id: &Owner,
    url: &str,
    events: &[String],
    shape: &webhooks::Shape,
    secret: &str,
) -> Result<WebhookRow> {
    match webhooks::insert(&core.db, id, url, events, shape, secret, MAX_WEBHOOKS, MAX_BASE64_WEBHOOKS).await? {
        webhooks::Inserted::Row(row) => Ok(*row),
        webhooks::Inserted::Full => {
            Err(Error::invalid(format!("an instance (or account) has at most {MAX_WEBHOOKS} webhooks of its own")))
        }
        webhooks::Inserted::Base64Full => Err(base64_full()),
        webhooks::Inserted::AccountFull(limit) => Err(Error::Quota {
            message: format!("the account's quota of {limit} webhooks is used up"),
            retry_after: None,
        }),
    }
}

/// The refusal of one base64 webhook too many.
pub fn base64_full() -> Error {
    Error::invalid(format!("an instance has at most {MAX_BASE64_WEBHOOKS} webhooks with base64"))
}

/// In an edit's transaction, before it: 400 when `shape` would be one base64 webhook too
/// many.
pub async fn check_base64_room(
    tx: &mut sqlx::PgConnection,
    id: &Owner,
    webhook: &WebhookId,
    shape: &webhooks::Shape,
) -> Result<()> {
    if shape.base64 && !webhooks::base64_room(tx, id, webhook, MAX_BASE64_WEBHOOKS).await? {
        return Err(base64_full());
    }
    Ok(())
}

/// A webhook URL and event list as registered: http(s), resolving to a public address
/// (unless the deployment allows private targets), events of the catalog.
pub async fn check(core: &Core, raw: &str, events: &[String]) -> Result<String> {
    let url = url::Url::parse(raw).map_err(|_| Error::invalid("url must be an http or https URL"))?;
    if raw.len() > 2048 {
        return Err(Error::invalid("url must be at most 2048 characters"));
    }
    shared::fetch::check_url(&url, core.config.allow_private_targets).await.map_err(|e| match e {
        FetchError::Refused => Error::invalid("url must be http(s) and must not point to a private or local address"),
        _ => Error::invalid("url's host does not resolve"),
    })?;
    if events.iter().any(|t| !shared::events::known(t)) {
        return Err(Error::invalid("events must be types of the event catalog (see the OpenAPI description)"));
    }
    Ok(url.to_string())
}

/// A webhook's shape; the Evolution options need the Evolution format.
pub fn shape(
    format: WebhookFormat,
    by_events: bool,
    base64: bool,
    evolution_events: Vec<String>,
) -> Result<webhooks::Shape> {
    if format == WebhookFormat::Paceline && (by_events || base64) {
        return Err(Error::invalid("by_events and base64 need format evolution"));
    }
    Ok(webhooks::Shape { format, by_events, base64, evolution_events })
}

/// A webhook endpoint.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookOut {
    pub id: WebhookId,
    /// Credentials in it are shown masked: the password as `***` (to the admin, who sees
    /// the user name), the whole user info as `***` to anyone else.
    pub url: String,
    /// Event types delivered; empty means every type.
    pub events: Vec<String>,
    /// False once disabled (by the owner, or after failing for too long).
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// `whsec_...`: only in the answers to create and to a rotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// `paceline` (our envelope) or `evolution` (Evolution API v2's payloads).
    pub format: WebhookFormat,
    /// Evolution format: the event's name is appended to the URL (`/messages-upsert`).
    pub by_events: bool,
    /// Evolution format: received media's bytes come in the payload (`message.base64`).
    pub base64: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl WebhookOut {
    /// As `admin` or not sees it: the URL's password never shown, its user name only to
    /// the admin.
    pub fn of(r: WebhookRow, show_secret: bool, admin: bool) -> WebhookOut {
        WebhookOut {
            secret: show_secret.then_some(r.secret),
            id: r.id,
            url: crate::instances::masked_url(&r.url, admin),
            events: r.events,
            enabled: r.enabled,
            disabled_reason: r.disabled_reason,
            format: r.shape.format,
            by_events: r.shape.by_events,
            base64: r.shape.base64,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// The webhooks of an instance (or an account).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookListOut {
    pub webhooks: Vec<WebhookOut>,
}

/// One delivery of an event to a webhook.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryOut {
    pub id: DeliveryId,
    pub event_id: EventId,
    pub event_type: String,
    /// `pending` (attempt due or in progress, or a retry scheduled), `succeeded`, or
    /// `failed` (retries exhausted, 410 Gone, or the endpoint was disabled): only a failed
    /// delivery can be resent.
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempts: i32,
    /// The HTTP status of the last attempt (none when the endpoint did not answer).
    pub response_status: Option<i32>,
    /// How long the last attempt took.
    pub latency_ms: Option<i32>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When the next attempt is due (pending only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When an attempt succeeded.
    pub delivered_at: Option<DateTime<Utc>>,
}

impl From<DeliveryRow> for DeliveryOut {
    fn from(r: DeliveryRow) -> Self {
        DeliveryOut {
            id: r.id,
            event_id: r.event_id,
            event_type: r.event_type,
            state: r.state,
            attempts: r.attempts,
            response_status: r.response_status,
            latency_ms: r.latency_ms,
            last_error: r.last_error,
            next_attempt_at: r.next_attempt_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
            delivered_at: r.delivered_at,
        }
    }
}

/// One delivery with its attempts (the latest 10, oldest first) and the request its
/// latest attempt made. Deliveries made before this was kept have neither.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryDetailOut {
    #[serde(flatten)]
    pub delivery: DeliveryOut,
    /// The latest attempt's request (none before the first attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<DeliveryRequestOut>,
    /// The attempts kept (the latest 10), oldest first; `attempts` counts them all.
    pub attempt_log: Vec<Attempt>,
}

/// The request an attempt made. Its `webhook-signature` header is not kept.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryRequestOut {
    pub method: String,
    pub url: String,
    /// `content-type`, `webhook-id` and `webhook-timestamp`.
    pub headers: std::collections::BTreeMap<String, String>,
    /// The body's first 4 KiB as text.
    pub body: String,
    /// The whole body's size.
    pub bytes: u64,
    /// True when `body` is only the start of it.
    pub truncated: bool,
}

impl From<DeliveryDetail> for DeliveryDetailOut {
    fn from(d: DeliveryDetail) -> Self {
        let attempt_log = d.attempt_log.0;
        let request = match (attempt_log.last(), d.last_request) {
            (Some(last), Some(body)) => Some(DeliveryRequestOut {
                method: "POST".into(),
                url: last.url.clone(),
                headers: [
                    ("content-type", "application/json".to_string()),
                    ("webhook-id", d.row.event_id.to_string()),
                    ("webhook-timestamp", last.at.timestamp().to_string()),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
                truncated: last.request_bytes > shared::db::deliveries::REQUEST_EXCERPT as u64,
                bytes: last.request_bytes,
                body,
            }),
            _ => None,
        };
        DeliveryDetailOut { delivery: d.row.into(), request, attempt_log }
    }
}

/// A page of the delivery log, narrowed.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeliveryQuery {
    /// Page size, 1-100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// Only deliveries in this state.
    pub state: Option<DeliveryState>,
    /// Only deliveries of this event type.
    #[param(value_type = Option<crate::catalog::EventType>)]
    pub event: Option<String>,
    /// Only deliveries made at or after this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    pub since: Option<DateTime<Utc>>,
}

impl DeliveryQuery {
    /// The filter it asks for; 400 `validation_failed` naming `event` for a type the
    /// catalog does not have.
    pub fn filter(&self) -> Result<shared::db::deliveries::LogFilter> {
        if let Some(e) = &self.event {
            if !shared::events::EVENT_TYPES.contains(&e.as_str()) {
                return Err(Error::field("event", "event must be a type of the event catalog"));
            }
        }
        Ok(shared::db::deliveries::LogFilter { state: self.state, event_type: self.event.clone(), since: self.since })
    }
}

/// A page of the delivery log.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryListOut {
    pub deliveries: Vec<DeliveryOut>,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
