//! `{inst}/webhooks`: an instance's webhook endpoints (registered by `domain::webhooks`'
//! rules) and their delivery log. Another
//! instance's webhook is 404 `not_found`, like one that does not exist.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use shared::auth::generate_webhook_secret;
use shared::db::deliveries as dlv;
use shared::db::webhooks::{self, WebhookRow};
use shared::error::ErrorBody;
use shared::ids::{DeliveryId, InstanceId, WebhookId};
use shared::{ApiError, ErrorCode};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::webhooks::{
    check, check_base64_room, insert, shape, DeliveryDetailOut, DeliveryListOut, DeliveryOut, DeliveryQuery,
    WebhookFormat, WebhookListOut, WebhookOut,
};
use door::extract::{Path, ValidatedJson, ValidatedQuery, WebhookAccess};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one, patch, delete))
        .routes(routes!(deliveries))
        .routes(routes!(delivery))
        .routes(routes!(resend))
}

/// Body of `POST {inst}/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookIn {
    /// http(s); never a private, loopback or link-local address.
    #[schema(pattern = "^[hH][tT][tT][pP][sS]?://[^/?#]+", max_length = 2048)]
    pub url: String,
    /// Event types to deliver (see the event catalog); absent or empty: all.
    #[serde(default)]
    #[schema(value_type = Vec<domain::catalog::EventType>)]
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
    #[schema(value_type = Option<Vec<domain::catalog::EventType>>)]
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

/// Register a webhook endpoint. The answer carries its signing secret, shown only here.
#[utoipa::path(post, path = "/v1/instances/{id}/webhooks", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = WebhookIn,
    responses(
        (status = 201, description = "registered; `secret` is shown only now", body = WebhookOut),
        (status = 400, description = "`validation_failed`: bad URL (or an internal address), unknown event type, too many webhooks (20, of which 2 with `base64`)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found` with another instance's token", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create(
    State(state): State<AppState>,
    WebhookAccess { id, principal }: WebhookAccess,
    ValidatedJson(b): ValidatedJson<WebhookIn>,
) -> Result<(StatusCode, Json<WebhookOut>), ApiError> {
    shared::db::instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    let events = dedup(b.events);
    let url = check(&state, &b.url, &events).await?;
    let shape = shape(b.format, b.by_events, b.base64, vec![])?;
    let row = insert(&state, &id, &url, &events, &shape, &generate_webhook_secret()).await?;
    Ok((StatusCode::CREATED, Json(WebhookOut::of(row, true, principal.is_admin()))))
}

/// The instance's webhooks (without secrets).
#[utoipa::path(get, path = "/v1/instances/{id}/webhooks", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the webhooks", body = WebhookListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found` with another instance's token", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(
    State(state): State<AppState>,
    WebhookAccess { id, principal }: WebhookAccess,
) -> Result<Json<WebhookListOut>, ApiError> {
    let rows = webhooks::list(&state.db, &id).await?;
    let admin = principal.is_admin();
    Ok(Json(WebhookListOut { webhooks: rows.into_iter().map(|r| WebhookOut::of(r, false, admin)).collect() }))
}

/// Read a webhook (without its secret).
#[utoipa::path(get, path = "/v1/instances/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    responses(
        (status = 200, description = "the webhook", body = WebhookOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such webhook, or another instance's token", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    WebhookAccess { id, principal }: WebhookAccess,
    Path(ids): Path<(InstanceId, WebhookId)>,
) -> Result<Json<WebhookOut>, ApiError> {
    let row = webhooks::get(&state.db, &id, &ids.1).await?.ok_or_else(|| ApiError::not_found("webhook"))?;
    Ok(Json(WebhookOut::of(row, false, principal.is_admin())))
}

/// Edit a webhook: URL, event types, enabled; `rotate_secret` issues a new secret.
#[utoipa::path(patch, path = "/v1/instances/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    request_body = WebhookPatch,
    responses(
        (status = 200, description = "the webhook; with `secret` after a rotation", body = WebhookOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such webhook, or another instance's token", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn patch(
    State(state): State<AppState>,
    WebhookAccess { id, principal }: WebhookAccess,
    Path(ids): Path<(InstanceId, WebhookId)>,
    ValidatedJson(p): ValidatedJson<WebhookPatch>,
) -> Result<Json<WebhookOut>, ApiError> {
    let current = webhooks::get(&state.db, &id, &ids.1).await?.ok_or_else(|| ApiError::not_found("webhook"))?;
    let events = dedup(p.events.unwrap_or(current.events));
    let url = check(&state, p.url.as_deref().unwrap_or(&current.url), &events).await?;
    let secret = p.rotate_secret.then(generate_webhook_secret);
    let enabled = p.enabled.unwrap_or(current.enabled);
    let c = &current.shape;
    let format = p.format.unwrap_or(c.format);
    let shape =
        shape(format, p.by_events.unwrap_or(c.by_events), p.base64.unwrap_or(c.base64), c.evolution_events.clone())?;
    let mut tx = state.db.begin().await?;
    check_base64_room(&mut tx, &id, &ids.1, &shape).await?;
    let edit = webhooks::Edit { url: &url, events: &events, shape: &shape, enabled, new_secret: secret.as_deref() };
    let row = webhooks::update(&mut *tx, &id, &ids.1, &edit).await?.ok_or_else(|| ApiError::not_found("webhook"))?;
    if current.enabled && !enabled {
        // Disabled by its owner: what was pending fails now (and can be resent later).
        dlv::fail_pending(&mut tx, &row.id, "the endpoint was disabled").await?;
    }
    tx.commit().await?;
    Ok(Json(WebhookOut::of(row, secret.is_some(), principal.is_admin())))
}

/// Remove a webhook.
#[utoipa::path(delete, path = "/v1/instances/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such webhook, or another instance's token", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    WebhookAccess { id, .. }: WebhookAccess,
    Path(ids): Path<(InstanceId, WebhookId)>,
) -> Result<StatusCode, ApiError> {
    if webhooks::delete(&state.db, &id, &ids.1).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("webhook"))
    }
}

/// A delivery log cursor: the last delivery's id, bound to its webhook.
fn decode_cursor(c: &str, webhook: &WebhookId) -> Result<DeliveryId, ApiError> {
    let f = domain::page::decode(c, &["d1", webhook.as_str()], 3)?;
    DeliveryId::parse(&f[2]).map_err(|_| ApiError::validation("invalid cursor"))
}

async fn webhook_of(state: &AppState, instance: &InstanceId, webhook: &WebhookId) -> Result<WebhookRow, ApiError> {
    webhooks::get(&state.db, instance, webhook).await?.ok_or_else(|| ApiError::not_found("webhook"))
}

/// The delivery log of a webhook, newest first, with cursor pagination; narrowed by
/// `state`, `event` (a type) and `since` (made at or after).
#[utoipa::path(get, path = "/v1/instances/{id}/webhooks/{webhook_id}/deliveries", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id"), ("webhook_id" = WebhookId, Path, description = "webhook id"), DeliveryQuery),
    responses(
        (status = 200, description = "a page of deliveries, newest first", body = DeliveryListOut),
        (status = 400, description = "`validation_failed`: bad limit, cursor, state, event type or time", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such webhook on this instance, or another instance's token", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn deliveries(
    State(state): State<AppState>,
    WebhookAccess { id, .. }: WebhookAccess,
    Path(ids): Path<(InstanceId, WebhookId)>,
    ValidatedQuery(q): ValidatedQuery<DeliveryQuery>,
) -> Result<Json<DeliveryListOut>, ApiError> {
    let limit = domain::page::limit(q.limit, 50, 100)?;
    let filter = q.filter()?;
    let hook = webhook_of(&state, &id, &ids.1).await?;
    let before = q.cursor.as_deref().map(|c| decode_cursor(c, &hook.id)).transpose()?;
    let rows = dlv::list(&state.db, &id, &hook.id, before.as_ref(), &filter, i64::from(limit) + 1).await?;
    let (rows, next_cursor) =
        domain::page::page(rows, limit, |r| domain::page::encode(&["d1", hook.id.as_str(), r.id.as_str()]));
    Ok(Json(DeliveryListOut { deliveries: rows.into_iter().map(Into::into).collect(), next_cursor }))
}

/// One delivery with its attempts (the latest 10: time, URL, status, latency, error, the
/// start of the endpoint's answer) and the request its latest attempt made.
#[utoipa::path(get, path = "/v1/instances/{id}/webhooks/{webhook_id}/deliveries/{delivery_id}", tag = "webhooks",
    params(
        ("id" = InstanceId, Path, description = "instance id"),
        ("webhook_id" = WebhookId, Path, description = "webhook id"),
        ("delivery_id" = DeliveryId, Path, description = "delivery id"),
    ),
    responses(
        (status = 200, description = "the delivery, its request and its attempts", body = DeliveryDetailOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such webhook or delivery, or another instance's token", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delivery(
    State(state): State<AppState>,
    WebhookAccess { id, .. }: WebhookAccess,
    Path(ids): Path<(InstanceId, WebhookId, DeliveryId)>,
) -> Result<Json<DeliveryDetailOut>, ApiError> {
    let hook = webhook_of(&state, &id, &ids.1).await?;
    let d = dlv::detail(&state.db, &id, &hook.id, &ids.2).await?.ok_or_else(|| ApiError::not_found("delivery"))?;
    Ok(Json(d.into()))
}

/// Resend a failed delivery: it is queued again, due now, with a fresh retry span.
#[utoipa::path(post, path = "/v1/instances/{id}/webhooks/{webhook_id}/deliveries/{delivery_id}/resend", tag = "webhooks",
    params(
        ("id" = InstanceId, Path, description = "instance id"),
        ("webhook_id" = WebhookId, Path, description = "webhook id"),
        ("delivery_id" = DeliveryId, Path, description = "delivery id"),
    ),
    responses(
        (status = 202, description = "queued again (`state: pending`)", body = DeliveryOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token may not be used from this address", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such webhook or delivery, or another instance's token", body = ErrorBody),
        (status = 409, description = "`conflict`: the delivery is not `failed`, or the webhook is disabled", body = ErrorBody),
        (status = 503, description = "`shutting_down`: the pod is draining; retry on another", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn resend(
    State(state): State<AppState>,
    WebhookAccess { id, .. }: WebhookAccess,
    Path(ids): Path<(InstanceId, WebhookId, DeliveryId)>,
) -> Result<(StatusCode, Json<DeliveryOut>), ApiError> {
    let hook = webhook_of(&state, &id, &ids.1).await?;
    if hook.enabled {
        if let Some(row) = dlv::resend(&state.db, &id, &hook.id, &ids.2, state.config.webhooks.retry_span).await? {
            return Ok((StatusCode::ACCEPTED, Json(row.into())));
        }
    }
    match dlv::get(&state.db, &id, &hook.id, &ids.2).await? {
        None => Err(ApiError::not_found("delivery")),
        Some(_) if !hook.enabled => {
            Err(ApiError::new(ErrorCode::Conflict, "the webhook is disabled; enable it before resending"))
        }
        Some(d) => Err(ApiError::new(
            ErrorCode::Conflict,
            format!("only a failed delivery can be resent; this one is {}", d.state),
        )),
    }
}
