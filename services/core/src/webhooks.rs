//! Webhook registration's rules: the URL a tenant may register, the event types, the
//! payload format, and the limits per instance. The delivery itself is the dispatcher's.

pub use shared::db::webhooks::WebhookFormat;
use shared::db::webhooks::{self, WebhookRow};
use shared::fetch::FetchError;
use shared::ids::{InstanceId, WebhookId};

use crate::{Core, Error, Result};

/// Most endpoints per instance.
pub const MAX_WEBHOOKS: i64 = 20;
/// Most endpoints per instance that carry received media in base64 (each delivery of
/// a media message then holds up to 14 MB in a dispatcher).
pub const MAX_BASE64_WEBHOOKS: i64 = 2;

/// Registers a webhook within the instance's limits.
pub async fn insert(
    core: &Core,
    id: &InstanceId,
    url: &str,
    events: &[String],
    shape: &webhooks::Shape,
    secret: &str,
) -> Result<WebhookRow> {
    match webhooks::insert(&core.db, id, url, events, shape, secret, MAX_WEBHOOKS, MAX_BASE64_WEBHOOKS).await? {
        webhooks::Inserted::Row(row) => Ok(*row),
        webhooks::Inserted::Full => Err(Error::invalid(format!("an instance has at most {MAX_WEBHOOKS} webhooks"))),
        webhooks::Inserted::Base64Full => Err(base64_full()),
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
    id: &InstanceId,
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
