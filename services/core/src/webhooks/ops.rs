//! The operations on an owner's webhooks (an instance's, or an account's) and their
//! delivery log: the `/v1` routes of both owners call these. Another owner's webhook is
//! `not_found`, like one that does not exist.

use serde::Deserialize;
use shared::auth::generate_webhook_secret;
use shared::db::deliveries as dlv;
use shared::db::webhooks::{self, Owner, WebhookRow};
use shared::ids::{DeliveryId, WebhookId};
use shared::ErrorCode;
use utoipa::ToSchema;

use super::{
    check, check_base64_room, insert, shape, DeliveryDetailOut, DeliveryListOut, DeliveryOut, DeliveryQuery,
    WebhookFormat, WebhookListOut, WebhookOut,
};
use crate::{Core, Error, Result};

/// Body of `POST {inst}/webhooks` (and of an account's).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookIn {
    /// http(s); never a private, loopback or link-local address.
    #[schema(pattern = "^[hH][tT][tT][pP][sS]?://[^/?#]+", max_length = 2048)]
    pub url: String,
    /// Event types to deliver (see the event catalog); absent or empty: all.
    #[serde(default)]
    #[schema(value_type = Vec<crate::catalog::EventType>)]
    pub events: Vec<String>,
    /// `paceline` (the default) or `evolution`: Evolution API v2's payloads, for the
    /// events Evolution has.
    #[serde(default)]
    pub format: WebhookFormat,
    /// Evolution format only: append the event's name to the URL.
    #[serde(default)]
    pub by_events: bool,
    /// Evolution format only: received media's bytes in the payload (media stored up to
    /// 10 MB; at most 2 such webhooks an instance).
    #[serde(default)]
    pub base64: bool,
}

/// Body of `PATCH {inst}/webhooks/{webhook_id}`: absent fields stay.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookPatch {
    #[schema(pattern = "^[hH][tT][tT][pP][sS]?://[^/?#]+", max_length = 2048)]
    pub url: Option<String>,
    #[schema(value_type = Option<Vec<crate::catalog::EventType>>)]
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
    /// Issue a new secret (returned once); the old one keeps verifying for a while.
    #[serde(default)]
    pub rotate_secret: bool,
    pub format: Option<WebhookFormat>,
    pub by_events: Option<bool>,
    pub base64: Option<bool>,
}

fn dedup(mut events: Vec<String>) -> Vec<String> {
    events.sort();
    events.dedup();
    events
}

/// The owner's webhook `id`, or `not_found`.
async fn webhook_of(core: &Core, owner: &Owner, id: &WebhookId) -> Result<WebhookRow> {
    webhooks::get(&core.db, owner, id).await?.ok_or(Error::NotFound("webhook"))
}

/// Registers a webhook; the answer carries its secret, shown only now. `admin`: the
/// caller sees the URL's user name.
pub async fn create(core: &Core, owner: &Owner, b: WebhookIn, admin: bool) -> Result<WebhookOut> {
    if let Owner::Instance(id) = owner {
        shared::db::instances::get(&core.db, id).await?.ok_or(Error::InstanceNotFound)?;
    }
    let events = dedup(b.events);
    let url = check(core, &b.url, &events).await?;
    let shape = shape(b.format, b.by_events, b.base64, vec![])?;
    let row = insert(core, owner, &url, &events, &shape, &generate_webhook_secret()).await?;
    Ok(WebhookOut::of(row, true, admin))
}

/// The owner's webhooks, without secrets.
pub async fn list(core: &Core, owner: &Owner, admin: bool) -> Result<WebhookListOut> {
    let rows = webhooks::list(&core.db, owner).await?;
    Ok(WebhookListOut { webhooks: rows.into_iter().map(|r| WebhookOut::of(r, false, admin)).collect() })
}

/// One of the owner's webhooks, without its secret.
pub async fn get(core: &Core, owner: &Owner, id: &WebhookId, admin: bool) -> Result<WebhookOut> {
    Ok(WebhookOut::of(webhook_of(core, owner, id).await?, false, admin))
}

/// Edits a webhook; disabling it fails what was pending (it can be resent later).
pub async fn patch(core: &Core, owner: &Owner, id: &WebhookId, p: WebhookPatch, admin: bool) -> Result<WebhookOut> {
    let current = webhook_of(core, owner, id).await?;
    let events = dedup(p.events.unwrap_or(current.events));
    let url = check(core, p.url.as_deref().unwrap_or(&current.url), &events).await?;
    let secret = p.rotate_secret.then(generate_webhook_secret);
    let enabled = p.enabled.unwrap_or(current.enabled);
    let c = &current.shape;
    let format = p.format.unwrap_or(c.format);
    let shape =
        shape(format, p.by_events.unwrap_or(c.by_events), p.base64.unwrap_or(c.base64), c.evolution_events.clone())?;
    let mut tx = core.db.begin().await?;
    check_base64_room(&mut tx, owner, id, &shape).await?;
    let edit = webhooks::Edit { url: &url, events: &events, shape: &shape, enabled, new_secret: secret.as_deref() };
    let row = webhooks::update(&mut *tx, owner, id, &edit).await?.ok_or(Error::NotFound("webhook"))?;
    if current.enabled && !enabled {
        dlv::fail_pending(&mut tx, &row.id, "the endpoint was disabled").await?;
    }
    tx.commit().await?;
    Ok(WebhookOut::of(row, secret.is_some(), admin))
}

/// Removes a webhook.
pub async fn delete(core: &Core, owner: &Owner, id: &WebhookId) -> Result<()> {
    match webhooks::delete(&core.db, owner, id).await? {
        true => Ok(()),
        false => Err(Error::NotFound("webhook")),
    }
}

/// A page of a webhook's delivery log, newest first.
pub async fn deliveries(core: &Core, owner: &Owner, id: &WebhookId, q: &DeliveryQuery) -> Result<DeliveryListOut> {
    let limit = crate::page::limit(q.limit, 50, 100)?;
    let filter = q.filter()?;
    let hook = webhook_of(core, owner, id).await?;
    let before = match q.cursor.as_deref() {
        Some(c) => {
            let f = crate::page::decode(c, &["d1", hook.id.as_str()], 3)?;
            Some(DeliveryId::parse(&f[2]).map_err(|_| Error::invalid("invalid cursor"))?)
        }
        None => None,
    };
    let rows = dlv::list(&core.db, &hook.id, before.as_ref(), &filter, i64::from(limit) + 1).await?;
    let (rows, next_cursor) =
        crate::page::page(rows, limit, |r| crate::page::encode(&["d1", hook.id.as_str(), r.id.as_str()]));
    Ok(DeliveryListOut { deliveries: rows.into_iter().map(Into::into).collect(), next_cursor })
}

/// One delivery with its attempts and the request its latest attempt made.
pub async fn delivery(core: &Core, owner: &Owner, id: &WebhookId, delivery: &DeliveryId) -> Result<DeliveryDetailOut> {
    let hook = webhook_of(core, owner, id).await?;
    let d = dlv::detail(&core.db, &hook.id, delivery).await?.ok_or(Error::NotFound("delivery"))?;
    Ok(d.into())
}

/// Queues a failed delivery again, due now, with a fresh retry span: `conflict` for one
/// not failed, or a disabled webhook.
pub async fn resend(core: &Core, owner: &Owner, id: &WebhookId, delivery: &DeliveryId) -> Result<DeliveryOut> {
    let hook = webhook_of(core, owner, id).await?;
    if hook.enabled {
        if let Some(row) = dlv::resend(&core.db, &hook.id, delivery, core.config.webhooks.retry_span).await? {
            return Ok(row.into());
        }
    }
    match dlv::get(&core.db, &hook.id, delivery).await? {
        None => Err(Error::NotFound("delivery")),
        Some(_) if !hook.enabled => {
            Err(Error::refused(ErrorCode::Conflict, "the webhook is disabled; enable it before resending"))
        }
        Some(d) => Err(Error::refused(
            ErrorCode::Conflict,
            format!("only a failed delivery can be resent; this one is {}", d.state),
        )),
    }
}
