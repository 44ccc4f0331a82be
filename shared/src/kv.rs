//! Redis: the pool and every key name. Only this module formats keys.

use deadpool_redis::{redis, Pool, Runtime};

use crate::Config;

/// Builds the Redis pool (connections are opened lazily).
pub fn connect(config: &Config) -> Result<Pool, deadpool_redis::CreatePoolError> {
    deadpool_redis::Config::from_url(config.redis_url.clone()).create_pool(Some(Runtime::Tokio1))
}

/// Builds keys under the configured prefix (tests give each test its own).
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(config: &Config) -> Self {
        Keys { prefix: config.namespace.key_prefix.clone() }
    }

    /// A console session signed out before its time (by a digest of its id), kept until
    /// the session could have ended anyway.
    pub fn console_ended(&self, session_digest: &str) -> String {
        format!("{}:console:ended:{session_digest}", self.prefix)
    }

    /// The lease of an instance: held by the worker that runs it (value: worker id).
    pub fn lease(&self, instance: &crate::ids::InstanceId) -> String {
        format!("{}:lease:{instance}", self.prefix)
    }

    /// The lease epoch counter of an instance (INCR on each acquisition).
    pub fn epoch(&self, instance: &crate::ids::InstanceId) -> String {
        format!("{}:epoch:{instance}", self.prefix)
    }

    /// Holders of the large-body slots: a sorted set of holder ids scored by expiry (ms).
    pub fn large_body_slots(&self) -> String {
        format!("{}:sem:large_body", self.prefix)
    }

    /// The large-body slots one instance holds (at most one): same shape.
    pub fn large_body_instance_slots(&self, instance: &crate::ids::InstanceId) -> String {
        format!("{}:sem:large_body:{instance}", self.prefix)
    }

    /// Open event streams of an instance, across API pods: holder ids scored by expiry.
    pub fn event_streams(&self, instance: &crate::ids::InstanceId) -> String {
        format!("{}:sem:events:{instance}", self.prefix)
    }

    /// Open event streams of an account, across API pods (as [`Keys::event_streams`]).
    pub fn account_event_streams(&self, account: &crate::ids::AccountId) -> String {
        format!("{}:sem:events:{account}", self.prefix)
    }

    /// New number lookups of an instance in the last minute (sorted set by time).
    pub fn lookups_minute(&self, instance: &crate::ids::InstanceId) -> String {
        format!("{}:quota:lookups:{instance}:minute", self.prefix)
    }

    /// New number lookups of an instance on a UTC day (`YYYYMMDD`).
    pub fn lookups_day(&self, instance: &crate::ids::InstanceId, day: &str) -> String {
        format!("{}:quota:lookups:{instance}:day:{day}", self.prefix)
    }

    /// What an account's instances took of one of its daily quotas (`what`) on `day`
    /// (UTC): a counter.
    pub fn account_daily(&self, account: &crate::ids::AccountId, what: &str, day: &str) -> String {
        format!("{}:quota:account:{account}:{what}:{day}", self.prefix)
    }

    /// A cap on an instance's network actions (`name`): a sorted set of takes by time.
    pub fn cap(&self, name: &str, instance: &crate::ids::InstanceId) -> String {
        format!("{}:quota:{name}:{instance}", self.prefix)
    }

    /// The attendant pod answering an instance's messages now (one at a time cluster-wide).
    pub fn attendant_lock(&self, instance: &crate::ids::InstanceId) -> String {
        format!("{}:attendant:{instance}", self.prefix)
    }

    /// Live workers: a sorted set of worker ids scored by their last heartbeat (ms).
    pub fn workers(&self) -> String {
        format!("{}:workers", self.prefix)
    }

    /// The fleet's counts (instances that should run, and those nobody holds) as one
    /// worker last measured them, for the others to read; and whose turn it is to measure.
    pub fn fleet_counts(&self) -> String {
        format!("{}:fleet:counts", self.prefix)
    }

    pub fn fleet_counts_turn(&self) -> String {
        format!("{}:fleet:counts:turn", self.prefix)
    }
}

/// Whether Redis answers PING (used by `/readyz`).
pub async fn is_ready(pool: &Pool) -> bool {
    let Ok(mut conn) = pool.get().await else { return false };
    redis::cmd("PING").query_async::<String>(&mut conn).await.is_ok()
}
