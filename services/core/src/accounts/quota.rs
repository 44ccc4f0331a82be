//! An account's quotas, checked where the work happens: instances when one is created or
//! moved in, webhooks when one is registered (`db::webhooks::insert`, under the
//! account's row lock), media bytes when media is stored, and the
//! daily ones (messages queued, number lookups) when a message is queued or a number
//! looked up. Counted ones answer 403 `quota_exceeded`; daily ones 429
//! `quota_exceeded` with `Retry-After` until the next UTC midnight.
//!
//! The daily counts are Redis counters per account and UTC day, taken whole or not at
//! all by one script and given back when the work then fails; the others are counted in
//! Postgres under the account's row lock. Which account holds an instance, and its
//! quotas, are cached here for 5 s (dropped at once on this pod when they change).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::Utc;
use deadpool_redis::redis::Script;
use shared::db::accounts::{AccountRow, Quotas};
use shared::ids::{AccountId, InstanceId};

use crate::{Core, Error, Result};

/// The account holding an instance, as its quotas need it.
#[derive(Debug, Clone)]
pub struct Limits {
    pub account: AccountId,
    pub quotas: Quotas,
}

/// How long an instance's account stays cached.
const TTL: Duration = Duration::from_secs(5);
/// Most instances cached (the stale ones go when full).
const CAPACITY: usize = 100_000;

/// Instances' accounts recently read (`None`: in no account).
#[derive(Default)]
pub struct LimitsCache {
    entries: Mutex<HashMap<InstanceId, (Option<Limits>, Instant)>>,
}

impl LimitsCache {
    fn get(&self, id: &InstanceId) -> Option<Option<Limits>> {
        let map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.get(id).filter(|(_, at)| at.elapsed() < TTL).map(|(l, _)| l.clone())
    }

    fn put(&self, id: InstanceId, limits: Option<Limits>) {
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= CAPACITY {
            map.retain(|_, (_, at)| at.elapsed() < TTL);
        }
        map.insert(id, (limits, Instant::now()));
    }

    /// Drops the cached limits of every instance of `account` on this pod.
    pub fn forget_account(&self, account: &AccountId) {
        let mut map = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, (l, _)| l.as_ref().is_none_or(|l| &l.account != account));
    }

    /// Drops the cached limits of one instance on this pod.
    pub fn forget_instance(&self, instance: &InstanceId) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(instance);
    }
}

/// The account holding `instance` and its quotas (cached for 5 s).
pub async fn of(core: &Core, instance: &InstanceId) -> Result<Option<Limits>> {
    if let Some(l) = core.limits.get(instance) {
        return Ok(l);
    }
    let row = shared::db::accounts::of_instance(&core.db, instance).await?.flatten();
    let limits = match row {
        Some(account) => {
            shared::db::accounts::get(&core.db, &account).await?.map(|a| Limits { account: a.id, quotas: a.quotas })
        }
        None => None,
    };
    core.limits.put(instance.clone(), limits.clone());
    Ok(limits)
}

/// 403 `quota_exceeded`.
fn exceeded(what: &str, limit: i64) -> Error {
    Error::Quota { message: format!("the account's quota of {limit} {what} is used up"), retry_after: None }
}

/// Whether `account` (locked by the caller's transaction) may hold one more instance.
pub async fn room_for_instance(tx: &mut sqlx::PgConnection, account: &AccountRow) -> Result<()> {
    if let Some(limit) = account.quotas.instances {
        let n = shared::db::accounts::instance_count(&mut *tx, &account.id).await?;
        if n >= i64::from(limit) {
            return Err(exceeded("instances", limit.into()));
        }
    }
    Ok(())
}

/// The media bytes `instance`'s account may still store (`None`: no account quota).
pub async fn media_room(core: &Core, instance: &InstanceId) -> Result<Option<u64>> {
    let Some(Limits { account, quotas: Quotas { media_bytes: Some(limit), .. }, .. }) = of(core, instance).await?
    else {
        return Ok(None);
    };
    let used = shared::db::accounts::media_bytes(&core.db, &account).await?;
    Ok(Some(limit.saturating_sub(used).max(0) as u64))
}

/// A daily quota of an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daily {
    /// Messages queued.
    Messages,
    /// Numbers looked up (new and cached).
    Lookups,
}

impl Daily {
    fn name(self) -> &'static str {
        match self {
            Daily::Messages => "messages",
            Daily::Lookups => "lookups",
        }
    }

    fn limit(self, q: &Quotas) -> Option<i32> {
        match self {
            Daily::Messages => q.messages_per_day,
            Daily::Lookups => q.lookups_per_day,
        }
    }
}

/// Adds `n` unless that passes the limit: the new count, or -1.
const TAKE: &str = r#"
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], 172800)
if v > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return -1
end
return v
"#;

/// What was taken of a daily quota, to give back when the work fails.
#[must_use]
#[derive(Debug, Default)]
pub struct DailyTaken {
    key: Option<String>,
    n: u64,
}

impl DailyTaken {
    /// Gives it back (best effort: a failure only leaves the day's count higher).
    pub async fn give_back(self, core: &Core) {
        let Some(key) = self.key else { return };
        let Ok(mut conn) = core.redis.get().await else { return };
        // Only a count that still exists is lowered (none is made without its expiry).
        let r: std::result::Result<i64, _> = deadpool_redis::redis::Script::new(
            "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('DECRBY', KEYS[1], ARGV[1]) end return 0",
        )
        .key(&key)
        .arg(self.n)
        .invoke_async(&mut conn)
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "giving back an account's daily quota failed");
        }
    }

    /// Keeps what was taken.
    pub fn keep(self) {}
}

/// Takes `n` of `instance`'s account's daily quota `what` for today (UTC): nothing to
/// take when it is in no account or the account sets no such quota; past the quota 429
/// `quota_exceeded` with `Retry-After` until midnight UTC.
pub async fn take_daily(core: &Core, instance: &InstanceId, what: Daily, n: u64) -> Result<DailyTaken> {
    let Some(limits) = of(core, instance).await? else { return Ok(DailyTaken::default()) };
    let Some(limit) = what.limit(&limits.quotas) else { return Ok(DailyTaken::default()) };
    let now = Utc::now();
    let key = core.keys.account_daily(&limits.account, what.name(), &now.format("%Y-%m-%d").to_string());
    let mut conn = core.redis.get().await?;
    let v: i64 = Script::new(TAKE).key(&key).arg(n).arg(limit).invoke_async(&mut conn).await?;
    if v < 0 {
        let midnight = (now.date_naive() + chrono::Duration::days(1)).and_hms_opt(0, 0, 0).unwrap_or_default();
        let wait = (midnight.and_utc() - now).num_seconds().max(1) as u64;
        let noun = match what {
            Daily::Messages => "messages a day",
            Daily::Lookups => "number lookups a day",
        };
        return Err(Error::Quota {
            message: format!("the account's quota of {limit} {noun} is used up until midnight UTC"),
            retry_after: Some(wait),
        });
    }
    Ok(DailyTaken { key: Some(key), n })
}
