//! An account's Chatwoot settings, and the inboxes its instances have from them.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use super::forget;
use crate::ids::InstanceId;

/// An account's settings as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AccountRow {
    pub config: serde_json::Value,
    pub token_sealed: Vec<u8>,
    pub private_origin: Option<String>,
    pub updated_at: DateTime<Utc>,
}

pub async fn account(db: impl PgExecutor<'_>, account: &str) -> Result<Option<AccountRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT config, token_sealed, private_origin, updated_at FROM chatwoot_accounts WHERE account_id = $1",
    )
    .bind(account)
    .fetch_optional(db)
    .await
}

/// Creates or replaces an account's settings; false when there is no account.
pub async fn put_account(
    db: impl PgExecutor<'_>,
    account: &str,
    config: &serde_json::Value,
    token_sealed: &[u8],
    private_origin: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "INSERT INTO chatwoot_accounts (account_id, config, token_sealed, private_origin) \
         SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM accounts WHERE id = $1) \
         ON CONFLICT (account_id) DO UPDATE SET config = EXCLUDED.config, token_sealed = EXCLUDED.token_sealed, \
             private_origin = EXCLUDED.private_origin, updated_at = now()",
    )
    .bind(account)
    .bind(config)
    .bind(token_sealed)
    .bind(private_origin)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Removes an account's settings; the inboxes made from them are removed by the caller.
pub async fn delete_account(db: impl PgExecutor<'_>, account: &str) -> Result<bool, sqlx::Error> {
    let r = sqlx::query("DELETE FROM chatwoot_accounts WHERE account_id = $1").bind(account).execute(db).await?;
    Ok(r.rows_affected() == 1)
}

/// The account's instances an inbox is to be made (or remade) for from its settings:
/// those without settings of their own.
pub async fn heirs(db: impl PgExecutor<'_>, account: &str) -> Result<Vec<InstanceId>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT i.id FROM instances i WHERE i.account_id = $1 \
           AND NOT EXISTS (SELECT 1 FROM chatwoot_inboxes c WHERE c.instance_id = i.id AND c.from_account IS NULL) \
         ORDER BY i.id",
    )
    .bind(account)
    .fetch_all(db)
    .await
}

/// Of these instances, those whose account has settings and which have no inbox yet,
/// with their account.
pub async fn unmade(db: impl PgExecutor<'_>, ids: &[String]) -> Result<Vec<(InstanceId, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT i.id, i.account_id FROM instances i JOIN chatwoot_accounts a ON a.account_id = i.account_id \
         WHERE i.id = ANY($1) AND NOT EXISTS (SELECT 1 FROM chatwoot_inboxes c WHERE c.instance_id = i.id)",
    )
    .bind(ids)
    .fetch_all(db)
    .await
}

/// Removes the inboxes made from an account's settings for instances no longer in it
/// (of these instances, or all of them), and everything the bridge kept for them: one
/// conditional delete, so an inbox made or taken over meanwhile is never caught.
pub async fn drop_strays(db: &PgPool, ids: Option<&[String]>) -> Result<u64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let strays: Vec<InstanceId> = sqlx::query_scalar(
        "DELETE FROM chatwoot_inboxes c USING instances i \
         WHERE i.id = c.instance_id AND c.from_account IS NOT NULL \
           AND ($1::text[] IS NULL OR c.instance_id = ANY($1)) \
           AND (i.account_id IS DISTINCT FROM c.from_account \
                OR NOT EXISTS (SELECT 1 FROM chatwoot_accounts a WHERE a.account_id = c.from_account)) \
         RETURNING c.instance_id",
    )
    .bind(ids)
    .fetch_all(&mut *tx)
    .await?;
    forget(&mut tx, &strays).await?;
    tx.commit().await?;
    Ok(strays.len() as u64)
}

/// Removes the inbox an instance has from its account's settings (it left the account).
pub async fn drop_inherited(db: &mut sqlx::PgConnection, id: &InstanceId) -> Result<(), sqlx::Error> {
    let gone: Vec<InstanceId> = sqlx::query_scalar(
        "DELETE FROM chatwoot_inboxes WHERE instance_id = $1 AND from_account IS NOT NULL RETURNING instance_id",
    )
    .bind(id)
    .fetch_all(&mut *db)
    .await?;
    forget(db, &gone).await
}
