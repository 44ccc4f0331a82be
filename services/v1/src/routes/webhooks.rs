//! `{inst}/webhooks`: an instance's webhook endpoints (registered by `domain::webhooks`'
//! rules) and their delivery log. Another
//! instance's webhook is 404 `not_found`, like one that does not exist.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared::db::webhooks::Owner;
use shared::error::ErrorBody;
use shared::ids::{DeliveryId, InstanceId, WebhookId};
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::webhooks::{
    DeliveryDetailOut, DeliveryListOut, DeliveryOut, DeliveryQuery, WebhookIn, WebhookListOut, WebhookOut, WebhookPatch,
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
    let out = domain::webhooks::create(&state, &Owner::Instance(id), b, principal.is_admin()).await?;
    Ok((StatusCode::CREATED, Json(out)))
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
    Ok(Json(domain::webhooks::list(&state, &Owner::Instance(id), principal.is_admin()).await?))
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
    Ok(Json(domain::webhooks::get(&state, &Owner::Instance(id), &ids.1, principal.is_admin()).await?))
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
    Ok(Json(domain::webhooks::patch(&state, &Owner::Instance(id), &ids.1, p, principal.is_admin()).await?))
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
    domain::webhooks::delete(&state, &Owner::Instance(id), &ids.1).await?;
    Ok(StatusCode::NO_CONTENT)
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
    Ok(Json(domain::webhooks::deliveries(&state, &Owner::Instance(id), &ids.1, &q).await?))
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
    Ok(Json(domain::webhooks::delivery(&state, &Owner::Instance(id), &ids.1, &ids.2).await?))
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
    let out = domain::webhooks::resend(&state, &Owner::Instance(id), &ids.1, &ids.2).await?;
    Ok((StatusCode::ACCEPTED, Json(out)))
}
