//! `wa_store`: the WhatsApp client's session store as (instance, kind, key) -> bytes.
//! Reads are plain; every write is fenced on the writer's lease epoch and reports
//! `Fenced` (writing nothing) once another worker owns the instance.

use sqlx::{PgConnection, PgExecutor, PgPool};

use shared::ids::InstanceId;

/// A write refused because another worker owns the instance now.
#[derive(Debug, thiserror::Error)]
#[error("the instance has a new owner; this worker may not write its session store")]
pub struct Fenced;

#[derive(Debug, thiserror::Error)]
pub enum StoreWriteError {
    #[error(transparent)]
    Fenced(#[from] Fenced),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// One row to write: key, value, optional expiry (unix seconds).
pub type Entry = (String, Vec<u8>, Option<i64>);

/// Locks the instance row for share while `epoch` owns it (the fence of every write).
async fn fence(tx: &mut PgConnection, inst: &InstanceId, epoch: i64) -> Result<(), StoreWriteError> {
    let owned: Option<i32> = sqlx::query_scalar("SELECT 1 FROM instances WHERE id = $1 AND owner_epoch = $2 FOR SHARE")
        .bind(inst)
        .bind(epoch)
        .fetch_optional(&mut *tx)
        .await?;
    owned.map(drop).ok_or(StoreWriteError::Fenced(Fenced))
}

pub async fn get(
    db: impl PgExecutor<'_>,
    inst: &InstanceId,
    kind: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar("SELECT value FROM wa_store WHERE instance_id = $1 AND kind = $2 AND key = $3")
        .bind(inst)
        .bind(kind)
        .bind(key)
        .fetch_optional(db)
        .await
}

/// The values of these keys that exist.
pub async fn get_many(
    db: impl PgExecutor<'_>,
    inst: &InstanceId,
    kind: &str,
    keys: &[String],
) -> Result<Vec<(String, Vec<u8>)>, sqlx::Error> {
    sqlx::query_as("SELECT key, value FROM wa_store WHERE instance_id = $1 AND kind = $2 AND key = ANY($3)")
        .bind(inst)
        .bind(kind)
        .bind(keys)
        .fetch_all(db)
        .await
}

/// Keys of a kind starting with `prefix` ("" for all), with their values, in key order.
pub async fn list(
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

/// Whether any key of the kinds starts with one of the prefixes.
pub async fn any_prefix(
    db: impl PgExecutor<'_>,
    inst: &InstanceId,
    kinds: &[&str],
    prefixes: &[String],
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM wa_store s, UNNEST($3::text[]) AS p(x) \
         WHERE s.instance_id = $1 AND s.kind = ANY($2) AND starts_with(s.key, p.x))",
    )
    .bind(inst)
    .bind(kinds)
    .bind(prefixes)
    .fetch_one(db)
    .await
}

/// The greatest key of a kind.
pub async fn max_key(db: impl PgExecutor<'_>, inst: &InstanceId, kind: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT max(key) FROM wa_store WHERE instance_id = $1 AND kind = $2")
        .bind(inst)
        .bind(kind)
        .fetch_one(db)
        .await
}

/// Sets values (insert or overwrite), fenced, in one transaction.
pub async fn put_many(
    db: &PgPool,
    inst: &InstanceId,
    epoch: i64,
    kind: &str,
    entries: &[Entry],
) -> Result<(), StoreWriteError> {
    let mut tx = db.begin().await?;
    fence(&mut tx, inst, epoch).await?;
    put_in(&mut tx, inst, kind, entries).await?;
    tx.commit().await?;
    Ok(())
}

async fn put_in(tx: &mut PgConnection, inst: &InstanceId, kind: &str, entries: &[Entry]) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    // One upsert may not touch a row twice: the last value of a key wins.
    let mut last: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        last.insert(e.0.as_str(), i);
    }
    let entries: Vec<&Entry> =
        entries.iter().enumerate().filter(|(i, e)| last[e.0.as_str()] == *i).map(|(_, e)| e).collect();
    let keys: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    let values: Vec<&[u8]> = entries.iter().map(|e| e.1.as_slice()).collect();
    let expiry: Vec<Option<i64>> = entries.iter().map(|e| e.2).collect();
    sqlx::query(
        "INSERT INTO wa_store (instance_id, kind, key, value, expires_at) \
         SELECT $1, $2, k, v, x FROM UNNEST($3::text[], $4::bytea[], $5::bigint[]) AS e(k, v, x) \
         ON CONFLICT (instance_id, kind, key) DO UPDATE \
         SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, written_at = now()",
    )
    .bind(inst)
    .bind(kind)
    .bind(&keys)
    .bind(&values)
    .bind(&expiry)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Writes several kinds in one fenced transaction (e.g. a mapping and its index).
pub async fn put_kinds(
    db: &PgPool,
    inst: &InstanceId,
    epoch: i64,
    batches: &[(&str, Vec<Entry>)],
) -> Result<(), StoreWriteError> {
    let mut tx = db.begin().await?;
    fence(&mut tx, inst, epoch).await?;
    for (kind, entries) in batches {
        put_in(&mut tx, inst, kind, entries).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Sets the first byte of existing values (a flag), fenced; never creates a row.
pub async fn set_first_byte(
    db: &PgPool,
    inst: &InstanceId,
    epoch: i64,
    kind: &str,
    keys: &[String],
    byte: u8,
) -> Result<(), StoreWriteError> {
    let mut tx = db.begin().await?;
    fence(&mut tx, inst, epoch).await?;
    sqlx::query(
        "UPDATE wa_store SET value = overlay(value placing $4 from 1 for 1), written_at = now() \
         WHERE instance_id = $1 AND kind = $2 AND key = ANY($3) AND length(value) > 0",
    )
    .bind(inst)
    .bind(kind)
    .bind(keys)
    .bind(vec![byte])
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Deletes keys (absent ones are fine), fenced; returns how many existed.
pub async fn delete(
    db: &PgPool,
    inst: &InstanceId,
    epoch: i64,
    kind: &str,
    keys: &[String],
) -> Result<u64, StoreWriteError> {
    let mut tx = db.begin().await?;
    fence(&mut tx, inst, epoch).await?;
    let r = sqlx::query("DELETE FROM wa_store WHERE instance_id = $1 AND kind = $2 AND key = ANY($3)")
        .bind(inst)
        .bind(kind)
        .bind(keys)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(r.rows_affected())
}

/// Deletes and returns a value in one step, fenced.
pub async fn take(
    db: &PgPool,
    inst: &InstanceId,
    epoch: i64,
    kind: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, StoreWriteError> {
    let mut tx = db.begin().await?;
    fence(&mut tx, inst, epoch).await?;
    let v =
        sqlx::query_scalar("DELETE FROM wa_store WHERE instance_id = $1 AND kind = $2 AND key = $3 RETURNING value")
            .bind(inst)
            .bind(kind)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(v)
}

/// What a sweep deletes.
pub enum Sweep<'a> {
    /// Every key starting with this prefix ("" for the whole kind).
    Prefix(&'a str),
    /// Written before this unix time.
    WrittenBefore(i64),
    /// Expiring at or before this unix time.
    ExpiredAt(i64),
}

/// Deletes the rows of a kind a sweep selects, fenced; returns how many.
pub async fn sweep(
    db: &PgPool,
    inst: &InstanceId,
    epoch: i64,
    kind: &str,
    what: Sweep<'_>,
) -> Result<u64, StoreWriteError> {
    let mut tx = db.begin().await?;
    fence(&mut tx, inst, epoch).await?;
    let q = match what {
        Sweep::Prefix(p) => sqlx::query("DELETE FROM wa_store WHERE instance_id = $1 AND kind = $2 AND starts_with(key, $3)").bind(inst).bind(kind).bind(p.to_string()),
        Sweep::WrittenBefore(t) => sqlx::query("DELETE FROM wa_store WHERE instance_id = $1 AND kind = $2 AND written_at < to_timestamp($3)")
            .bind(inst)
            .bind(kind)
            .bind(t as f64),
        Sweep::ExpiredAt(t) => sqlx::query(
            "DELETE FROM wa_store WHERE instance_id = $1 AND kind = $2 AND expires_at IS NOT NULL AND expires_at <> 0 AND expires_at <= $3",
        )
        .bind(inst)
        .bind(kind)
        .bind(t),
    };
    let r = q.execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(r.rows_affected())
}
