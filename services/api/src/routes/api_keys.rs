//! `{inst}/api-keys`: restricted API keys a tenant hands to third parties. A key is
//! `read_only` or `send_only` (what each reaches is `routes::access`), may expire, and
//! obeys its instance's IP allow-list and its own. The token is shown once and stored as
//! its SHA-256. Only the instance token and the admin create, list and revoke keys; a
//! revoked key is refused at once on this pod and, told over NATS, on the others (within
//! the token cache's 5 s in any case).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::auth::{generate_token, hash_token, API_KEY_PREFIX};
use shared::db::api_keys::{self, KeyRow, KeyScope, NewKey};
use shared::error::ErrorBody;
use shared::ids::{InstanceId, KeyId};
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use crate::pagination::{self, PageQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_keys, create_key)).routes(routes!(revoke_key))
}

/// The most keys one instance holds.
pub const MAX_KEYS: i64 = 100;
/// The longest key name (characters).
const NAME_LIMIT: usize = 100;

/// Body of `POST {inst}/api-keys`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyIn {
    /// What the key is for, 1-100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    pub scope: KeyScope,
    /// When it stops working (RFC 3339, in the future); never when absent.
    pub expires_at: Option<DateTime<Utc>>,
    /// Addresses or CIDRs it may be used from, besides the instance's own allow-list
    /// (empty: anywhere the instance's allows).
    #[serde(default)]
    #[schema(max_items = 100)]
    pub ip_allowlist: Vec<String>,
}

/// A key as listed: never its token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct KeyOut {
    pub id: KeyId,
    pub name: String,
    pub scope: KeyScope,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was last used; written at most once per 5 s per API pod.
    pub last_used_at: Option<DateTime<Utc>>,
    pub ip_allowlist: Vec<String>,
}

impl From<KeyRow> for KeyOut {
    fn from(r: KeyRow) -> KeyOut {
        KeyOut {
            id: r.id,
            name: r.name,
            scope: r.scope,
            created_at: r.created_at,
            expires_at: r.expires_at,
            last_used_at: r.last_used_at,
            ip_allowlist: r.ip_allowlist,
        }
    }
}

/// A new key and its token, shown only now.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct KeyCreatedOut {
    pub key: KeyOut,
    /// `pl_key_...`: use it as `Authorization: Bearer` (or `X-API-Key` on the action
    /// routes).
    pub token: String,
}

/// A page of keys, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct KeyListOut {
    pub keys: Vec<KeyOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Create a restricted key; its token is in this answer only.
#[utoipa::path(post, path = "/v1/instances/{id}/api-keys", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = KeyIn,
    responses(
        (status = 201, description = "the key and its token", body = KeyCreatedOut),
        (status = 400, description = "`validation_failed`: the name, an `expires_at` not in the future, an allow-list entry, or the instance's 100 keys", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or a key (no key creates keys)", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create_key(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(b): ValidatedJson<KeyIn>,
) -> Result<(StatusCode, Json<KeyCreatedOut>), ApiError> {
    let name = crate::schemas::trim_ecma(&b.name).to_string();
    if name.is_empty() || name.chars().count() > NAME_LIMIT {
        return Err(ApiError::validation(format!("name must be 1-{NAME_LIMIT} characters")));
    }
    if b.expires_at.is_some_and(|at| at <= Utc::now()) {
        return Err(ApiError::validation("expires_at must be in the future"));
    }
    let allowlist = crate::service::instances::normalize_allowlist(&b.ip_allowlist)?;
    let token = generate_token(API_KEY_PREFIX);
    let hash = hash_token(&token);
    let new =
        NewKey { name: &name, scope: b.scope, token_hash: &hash, expires_at: b.expires_at, ip_allowlist: &allowlist };
    let row = api_keys::insert(&state.db, &id, new, MAX_KEYS)
        .await?
        .ok_or_else(|| ApiError::validation(format!("an instance has at most {MAX_KEYS} API keys")))?;
    Ok((StatusCode::CREATED, Json(KeyCreatedOut { key: row.into(), token })))
}

/// The instance's keys, oldest first, without their tokens.
#[utoipa::path(get, path = "/v1/instances/{id}/api-keys", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id"), PageQuery),
    responses(
        (status = 200, description = "a page of keys", body = KeyListOut),
        (status = 400, description = "`validation_failed`: bad limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or a key", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list_keys(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<KeyListOut>, ApiError> {
    let limit = pagination::limit(q.limit, 50, 200)?;
    let after = match q.cursor.as_deref() {
        Some(c) => {
            let f = pagination::decode(c, &["keys", id.as_str()], 3)?;
            Some(KeyId::parse(&f[2]).map_err(|_| ApiError::validation("invalid cursor"))?)
        }
        None => None,
    };
    let rows = api_keys::list(&state.db, &id, after.as_ref(), i64::from(limit) + 1).await?;
    let (rows, next_cursor) =
        pagination::page(rows, limit, |r| pagination::encode(&["keys", id.as_str(), r.id.as_str()]));
    Ok(Json(KeyListOut { keys: rows.into_iter().map(KeyOut::from).collect(), next_cursor }))
}

/// Revoke a key: refused at once here, and on every API pod within 5 s.
#[utoipa::path(delete, path = "/v1/instances/{id}/api-keys/{key_id}", tag = "platform",
    params(("id" = InstanceId, Path, description = "instance id"), ("key_id" = KeyId, Path, description = "key id")),
    responses(
        (status = 204, description = "revoked"),
        (status = 400, description = "`validation_failed`: a key id not of its form", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or a key", body = ErrorBody),
        (status = 404, description = "`instance_not_found`; `not_found`: no such key", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn revoke_key(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, KeyId)>,
) -> Result<StatusCode, ApiError> {
    if !api_keys::delete(&state.db, &id, &ids.1).await? {
        return Err(ApiError::not_found("API key"));
    }
    crate::auth_cache::invalidate(&state, &id).await;
    Ok(StatusCode::NO_CONTENT)
}
