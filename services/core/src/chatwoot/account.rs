//! An account's Chatwoot settings (`/v1/accounts/{account_id}/chatwoot`): every instance
//! of the account without settings of its own gets an inbox of its own made from them,
//! named after the instance, in the account's Chatwoot. Setting them makes (or remakes)
//! those inboxes at once; an instance that joins the account later gets its inbox with its
//! first event (the bridge asks [`inherit`]); one that leaves loses it; removing the
//! settings removes them all (nothing in Chatwoot is deleted).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::chatwoot as rows;
use shared::ids::{AccountId, InstanceId};
use utoipa::ToSchema;

use super::{check, merge, sealer, store, ChatwootIn, Now, Stored};
use crate::{Core, Error, Result};

fn owner(account: &str) -> String {
    format!("chatwoot-account:{account}")
}

/// An account's Chatwoot settings as shown: the token never, only that it is set.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AccountChatwootOut {
    pub enabled: bool,
    pub url: String,
    pub account_id: i64,
    pub token_set: bool,
    pub sign_messages: bool,
    pub sign_delimiter: String,
    pub reopen_conversation: bool,
    pub conversation_pending: bool,
    pub groups: bool,
    pub ignore_jids: Vec<String>,
    pub import_contacts: bool,
    pub import_messages: bool,
    pub import_days: u32,
    pub allow_private_targets: bool,
    /// The account's instances with an inbox made from these settings.
    pub instances: i64,
    pub updated_at: DateTime<Utc>,
}

/// The settings stored, opened.
struct Opened {
    config: ChatwootIn,
    token: String,
    private_origin: Option<String>,
    updated_at: DateTime<Utc>,
}

async fn opened(core: &Core, account: &AccountId) -> Result<Option<Opened>> {
    let Some(row) = rows::account(&core.db, account.as_str()).await? else { return Ok(None) };
    let token = sealer(&core.config)?
        .open(&owner(account.as_str()), &row.token_sealed)
        .and_then(|p| String::from_utf8(p).ok())
        .ok_or_else(|| Error::internal("a stored Chatwoot token does not open with this key"))?;
    let config: ChatwootIn = serde_json::from_value(row.config).map_err(Error::internal)?;
    Ok(Some(Opened { config, token, private_origin: row.private_origin, updated_at: row.updated_at }))
}

/// `GET /v1/accounts/{account_id}/chatwoot`.
pub async fn get(core: &Core, account: &AccountId) -> Result<AccountChatwootOut> {
    let o = opened(core, account).await?.ok_or(Error::NotFound("chatwoot settings"))?;
    let instances: i64 = sqlx::query_scalar("SELECT count(*) FROM chatwoot_inboxes WHERE from_account = $1")
        .bind(account.as_str())
        .fetch_one(&core.db)
        .await
        .map_err(Error::from)?;
    let c = o.config;
    let allow = o.private_origin.is_some() && o.private_origin == c.origin();
    Ok(AccountChatwootOut {
        enabled: c.enabled,
        url: c.url,
        account_id: c.account_id,
        token_set: true,
        sign_messages: c.sign_messages,
        sign_delimiter: c.sign_delimiter,
        reopen_conversation: c.reopen_conversation,
        conversation_pending: c.conversation_pending,
        groups: c.groups,
        ignore_jids: c.ignore_jids,
        import_contacts: c.import_contacts,
        import_messages: c.import_messages,
        import_days: c.import_days,
        allow_private_targets: allow,
        instances,
        updated_at: o.updated_at,
    })
}

/// `PUT /v1/accounts/{account_id}/chatwoot`: the rules of an instance's `PUT` (without
/// `inbox_id` or `inbox_name`: each instance has its own inbox, named after it), then the
/// inboxes of the account's instances without settings of their own are made or remade.
pub async fn put(core: &Core, account: &AccountId, admin: bool, body: ChatwootIn) -> Result<AccountChatwootOut> {
    if body.inbox_id.is_some() || body.inbox_name.is_some() {
        return Err(Error::invalid("an account's settings name no inbox: each instance gets its own, named after it"));
    }
    let now = opened(core, account).await?;
    let view = now.as_ref().map(|n| Now {
        config: &n.config,
        token: Some(n.token.as_str()),
        private_origin: n.private_origin.as_deref(),
    });
    let k = check(core, admin, body, view).await?;
    let config = serde_json::to_value(&k.c).map_err(Error::internal)?;
    let sealed = sealer(&core.config)?.seal(&owner(account.as_str()), k.token.as_bytes());
    if !rows::put_account(&core.db, account.as_str(), &config, &sealed, k.private_origin.as_deref()).await? {
        return Err(Error::NotFound("account"));
    }
    let heirs = rows::heirs(&core.db, account.as_str()).await?;
    for id in &heirs {
        inherit(core, id, account.as_str()).await?;
    }
    tracing::info!(account_id = %account, instances = heirs.len(), "chatwoot settings set for an account");
    get(core, account).await
}

/// `PATCH /v1/accounts/{account_id}/chatwoot`: a JSON merge patch over the settings.
pub async fn patch(
    core: &Core,
    account: &AccountId,
    admin: bool,
    patch: &serde_json::Value,
) -> Result<AccountChatwootOut> {
    let now = opened(core, account).await?.ok_or(Error::NotFound("chatwoot settings"))?;
    let mut shown = now.config.clone();
    shown.allow_private_targets = now.private_origin.is_some() && now.private_origin == shown.origin();
    let mut v = serde_json::to_value(&shown).map_err(Error::internal)?;
    merge(&mut v, patch);
    let next: ChatwootIn = shared::json::parse_json(&serde_json::to_vec(&v).map_err(Error::internal)?)?;
    put(core, account, admin, next).await
}

/// `DELETE /v1/accounts/{account_id}/chatwoot`: the settings go, and with them the
/// inboxes made from them (instances' own settings stay).
pub async fn delete(core: &Core, account: &AccountId) -> Result<()> {
    if !rows::delete_account(&core.db, account.as_str()).await? {
        return Err(Error::NotFound("chatwoot settings"));
    }
    rows::drop_strays(&core.db, None).await?;
    Ok(())
}

/// Makes (or remakes) instance `id`'s inbox from its account's settings, unless it has
/// settings of its own.
pub async fn inherit(core: &Core, id: &InstanceId, account: &str) -> Result<()> {
    let Some(o) = opened(core, &AccountId::parse(account).map_err(Error::internal)?).await? else {
        return Ok(());
    };
    let now = match rows::get(&core.db, id).await? {
        Some(row) => Some(Stored::open(row, &sealer(&core.config)?)?),
        None => None,
    };
    if now.as_ref().is_some_and(|n| n.from_account.is_none()) {
        return Ok(());
    }
    let mut c = o.config;
    c.allow_private_targets = o.private_origin.is_some();
    let k = super::Checked { c, token: o.token, private_origin: o.private_origin };
    match store(core, id, k, now.as_ref(), Some(account)).await {
        // Gone, or given settings of its own meanwhile: nothing to make.
        Err(Error::InstanceNotFound) => Ok(()),
        other => other,
    }
}
