//! `{inst}/webhooks`: an instance's webhook endpoints. Deliveries and their log come with
//! the webhooks issue; registering endpoints works now. Another instance's webhook is
//! 404 `not_found`, like one that does not exist.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::auth::generate_webhook_secret;
use shared::db::webhooks::{self, WebhookRow};
use shared::error::ErrorBody;
use shared::fetch::FetchError;
use shared::ids::{InstanceId, WebhookId};
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, ValidatedJson};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list)).routes(routes!(get_one, patch, delete))
}

/// Most endpoints per instance.
const MAX_WEBHOOKS: usize = 20;

/// A webhook endpoint.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookOut {
    pub id: WebhookId,
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
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl WebhookOut {
    fn of(r: WebhookRow, show_secret: bool) -> WebhookOut {
        WebhookOut {
            secret: show_secret.then_some(r.secret),
            id: r.id,
            url: r.url,
            events: r.events,
            enabled: r.enabled,
            disabled_reason: r.disabled_reason,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Body of `POST {inst}/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookIn {
    /// http(s); never a private, loopback or link-local address.
    pub url: String,
    /// Event types to deliver (see the event catalog); absent or empty: all.
    #[serde(default)]
    pub events: Vec<String>,
}

/// Body of `PATCH {inst}/webhooks/{webhook_id}`: absent fields stay.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookPatch {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
    /// Issue a new secret (returned once); the old one keeps verifying for a while.
    #[serde(default)]
    pub rotate_secret: bool,
}

/// The webhooks of an instance.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WebhookListOut {
    pub webhooks: Vec<WebhookOut>,
}

async fn check(state: &AppState, raw: &str, events: &[String]) -> Result<String, ApiError> {
    let url = url::Url::parse(raw).map_err(|_| ApiError::validation("url must be an http or https URL"))?;
    if raw.len() > 2048 {
        return Err(ApiError::validation("url must be at most 2048 characters"));
    }
    shared::fetch::check_url(&url, state.config.allow_private_targets).await.map_err(|e| match e {
        FetchError::Refused => ApiError::validation("url must be http(s) and must not point to a private or local address"),
        _ => ApiError::validation("url's host does not resolve"),
    })?;
    if events.iter().any(|t| !shared::events::known(t)) {
        return Err(ApiError::validation("events must be types of the event catalog (see the OpenAPI description)"));
    }
    Ok(url.to_string())
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
        (status = 400, description = "`validation_failed`: bad URL (or an internal address), unknown event type, too many webhooks", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(b): ValidatedJson<WebhookIn>,
) -> Result<(StatusCode, Json<WebhookOut>), ApiError> {
    shared::db::instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    let events = dedup(b.events);
    let url = check(&state, &b.url, &events).await?;
    if webhooks::list(&state.db, &id).await?.len() >= MAX_WEBHOOKS {
        return Err(ApiError::validation(format!("an instance has at most {MAX_WEBHOOKS} webhooks")));
    }
    let row = webhooks::insert(&state.db, &id, &url, &events, &generate_webhook_secret()).await?;
    Ok((StatusCode::CREATED, Json(WebhookOut::of(row, true))))
}

/// The instance's webhooks (without secrets).
#[utoipa::path(get, path = "/v1/instances/{id}/webhooks", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the webhooks", body = WebhookListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(State(state): State<AppState>, InstanceAccess { id, .. }: InstanceAccess) -> Result<Json<WebhookListOut>, ApiError> {
    let rows = webhooks::list(&state.db, &id).await?;
    Ok(Json(WebhookListOut { webhooks: rows.into_iter().map(|r| WebhookOut::of(r, false)).collect() }))
}

/// Read a webhook (without its secret).
#[utoipa::path(get, path = "/v1/instances/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    responses(
        (status = 200, description = "the webhook", body = WebhookOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found` (also another instance's webhook)", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(String, String)>,
) -> Result<Json<WebhookOut>, ApiError> {
    let row = webhooks::get(&state.db, &id, &ids.1).await?.ok_or_else(|| ApiError::not_found("webhook"))?;
    Ok(Json(WebhookOut::of(row, false)))
}

/// Edit a webhook: URL, event types, enabled; `rotate_secret` issues a new secret.
#[utoipa::path(patch, path = "/v1/instances/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    request_body = WebhookPatch,
    responses(
        (status = 200, description = "the webhook; with `secret` after a rotation", body = WebhookOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn patch(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(String, String)>,
    ValidatedJson(p): ValidatedJson<WebhookPatch>,
) -> Result<Json<WebhookOut>, ApiError> {
    let current = webhooks::get(&state.db, &id, &ids.1).await?.ok_or_else(|| ApiError::not_found("webhook"))?;
    let events = dedup(p.events.unwrap_or(current.events));
    let url = check(&state, p.url.as_deref().unwrap_or(&current.url), &events).await?;
    let secret = p.rotate_secret.then(generate_webhook_secret);
    let row = webhooks::update(&state.db, &id, &ids.1, &url, &events, p.enabled.unwrap_or(current.enabled), secret.as_deref())
        .await?
        .ok_or_else(|| ApiError::not_found("webhook"))?;
    Ok(Json(WebhookOut::of(row, secret.is_some())))
}

/// Remove a webhook.
#[utoipa::path(delete, path = "/v1/instances/{id}/webhooks/{webhook_id}", tag = "webhooks",
    params(("id" = InstanceId, Path, description = "instance id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    if webhooks::delete(&state.db, &id, &ids.1).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("webhook"))
    }
}
