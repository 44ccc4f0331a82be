//! Accounts (`accounts`, `account_tokens`): a provider's customers, each holding
//! instances, with tokens of their own, quotas and a state; and the usage an account
//! keeps of instances that left it (`account_usage_retired`). Every query here is
//! compile-checked against the schema (`query!`, descriptions in `shared/.sqlx`).

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use sqlx::PgExecutor;

use crate::db::usage::Counts;
use crate::ids::{AccountId, AccountTokenId, InstanceId};

/// Whether an account's tokens may write and its instances send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum AccountState {
    /// Working.
    Active,
    /// Its tokens may only read; its instances' queues hold (nothing is lost).
    Suspended,
}

impl AccountState {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountState::Active => "active",
            AccountState::Suspended => "suspended",
        }
    }
}

/// An account's quotas; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Quotas {
    /// Instances the account may hold.
    pub instances: Option<i32>,
    /// Messages its instances may queue per UTC day, all together.
    pub messages_per_day: Option<i32>,
    /// Media bytes its instances may keep stored, all together.
    pub media_bytes: Option<i64>,
    /// Number lookups its instances may make per UTC day (new and cached).
    pub lookups_per_day: Option<i32>,
    /// Webhooks registered on its instances and on the account, all together.
    pub webhooks: Option<i32>,
}

/// A row of `accounts`.
#[derive(Debug, Clone)]
pub struct AccountRow {
    pub id: AccountId,
    pub name: String,
    pub metadata: serde_json::Value,
    pub state: AccountState,
    pub quotas: Quotas,
    pub suspended_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The settable fields of an account.
#[derive(Debug, Clone)]
pub struct AccountFields {
    pub name: String,
    pub metadata: serde_json::Value,
    pub state: AccountState,
    pub quotas: Quotas,
}

impl From<&AccountRow> for AccountFields {
    fn from(r: &AccountRow) -> Self {
        AccountFields { name: r.name.clone(), metadata: r.metadata.clone(), state: r.state, quotas: r.quotas }
    }
}

/// What an account token resolves to.
#[derive(Debug, Clone)]
pub struct AccountAuth {
    pub account_id: AccountId,
    pub name: String,
    pub state: AccountState,
}

/// An account token as listed (never the token).
#[derive(Debug, Clone)]
pub struct TokenRow {
    pub id: AccountTokenId,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The flat columns as read, before the quotas are gathered.
struct Flat {
    id: AccountId,
    name: String,
    metadata: Json<serde_json::Value>,
    state: AccountState,
    quota_instances: Option<i32>,
    quota_messages_per_day: Option<i32>,
    quota_media_bytes: Option<i64>,
    quota_lookups_per_day: Option<i32>,
    quota_webhooks: Option<i32>,
    suspended_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<Flat> for AccountRow {
    fn from(f: Flat) -> Self {
        AccountRow {
            id: f.id,
            name: f.name,
            metadata: f.metadata.0,
            state: f.state,
            quotas: Quotas {
                instances: f.quota_instances,
                messages_per_day: f.quota_messages_per_day,
                media_bytes: f.quota_media_bytes,
                lookups_per_day: f.quota_lookups_per_day,
                webhooks: f.quota_webhooks,
            },
            suspended_at: f.suspended_at,
            created_at: f.created_at,
            updated_at: f.updated_at,
        }
    }
}

/// A new account with its first token, in one transaction.
pub async fn insert(
    db: &sqlx::PgPool,
    id: &AccountId,
    f: &AccountFields,
    token: (&AccountTokenId, &str, &str),
) -> Result<AccountRow, sqlx::Error> {
    let mut tx = db.begin().await?;
    let q = &f.quotas;
    let row = sqlx::query_as!(
        Flat,
        r#"INSERT INTO accounts (id, name, metadata, state, quota_instances, quota_messages_per_day,
               quota_media_bytes, quota_lookups_per_day, quota_webhooks)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
           RETURNING id AS "id: AccountId", name, metadata AS "metadata: Json<serde_json::Value>", state AS "state: AccountState",
               quota_instances, quota_messages_per_day, quota_media_bytes, quota_lookups_per_day, quota_webhooks,
               suspended_at, created_at, updated_at"#,
        id.as_str(),
        f.name,
        Json(&f.metadata) as _,
        f.state.as_str(),
        q.instances,
        q.messages_per_day,
        q.media_bytes,
        q.lookups_per_day,
        q.webhooks,
    )
    .fetch_one(&mut *tx)
    .await?;
    let (token_id, name, hash) = token;
    sqlx::query!(
        "INSERT INTO account_tokens (id, account_id, name, token_hash) VALUES ($1, $2, $3, $4)",
        token_id.as_str(),
        id.as_str(),
        name,
        hash,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row.into())
}

pub async fn get(db: impl PgExecutor<'_>, id: &AccountId) -> Result<Option<AccountRow>, sqlx::Error> {
    let row = sqlx::query_as!(
        Flat,
        r#"SELECT id AS "id: AccountId", name, metadata AS "metadata: Json<serde_json::Value>", state AS "state: AccountState",
               quota_instances, quota_messages_per_day, quota_media_bytes, quota_lookups_per_day, quota_webhooks,
               suspended_at, created_at, updated_at
           FROM accounts WHERE id = $1"#,
        id.as_str(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(AccountRow::from))
}

/// Like [`get`], locking the row for the rest of the transaction: what is counted
/// against the account's quotas (its instances, its webhooks) is added one caller at a
/// time.
pub async fn get_for_update(tx: &mut sqlx::PgConnection, id: &AccountId) -> Result<Option<AccountRow>, sqlx::Error> {
    let row = sqlx::query_as!(
        Flat,
        r#"SELECT id AS "id: AccountId", name, metadata AS "metadata: Json<serde_json::Value>", state AS "state: AccountState",
               quota_instances, quota_messages_per_day, quota_media_bytes, quota_lookups_per_day, quota_webhooks,
               suspended_at, created_at, updated_at
           FROM accounts WHERE id = $1 FOR UPDATE"#,
        id.as_str(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row.map(AccountRow::from))
}

/// Up to `limit` accounts in id (creation) order after `after`, optionally in one state
/// and with names containing `name` in any case.
pub async fn list(
    db: impl PgExecutor<'_>,
    state: Option<AccountState>,
    name: Option<&str>,
    after: Option<&AccountId>,
    limit: i64,
) -> Result<Vec<AccountRow>, sqlx::Error> {
    let rows = sqlx::query_as!(
        Flat,
        r#"SELECT id AS "id: AccountId", name, metadata AS "metadata: Json<serde_json::Value>", state AS "state: AccountState",
               quota_instances, quota_messages_per_day, quota_media_bytes, quota_lookups_per_day, quota_webhooks,
               suspended_at, created_at, updated_at
           FROM accounts
           WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR strpos(lower(name), lower($2)) > 0)
               AND ($3::text IS NULL OR id > $3)
           ORDER BY id LIMIT $4"#,
        state.map(AccountState::as_str),
        name,
        after.map(AccountId::as_str),
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(AccountRow::from).collect())
}

/// Writes every settable field (`suspended_at` follows the state); the new row.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: &AccountId,
    f: &AccountFields,
) -> Result<Option<AccountRow>, sqlx::Error> {
    let q = &f.quotas;
    let row = sqlx::query_as!(
        Flat,
        r#"UPDATE accounts SET name = $2, metadata = $3, state = $4, quota_instances = $5,
               quota_messages_per_day = $6, quota_media_bytes = $7, quota_lookups_per_day = $8, quota_webhooks = $9,
               suspended_at = CASE WHEN $4 = 'suspended' THEN coalesce(suspended_at, now()) END, updated_at = now()
           WHERE id = $1
           RETURNING id AS "id: AccountId", name, metadata AS "metadata: Json<serde_json::Value>", state AS "state: AccountState",
               quota_instances, quota_messages_per_day, quota_media_bytes, quota_lookups_per_day, quota_webhooks,
               suspended_at, created_at, updated_at"#,
        id.as_str(),
        f.name,
        Json(&f.metadata) as _,
        f.state.as_str(),
        q.instances,
        q.messages_per_day,
        q.media_bytes,
        q.lookups_per_day,
        q.webhooks,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(AccountRow::from))
}

/// Deletes an account that holds no instance (its tokens and kept usage go with it);
/// `Ok(None)` when it does not exist, `Ok(Some(false))` while it holds instances.
pub async fn delete_empty(db: &sqlx::PgPool, id: &AccountId) -> Result<Option<bool>, sqlx::Error> {
    let mut tx = db.begin().await?;
    if get_for_update(&mut tx, id).await?.is_none() {
        return Ok(None);
    }
    if instance_count(&mut *tx, id).await? > 0 {
        return Ok(Some(false));
    }
    sqlx::query!("DELETE FROM accounts WHERE id = $1", id.as_str()).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Some(true))
}

/// How many instances the account holds.
pub async fn instance_count(db: impl PgExecutor<'_>, id: &AccountId) -> Result<i64, sqlx::Error> {
    let n = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM instances WHERE account_id = $1"#, id.as_str())
        .fetch_one(db)
        .await?;
    Ok(n)
}

/// The account's instances with when each joined it (its events from then on are the
/// account's).
pub async fn members(
    db: impl PgExecutor<'_>,
    id: &AccountId,
) -> Result<Vec<(InstanceId, Option<DateTime<Utc>>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id AS "id: InstanceId", account_joined_at FROM instances WHERE account_id = $1 ORDER BY id"#,
        id.as_str()
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.account_joined_at)).collect())
}

/// The ids of the account's instances, in id order.
pub async fn instance_ids(db: impl PgExecutor<'_>, id: &AccountId) -> Result<Vec<InstanceId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT id AS "id: InstanceId" FROM instances WHERE account_id = $1 ORDER BY id"#,
        id.as_str()
    )
    .fetch_all(db)
    .await
}

/// The account an instance belongs to: `None` for no such instance, `Some(None)` for
/// one outside every account.
pub async fn of_instance(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
) -> Result<Option<Option<AccountId>>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT account_id AS "account_id: AccountId" FROM instances WHERE id = $1"#,
        instance.as_str()
    )
    .fetch_optional(db)
    .await
}

/// The account holding `instance`, locked for the rest of the transaction, with its
/// webhook quota.
pub async fn locked_of_instance(
    tx: &mut sqlx::PgConnection,
    instance: &InstanceId,
) -> Result<Option<(AccountId, Option<i32>)>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT a.id AS "id: AccountId", a.quota_webhooks FROM accounts a
           WHERE a.id = (SELECT account_id FROM instances WHERE id = $1) FOR UPDATE"#,
        instance.as_str()
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row.map(|r| (r.id, r.quota_webhooks)))
}

/// Moves an instance into `to` (or out of every account), within the caller's
/// transaction: the usage it made in the account it leaves stays with that account
/// through today; the new one counts it from tomorrow (from today when it had none).
/// Whether the instance exists.
pub async fn move_instance(
    tx: &mut sqlx::PgConnection,
    instance: &InstanceId,
    to: Option<&AccountId>,
) -> Result<bool, sqlx::Error> {
    let Some(current) =
        sqlx::query!(r#"SELECT account_id, account_since FROM instances WHERE id = $1 FOR UPDATE"#, instance.as_str())
            .fetch_optional(&mut *tx)
            .await?
    else {
        return Ok(false);
    };
    if current.account_id.as_deref() == to.map(AccountId::as_str) {
        return Ok(true);
    }
    if let (Some(from), Some(since)) = (&current.account_id, current.account_since) {
        let today = Utc::now().date_naive();
        fold_usage(&mut *tx, instance, from, since, today).await?;
    }
    record_departure(&mut *tx, instance).await?;
    sqlx::query!(
        "UPDATE instances SET account_id = $2, \
             account_since = CASE WHEN $2::text IS NULL THEN NULL \
                 WHEN account_id IS NULL THEN (now() AT TIME ZONE 'UTC')::date \
                 ELSE (now() AT TIME ZONE 'UTC')::date + 1 END, \
             account_joined_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END, \
             updated_at = now() \
         WHERE id = $1",
        instance.as_str(),
        to.map(AccountId::as_str),
    )
    .execute(&mut *tx)
    .await?;
    Ok(true)
}

/// Notes that the instance is leaving its account (if it is in one), before it is moved
/// or deleted in the same transaction: the events it made while in it still reach that
/// account's webhooks, however late the dispatcher reads them.
pub async fn record_departure(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO account_departures (instance_id, account_id, name, joined_at, left_at) \
         SELECT id, account_id, name, COALESCE(account_joined_at, created_at), now() \
         FROM instances WHERE id = $1 AND account_id IS NOT NULL",
        instance.as_str()
    )
    .execute(db)
    .await
    .map(drop)
}

/// Keeps an instance's usage of `since..=through` with `account` (before the instance
/// leaves it or is deleted).
pub async fn fold_usage(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    account: &str,
    since: NaiveDate,
    through: NaiveDate,
) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT account_usage_fold($1, $2, $3, $4)", instance.as_str(), account, since, through)
        .execute(db)
        .await
        .map(drop)
}

/// The account's usage per day of `from..=to`: its instances' from the day each
/// joined, and what it kept of instances that left.
pub async fn usage_days(
    db: impl PgExecutor<'_>,
    id: &AccountId,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<crate::db::usage::DayRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT day, {sums} FROM ( \
             SELECT u.day, {ucols} FROM usage_daily u JOIN instances i ON i.id = u.instance_id \
             WHERE i.account_id = $1 AND u.day >= i.account_since AND u.day BETWEEN $2 AND $3 \
             UNION ALL \
             SELECT day, {cols} FROM account_usage_retired WHERE account_id = $1 AND day BETWEEN $2 AND $3 \
         ) x GROUP BY day ORDER BY day",
        sums = crate::db::usage::SUMS.as_str(),
        cols = crate::db::usage::COLUMNS,
        ucols = crate::db::usage::qualified("u"),
    ))
    .bind(id.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(db)
    .await
}

/// One line of the billing export: a day of one instance, or (no instance) what the
/// account kept of instances that left it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ExportRow {
    pub day: NaiveDate,
    pub instance_id: Option<String>,
    pub instance_name: Option<String>,
    #[sqlx(flatten)]
    pub counts: Counts,
}

/// Up to `limit` lines of the account's export over `from..=to`, ordered by day then
/// instance (kept usage first, as the empty instance), after the cursor `after`.
pub async fn usage_export(
    db: impl PgExecutor<'_>,
    id: &AccountId,
    from: NaiveDate,
    to: NaiveDate,
    after: Option<(NaiveDate, String)>,
    limit: i64,
) -> Result<Vec<ExportRow>, sqlx::Error> {
    let (after_day, after_inst) = after.map_or((None, None), |(d, i)| (Some(d), Some(i)));
    sqlx::query_as(&format!(
        "SELECT day, nullif(instance_id, '') AS instance_id, instance_name, {cols} FROM ( \
             SELECT u.day, u.instance_id, i.name AS instance_name, {ucols} FROM usage_daily u \
             JOIN instances i ON i.id = u.instance_id \
             WHERE i.account_id = $1 AND u.day >= i.account_since AND u.day BETWEEN $2 AND $3 \
             UNION ALL \
             SELECT day, '' AS instance_id, NULL AS instance_name, {cols} FROM account_usage_retired \
             WHERE account_id = $1 AND day BETWEEN $2 AND $3 \
         ) x \
         WHERE $4::date IS NULL OR (day, instance_id) > ($4::date, $5::text) \
         ORDER BY day, instance_id LIMIT $6",
        cols = crate::db::usage::COLUMNS,
        ucols = crate::db::usage::qualified("u"),
    ))
    .bind(id.as_str())
    .bind(from)
    .bind(to)
    .bind(after_day)
    .bind(after_inst)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// A new token for the account, unless it has `max` already (then `None`).
pub async fn insert_token(
    db: &sqlx::PgPool,
    account: &AccountId,
    name: &str,
    token_hash: &str,
    max: i64,
) -> Result<Option<TokenRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    if get_for_update(&mut tx, account).await?.is_none() {
        return Ok(None);
    }
    let id = AccountTokenId::new();
    let row = sqlx::query_as!(
        TokenRow,
        r#"INSERT INTO account_tokens (id, account_id, name, token_hash)
           SELECT $1, $2, $3, $4 WHERE (SELECT count(*) FROM account_tokens WHERE account_id = $2) < $5
           RETURNING id AS "id: AccountTokenId", name, created_at, last_used_at"#,
        id.as_str(),
        account.as_str(),
        name,
        token_hash,
        max,
    )
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row)
}

/// The account's tokens in id (creation) order.
pub async fn tokens(db: impl PgExecutor<'_>, account: &AccountId) -> Result<Vec<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        r#"SELECT id AS "id: AccountTokenId", name, created_at, last_used_at
           FROM account_tokens WHERE account_id = $1 ORDER BY id"#,
        account.as_str(),
    )
    .fetch_all(db)
    .await
}

/// Revokes one of the account's tokens; whether it existed.
pub async fn delete_token(
    db: impl PgExecutor<'_>,
    account: &AccountId,
    id: &AccountTokenId,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query!("DELETE FROM account_tokens WHERE id = $1 AND account_id = $2", id.as_str(), account.as_str())
        .execute(db)
        .await?;
    Ok(r.rows_affected() > 0)
}

/// The account behind a token hash, recording the token's use.
pub async fn auth_by_token_hash(db: impl PgExecutor<'_>, token_hash: &str) -> Result<Option<AccountAuth>, sqlx::Error> {
    sqlx::query_as!(
        AccountAuth,
        r#"UPDATE account_tokens t SET last_used_at = now() FROM accounts a
           WHERE t.token_hash = $1 AND a.id = t.account_id
           RETURNING a.id AS "account_id!: AccountId", a.name AS "name!", a.state AS "state!: AccountState""#,
        token_hash,
    )
    .fetch_optional(db)
    .await
}

/// Webhooks registered on the account and on its instances.
pub async fn webhook_count(db: impl PgExecutor<'_>, id: &AccountId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM webhooks w
           WHERE w.account_id = $1 OR w.instance_id IN (SELECT i.id FROM instances i WHERE i.account_id = $1)"#,
        id.as_str()
    )
    .fetch_one(db)
    .await
}

/// Media bytes the account's instances keep stored.
pub async fn media_bytes(db: impl PgExecutor<'_>, id: &AccountId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT coalesce(sum(m.bytes), 0)::bigint AS "n!" FROM media_usage m
           JOIN instances i ON i.id = m.instance_id WHERE i.account_id = $1"#,
        id.as_str()
    )
    .fetch_one(db)
    .await
}
