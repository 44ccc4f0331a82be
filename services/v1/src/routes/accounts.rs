//! `/v1/accounts`: a provider's customers (`domain::accounts`). The admin creates,
//! lists, edits, suspends and deletes them; an account's own token reads it, rotates
//! its tokens and reads its usage and billing export.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use domain::accounts::usage::{ExportFormat, ExportOut, ExportQuery};
use domain::accounts::{
    AccountCreatedOut, AccountIn, AccountListOut, AccountListQuery, AccountOut, AccountPatch, DeleteQuery,
    TokenCreatedOut, TokenIn, TokenListOut,
};
use domain::usage::{UsageOut, UsageQuery};
use shared::error::ErrorBody;
use shared::ids::{AccountId, AccountTokenId};
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{AccountAccess, Admin, Path, ValidatedJson, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_one, patch, delete))
        .routes(routes!(usage))
        .routes(routes!(export))
        .routes(routes!(create_token, list_tokens))
        .routes(routes!(revoke_token))
}

/// Create an account (admin) with its first token, shown only in this answer.
#[utoipa::path(post, path = "/v1/accounts", tag = "accounts",
    request_body = AccountIn,
    responses(
        (status = 201, description = "created", body = AccountCreatedOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn create(
    State(state): State<AppState>,
    _admin: Admin,
    ValidatedJson(body): ValidatedJson<AccountIn>,
) -> Result<(StatusCode, Json<AccountCreatedOut>), ApiError> {
    Ok((StatusCode::CREATED, Json(domain::accounts::create(&state, body).await?)))
}

/// List accounts (admin), oldest first, by state and name, with cursor pagination.
#[utoipa::path(get, path = "/v1/accounts", tag = "accounts",
    params(AccountListQuery),
    responses(
        (status = 200, description = "a page", body = AccountListOut),
        (status = 400, description = "`validation_failed`: bad filter, limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn list(
    State(state): State<AppState>,
    _admin: Admin,
    ValidatedQuery(q): ValidatedQuery<AccountListQuery>,
) -> Result<Json<AccountListOut>, ApiError> {
    Ok(Json(domain::accounts::list(&state, &q).await?))
}

/// Read an account, with how many instances it holds: the admin, or its own token.
#[utoipa::path(get, path = "/v1/accounts/{account_id}", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 200, description = "the account", body = AccountOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another account's token, or not an admin or account token", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn get_one(State(state): State<AppState>, access: AccountAccess) -> Result<Json<AccountOut>, ApiError> {
    Ok(Json(domain::accounts::get(&state, &access.id).await?))
}

/// Edit an account (admin): its name, metadata (replaced whole), quotas (those named)
/// and state. `suspended` stops its instances' sends (queued messages wait, nothing is
/// lost) and leaves its tokens only reads; `active` resumes both.
#[utoipa::path(patch, path = "/v1/accounts/{account_id}", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id")),
    request_body = AccountPatch,
    responses(
        (status = 200, description = "the account", body = AccountOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn patch(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<AccountId>,
    ValidatedJson(p): ValidatedJson<AccountPatch>,
) -> Result<Json<AccountOut>, ApiError> {
    Ok(Json(domain::accounts::patch(&state, &id, p).await?))
}

/// Delete an account (admin). While it holds instances it is refused, unless
/// `?cascade=true`, which deletes them first; its tokens stop working at once.
#[utoipa::path(delete, path = "/v1/accounts/{account_id}", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id"), DeleteQuery),
    responses(
        (status = 204, description = "deleted"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: it holds instances and `cascade` was not asked", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn delete(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<AccountId>,
    ValidatedQuery(q): ValidatedQuery<DeleteQuery>,
) -> Result<StatusCode, ApiError> {
    domain::accounts::delete(&state, &id, q.cascade).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The account's usage per UTC day and in total: its instances' figures from the day
/// each joined it, and what it kept of instances deleted or moved out.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/usage", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id"), UsageQuery),
    responses(
        (status = 200, description = "usage per day and in total", body = UsageOut),
        (status = 400, description = "`validation_failed`: a date not `YYYY-MM-DD`, `from` after `to`, or more than 93 days", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn usage(
    State(state): State<AppState>,
    access: AccountAccess,
    ValidatedQuery(q): ValidatedQuery<UsageQuery>,
) -> Result<Json<UsageOut>, ApiError> {
    Ok(Json(domain::accounts::usage::get(&state, &access.id, &q).await?))
}

/// The billing export: a line per instance and UTC day with any usage (and one per day
/// for what the account kept of instances that left), by day then instance, paged.
/// `format=csv` answers `text/csv` with the next page in a `Link: <...>; rel="next"`
/// header.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/usage/export", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id"), ExportQuery),
    responses(
        (status = 200, description = "a page of the export, as JSON or (`format=csv`) CSV",
            content((ExportOut = "application/json"), (String = "text/csv"))),
        (status = 400, description = "`validation_failed`: missing or bad dates, more than 366 days, a bad limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn export(
    State(state): State<AppState>,
    access: AccountAccess,
    ValidatedQuery(q): ValidatedQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    let out = domain::accounts::usage::export(&state, &access.id, &q).await?;
    if q.format.unwrap_or_default() == ExportFormat::Json {
        return Ok(Json(out).into_response());
    }
    let mut resp = domain::accounts::usage::csv(&out).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
    let file = format!("attachment; filename=\"usage-{}-{}-{}.csv\"", access.id, out.from, out.to);
    if let Ok(v) = HeaderValue::from_str(&file) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Some(next) = &out.next_cursor {
        let mut link = format!("</v1/accounts/{}/usage/export?from={}&to={}&format=csv", access.id, out.from, out.to);
        if let Some(limit) = q.limit {
            link.push_str(&format!("&limit={limit}"));
        }
        link.push_str(&format!("&cursor={next}>; rel=\"next\""));
        if let Ok(v) = HeaderValue::from_str(&link) {
            headers.insert(header::LINK, v);
        }
    }
    Ok(resp)
}

/// A new token of the account (at most 10 at once), shown only in this answer: rotate
/// by creating the new one, moving the customer to it, then revoking the old.
#[utoipa::path(post, path = "/v1/accounts/{account_id}/tokens", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id")),
    request_body = TokenIn,
    responses(
        (status = 201, description = "created", body = TokenCreatedOut),
        (status = 400, description = "`validation_failed`: a bad name, or 10 tokens already", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn create_token(
    State(state): State<AppState>,
    access: AccountAccess,
    ValidatedJson(body): ValidatedJson<TokenIn>,
) -> Result<(StatusCode, Json<TokenCreatedOut>), ApiError> {
    Ok((StatusCode::CREATED, Json(domain::accounts::create_token(&state, &access.id, body).await?)))
}

/// The account's tokens, oldest first, never the tokens themselves.
#[utoipa::path(get, path = "/v1/accounts/{account_id}/tokens", tag = "accounts",
    params(("account_id" = AccountId, Path, description = "account id")),
    responses(
        (status = 200, description = "its tokens", body = TokenListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn list_tokens(State(state): State<AppState>, access: AccountAccess) -> Result<Json<TokenListOut>, ApiError> {
    Ok(Json(domain::accounts::tokens(&state, &access.id).await?))
}

/// Revoke one of the account's tokens: refused at once on this pod, within 5 s on the
/// others.
#[utoipa::path(delete, path = "/v1/accounts/{account_id}/tokens/{token_id}", tag = "accounts",
    params(
        ("account_id" = AccountId, Path, description = "account id"),
        ("token_id" = AccountTokenId, Path, description = "token id"),
    ),
    responses(
        (status = 204, description = "revoked"),
        (status = 400, description = "`validation_failed`: a malformed token id", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn revoke_token(
    State(state): State<AppState>,
    access: AccountAccess,
    Path(ids): Path<(String, AccountTokenId)>,
) -> Result<StatusCode, ApiError> {
    domain::accounts::revoke_token(&state, &access.id, &ids.1).await?;
    Ok(StatusCode::NO_CONTENT)
}
