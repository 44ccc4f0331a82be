//! Which numbers have an account. Known numbers are answered from Postgres; new ones go
//! to the instance's session and count against its quotas (10 a minute, sliding, and
//! 200 a UTC day), kept in Redis across all pods.

use chrono::{Timelike, Utc};
use deadpool_redis::redis::Script;
use serde::{Deserialize, Serialize};
use shared::bus::RpcRequest;
use shared::db::number_checks::{self, Known};
use shared::ids::InstanceId;
use utoipa::ToSchema;

use crate::accounts::quota::Daily;
use crate::net::call;
use crate::{Core, Ctx, Error, Result};

pub const PER_MINUTE: u32 = 10;
pub const PER_DAY: u32 = 200;

/// Takes `n` lookups if both quotas allow: returns {0, 0}, or {1, ms until the minute
/// allows} or {2, 0} for the day.
const TAKE: &str = r#"
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local per_minute = tonumber(ARGV[3])
local per_day = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
local m = redis.call('ZCARD', KEYS[1])
if m + n > per_minute then
  local idx = m + n - per_minute - 1
  local e = redis.call('ZRANGE', KEYS[1], idx, idx, 'WITHSCORES')
  local at = tonumber(e[2] or now)
  return {1, at + 60000 - now}
end
local d = tonumber(redis.call('GET', KEYS[2]) or '0')
if d + n > per_day then
  return {2, 0}
end
for i = 1, n do
  redis.call('ZADD', KEYS[1], now, ARGV[5] .. ':' .. i)
end
redis.call('PEXPIRE', KEYS[1], 61000)
redis.call('INCRBY', KEYS[2], n)
redis.call('EXPIRE', KEYS[2], 172800)
return {0, 0}
"#;

/// One number's answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NumberResult {
    /// The number as asked.
    pub number: String,
    pub exists: bool,
    /// Its JID, when it has an account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jid: Option<String>,
}

/// A phone number as digits (a leading `+` and separators are dropped): 7-15 digits.
pub fn normalize_phone(raw: &str) -> Result<String> {
    let digits: String = raw.chars().filter(|c| !matches!(c, '+' | ' ' | '-' | '(' | ')' | '.')).collect();
    if (7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) {
        Ok(digits)
    } else {
        Err(Error::invalid("phone must be a number with country code, 7-15 digits"))
    }
}

/// Which of 1 to 10 numbers have an account, in the order asked. Numbers this instance
/// already checked are answered without a lookup; new ones count against the quotas.
pub async fn check(ctx: Ctx<'_>, numbers: &[String]) -> Result<Vec<NumberResult>> {
    let (core, id) = (ctx.core, ctx.instance);
    if numbers.is_empty() || numbers.len() > 10 {
        return Err(Error::invalid("numbers must hold 1 to 10 phone numbers"));
    }
    let asked: Vec<(String, String)> =
        numbers.iter().map(|n| normalize_phone(n).map(|d| (n.clone(), d))).collect::<Result<_, _>>()?;
    let mut digits: Vec<String> = asked.iter().map(|a| a.1.clone()).collect();
    digits.sort();
    digits.dedup();
    // The account's daily quota counts every number asked, answered from the cache or not.
    let account = crate::accounts::quota::take_daily(core, id, Daily::Lookups, digits.len() as u64).await?;
    let answered = lookup(core, id, &digits).await;
    match &answered {
        Ok(_) => account.keep(),
        Err(_) => account.give_back(core).await,
    }
    let (answers, new) = answered?;
    // Usage: numbers the network was asked about, and those the cache answered.
    let cached = (digits.len() - new) as i64;
    if let Err(e) = shared::db::usage::add_lookups(&core.db, id, new as i64, cached).await {
        tracing::warn!(error = %e, "counting lookups failed");
    }
    let results: Vec<NumberResult> = asked
        .into_iter()
        .map(|(number, d)| {
            let a = answers.iter().find(|a| a.0 == d);
            NumberResult { number, exists: a.is_some_and(|a| a.1), jid: a.and_then(|a| a.2.clone()) }
        })
        .collect();
    Ok(results)
}

/// The answers for `digits`: those this instance already checked, and the rest from the
/// network within the instance's quotas; and how many the network was asked.
async fn lookup(core: &Core, id: &InstanceId, digits: &[String]) -> Result<(Vec<Known>, usize)> {
    let mut answers: Vec<Known> = number_checks::known(&core.db, id, digits).await?;
    let new: Vec<String> = digits.iter().filter(|d| !answers.iter().any(|a| &a.0 == *d)).cloned().collect();
    if !new.is_empty() {
        let taken = take_quota(core, id, new.len()).await?;
        let v = match call(core, id, RpcRequest::CheckNumbers { numbers: new.clone() }).await {
            Ok(v) => v,
            Err(e) => {
                // Lookups that did not happen do not count.
                if let Err(r) = give_back(core, id, &taken, new.len()).await {
                    tracing::warn!(error = %r, "returning lookup quota failed");
                }
                return Err(e);
            }
        };
        #[derive(serde::Deserialize)]
        struct Checked {
            results: Vec<shared::contract::NumberAnswer>,
        }
        let Checked { results } = serde_json::from_value(v)
            .map_err(|e| Error::internal(format_args!("unexpected answer from the worker: {e}")))?;
        let fresh: Vec<Known> = results.into_iter().map(|r| (r.number, r.exists, r.jid.map(String::from))).collect();
        number_checks::record(&core.db, id, &fresh).await?;
        answers.extend(fresh);
    }
    Ok((answers, new.len()))
}

/// Lookups taken from the quotas: the members added and the day they counted on.
struct Taken {
    member: String,
    day: String,
}

/// Returns lookups taken for a call that failed.
async fn give_back(core: &Core, id: &InstanceId, t: &Taken, n: usize) -> Result<()> {
    let mut conn = core.redis.get().await?;
    let members: Vec<String> = (1..=n).map(|i| format!("{}:{i}", t.member)).collect();
    let _: () = deadpool_redis::redis::pipe()
        .cmd("ZREM")
        .arg(core.keys.lookups_minute(id))
        .arg(&members)
        .ignore()
        .cmd("DECRBY")
        .arg(core.keys.lookups_day(id, &t.day))
        .arg(n)
        .ignore()
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// Takes `n` new lookups from the instance's quotas, or answers 429 with Retry-After.
async fn take_quota(core: &Core, id: &InstanceId, n: usize) -> Result<Taken> {
    let now = Utc::now();
    let day = now.format("%Y%m%d").to_string();
    let member = uuid::Uuid::new_v4().to_string();
    let mut conn = core.redis.get().await?;
    let (verdict, wait_ms): (i64, i64) = Script::new(TAKE)
        .key(core.keys.lookups_minute(id))
        .key(core.keys.lookups_day(id, &day))
        .arg(now.timestamp_millis())
        .arg(n)
        .arg(PER_MINUTE)
        .arg(PER_DAY)
        .arg(&member)
        .invoke_async(&mut conn)
        .await?;
    match verdict {
        0 => Ok(Taken { member, day }),
        1 => Err(Error::RateLimited {
            message: format!("at most {PER_MINUTE} new number lookups a minute"),
            retry_after: (wait_ms.max(0) as u64).div_ceil(1000).max(1),
        }),
        _ => {
            let to_midnight = 86_400 - u64::from(now.num_seconds_from_midnight());
            Err(Error::RateLimited {
                message: format!("at most {PER_DAY} new number lookups a UTC day"),
                retry_after: to_midnight.max(1),
            })
        }
    }
}
