//! `/v1/accounts/{account_id}/webhooks`: an account's webhooks, receiving the events of every
//! instance of the account (each payload names its instance), with the same signing,
//! retries, delivery log and resend as an instance's (`domain::webhooks`). The admin or
//! the account's own token; another account's webhook is `not_found`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared::db::webhooks::Owner;
use shared::error::ErrorBody;
use shared::ids::{AccountId, DeliveryId, WebhookId};
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::webhooks::{
    DeliveryDetailOut, DeliveryListOut, DeliveryOut, DeliveryQuery, WebhookIn, WebhookListOut, WebhookOut, WebhookPatch,
};
use door::extract::{AccountAccess, Path, ValidatedJson, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one, patch, delete))
        .routes(routes!(deliveries))
        .routes(routes!(delivery))
        .routes(routes!(resend))
}

fn owner(a: &AccountAccess) -> Owner {
    Owner::Account(a.id.clone())
}

/// Register a webhook of the account: it receives the events of all its instances. The
/// answer carries its signing secret, shown only here.
#[utoipa::path(post, path = "/v1/accounts/{account_id}/webhooks", tag = "accounts", operation_id = "webhooks_create",
    params(("account_id" = AccountId, Path, description = "account id")),
    request_body = WebhookIn,
    responses(
        (status = 201, description = "registered; `secret` is shown only now", body = WebhookOut),
        (status = 400, description = "`validation_failed`: bad URL (or an internal address), unknown event type, too many webhooks (20, of which 2 with `base64`)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's token, or a suspended account's; `quota_exceeded`: the account holds its quota of webhooks", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn create(
    State(state): State<AppState>,
    access: AccountAccess,
    ValidatedJson(b): ValidatedJson<WebhookIn>,
) -> Result<(StatusCode, Json<WebhookOut>), ApiError> {
    let out = domain::webhooks::create(&state, &owner(&access), b, access.principal.is_admin()).await?;
    Ok((StatusCode::CREATED, Json(out)))
}

/// The account's webhooks (without secrets).
#[utoipa::path(get, path = "/v1/accounts/{account_id}/webhooks", tag = "accounts", operation_id = "webhooks_list",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 200, description = "the webhooks", body = WebhookListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn list(State(state): State<AppState>, access: AccountAccess) -> Result<Json<WebhookListOut>, ApiError> {
    Ok(Json(domain::webhooks::list(&state, &owner(&access), access.principal.is_admin()).await?))
}

/// Read one of the account's webhooks (without its secret).
#[utoipa::path(get, path = "/v1/accounts/{account_id}/webhooks/{webhook_id}", tag = "accounts", operation_id = "webhooks_get",
    params(("account_id" = AccountId, Path, description = "account id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    responses(
        (status = 200, description = "the webhook", body = WebhookOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account or webhook", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn get_one(
    State(state): State<AppState>,
    access: AccountAccess,
    Path(ids): Path<(AccountId, WebhookId)>,
) -> Result<Json<WebhookOut>, ApiError> {
    Ok(Json(domain::webhooks::get(&state, &owner(&access), &ids.1, access.principal.is_admin()).await?))
}

/// Edit one of the account's webhooks: URL, event types, enabled; `rotate_secret`
/// issues a new secret.
#[utoipa::path(patch, path = "/v1/accounts/{account_id}/webhooks/{webhook_id}", tag = "accounts", operation_id = "webhooks_patch",
    params(("account_id" = AccountId, Path, description = "account id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    request_body = WebhookPatch,
    responses(
        (status = 200, description = "the webhook; with `secret` after a rotation", body = WebhookOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account or webhook", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn patch(
    State(state): State<AppState>,
    access: AccountAccess,
    Path(ids): Path<(AccountId, WebhookId)>,
    ValidatedJson(p): ValidatedJson<WebhookPatch>,
) -> Result<Json<WebhookOut>, ApiError> {
    Ok(Json(domain::webhooks::patch(&state, &owner(&access), &ids.1, p, access.principal.is_admin()).await?))
}

/// Remove one of the account's webhooks.
#[utoipa::path(delete, path = "/v1/accounts/{account_id}/webhooks/{webhook_id}", tag = "accounts", operation_id = "webhooks_delete",
    params(("account_id" = AccountId, Path, description = "account id"), ("webhook_id" = WebhookId, Path, description = "webhook id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account or webhook", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn delete(
    State(state): State<AppState>,
    access: AccountAccess,
    Path(ids): Path<(AccountId, WebhookId)>,
) -> Result<StatusCode, ApiError> {
    domain::webhooks::delete(&state, &owner(&access), &ids.1).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The delivery log of one of the account's webhooks, newest first (every instance's
/// deliveries together), with cursor pagination and the same filters as an instance's.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/webhooks/{webhook_id}/deliveries", tag = "accounts", operation_id = "webhooks_deliveries",
    params(("account_id" = AccountId, Path, description = "account id"), ("webhook_id" = WebhookId, Path, description = "webhook id"), DeliveryQuery),
    responses(
        (status = 200, description = "a page of deliveries, newest first", body = DeliveryListOut),
        (status = 400, description = "`validation_failed`: bad limit, cursor, state, event type or time", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account or webhook", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn deliveries(
    State(state): State<AppState>,
    access: AccountAccess,
    Path(ids): Path<(AccountId, WebhookId)>,
    ValidatedQuery(q): ValidatedQuery<DeliveryQuery>,
) -> Result<Json<DeliveryListOut>, ApiError> {
    Ok(Json(domain::webhooks::deliveries(&state, &owner(&access), &ids.1, &q).await?))
}

/// One delivery of an account's webhook, with its attempts and its latest request.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/webhooks/{webhook_id}/deliveries/{delivery_id}", tag = "accounts", operation_id = "webhooks_delivery",
    params(
        ("account_id" = AccountId, Path, description = "account id"),
        ("webhook_id" = WebhookId, Path, description = "webhook id"),
        ("delivery_id" = DeliveryId, Path, description = "delivery id"),
    ),
    responses(
        (status = 200, description = "the delivery, its request and its attempts", body = DeliveryDetailOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, webhook or delivery", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn delivery(
    State(state): State<AppState>,
    access: AccountAccess,
    Path(ids): Path<(AccountId, WebhookId, DeliveryId)>,
) -> Result<Json<DeliveryDetailOut>, ApiError> {
    Ok(Json(domain::webhooks::delivery(&state, &owner(&access), &ids.1, &ids.2).await?))
}

/// Resend a failed delivery of an account's webhook: queued again, due now.
#[utoipa::path(post, path = "/v1/accounts/{account_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/resend", tag = "accounts", operation_id = "webhooks_resend",
    params(
        ("account_id" = AccountId, Path, description = "account id"),
        ("webhook_id" = WebhookId, Path, description = "webhook id"),
        ("delivery_id" = DeliveryId, Path, description = "delivery id"),
    ),
    responses(
        (status = 202, description = "queued again (`state: pending`)", body = DeliveryOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, webhook or delivery", body = ErrorBody),
        (status = 409, description = "`conflict`: the delivery is not `failed`, or the webhook is disabled", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn resend(
    State(state): State<AppState>,
    access: AccountAccess,
    Path(ids): Path<(AccountId, WebhookId, DeliveryId)>,
) -> Result<(StatusCode, Json<DeliveryOut>), ApiError> {
    let out = domain::webhooks::resend(&state, &owner(&access), &ids.1, &ids.2).await?;
    Ok((StatusCode::ACCEPTED, Json(out)))
}
