//! Who a token is: the admin, an instance's own token or one of its restricted keys
//! ([`Principal`], resolved by [`authenticate`]), and a short-lived cache of instance
//! tokens and API keys (by their SHA-256, never the token), so a busy instance's
//! requests skip the token lookup in Postgres.
//!
//! An entry lives `TTL` at most. A change that affects what a token may do (deleting the
//! instance, renaming it, editing its IP allow-list, revoking one of its keys) drops the
//! instance's entries on the pod that made it at once, and on every other API pod as soon as they hear of it on
//! NATS; were that notice lost (NATS is not the source of truth), the entry expires
//! within `TTL` anyway. Each change is also announced in the process (`Core::auth_changes`),
//! so open event streams check their access again at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::net::IpAddr;

use futures::StreamExt;
use shared::auth::{self, TokenKind};
use shared::db::accounts::{self, AccountAuth, AccountState};
use shared::db::api_keys::{self, KeyAuth, KeyScope};
use shared::db::instances::{self, InstanceAuth};
use shared::ids::{AccountId, InstanceId, KeyId};

use crate::{Caller, Core, Error, Result};

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The operator's admin token: reaches everything.
    Admin,
    /// An instance token: reaches only its own instance.
    Instance { id: InstanceId, name: String },
    /// A restricted API key of an instance: its instance's routes of its scope
    /// (`api::access`).
    Key { id: InstanceId, name: String, key_id: KeyId, scope: KeyScope },
    /// An account token: the account itself (read), creating instances in it, and every
    /// instance route of its instances, as their owner. A suspended account's token
    /// may only read.
    Account { id: AccountId, name: String, suspended: bool },
}

impl Principal {
    /// The caller as the core's operations see it.
    pub fn caller(&self) -> Caller {
        match self {
            Principal::Admin => Caller::Admin,
            Principal::Instance { .. } | Principal::Account { .. } => Caller::Owner,
            Principal::Key { .. } => Caller::Key,
        }
    }

    pub fn is_admin(&self) -> bool {
        matches!(self, Principal::Admin)
    }

    /// 403 unless the caller is the admin.
    pub fn require_admin(&self) -> Result<()> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(Error::Forbidden("this operation needs the admin token".into()))
        }
    }

    /// Checks access to the instance named in the path and parses its id. An instance
    /// token naming any other instance gets 403 (whether or not that instance exists),
    /// and so does an account token naming one outside its account; the admin gets 404
    /// for an id that cannot exist.
    pub async fn instance(&self, core: &Core, raw_id: &str) -> Result<InstanceId> {
        match self {
            Principal::Admin => InstanceId::parse(raw_id).map_err(|_| Error::InstanceNotFound),
            Principal::Instance { id, .. } | Principal::Key { id, .. } if id.as_str() == raw_id => Ok(id.clone()),
            Principal::Instance { .. } | Principal::Key { .. } => {
                Err(Error::Forbidden("this token belongs to another instance".into()))
            }
            Principal::Account { id: account, .. } => {
                let other = || Error::Forbidden("this instance is not in the token's account".into());
                let id = InstanceId::parse(raw_id).map_err(|_| other())?;
                match accounts::of_instance(&core.db, &id).await? {
                    Some(Some(a)) if &a == account => Ok(id),
                    _ => Err(other()),
                }
            }
        }
    }

    /// Whether the token reaches the instance `id`, held by `account`.
    pub fn reaches(&self, id: &InstanceId, account: Option<&AccountId>) -> bool {
        match self {
            Principal::Admin => true,
            Principal::Instance { id: own, .. } | Principal::Key { id: own, .. } => own == id,
            Principal::Account { id: own, .. } => account == Some(own),
        }
    }

    /// The instance a token belongs to (none for the admin and account tokens).
    pub fn own_instance(&self) -> Option<&InstanceId> {
        match self {
            Principal::Admin | Principal::Account { .. } => None,
            Principal::Instance { id, .. } | Principal::Key { id, .. } => Some(id),
        }
    }

    /// The account of an account token.
    pub fn account(&self) -> Option<&AccountId> {
        match self {
            Principal::Account { id, .. } => Some(id),
            _ => None,
        }
    }

    /// Checks access to the account named in the path: the admin reaches every one (404
    /// for an id that cannot exist), an account token only its own (403 otherwise);
    /// other tokens none.
    pub fn account_in_path(&self, raw_id: &str) -> Result<AccountId> {
        match self {
            Principal::Admin => AccountId::parse(raw_id).map_err(|_| Error::NotFound("account")),
            Principal::Account { id, .. } if id.as_str() == raw_id => Ok(id.clone()),
            Principal::Account { .. } => Err(Error::Forbidden("this token belongs to another account".into())),
            _ => Err(Error::Forbidden("this operation needs the admin token or an account token".into())),
        }
    }
}

/// Resolves a token to a principal, for a client at the address `ip` gives (asked only
/// when the token has an allow-list): 401 `unauthorized` for no such token (or an
/// expired key), 403 from an address its allow-lists refuse.
pub async fn authenticate(core: &Core, token: &str, ip: impl FnOnce() -> Option<IpAddr>) -> Result<Principal> {
    let unauthorized = || Error::from(shared::ApiError::unauthorized());
    let cached = match TokenKind::of(token) {
        Some(TokenKind::Admin)
            if core.config.admin_token.as_deref().is_some_and(|a| auth::admin_token_matches(token, a)) =>
        {
            return Ok(Principal::Admin)
        }
        Some(kind @ (TokenKind::Instance | TokenKind::ApiKey | TokenKind::Account)) => {
            let hash = auth::hash_token(token);
            match core.tokens.get(&hash) {
                Some(found) => found,
                None => {
                    let found = match kind {
                        TokenKind::Instance => {
                            instances::auth_by_token_hash(&core.db, &hash).await?.map(Cached::Instance)
                        }
                        TokenKind::ApiKey => api_keys::auth_by_token_hash(&core.db, &hash).await?.map(Cached::Key),
                        _ => accounts::auth_by_token_hash(&core.db, &hash).await?.map(Cached::Account),
                    };
                    let found = found.ok_or_else(unauthorized)?;
                    core.tokens.put(hash, found.clone());
                    found
                }
            }
        }
        _ => return Err(unauthorized()),
    };
    let outside = || Error::Forbidden("this token may not be used from this address".into());
    match cached {
        Cached::Instance(inst) => {
            if !inst.ip_allowlist.is_empty() && !crate::ip::allowed_by(ip(), &inst.ip_allowlist) {
                return Err(outside());
            }
            Ok(Principal::Instance { id: inst.id, name: inst.name })
        }
        Cached::Key(k) => {
            // A cached key may have expired since it was looked up.
            if k.expires_at.is_some_and(|at| at <= chrono::Utc::now()) {
                return Err(unauthorized());
            }
            if !k.instance_allowlist.is_empty() || !k.ip_allowlist.is_empty() {
                let ip = ip();
                if !crate::ip::allowed_by(ip, &k.instance_allowlist) || !crate::ip::allowed_by(ip, &k.ip_allowlist) {
                    return Err(outside());
                }
            }
            Ok(Principal::Key { id: k.instance_id, name: k.instance_name, key_id: k.key_id, scope: k.scope })
        }
        Cached::Account(a) => {
            Ok(Principal::Account { id: a.account_id, name: a.name, suspended: a.state == AccountState::Suspended })
        }
    }
}

/// What a token hash was found to be.
#[derive(Debug, Clone)]
pub enum Cached {
    Instance(InstanceAuth),
    Key(KeyAuth),
    Account(AccountAuth),
}

impl Cached {
    fn instance(&self) -> Option<&InstanceId> {
        match self {
            Cached::Instance(a) => Some(&a.id),
            Cached::Key(k) => Some(&k.instance_id),
            Cached::Account(_) => None,
        }
    }

    fn account(&self) -> Option<&AccountId> {
        match self {
            Cached::Account(a) => Some(&a.account_id),
            _ => None,
        }
    }
}

/// The longest a cached token stays valid without a fresh look.
pub const TTL: Duration = Duration::from_secs(5);
/// Most tokens kept (the oldest half goes when full).
const CAPACITY: usize = 100_000;

#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<String, (Cached, Instant)>>,
}

impl TokenCache {
    /// The cached answer for a token hash, while fresh.
    pub fn get(&self, hash: &str) -> Option<Cached> {
        let map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.get(hash).filter(|(_, at)| at.elapsed() < TTL).map(|(a, _)| a.clone())
    }

    pub fn put(&self, hash: String, auth: Cached) {
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= CAPACITY {
            map.retain(|_, (_, at)| at.elapsed() < TTL / 2);
        }
        map.insert(hash, (auth, Instant::now()));
    }

    /// Drops every entry of an instance.
    pub fn forget(&self, instance: &InstanceId) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, (a, _)| a.instance() != Some(instance));
    }

    /// Drops every token of an account.
    pub fn forget_account(&self, account: &AccountId) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, (a, _)| a.account() != Some(account));
    }
}

/// Drops an instance's entries here and tells the other API pods to.
pub async fn invalidate(core: &crate::Core, instance: &InstanceId) {
    core.tokens.forget(instance);
    core.limits.forget_instance(instance);
    let _ = core.auth_changes.send(instance.clone());
    if let Err(e) = core.nats.publish(core.subjects.auth_changed(), instance.as_str().to_string().into()).await {
        tracing::warn!(error = %e, "telling other pods of a token change failed; their entries expire within the TTL");
    }
}

/// Drops an account's tokens here and tells the other API pods to (its state, quotas or
/// tokens changed, or it was deleted); open account event streams check theirs again.
pub async fn invalidate_account(core: &crate::Core, account: &AccountId) {
    core.tokens.forget_account(account);
    core.limits.forget_account(account);
    let _ = core.account_changes.send(account.clone());
    if let Err(e) = core.nats.publish(core.subjects.auth_changed(), account.as_str().to_string().into()).await {
        tracing::warn!(error = %e, "telling other pods of an account change failed; their entries expire within the TTL");
    }
}

/// Listens for other pods' changes until the connection closes.
pub async fn listen(
    nats: async_nats::Client,
    subject: String,
    cache: std::sync::Arc<TokenCache>,
    limits: std::sync::Arc<crate::accounts::quota::LimitsCache>,
    changes: tokio::sync::broadcast::Sender<InstanceId>,
    account_changes: tokio::sync::broadcast::Sender<AccountId>,
) {
    let mut sub = match nats.subscribe(subject).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "subscribing to token changes failed; cached tokens expire within the TTL");
            return;
        }
    };
    while let Some(msg) = sub.next().await {
        let Ok(text) = std::str::from_utf8(&msg.payload) else { continue };
        if let Ok(id) = InstanceId::parse(text) {
            cache.forget(&id);
            limits.forget_instance(&id);
            let _ = changes.send(id);
        } else if let Ok(id) = AccountId::parse(text) {
            cache.forget_account(&id);
            limits.forget_account(&id);
            let _ = account_changes.send(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(id: &InstanceId) -> Cached {
        Cached::Instance(InstanceAuth { id: id.clone(), name: "n".into(), ip_allowlist: vec![] })
    }

    fn key(id: &InstanceId) -> Cached {
        Cached::Key(KeyAuth {
            key_id: shared::ids::KeyId::new(),
            instance_id: id.clone(),
            instance_name: "n".into(),
            scope: shared::db::api_keys::KeyScope::ReadOnly,
            expires_at: None,
            ip_allowlist: vec![],
            instance_allowlist: vec![],
        })
    }

    #[test]
    fn entries_are_found_forgotten_per_instance_and_expire() {
        let c = TokenCache::default();
        let (a, b) = (InstanceId::new(), InstanceId::new());
        c.put("ha".into(), auth(&a));
        c.put("ka".into(), key(&a));
        c.put("hb".into(), auth(&b));
        assert_eq!(c.get("ha").unwrap().instance(), Some(&a));
        c.forget(&a);
        assert!(c.get("ha").is_none());
        assert!(c.get("ka").is_none(), "an instance's keys go with it");
        assert!(c.get("hb").is_some());
        c.entries.lock().unwrap().get_mut("hb").unwrap().1 = Instant::now() - TTL;
        assert!(c.get("hb").is_none(), "expired");
    }
}
