//! `wa_store`: the WhatsApp client's session store as (instance, kind, key) -> bytes.
//! Reads are plain; every write is fenced on the writer's lease epoch and returns false
//! (writing nothing) once another worker owns the instance.

use sqlx::{PgExecutor, PgPool};

use crate::ids::InstanceId;

/// Fence: the write applies only while `epoch` owns the instance.
const OWNED: &str = "EXISTS (SELECT 1 FROM instances WHERE id = $1 AND owner_epoch = $2)";

pub async fn get(db: impl PgExecutor<'_>, inst: &InstanceId, kind: &str, key: &str) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar("SELECT value FROM wa_store WHERE instance_id = $1 AND kind = $2 AND key = $3")
        .bind(inst)
        .bind(kind)
        .bind(key)
        .fetch_optional(db)
        .await
}

/// Every (key, value) of a kind, in key order.
pub async fn list(db: impl PgExecutor<'_>, inst: &InstanceId, kind: &str) -> Result<Vec<(String, Vec<u8>)>, sqlx::Error> {
    sqlx::query_as("SELECT key, value FROM wa_store WHERE instance_id = $1 AND kind = $2 ORDER BY key")
        .bind(inst)
        .bind(kind)
        .fetch_all(db)
        .await
}

/// Keys of a kind starting with `prefix`, with their values.
pub async fn list_prefix(
    db: impl PgExecutor<'_>,
    inst: &InstanceId,
    kind: &str,
    prefix: &str,
) -> Result<Vec<(String, Vec<u8>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT key, value FROM wa_store WHERE instance_id = $1 AND kind = $2 AND starts_with(key, $3) ORDER BY key",
    )
    .bind(inst)
    .bind(kind)
    .bind(prefix)
    .fetch_all(db)
    .await
}

/// Sets values (insert or overwrite), fenced; all or nothing.
pub async fn put_many(
    db: &PgPool,
    inst: &InstanceId,
    epoch: i64,
    kind: &str,
    entries: &[(String, Vec<u8>)],
) -> Result<bool, sqlx::Error> {
    let keys: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    let values: Vec<&[u8]> = entries.iter().map(|e| e.1.as_slice()).collect();
    let mut tx = db.begin().await?;
    let owned: bool = sqlx::query_scalar(&format!("SELECT {OWNED}")).bind(inst).bind(epoch).fetch_one(&mut *tx).await?;
    if !owned {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO wa_store (instance_id, kind, key, value) SELECT $1, $2, k, v FROM UNNEST($3::text[], $4::bytea[]) AS e(k, v) \
         ON CONFLICT (instance_id, kind, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
    )
    .bind(inst)
    .bind(kind)
    .bind(&keys)
    .bind(&values)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

pub async fn put(db: &PgPool, inst: &InstanceId, epoch: i64, kind: &str, key: &str, value: &[u8]) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(&format!(
        "INSERT INTO wa_store (instance_id, kind, key, value) SELECT $1, $3, $4, $5 WHERE {OWNED} \
         ON CONFLICT (instance_id, kind, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now() \
         WHERE {OWNED}"
    ))
    .bind(inst)
    .bind(epoch)
    .bind(kind)
    .bind(key)
    .bind(value)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Deletes keys (absent ones are fine), fenced. False: not the owner.
pub async fn delete(db: &PgPool, inst: &InstanceId, epoch: i64, kind: &str, keys: &[&str]) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let owned: bool = sqlx::query_scalar(&format!("SELECT {OWNED}")).bind(inst).bind(epoch).fetch_one(&mut *tx).await?;
    if !owned {
        return Ok(false);
    }
    sqlx::query("DELETE FROM wa_store WHERE instance_id = $1 AND kind = $2 AND key = ANY($3)")
        .bind(inst)
        .bind(kind)
        .bind(keys)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}

/// Deletes every key of a kind (or of every kind, with `None`), fenced.
pub async fn clear(db: &PgPool, inst: &InstanceId, epoch: i64, kind: Option<&str>) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let owned: bool = sqlx::query_scalar(&format!("SELECT {OWNED}")).bind(inst).bind(epoch).fetch_one(&mut *tx).await?;
    if !owned {
        return Ok(false);
    }
    sqlx::query("DELETE FROM wa_store WHERE instance_id = $1 AND ($2::text IS NULL OR kind = $2)")
        .bind(inst)
        .bind(kind)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}
