//! A short-lived cache of instance tokens and API keys (by their SHA-256, never the
//! token), so a busy instance's requests skip the token lookup in Postgres.
//!
//! An entry lives `TTL` at most. A change that affects what a token may do (deleting the
//! instance, renaming it, editing its IP allow-list, revoking one of its keys) drops the
//! instance's entries on the pod that made it at once, and on every other API pod as soon as they hear of it on
//! NATS; were that notice lost (NATS is not the source of truth), the entry expires
//! within `TTL` anyway. Each change is also announced in the pod (`AppState::auth_changes`),
//! so open event streams check their access again at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use shared::db::api_keys::KeyAuth;
use shared::db::instances::InstanceAuth;
use shared::ids::InstanceId;

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
pub async fn invalidate(state: &crate::AppState, instance: &InstanceId) {
    state.token_cache.forget(instance);
    let _ = state.auth_changes.send(instance.clone());
    if let Err(e) = state.nats.publish(state.subjects.auth_changed(), instance.as_str().to_string().into()).await {
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
