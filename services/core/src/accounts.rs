//! Accounts: a hosting provider's customers as tenants. The admin creates, edits,
//! suspends and deletes them; each holds instances (at most one account an instance),
//! has tokens of its own (`pl_acct_...`, shown once, stored as SHA-256, several at once
//! so they can be rotated), quotas checked where the work happens (`quota`), and usage
//! rolled up from its instances' (`usage`).
//!
//! A suspended account's tokens may only read (the doors refuse their writes), and its
//! instances' queues hold: the worker reads the account's state with the instance's
//! pacing, and is told at once here. Nothing queued is lost; resuming sends it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::auth::{generate_token, hash_token, ACCOUNT_TOKEN_PREFIX};
use shared::db::accounts::{self, AccountFields, AccountRow, AccountState, Quotas, TokenRow};
use shared::ids::{AccountId, AccountTokenId, InstanceId};
use utoipa::{IntoParams, ToSchema};

use crate::page;
use crate::{Core, Error, Result};

pub mod quota;
pub mod usage;

/// The most tokens one account holds at once.
pub const MAX_TOKENS: i64 = 10;
/// The longest account or token name (characters).
const NAME_LIMIT: usize = 100;
/// `metadata`'s bounds: keys, a key's length and pattern, a value's length.
const METADATA_KEYS: usize = 50;
const METADATA_KEY_PATTERN: &str = "^[A-Za-z0-9_.:-]{1,40}$";
const METADATA_VALUE_LIMIT: usize = 500;

/// The schema of `metadata`: an object of up to 50 string values (up to 500 characters)
/// under keys of 1-40 of `[A-Za-z0-9_.:-]`.
pub struct Metadata;

impl utoipa::PartialSchema for Metadata {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let key = ObjectBuilder::new().schema_type(Type::String).pattern(Some(METADATA_KEY_PATTERN));
        let value = ObjectBuilder::new().schema_type(Type::String).max_length(Some(METADATA_VALUE_LIMIT));
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .max_properties(Some(METADATA_KEYS))
            .property_names(Some(key))
            .additional_properties(Some(value))
            .description(Some("The provider's own data (its customer id, a plan): up to 50 string values of up to 500 characters, under keys of 1-40 of `[A-Za-z0-9_.:-]`."))
            .into()
    }
}

impl ToSchema for Metadata {}

/// An account.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AccountOut {
    pub id: AccountId,
    pub name: String,
    #[schema(value_type = Metadata)]
    pub metadata: serde_json::Value,
    pub quotas: Quotas,
    pub state: AccountState,
    /// Since when it is suspended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended_at: Option<DateTime<Utc>>,
    /// How many instances it holds (on `GET /v1/accounts/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<AccountRow> for AccountOut {
    fn from(r: AccountRow) -> AccountOut {
        AccountOut {
            id: r.id,
            name: r.name,
            metadata: r.metadata,
            quotas: r.quotas,
            state: r.state,
            suspended_at: r.suspended_at,
            instances: None,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Body of `POST /v1/accounts`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountIn {
    #[schema(value_type = crate::schemas::Name)]
    pub name: String,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<serde_json::Value>,
    /// Absent ones: no limit.
    #[serde(default, deserialize_with = "object_only")]
    pub quotas: Option<QuotasPatch>,
}

/// Quotas to set: a number sets one, `null` lifts it, an absent one stays as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotasPatch {
    #[serde(default, deserialize_with = "some")]
    #[schema(value_type = Option<u32>, maximum = 2_147_483_647)]
    pub instances: Option<Option<i64>>,
    #[serde(default, deserialize_with = "some")]
    #[schema(value_type = Option<u32>, maximum = 2_147_483_647)]
    pub messages_per_day: Option<Option<i64>>,
    #[serde(default, deserialize_with = "some")]
    #[schema(value_type = Option<u64>, maximum = 9_007_199_254_740_991_i64)]
    pub media_bytes: Option<Option<i64>>,
    #[serde(default, deserialize_with = "some")]
    #[schema(value_type = Option<u32>, maximum = 2_147_483_647)]
    pub lookups_per_day: Option<Option<i64>>,
    #[serde(default, deserialize_with = "some")]
    #[schema(value_type = Option<u32>, maximum = 2_147_483_647)]
    pub webhooks: Option<Option<i64>>,
}

/// An optional JSON object read as `T`; anything but an object or `null` is refused (a
/// derived struct would also take an array of its fields in order).
fn object_only<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> std::result::Result<Option<T>, D::Error> {
    use serde::de::Error as _;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v @ serde_json::Value::Object(_)) => serde_json::from_value(v).map(Some).map_err(D::Error::custom),
        Some(_) => Err(D::Error::custom("expected an object")),
    }
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn some<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> std::result::Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl QuotasPatch {
    /// `q` with this patch applied; a quota out of range is 400 naming it.
    fn apply(&self, mut q: Quotas) -> Result<Quotas> {
        fn small(name: &str, v: Option<i64>) -> Result<Option<i32>> {
            v.map(|n| {
                i32::try_from(n).ok().filter(|n| *n >= 0).ok_or_else(|| {
                    Error::field(&format!("quotas.{name}"), format!("quotas.{name} must be 0 to 2147483647 or null"))
                })
            })
            .transpose()
        }
        if let Some(v) = self.instances {
            q.instances = small("instances", v)?;
        }
        if let Some(v) = self.messages_per_day {
            q.messages_per_day = small("messages_per_day", v)?;
        }
        if let Some(v) = self.lookups_per_day {
            q.lookups_per_day = small("lookups_per_day", v)?;
        }
        if let Some(v) = self.webhooks {
            q.webhooks = small("webhooks", v)?;
        }
        if let Some(v) = self.media_bytes {
            if v.is_some_and(|n| !(0..=9_007_199_254_740_991).contains(&n)) {
                return Err(Error::field("quotas.media_bytes", "quotas.media_bytes must be 0 to 2^53-1 or null"));
            }
            q.media_bytes = v;
        }
        Ok(q)
    }
}

/// Answer of `POST /v1/accounts`: the only time its first token is shown.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AccountCreatedOut {
    pub account: AccountOut,
    /// `pl_acct_...`: hand it to the customer; it is never shown again.
    pub token: String,
}

/// Body of `PATCH /v1/accounts/{id}`: absent fields stay as they are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AccountPatch {
    #[schema(value_type = Option<crate::schemas::Name>)]
    pub name: Option<String>,
    /// Replaces the whole object.
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<serde_json::Value>,
    /// Only the quotas named change.
    #[serde(default, deserialize_with = "object_only")]
    pub quotas: Option<QuotasPatch>,
    /// `suspended` stops its instances' sends (queued messages wait) and its tokens'
    /// writes; `active` resumes both.
    pub state: Option<AccountState>,
}

/// Query of `GET /v1/accounts`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AccountListQuery {
    /// Only accounts in this state.
    pub state: Option<AccountState>,
    /// Only accounts whose name contains this, in any case.
    #[param(min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// Page size, 1-200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

/// A page of accounts, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AccountListOut {
    pub accounts: Vec<AccountOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Query of `DELETE /v1/accounts/{id}`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// `true` deletes the account's instances too; without it an account that holds
    /// any is refused (409 `conflict`).
    #[serde(default)]
    pub cascade: bool,
}

/// Body of `POST /v1/accounts/{id}/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenIn {
    /// What the token is for.
    #[schema(value_type = crate::schemas::Name)]
    pub name: String,
}

/// An account token as listed: never the token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenOut {
    pub id: AccountTokenId,
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// When it was last looked up (at most once per 5 s per API pod).
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<TokenRow> for TokenOut {
    fn from(r: TokenRow) -> TokenOut {
        TokenOut { id: r.id, name: r.name, created_at: r.created_at, last_used_at: r.last_used_at }
    }
}

/// A new account token, shown only now.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenCreatedOut {
    #[serde(rename = "token_info")]
    pub info: TokenOut,
    /// `pl_acct_...`.
    pub token: String,
}

/// An account's tokens, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenListOut {
    pub tokens: Vec<TokenOut>,
}

/// Body of `PUT /v1/instances/{id}/account` (admin).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveIn {
    /// The account to hold the instance; `null` takes it out of every account. Required.
    #[serde(deserialize_with = "some")]
    #[schema(value_type = Option<AccountId>, required = true)]
    pub account_id: Option<Option<AccountId>>,
}

/// A name: 1-100 characters, not only whitespace, no control character; stored trimmed.
fn name(raw: &str, field: &str) -> Result<String> {
    let name = crate::text::trim_ecma(raw).to_string();
    if name.is_empty() || raw.chars().count() > NAME_LIMIT || raw.chars().any(char::is_control) {
        return Err(Error::field(field, format!("{field} must be 1-{NAME_LIMIT} characters, none of them control")));
    }
    Ok(name)
}

/// Metadata as [`Metadata`] describes it; 400 naming `metadata` otherwise.
fn metadata(v: serde_json::Value) -> Result<serde_json::Value> {
    let bad = |m: &str| Error::field("metadata", m.to_string());
    let Some(map) = v.as_object() else { return Err(bad("metadata must be a JSON object")) };
    if map.len() > METADATA_KEYS {
        return Err(bad("metadata holds at most 50 keys"));
    }
    let key_ok =
        |k: &str| (1..=40).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
    for (k, val) in map {
        if !key_ok(k) {
            return Err(bad("metadata keys must be 1-40 of A-Z, a-z, 0-9, `_`, `.`, `:` and `-`"));
        }
        match val.as_str() {
            Some(s) if s.chars().count() <= METADATA_VALUE_LIMIT && !s.contains('\0') => {}
            _ => return Err(bad("metadata values must be strings of at most 500 characters, without NUL")),
        }
    }
    Ok(v)
}

/// Creates an account with its first token (shown only in the answer).
pub async fn create(core: &Core, b: AccountIn) -> Result<AccountCreatedOut> {
    let fields = AccountFields {
        name: name(&b.name, "name")?,
        metadata: metadata(b.metadata.unwrap_or_else(|| serde_json::json!({})))?,
        state: AccountState::Active,
        quotas: b.quotas.unwrap_or_default().apply(Quotas::default())?,
    };
    let token = generate_token(ACCOUNT_TOKEN_PREFIX);
    let id = AccountId::new();
    let row = accounts::insert(&core.db, &id, &fields, (&AccountTokenId::new(), "first", &hash_token(&token))).await?;
    tracing::info!(account_id = %row.id, "account created");
    Ok(AccountCreatedOut { account: row.into(), token })
}

/// A page of accounts, oldest first.
pub async fn list(core: &Core, q: &AccountListQuery) -> Result<AccountListOut> {
    let limit = page::limit(q.limit, 50, 200)?;
    let after = match q.cursor.as_deref() {
        Some(c) => {
            let f = page::decode(c, &["acct"], 2)?;
            Some(AccountId::parse(&f[1]).map_err(|_| Error::invalid("invalid cursor"))?)
        }
        None => None,
    };
    if q.name.as_deref().is_some_and(|n| n.is_empty() || n.chars().count() > NAME_LIMIT) {
        return Err(Error::field("name", "name must be 1-100 characters"));
    }
    let rows = accounts::list(&core.db, q.state, q.name.as_deref(), after.as_ref(), i64::from(limit) + 1).await?;
    let (rows, next_cursor) = page::page(rows, limit, |r| page::encode(&["acct", r.id.as_str()]));
    Ok(AccountListOut { accounts: rows.into_iter().map(AccountOut::from).collect(), next_cursor })
}

/// The account, with how many instances it holds.
pub async fn get(core: &Core, id: &AccountId) -> Result<AccountOut> {
    let row = accounts::get(&core.db, id).await?.ok_or(Error::NotFound("account"))?;
    let n = accounts::instance_count(&core.db, id).await?;
    Ok(AccountOut { instances: Some(n), ..row.into() })
}

/// Edits the account (the admin's). A change of state reaches its tokens at once on
/// this pod and within 5 s on the others, and its instances' workers at once.
pub async fn patch(core: &Core, id: &AccountId, p: AccountPatch) -> Result<AccountOut> {
    let mut tx = core.db.begin().await?;
    let current = accounts::get_for_update(&mut tx, id).await?.ok_or(Error::NotFound("account"))?;
    let mut f = AccountFields::from(&current);
    if let Some(v) = &p.name {
        f.name = name(v, "name")?;
    }
    if let Some(v) = p.metadata {
        f.metadata = metadata(v)?;
    }
    if let Some(q) = &p.quotas {
        f.quotas = q.apply(f.quotas)?;
    }
    if let Some(s) = p.state {
        f.state = s;
    }
    let row = accounts::update(&mut *tx, id, &f).await?.ok_or(Error::NotFound("account"))?;
    tx.commit().await?;
    if row.state != current.state || row.quotas != current.quotas {
        crate::auth::invalidate_account(core, id).await;
    }
    if row.state != current.state {
        tracing::info!(account_id = %id, state = row.state.as_str(), "account state changed");
        for instance in accounts::instance_ids(&core.db, id).await? {
            crate::instances::rules_changed(core, &instance).await;
        }
    }
    get(core, id).await
}

/// Deletes the account. One that holds instances is refused unless `cascade`, which
/// deletes them first (each as `DELETE /v1/instances/{id}` would).
pub async fn delete(core: &Core, id: &AccountId, cascade: bool) -> Result<()> {
    if cascade {
        for instance in accounts::instance_ids(&core.db, id).await? {
            match crate::instances::delete_one(core, &instance).await {
                Ok(()) | Err(Error::InstanceNotFound) => {}
                Err(e) => return Err(e),
            }
        }
    }
    match accounts::delete_empty(&core.db, id).await? {
        None => Err(Error::NotFound("account")),
        Some(false) => Err(Error::refused(
            shared::ErrorCode::Conflict,
            "the account still holds instances: delete or move them, or ask with ?cascade=true",
        )),
        Some(true) => {
            crate::auth::invalidate_account(core, id).await;
            tracing::info!(account_id = %id, "account deleted");
            Ok(())
        }
    }
}

/// A new token of the account (at most 10 at once), shown only in the answer.
pub async fn create_token(core: &Core, id: &AccountId, b: TokenIn) -> Result<TokenCreatedOut> {
    let name = name(&b.name, "name")?;
    let token = generate_token(ACCOUNT_TOKEN_PREFIX);
    let row = accounts::insert_token(&core.db, id, &name, &hash_token(&token), MAX_TOKENS).await?;
    match row {
        Some(row) => Ok(TokenCreatedOut { info: row.into(), token }),
        None if accounts::get(&core.db, id).await?.is_none() => Err(Error::NotFound("account")),
        None => Err(Error::invalid(format!("an account has at most {MAX_TOKENS} tokens: revoke one first"))),
    }
}

/// The account's tokens, without the tokens themselves.
pub async fn tokens(core: &Core, id: &AccountId) -> Result<TokenListOut> {
    if accounts::get(&core.db, id).await?.is_none() {
        return Err(Error::NotFound("account"));
    }
    Ok(TokenListOut { tokens: accounts::tokens(&core.db, id).await?.into_iter().map(TokenOut::from).collect() })
}

/// Revokes one of the account's tokens: refused at once here, within 5 s elsewhere.
pub async fn revoke_token(core: &Core, id: &AccountId, token: &AccountTokenId) -> Result<()> {
    if !accounts::delete_token(&core.db, id, token).await? {
        return Err(Error::NotFound("account token"));
    }
    crate::auth::invalidate_account(core, id).await;
    Ok(())
}

/// Moves an instance into an account or out of every account (the admin's), within
/// the target's instance quota. The instance's tokens and sessions are untouched.
pub async fn move_instance(core: &Core, instance: &InstanceId, to: Option<&AccountId>) -> Result<()> {
    let mut tx = core.db.begin().await?;
    // Both accounts lock first, in id order, then the instance (the order every writer
    // takes), so two moves or a move and a registration never deadlock.
    let here = accounts::of_instance(&mut *tx, instance).await?.ok_or(Error::InstanceNotFound)?;
    let mut ids: Vec<&AccountId> = here.iter().chain(to).collect();
    ids.sort();
    ids.dedup();
    let mut target = None;
    for a in ids {
        let row = accounts::get_for_update(&mut tx, a).await?;
        if Some(a) == to {
            target = Some(row.ok_or(Error::NotFound("account"))?);
        }
    }
    if let Some(target) = target.filter(|_| here.as_ref() != to) {
        quota::room_for_instance(&mut tx, &target).await?;
    }
    if !accounts::move_instance(&mut tx, instance, to).await? {
        return Err(Error::InstanceNotFound);
    }
    if here.as_ref() != to {
        // A Chatwoot inbox made from the old account's settings goes with the move (the
        // new account's, if any, makes one with the instance's next event).
        shared::db::chatwoot::drop_inherited(&mut tx, instance).await?;
    }
    tx.commit().await?;
    crate::auth::invalidate(core, instance).await;
    crate::instances::rules_changed(core, instance).await;
    Ok(())
}
