//! How long media is kept: received (inbound) and sent (outbound) media each for their
//! own number of days: an instance's override, else its account's, else the
//! deployment's. The collector expires what is past its time, oldest first, in batches.

use sqlx::{PgExecutor, PgPool};

use crate::db::webhooks::Owner;

/// Days each way; `None`: inherited (from the account, then the deployment).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Days {
    pub inbound: Option<i32>,
    pub outbound: Option<i32>,
}

/// The fewest days an inbound medium may be kept (an override's floor).
pub const MIN_INBOUND_DAYS: i32 = 1;
/// The fewest days an outbound medium may be kept: a queued message lives up to 7 days,
/// and its media must outlive it.
pub const MIN_OUTBOUND_DAYS: i32 = 8;
/// The most days an override may say.
pub const MAX_DAYS: i32 = 3650;

fn table(owner: &Owner) -> &'static str {
    match owner {
        Owner::Instance(_) => "instances",
        Owner::Account(_) => "accounts",
    }
}

/// An instance's or an account's own overrides (`None`: no such owner).
pub async fn get(db: impl PgExecutor<'_>, owner: &Owner) -> Result<Option<Days>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT media_retention_inbound_days AS inbound, media_retention_outbound_days AS outbound \
         FROM {} WHERE id = $1",
        table(owner)
    ))
    .bind(owner.as_str())
    .fetch_optional(db)
    .await
}

/// Sets an owner's overrides (within the bounds above, checked by the caller); whether
/// it exists.
pub async fn set(db: impl PgExecutor<'_>, owner: &Owner, days: Days) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(&format!(
        "UPDATE {} SET media_retention_inbound_days = $2, media_retention_outbound_days = $3 WHERE id = $1",
        table(owner)
    ))
    .bind(owner.as_str())
    .bind(days.inbound)
    .bind(days.outbound)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// What an account's instances inherit from it (none for an instance outside accounts).
pub async fn of_account_of(db: impl PgExecutor<'_>, instance: &str) -> Result<Days, sqlx::Error> {
    let days: Option<Days> = sqlx::query_as(
        "SELECT a.media_retention_inbound_days AS inbound, a.media_retention_outbound_days AS outbound \
         FROM instances i JOIN accounts a ON a.id = i.account_id WHERE i.id = $1",
    )
    .bind(instance)
    .fetch_optional(db)
    .await?;
    Ok(days.unwrap_or_default())
}

/// Expires up to `limit` media past their retention (`defaults` the deployment's days
/// each way), oldest first: the rows stay, marked expired (410 `media_unavailable`),
/// their bytes go (chunks at once, objects queued by trigger), their instances' usage
/// falls. How many were expired.
pub async fn expire_due(db: &PgPool, defaults: (i32, i32), limit: i64) -> Result<u64, sqlx::Error> {
    let (inbound, outbound) = defaults;
    let mut tx = db.begin().await?;
    // No medium is kept less than the fewest days anyone says: only rows older than that
    // are looked at (the retention index, by creation).
    let fewest: i32 = sqlx::query_scalar(
        "SELECT LEAST($1, $2, \
             (SELECT min(LEAST(media_retention_inbound_days, media_retention_outbound_days)) FROM instances), \
             (SELECT min(LEAST(media_retention_inbound_days, media_retention_outbound_days)) FROM accounts))",
    )
    .bind(inbound)
    .bind(outbound)
    .fetch_one(&mut *tx)
    .await?;
    let ids: Vec<String> = sqlx::query_scalar(
        "UPDATE media SET expired = true, size = 0, remote = NULL, fetch_after = NULL, object_key = NULL \
         WHERE id IN ( \
             SELECT m.id FROM media m \
             JOIN instances i ON i.id = m.instance_id \
             LEFT JOIN accounts a ON a.id = i.account_id \
             WHERE NOT m.expired AND m.created_at < now() - make_interval(days => $3) \
               AND m.created_at < now() - make_interval(days => CASE \
                   WHEN m.inbound THEN COALESCE(i.media_retention_inbound_days, a.media_retention_inbound_days, $1) \
                   WHEN NOT m.inbound THEN COALESCE(i.media_retention_outbound_days, a.media_retention_outbound_days, $2) \
                   ELSE GREATEST(COALESCE(i.media_retention_inbound_days, a.media_retention_inbound_days, $1), \
                                 COALESCE(i.media_retention_outbound_days, a.media_retention_outbound_days, $2)) END) \
             ORDER BY m.created_at LIMIT $4 FOR UPDATE OF m SKIP LOCKED) \
         RETURNING id",
    )
    .bind(inbound)
    .bind(outbound)
    .bind(fewest)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM media_chunks WHERE media_id = ANY($1)").bind(&ids).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(ids.len() as u64)
}
