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
use shared::db::api_keys::{self, KeyAuth, KeyScope};
use shared::db::instances::{self, InstanceAuth};
use shared::ids::{InstanceId, KeyId};

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
}

impl Principal {
    /// The caller as the core's operations see it.
    pub fn caller(&self) -> Caller {
        match self {
            Principal::Admin => Caller::Admin,
            Principal::Instance { .. } => Caller::Owner,
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
    /// token naming any other instance gets 403 (whether or not that instance exists);
    /// the admin gets 404 for an id that cannot exist.
    pub fn instance(&self, raw_id: &str) -> Result<InstanceId> {
        match self {
            Principal::Admin => InstanceId::parse(raw_id).map_err(|_| Error::InstanceNotFound),
            Principal::Instance { id, .. } | Principal::Key { id, .. } if id.as_str() == raw_id => Ok(id.clone()),
            Principal::Instance { .. } | Principal::Key { .. } => {
                Err(Error::Forbidden("this token belongs to another instance".into()))
            }
        }
    }

    /// The instance a token belongs to (none for the admin).
    pub fn own_instance(&self) -> Option<&InstanceId> {
        match self {
            Principal::Admin => None,
            Principal::Instance { id, .. } | Principal::Key { id, .. } => Some(id),
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
        Some(kind @ (TokenKind::Instance | TokenKind::ApiKey)) => {
            let hash = auth::hash_token(token);
            match core.tokens.get(&hash) {
                Some(found) => found,
                None => {
                    let found = if kind == TokenKind::Instance {
                        instances::auth_by_token_hash(&core.db, &hash).await?.map(Cached::Instance)
                    } else {
                        api_keys::auth_by_token_hash(&core.db, &hash).await?.map(Cached::Key)
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
    }
}

/// What a token hash was found to be.
#[derive(Debug, Clone)]
pub enum Cached {
    Instance(InstanceAuth),
    Key(KeyAuth),
}

impl Cached {
    fn instance(&self) -> &InstanceId {
        match self {
            Cached::Instance(a) => &a.id,
            Cached::Key(k) => &k.instance_id,
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
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, (a, _)| a.instance() != instance);
    }
}

/// Drops an instance's entries here and tells the other API pods to.
pub async fn invalidate(core: &crate::Core, instance: &InstanceId) {
    core.tokens.forget(instance);
    let _ = core.auth_changes.send(instance.clone());
    if let Err(e) = core.nats.publish(core.subjects.auth_changed(), instance.as_str().to_string().into()).await {
        tracing::warn!(error = %e, "telling other pods of a token change failed; their entries expire within the TTL");
    }
}

/// Listens for other pods' changes until the connection closes.
pub async fn listen(
    nats: async_nats::Client,
    subject: String,
    cache: std::sync::Arc<TokenCache>,
    changes: tokio::sync::broadcast::Sender<InstanceId>,
) {
    let mut sub = match nats.subscribe(subject).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "subscribing to token changes failed; cached tokens expire within the TTL");
            return;
        }
    };
    while let Some(msg) = sub.next().await {
        if let Some(id) = std::str::from_utf8(&msg.payload).ok().and_then(|s| InstanceId::parse(s).ok()) {
            cache.forget(&id);
            let _ = changes.send(id);
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
        assert_eq!(c.get("ha").unwrap().instance(), &a);
        c.forget(&a);
        assert!(c.get("ha").is_none());
        assert!(c.get("ka").is_none(), "an instance's keys go with it");
        assert!(c.get("hb").is_some());
        c.entries.lock().unwrap().get_mut("hb").unwrap().1 = Instant::now() - TTL;
        assert!(c.get("hb").is_none(), "expired");
    }
}
