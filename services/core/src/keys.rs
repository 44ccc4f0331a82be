//! Restricted API keys a tenant hands to third parties. A key is `read_only` or
//! `send_only` (what each reaches is the API's access table), may expire, and obeys its
//! instance's IP allow-list and its own. The token is shown once and stored as its
//! SHA-256. A revoked key is refused at once in this process and, told over NATS, in the
//! others (within the token cache's 5 s in any case).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::auth::{generate_token, hash_token, API_KEY_PREFIX};
use shared::db::api_keys::{self, KeyRow, KeyScope, NewKey};
use shared::ids::KeyId;
use utoipa::ToSchema;

use crate::page::{self, PageQuery};
use crate::{Ctx, Error, Result};

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

/// Creates a key of the instance; its token is in this answer only.
pub async fn create(ctx: Ctx<'_>, b: KeyIn) -> Result<KeyCreatedOut> {
    let name = crate::text::trim_ecma(&b.name).to_string();
    if name.is_empty() || name.chars().count() > NAME_LIMIT {
        return Err(Error::invalid(format!("name must be 1-{NAME_LIMIT} characters")));
    }
    if b.expires_at.is_some_and(|at| at <= Utc::now()) {
        return Err(Error::invalid("expires_at must be in the future"));
    }
    let allowlist = crate::instances::normalize_allowlist(&b.ip_allowlist)?;
    let token = generate_token(API_KEY_PREFIX);
    let hash = hash_token(&token);
    let new =
        NewKey { name: &name, scope: b.scope, token_hash: &hash, expires_at: b.expires_at, ip_allowlist: &allowlist };
    let row = api_keys::insert(&ctx.core.db, ctx.instance, new, MAX_KEYS)
        .await?
        .ok_or_else(|| Error::invalid(format!("an instance has at most {MAX_KEYS} API keys")))?;
    Ok(KeyCreatedOut { key: row.into(), token })
}

/// A page of the instance's keys, oldest first, without their tokens.
pub async fn list(ctx: Ctx<'_>, q: &PageQuery) -> Result<KeyListOut> {
    let id = ctx.instance;
    let limit = page::limit(q.limit, 50, 200)?;
    let after = match q.cursor.as_deref() {
        Some(c) => {
            let f = page::decode(c, &["keys", id.as_str()], 3)?;
            Some(KeyId::parse(&f[2]).map_err(|_| Error::invalid("invalid cursor"))?)
        }
        None => None,
    };
    let rows = api_keys::list(&ctx.core.db, id, after.as_ref(), i64::from(limit) + 1).await?;
    let (rows, next_cursor) = page::page(rows, limit, |r| page::encode(&["keys", id.as_str(), r.id.as_str()]));
    Ok(KeyListOut { keys: rows.into_iter().map(KeyOut::from).collect(), next_cursor })
}

/// Revokes a key: refused at once here, and in every other process within 5 s.
pub async fn revoke(ctx: Ctx<'_>, key: &KeyId) -> Result<()> {
    if !api_keys::delete(&ctx.core.db, ctx.instance, key).await? {
        return Err(Error::NotFound("API key"));
    }
    crate::auth::invalidate(ctx.core, ctx.instance).await;
    Ok(())
}
