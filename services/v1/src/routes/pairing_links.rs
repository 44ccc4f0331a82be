//! `{inst}/pairing-links` (admin): hosted pairing links. A hosting provider sends its
//! customer a link; the page behind it (`routes::pair_page`) pairs the customer's phone
//! without showing any token. A link is built on `public_url` (the API's own address when
//! it listens on loopback), holds an unguessable token kept only as its SHA-256, and
//! works until it expires, is used or is revoked.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use shared::auth::{generate_token, hash_token};
use shared::db::pairing_links;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::{ApiError, ErrorCode};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::pairing::{LinkIn, LinkOut};
use door::extract::InstanceAccess;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_link, revoke_links))
}

/// How long a link lives unless asked otherwise.
const DEFAULT_TTL: std::time::Duration = std::time::Duration::from_secs(3600);
/// The longest a link may live.
const MAX_TTL: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);
/// The shortest.
const MIN_TTL: std::time::Duration = std::time::Duration::from_secs(60);
/// Active links one instance holds at most.
const MAX_ACTIVE: i64 = 20;
/// The link token's prefix (never a bearer token: it opens only the page).
pub const LINK_TOKEN_PREFIX: &str = "pl_pair_";

/// Make a hosted pairing link for the instance.
#[utoipa::path(post, path = "/v1/instances/{id}/pairing-links", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body(content = Option<LinkIn>, description = "optional: `{}` or no body gives a 1 h link"),
    responses(
        (status = 201, description = "the link", body = LinkOut),
        (status = 400, description = "`validation_failed`: `expires_in` not a duration of 1 minute to 7 days, or the instance's 20 active links", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: no `public_url` to build links on (listening beyond loopback)", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn create_link(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<LinkOut>), ApiError> {
    principal.require_admin()?;
    // No body at all (or JSON `null`, as the optional body reads) is the defaults.
    let b: LinkIn = shared::http::parse_json_or_default(&body)?;
    let ttl = match b.expires_in.as_deref() {
        None => DEFAULT_TTL,
        Some(s) => domain::message_in::parse_duration(s)
            .filter(|d| (MIN_TTL..=MAX_TTL).contains(d))
            .ok_or_else(|| ApiError::validation("expires_in must be a duration from 1m to 7d, such as 30m or 1h"))?,
    };
    let base = state
        .media_urls
        .base()
        .ok_or_else(|| {
            ApiError::new(ErrorCode::Conflict, "pairing links need public_url (the API is not on loopback)")
        })?
        .to_string();
    let token = generate_token(LINK_TOKEN_PREFIX);
    let expires_at = Utc::now() + chrono::Duration::from_std(ttl).map_err(ApiError::internal)?;
    let row = pairing_links::insert(&state.db, &id, &hash_token(&token), expires_at, MAX_ACTIVE)
        .await?
        .ok_or_else(|| ApiError::validation(format!("an instance has at most {MAX_ACTIVE} active pairing links")))?;
    let url = format!("{base}{}/{token}", crate::routes::pair_page::PAGE_PREFIX);
    Ok((StatusCode::CREATED, Json(LinkOut { url, expires_at: row.expires_at })))
}

/// Revoke every pairing link of the instance: their pages say so and pair nothing.
#[utoipa::path(delete, path = "/v1/instances/{id}/pairing-links", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 204, description = "revoked (also when there was none)"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn revoke_links(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
) -> Result<StatusCode, ApiError> {
    principal.require_admin()?;
    pairing_links::revoke_all(&state.db, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
