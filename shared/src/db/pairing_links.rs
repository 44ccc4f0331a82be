//! Hosted pairing links (`pairing_links`), looked up by the SHA-256 of the token in
//! their URL. Every query here is compile-checked against the schema (`query!`, with the
//! descriptions in `shared/.sqlx`: scripts/sqlx-prepare).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::ids::{InstanceId, PairingLinkId};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LinkRow {
    pub id: PairingLinkId,
    pub instance_id: InstanceId,
    pub expires_at: DateTime<Utc>,
    pub used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Where a link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    Active,
    Used,
    Revoked,
    Expired,
}

impl LinkRow {
    pub fn state(&self, now: DateTime<Utc>) -> LinkState {
        if self.revoked_at.is_some() {
            LinkState::Revoked
        } else if self.used_at.is_some() {
            LinkState::Used
        } else if self.expires_at <= now {
            LinkState::Expired
        } else {
            LinkState::Active
        }
    }
}

/// A new link for `instance`, unless it already has `max` active ones (then `None`).
pub async fn insert(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    token_hash: &str,
    expires_at: DateTime<Utc>,
    max: i64,
) -> Result<Option<LinkRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    super::instances::lock(&mut tx, instance).await?;
    let id = PairingLinkId::new();
    let row = sqlx::query_as!(
        LinkRow,
        r#"INSERT INTO pairing_links (id, instance_id, token_hash, expires_at)
           SELECT $1, $2, $3, $4 WHERE (SELECT count(*) FROM pairing_links WHERE instance_id = $2
               AND revoked_at IS NULL AND used_at IS NULL AND expires_at > now()) < $5
           RETURNING id AS "id: PairingLinkId", instance_id AS "instance_id: InstanceId", expires_at,
               used_at, revoked_at"#,
        id.as_str(),
        instance.as_str(),
        token_hash,
        expires_at,
        max,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row)
}

pub async fn by_token_hash(db: impl PgExecutor<'_>, token_hash: &str) -> Result<Option<LinkRow>, sqlx::Error> {
    sqlx::query_as!(
        LinkRow,
        r#"SELECT id AS "id: PairingLinkId", instance_id AS "instance_id: InstanceId", expires_at, used_at, revoked_at
           FROM pairing_links WHERE token_hash = $1"#,
        token_hash,
    )
    .fetch_optional(db)
    .await
}

/// Revokes every link of the instance that is not revoked yet; how many.
pub async fn revoke_all(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<u64, sqlx::Error> {
    let r = sqlx::query!(
        "UPDATE pairing_links SET revoked_at = now() WHERE instance_id = $1 AND revoked_at IS NULL",
        instance.as_str(),
    )
    .execute(db)
    .await?;
    Ok(r.rows_affected())
}

/// Marks an active link used (the instance connected through it).
pub async fn mark_used(db: impl PgExecutor<'_>, id: &PairingLinkId) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE pairing_links SET used_at = now() WHERE id = $1 AND used_at IS NULL AND revoked_at IS NULL",
        id.as_str(),
    )
    .execute(db)
    .await
    .map(drop)
}

/// Marks every active link of the instance used: it is connected now.
pub async fn use_all(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<u64, sqlx::Error> {
    let r = sqlx::query!(
        "UPDATE pairing_links SET used_at = now()
         WHERE instance_id = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()",
        instance.as_str(),
    )
    .execute(db)
    .await?;
    Ok(r.rows_affected())
}
