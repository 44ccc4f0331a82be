//! paceline's domain core. Every door (the `/v1` routes, Evolution's action routes, MCP
//! over the router, the attendant) performs an operation by calling a function here
//! with a [`Ctx`]: the shared handles ([`Core`]), the instance and the caller. No door
//! calls another door's handler; each maps [`Error`] to its own envelope.
//!
//! One module per area. The core depends on `shared` (storage, the bus, config) and on
//! nothing that speaks HTTP.

pub mod accounts;
pub mod attendant;
pub mod auth;
pub mod bulk;
pub mod business;
pub mod caps;
pub mod catalog;
pub mod channels;
pub mod chats;
pub mod chatwoot;
pub mod cluster;
pub mod communities;
pub mod contacts;
pub mod enqueue;
mod error;
pub mod groups;
pub mod history;
pub mod instances;
pub mod ip;
pub mod keys;
pub mod labels;
pub mod media_retention;
pub mod media_urls;
pub mod message_in;
pub mod messages;
pub mod net;
pub mod numbers;
pub mod page;
pub mod pairing;
pub mod pictures;
pub mod profile;
pub mod qr;
pub mod queue;
pub mod risk;
pub mod schemas;
pub mod send;
pub mod sinks;
pub mod slots;
pub mod states;
pub mod text;
pub mod usage;
pub mod webhooks;

pub use error::{Error, Result};

use shared::ids::InstanceId;
use shared::{bus, kv, Config};

/// The handles every operation may use: pools, clients and config; cheap to clone.
#[derive(Clone)]
pub struct Core {
    pub config: Config,
    pub db: sqlx::PgPool,
    /// Media bytes: Postgres, and the bucket when one is configured.
    pub media: shared::db::media::Store,
    pub redis: deadpool_redis::Pool,
    pub nats: async_nats::Client,
    pub keys: kv::Keys,
    pub subjects: bus::Subjects,
    /// Fetches tenants' URLs (media) without reaching internal addresses.
    pub fetcher: shared::fetch::GuardedClient,
    /// Batches accepted messages into shared statements (started on first use).
    enqueuer: std::sync::Arc<std::sync::OnceLock<enqueue::Enqueuer>>,
    /// When each instance's worker was last woken from this process.
    pub wakes: std::sync::Arc<enqueue::Wakes>,
    /// Signs and checks `/media/...` URLs.
    pub media_urls: std::sync::Arc<media_urls::MediaUrls>,
    /// Instance tokens and API keys recently looked up.
    pub tokens: std::sync::Arc<auth::TokenCache>,
    /// Instances' accounts and their quotas recently looked up.
    pub limits: std::sync::Arc<accounts::quota::LimitsCache>,
    /// Instances whose tokens' access changed (here or, told over NATS, in another
    /// process): open event streams check theirs again.
    pub auth_changes: tokio::sync::broadcast::Sender<InstanceId>,
    /// Accounts whose tokens' access changed (suspended, deleted, a token revoked).
    pub account_changes: tokio::sync::broadcast::Sender<shared::ids::AccountId>,
}

impl Core {
    /// Connects to Postgres (applying migrations when configured, or waiting for this
    /// build's schema), Redis and NATS, for `role` (whose settings are validated first),
    /// naming the NATS connection after `name`.
    pub async fn connect(
        config: Config,
        shutdown: &shared::Shutdown,
        role: shared::config::Role,
        name: &str,
    ) -> anyhow::Result<Core> {
        use anyhow::Context;
        config.validate(role)?;
        let db = shared::db::connect(&config).await.context("connecting to postgres")?;
        shared::db::prepare(&db, &config, shutdown).await.context("preparing the database schema")?;
        let redis = kv::connect(&config).context("configuring redis")?;
        let nats = bus::connect(&config, name).await.context("connecting to nats")?;
        Ok(Core::new(config, db, redis, nats))
    }

    /// The batcher of accepted messages, started with the first.
    pub fn enqueuer(&self) -> &enqueue::Enqueuer {
        self.enqueuer.get_or_init(|| enqueue::Enqueuer::start(self.db.clone()))
    }

    /// The handles from connected pools and clients.
    pub fn new(config: Config, db: sqlx::PgPool, redis: deadpool_redis::Pool, nats: async_nats::Client) -> Core {
        Core {
            keys: kv::Keys::new(&config),
            subjects: bus::Subjects::new(&config),
            fetcher: shared::fetch::GuardedClient::new(
                config.allow_private_targets,
                std::time::Duration::from_secs(60),
            ),
            enqueuer: Default::default(),
            wakes: Default::default(),
            media_urls: std::sync::Arc::new(media_urls::MediaUrls::new(&config, config.admin_token.as_deref())),
            tokens: Default::default(),
            limits: Default::default(),
            auth_changes: tokio::sync::broadcast::channel(1024).0,
            account_changes: tokio::sync::broadcast::channel(1024).0,
            media: shared::db::media::Store::new(db.clone(), &config.media_store)
                .expect("Config::validate checks the media store's settings"),
            config,
            db,
            redis,
            nats,
        }
    }
}

/// Who asks, as far as an operation cares: the doors authenticate and check the route's
/// access (`api::access`); an operation only distinguishes what its rules name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// The operator's admin token.
    Admin,
    /// The instance's own token (or the attendant acting for it).
    Owner,
    /// A restricted API key of the instance.
    Key,
    /// The attendant, answering the instance's chats: it reaches them as the owner would,
    /// not its status or channels.
    Attendant,
}

/// One operation's context: the handles, the instance it acts on, and who asks.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub core: &'a Core,
    pub instance: &'a InstanceId,
    pub caller: Caller,
}

impl<'a> Ctx<'a> {
    pub fn new(core: &'a Core, instance: &'a InstanceId, caller: Caller) -> Ctx<'a> {
        Ctx { core, instance, caller }
    }
}
