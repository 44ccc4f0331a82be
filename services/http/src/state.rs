//! The one state every handler shares.

use std::sync::Arc;

use shared::{Config, Shutdown};

/// Pools, clients and config; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// The domain core's handles (config, Postgres, Redis, NATS, the guarded fetcher):
    /// `state.db` and the like reach them through `Deref`.
    pub core: domain::Core,
    /// Cancelled on SIGTERM: new requests get 503 `shutting_down` from then on.
    pub shutdown: Shutdown,
    /// `/healthz` and `/readyz` are public when the API listens on loopback only.
    pub health_public: bool,
    /// Event streams open on this pod.
    pub event_streams: Arc<std::sync::atomic::AtomicUsize>,
    /// API requests per instance and token kind, not yet written to the usage counts.
    pub requests: crate::usage::RequestCounts,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl std::ops::Deref for Inner {
    type Target = domain::Core;
    fn deref(&self) -> &domain::Core {
        &self.core
    }
}

impl AppState {
    /// One operation's context: the core, the instance and the caller.
    pub fn ctx<'a>(&'a self, instance: &'a shared::ids::InstanceId, caller: domain::Caller) -> domain::Ctx<'a> {
        domain::Ctx::new(&self.core, instance, caller)
    }

    /// Connects to Postgres (applying migrations when configured), Redis and NATS, for
    /// the API.
    pub async fn connect(config: Config, shutdown: Shutdown) -> anyhow::Result<AppState> {
        let core = domain::Core::connect(config, &shutdown, shared::config::Role::Api, "api").await?;
        shared::health::register(
            "api",
            vec![
                shared::health::postgres(core.db.clone()),
                shared::health::redis(core.redis.clone()),
                shared::health::nats(core.nats.clone()),
            ],
        );
        if core.media.objects().is_some() {
            shared::health::report("api", "media_store", shared::health::media_store(core.media.clone()));
        }
        tokio::spawn(domain::auth::listen(
            core.nats.clone(),
            core.subjects.auth_changed(),
            core.tokens.clone(),
            core.limits.clone(),
            core.auth_changes.clone(),
            core.account_changes.clone(),
        ));
        Ok(AppState(Arc::new(Inner {
            health_public: core.config.listen_addr.ip().is_loopback(),
            event_streams: Default::default(),
            requests: Default::default(),
            core,
            shutdown,
        })))
    }
}
