//! Restricted API keys (`api_keys`): created and revoked by the instance token or the
//! admin, looked up by the SHA-256 of the token. Every query here is compile-checked
//! against the schema (`query!`, descriptions in `shared/.sqlx`: scripts/sqlx-prepare).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;

use crate::ids::{InstanceId, KeyId};

/// What a key reaches (the API keeps the table of routes per scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum KeyScope {
    /// Every read of its instance.
    ReadOnly,
    /// Sending messages and reading their status, number checks.
    SendOnly,
}

impl KeyScope {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyScope::ReadOnly => "read_only",
            KeyScope::SendOnly => "send_only",
        }
    }
}

/// A key as listed (never its token).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyRow {
    pub id: KeyId,
    pub instance_id: InstanceId,
    pub name: String,
    pub scope: KeyScope,
    pub ip_allowlist: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// What authenticating a key needs: the key, and its instance's name and allow-list.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyAuth {
    pub key_id: KeyId,
    pub instance_id: InstanceId,
    pub instance_name: String,
    pub scope: KeyScope,
    pub expires_at: Option<DateTime<Utc>>,
    /// The key's own allow-list.
    pub ip_allowlist: Vec<String>,
    /// Its instance's allow-list (the key obeys both).
    pub instance_allowlist: Vec<String>,
}

/// What a new key is made of.
pub struct NewKey<'a> {
    pub name: &'a str,
    pub scope: KeyScope,
    pub token_hash: &'a str,
    pub expires_at: Option<DateTime<Utc>>,
    pub ip_allowlist: &'a [String],
}

/// A new key for `instance`, unless it already has `max` (then `None`).
pub async fn insert(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    k: NewKey<'_>,
    max: i64,
) -> Result<Option<KeyRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    // One creation at a time per instance, so the count holds.
    super::instances::lock(&mut tx, instance).await?;
    let id = KeyId::new();
    let row = sqlx::query_as!(
        KeyRow,
        r#"INSERT INTO api_keys (id, instance_id, name, scope, token_hash, expires_at, ip_allowlist)
           SELECT $1, $2, $3, $4, $5, $6, $7 WHERE (SELECT count(*) FROM api_keys WHERE instance_id = $2) < $8
           RETURNING id AS "id: KeyId", instance_id AS "instance_id: InstanceId", name, scope AS "scope: KeyScope",
               ip_allowlist, created_at, expires_at, last_used_at"#,
        id.as_str(),
        instance.as_str(),
        k.name,
        k.scope.as_str(),
        k.token_hash,
        k.expires_at,
        k.ip_allowlist,
        max,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row)
}

/// Up to `limit` keys of an instance in id (creation) order, after `after`.
pub async fn list(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    after: Option<&KeyId>,
    limit: i64,
) -> Result<Vec<KeyRow>, sqlx::Error> {
    sqlx::query_as!(
        KeyRow,
        r#"SELECT id AS "id: KeyId", instance_id AS "instance_id: InstanceId", name, scope AS "scope: KeyScope",
               ip_allowlist, created_at, expires_at, last_used_at
           FROM api_keys WHERE instance_id = $1 AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3"#,
        instance.as_str(),
        after.map(KeyId::as_str),
        limit,
    )
    .fetch_all(db)
    .await
}

/// Deletes a key; whether it existed.
pub async fn delete(db: impl PgExecutor<'_>, instance: &InstanceId, id: &KeyId) -> Result<bool, sqlx::Error> {
    let r = sqlx::query!("DELETE FROM api_keys WHERE id = $1 AND instance_id = $2", id.as_str(), instance.as_str())
        .execute(db)
        .await?;
    Ok(r.rows_affected() > 0)
}

/// The key with this token hash, not yet expired, recording its use.
pub async fn auth_by_token_hash(db: impl PgExecutor<'_>, token_hash: &str) -> Result<Option<KeyAuth>, sqlx::Error> {
    // Columns of a joined UPDATE's RETURNING are described as nullable: `!` says which are not.
    sqlx::query_as!(
        KeyAuth,
        r#"UPDATE api_keys k SET last_used_at = now() FROM instances i
           WHERE k.token_hash = $1 AND i.id = k.instance_id AND (k.expires_at IS NULL OR k.expires_at > now())
           RETURNING k.id AS "key_id!: KeyId", k.instance_id AS "instance_id!: InstanceId",
               i.name AS "instance_name!", k.scope AS "scope!: KeyScope", k.expires_at,
               k.ip_allowlist AS "ip_allowlist!", i.ip_allowlist AS "instance_allowlist!""#,
        token_hash,
    )
    .fetch_optional(db)
    .await
}
