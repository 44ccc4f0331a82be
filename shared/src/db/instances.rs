//! The `instances` table.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgExecutor;

use crate::ids::{AccountId, InstanceId};

/// An instance's connection state (the `state` column, text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum InstanceState {
    /// No session running.
    Disconnected,
    /// Waiting for a QR scan or a pairing code.
    QrPending,
    /// A session is starting.
    Connecting,
    /// Linked and online.
    Connected,
    /// The phone unlinked this device; pair again.
    LoggedOut,
    /// The number is banned; delete the instance.
    Banned,
}

impl InstanceState {
    pub const ALL: [InstanceState; 6] = [
        InstanceState::Disconnected,
        InstanceState::QrPending,
        InstanceState::Connecting,
        InstanceState::Connected,
        InstanceState::LoggedOut,
        InstanceState::Banned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Disconnected => "disconnected",
            InstanceState::QrPending => "qr_pending",
            InstanceState::Connecting => "connecting",
            InstanceState::Connected => "connected",
            InstanceState::LoggedOut => "logged_out",
            InstanceState::Banned => "banned",
        }
    }

    pub fn parse(s: &str) -> Option<InstanceState> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// A row of `instances` (without the token hash).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InstanceRow {
    pub id: InstanceId,
    pub name: String,
    pub state: InstanceState,
    pub tags: Vec<String>,
    pub ip_allowlist: Vec<String>,
    /// The admin set the allow-list: the instance's token may only narrow it.
    pub ip_allowlist_locked: bool,
    pub min_interval_ms: i32,
    pub max_per_minute: i32,
    pub unsafe_pacing: bool,
    /// The admin set the pacing: the instance's token may only slow it.
    pub pacing_locked: bool,
    pub proxy_url: Option<String>,
    pub reject_call: bool,
    pub msg_call: String,
    pub phone: Option<String>,
    pub account_type: Option<String>,
    /// The account's profile (push) name as the session last reported it.
    pub profile_name: Option<String>,
    pub owner_epoch: i64,
    /// Whether a session should run (connect asked, not logged out, banned or deleted).
    pub desired: bool,
    /// Per-instance network driver; `None` means the deployment's.
    pub network: Option<String>,
    /// Why the instance is in its state, when that needs saying.
    pub state_reason: Option<String>,
    /// IANA time zone of the send window.
    pub time_zone: String,
    pub send_window_start: Option<chrono::NaiveTime>,
    pub send_window_end: Option<chrono::NaiveTime>,
    /// The last ban-risk evaluation: score, level and when.
    pub risk_score: Option<f32>,
    pub risk_level: Option<String>,
    pub risk_at: Option<DateTime<Utc>>,
    /// Set while a policy holds the queue, and since when.
    pub queue_paused_reason: Option<String>,
    pub queue_paused_at: Option<DateTime<Utc>>,
    /// The instance's own ban-risk policies (none: the deployment's).
    pub risk_policy: Option<sqlx::types::Json<crate::risk::PolicyOverrides>>,
    /// The admin set `risk_policy`: the instance's token may only make it stricter.
    pub risk_policy_locked: bool,
    /// The account holding the instance, if any.
    pub account_id: Option<AccountId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What an instance token resolves to: enough to authorize a request.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InstanceAuth {
    pub id: InstanceId,
    pub name: String,
    pub ip_allowlist: Vec<String>,
}

/// The settable fields of an instance, as written on create and on patch.
#[derive(Debug, Clone)]
pub struct InstanceFields {
    pub name: String,
    pub tags: Vec<String>,
    pub ip_allowlist: Vec<String>,
    /// The admin set the allow-list: the instance's token may only narrow it.
    pub ip_allowlist_locked: bool,
    pub min_interval_ms: i32,
    pub max_per_minute: i32,
    pub unsafe_pacing: bool,
    /// The admin set the pacing: the instance's token may only slow it.
    pub pacing_locked: bool,
    pub proxy_url: Option<String>,
    pub reject_call: bool,
    pub msg_call: String,
    pub time_zone: String,
    /// Daily send window (local start, local end), both or neither.
    pub send_window: Option<(chrono::NaiveTime, chrono::NaiveTime)>,
    /// `sim` or `whatsapp`; `None` follows the deployment's `network`.
    pub network: Option<String>,
    /// The instance's own ban-risk policies; `None` follows the deployment's.
    pub risk_policy: Option<crate::risk::PolicyOverrides>,
    /// The admin set `risk_policy`: the instance's token may only make it stricter.
    pub risk_policy_locked: bool,
}

impl From<&InstanceRow> for InstanceFields {
    fn from(r: &InstanceRow) -> Self {
        InstanceFields {
            name: r.name.clone(),
            tags: r.tags.clone(),
            ip_allowlist: r.ip_allowlist.clone(),
            ip_allowlist_locked: r.ip_allowlist_locked,
            min_interval_ms: r.min_interval_ms,
            max_per_minute: r.max_per_minute,
            unsafe_pacing: r.unsafe_pacing,
            pacing_locked: r.pacing_locked,
            proxy_url: r.proxy_url.clone(),
            reject_call: r.reject_call,
            msg_call: r.msg_call.clone(),
            time_zone: r.time_zone.clone(),
            send_window: r.send_window_start.zip(r.send_window_end),
            network: r.network.clone(),
            risk_policy: r.risk_policy.as_ref().map(|p| p.0.clone()),
            risk_policy_locked: r.risk_policy_locked,
        }
    }
}

/// A write that broke a uniqueness rule users can hit.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("an instance with this name already exists")]
    NameTaken,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

fn map_write(e: sqlx::Error) -> WriteError {
    if super::is_constraint_violation(&e, "instances_name_key") {
        WriteError::NameTaken
    } else {
        WriteError::Db(e)
    }
}

const COLUMNS: &str = "id, name, state, tags, ip_allowlist, ip_allowlist_locked, min_interval_ms, max_per_minute, \
    unsafe_pacing, pacing_locked, proxy_url, reject_call, msg_call, phone, account_type, profile_name, owner_epoch, desired, network, state_reason, time_zone, send_window_start, send_window_end, \
    risk_score, risk_level, risk_at, queue_paused_reason, queue_paused_at, risk_policy, risk_policy_locked, account_id, created_at, updated_at";

/// The settable columns, bound by [`bind_fields`] as `$2` to `$18` (`$1` is the id).
const FIELD_COLUMNS: &str =
    "name, tags, ip_allowlist, ip_allowlist_locked, min_interval_ms, max_per_minute, unsafe_pacing, pacing_locked, \
    proxy_url, reject_call, msg_call, time_zone, send_window_start, send_window_end, network, risk_policy, \
    risk_policy_locked";

type RowQuery<'q> = sqlx::query::QueryAs<'q, sqlx::Postgres, InstanceRow, sqlx::postgres::PgArguments>;

/// Binds the settable fields in [`FIELD_COLUMNS`] order.
fn bind_fields<'q>(q: RowQuery<'q>, f: &'q InstanceFields) -> RowQuery<'q> {
    q.bind(&f.name)
        .bind(&f.tags)
        .bind(&f.ip_allowlist)
        .bind(f.ip_allowlist_locked)
        .bind(f.min_interval_ms)
        .bind(f.max_per_minute)
        .bind(f.unsafe_pacing)
        .bind(f.pacing_locked)
        .bind(&f.proxy_url)
        .bind(f.reject_call)
        .bind(&f.msg_call)
        .bind(&f.time_zone)
        .bind(f.send_window.map(|w| w.0))
        .bind(f.send_window.map(|w| w.1))
        .bind(&f.network)
        .bind(f.risk_policy.as_ref().map(sqlx::types::Json))
        .bind(f.risk_policy_locked)
}

/// A new instance, inside `account` when one is given (its usage the account's from
/// today), with its token's hash and, when the deployment can seal, the token sealed.
pub async fn insert(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    (token_hash, token_sealed): (&str, Option<&[u8]>),
    f: &InstanceFields,
    account: Option<&AccountId>,
) -> Result<InstanceRow, WriteError> {
    let sql = format!(
        "INSERT INTO instances (id, {FIELD_COLUMNS}, token_hash, account_id, token_sealed, account_since, \
             account_joined_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, \
             CASE WHEN $20::text IS NULL THEN NULL ELSE (now() AT TIME ZONE 'UTC')::date END, \
             CASE WHEN $20::text IS NULL THEN NULL ELSE now() END) \
         RETURNING {COLUMNS}"
    );
    bind_fields(sqlx::query_as::<_, InstanceRow>(&sql).bind(id), f)
        .bind(token_hash)
        .bind(account)
        .bind(token_sealed)
        .fetch_one(db)
        .await
        .map_err(map_write)
}

/// Gives the instance a new token (its hash, and sealed when the deployment can seal):
/// the old one stops working at once on this pod, and on others when told. Whether the
/// instance exists.
pub async fn set_token(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    token_hash: &str,
    sealed: Option<&[u8]>,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query("UPDATE instances SET token_hash = $2, token_sealed = $3, updated_at = now() WHERE id = $1")
        .bind(id)
        .bind(token_hash)
        .bind(sealed)
        .execute(db)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// The sealed tokens of `ids` (those that have one).
pub async fn sealed_tokens(
    db: impl PgExecutor<'_>,
    ids: &[InstanceId],
) -> Result<Vec<(InstanceId, Vec<u8>)>, sqlx::Error> {
    let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
    sqlx::query_as("SELECT id, token_sealed FROM instances WHERE id = ANY($1) AND token_sealed IS NOT NULL")
        .bind(&ids)
        .fetch_all(db)
        .await
}

/// What Evolution's `fetchInstances` counts of each of `ids`: its chats, the people among
/// them, and its messages sent and received (from the daily usage, so a message counts
/// once the relay has counted it).
pub async fn counts(
    db: impl PgExecutor<'_>,
    ids: &[InstanceId],
) -> Result<Vec<(InstanceId, i64, i64, i64)>, sqlx::Error> {
    let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
    sqlx::query_as(
        "SELECT i.id, \
            (SELECT count(*) FROM chats c WHERE c.instance_id = i.id), \
            (SELECT count(*) FROM chats c WHERE c.instance_id = i.id AND split_part(c.jid, '@', 2) = ANY($2)), \
            (SELECT coalesce(sum(u.messages_sent + u.messages_received), 0)::bigint FROM usage_daily u \
                WHERE u.instance_id = i.id) \
         FROM unnest($1::text[]) AS i (id)",
    )
    .bind(&ids)
    // The people: users by number or by hidden id.
    .bind([crate::jid::USER_SERVER, crate::jid::LID_SERVER])
    .fetch_all(db)
    .await
}

/// Whether the instance exists.
/// Records the account's profile name as the network now has it (after a change made
/// through the API; the worker records what its session reports).
pub async fn set_profile_name(db: impl PgExecutor<'_>, id: &InstanceId, name: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE instances SET profile_name = $2 WHERE id = $1").bind(id).bind(name).execute(db).await.map(drop)
}

pub async fn exists(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM instances WHERE id = $1)").bind(id).fetch_one(db).await
}

pub async fn get(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Option<InstanceRow>, sqlx::Error> {
    sqlx::query_as::<_, InstanceRow>(&format!("SELECT {COLUMNS} FROM instances WHERE id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await
}

/// Like [`get`], locking the row for the rest of the transaction.
pub async fn get_for_update(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Option<InstanceRow>, sqlx::Error> {
    sqlx::query_as::<_, InstanceRow>(&format!("SELECT {COLUMNS} FROM instances WHERE id = $1 FOR UPDATE"))
        .bind(id)
        .fetch_optional(db)
        .await
}

pub async fn get_by_name(db: impl PgExecutor<'_>, name: &str) -> Result<Option<InstanceRow>, sqlx::Error> {
    sqlx::query_as::<_, InstanceRow>(&format!("SELECT {COLUMNS} FROM instances WHERE name = $1"))
        .bind(name)
        .fetch_optional(db)
        .await
}

pub async fn auth_by_token_hash(
    db: impl PgExecutor<'_>,
    token_hash: &str,
) -> Result<Option<InstanceAuth>, sqlx::Error> {
    sqlx::query_as::<_, InstanceAuth>("SELECT id, name, ip_allowlist FROM instances WHERE token_hash = $1")
        .bind(token_hash)
        .fetch_optional(db)
        .await
}

/// Filters of the instance list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub tag: Option<String>,
    pub state: Option<InstanceState>,
    /// Only names containing this, in any case.
    pub name: Option<String>,
    /// Only instances last evaluated at this ban-risk level.
    pub risk: Option<String>,
    /// Only instances of this account.
    pub account: Option<AccountId>,
    /// Keyset cursor: only ids after this one.
    pub after: Option<InstanceId>,
    pub limit: i64,
}

/// What [`ListFilter`] matches (`$1` tag, `$2` state, `$3` name, `$4` risk level, `$5`
/// account).
const LIST_WHERE: &str = "($1::text IS NULL OR tags @> ARRAY[$1::text]) \
       AND ($2::text IS NULL OR state = $2) \
       AND ($3::text IS NULL OR strpos(lower(name), lower($3)) > 0) \
       AND ($4::text IS NULL OR risk_level = $4) \
       AND ($5::text IS NULL OR account_id = $5)";

/// Instances in id (creation) order.
pub async fn list(db: impl PgExecutor<'_>, f: &ListFilter) -> Result<Vec<InstanceRow>, sqlx::Error> {
    sqlx::query_as::<_, InstanceRow>(&format!(
        "SELECT {COLUMNS} FROM instances WHERE {LIST_WHERE} AND ($6::text IS NULL OR id > $6) ORDER BY id LIMIT $7"
    ))
    .bind(&f.tag)
    .bind(f.state.map(InstanceState::as_str))
    .bind(&f.name)
    .bind(&f.risk)
    .bind(&f.account)
    .bind(&f.after)
    .bind(f.limit)
    .fetch_all(db)
    .await
}

/// How many instances the filter matches (its cursor and limit aside).
pub async fn count(db: impl PgExecutor<'_>, f: &ListFilter) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(&format!("SELECT count(*) FROM instances WHERE {LIST_WHERE}"))
        .bind(&f.tag)
        .bind(f.state.map(InstanceState::as_str))
        .bind(&f.name)
        .bind(&f.risk)
        .bind(&f.account)
        .fetch_one(db)
        .await
}

/// How many instances are in each state.
pub async fn count_by_state(db: impl PgExecutor<'_>) -> Result<Vec<(InstanceState, i64)>, sqlx::Error> {
    sqlx::query_as("SELECT state, count(*) FROM instances GROUP BY state ORDER BY state").fetch_all(db).await
}

/// The ids of instances whose session should run (`instances_desired_idx`).
pub async fn desired_ids(db: impl PgExecutor<'_>) -> Result<Vec<InstanceId>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM instances WHERE desired ORDER BY id").fetch_all(db).await
}

/// Writes every settable field; returns the new row.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
    f: &InstanceFields,
) -> Result<Option<InstanceRow>, WriteError> {
    let sql = format!(
        "UPDATE instances SET ({FIELD_COLUMNS}, updated_at) = \
         ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, now()) \
         WHERE id = $1 RETURNING {COLUMNS}"
    );
    bind_fields(sqlx::query_as::<_, InstanceRow>(&sql).bind(id), f).fetch_optional(db).await.map_err(map_write)
}

/// Deletes the instance; its token stops working with the commit. The usage it made in
/// its account stays with the account, and its `instance.deleted` event (naming the
/// account) is written with the deletion.
pub async fn delete(db: &sqlx::PgPool, id: &InstanceId) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    // Accounts lock before instances (as registering a webhook and moving an instance
    // take them), so the usage kept below takes no lock against that order.
    sqlx::query("SELECT 1 FROM accounts WHERE id = (SELECT account_id FROM instances WHERE id = $1) FOR UPDATE")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    let held: Option<(String, Option<AccountId>, Option<chrono::NaiveDate>)> =
        sqlx::query_as("SELECT name, account_id, account_since FROM instances WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((name, account, since)) = held else { return Ok(false) };
    if let (Some(account), Some(since)) = (&account, since) {
        let through = Utc::now().date_naive() + chrono::Duration::days(1);
        super::accounts::fold_usage(&mut *tx, id, account.as_str(), since, through).await?;
    }
    super::accounts::record_departure(&mut *tx, id).await?;
    let event =
        crate::events::Event::InstanceDeleted(crate::events::InstanceLifecycleEventData { name, account_id: account });
    super::outbox::insert(&mut *tx, id, &event).await?;
    let gone = sqlx::query("DELETE FROM instances WHERE id = $1").bind(id).execute(&mut *tx).await?.rows_affected();
    tx.commit().await?;
    Ok(gone == 1)
}

/// API side: ask for the session to run. After a logout or a forgotten session this means
/// pairing again. Returns `None` for an unknown instance; a banned one stays as it is.
pub async fn request_run(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Option<InstanceState>, sqlx::Error> {
    let state: Option<String> = sqlx::query_scalar(
        "UPDATE instances SET desired = (state <> 'banned'), \
         state = CASE WHEN state = 'logged_out' THEN 'disconnected' ELSE state END, updated_at = now() \
         WHERE id = $1 RETURNING state",
    )
    .bind(id)
    .fetch_optional(db)
    .await?;
    Ok(state.and_then(|s| InstanceState::parse(&s)))
}

/// The QR code on show, if any: (state, code, expiry).
pub async fn qr(
    db: impl PgExecutor<'_>,
    id: &InstanceId,
) -> Result<Option<(String, bool, Option<String>, Option<DateTime<Utc>>)>, sqlx::Error> {
    sqlx::query_as("SELECT state, desired, qr_code, qr_expires_at FROM instances WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await
}

/// Takes the instance's row for update, so what its caller counts and inserts for the
/// instance (keys, pairing links, webhooks) takes turns with concurrent callers.
pub(crate) async fn lock(tx: &mut sqlx::PgConnection, instance: &InstanceId) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT 1 AS locked FROM instances WHERE id = $1 FOR UPDATE", instance.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map(drop)
}
