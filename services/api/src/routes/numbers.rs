//! `POST {inst}/check-numbers`: which numbers have an account. Known numbers are answered
//! from Postgres; new ones go to the instance's session and count against its quotas
//! (10 a minute, sliding, and 200 a UTC day), kept in Redis across all API pods.

use crate::db::number_checks::{self, Known};
use axum::extract::State;
use axum::Json;
use chrono::{Timelike, Utc};
use deadpool_redis::redis::Script;
use serde::{Deserialize, Serialize};
use shared::bus::RpcRequest;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::{ApiError, ErrorCode};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, ValidatedJson};
use crate::service::pairing::normalize_phone;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(check_numbers))
}

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

/// Body of `POST {inst}/check-numbers`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckNumbersIn {
    /// 1 to 10 phone numbers with country code.
    #[schema(min_items = 1, max_items = 10, value_type = Vec<crate::schemas::PhoneNumber>)]
    pub numbers: Vec<String>,
}

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

/// Answers, in the order asked.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CheckNumbersOut {
    pub results: Vec<NumberResult>,
}

/// Which numbers have an account. Numbers this instance already checked are answered
/// without a lookup; new ones count against 10 a minute and 200 a UTC day.
#[utoipa::path(post, path = "/v1/instances/{id}/check-numbers", tag = "numbers",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = CheckNumbersIn,
    responses(
        (status = 200, description = "the answers", body = CheckNumbersOut),
        (status = 400, description = "`validation_failed`: 1 to 10 numbers with country code", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: new-lookup quota used up (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn check_numbers(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(b): ValidatedJson<CheckNumbersIn>,
) -> Result<Json<CheckNumbersOut>, ApiError> {
    if b.numbers.is_empty() || b.numbers.len() > 10 {
        return Err(ApiError::validation("numbers must hold 1 to 10 phone numbers"));
    }
    let asked: Vec<(String, String)> =
        b.numbers.iter().map(|n| normalize_phone(n).map(|d| (n.clone(), d))).collect::<Result<_, _>>()?;
    let mut digits: Vec<String> = asked.iter().map(|a| a.1.clone()).collect();
    digits.sort();
    digits.dedup();
    let mut answers: Vec<Known> = number_checks::known(&state.db, &id, &digits).await?;
    let new: Vec<String> = digits.iter().filter(|d| !answers.iter().any(|a| &a.0 == *d)).cloned().collect();
    if !new.is_empty() {
        let taken = take_quota(&state, &id, new.len()).await?;
        let v = match crate::rpc::call(&state, &id, RpcRequest::CheckNumbers { numbers: new.clone() }).await {
            Ok(v) => v,
            Err(e) => {
                // Lookups that did not happen do not count.
                if let Err(r) = give_back(&state, &id, &taken, new.len()).await {
                    tracing::warn!(error = %r, "returning lookup quota failed");
                }
                return Err(e);
            }
        };
        let fresh: Vec<Known> = v["results"]
            .as_array()
            .ok_or_else(|| ApiError::internal("check reply without results"))?
            .iter()
            .filter_map(|r| {
                let number = r["number"].as_str()?.to_string();
                Some((number, r["exists"].as_bool()?, r["jid"].as_str().map(str::to_owned)))
            })
            .collect();
        number_checks::record(&state.db, &id, &fresh).await?;
        answers.extend(fresh);
    }
    // Usage: numbers the network was asked about, and those the cache answered.
    let cached = (digits.len() - new.len()) as i64;
    if let Err(e) = shared::db::usage::add_lookups(&state.db, &id, new.len() as i64, cached).await {
        tracing::warn!(error = %e, "counting lookups failed");
    }
    let results = asked
        .into_iter()
        .map(|(number, d)| {
            let a = answers.iter().find(|a| a.0 == d);
            NumberResult { number, exists: a.is_some_and(|a| a.1), jid: a.and_then(|a| a.2.clone()) }
        })
        .collect();
    Ok(Json(CheckNumbersOut { results }))
}

/// Lookups taken from the quotas: the members added and the day they counted on.
struct Taken {
    member: String,
    day: String,
}

/// Returns lookups taken for a call that failed.
async fn give_back(state: &AppState, id: &InstanceId, t: &Taken, n: usize) -> Result<(), ApiError> {
    let mut conn = state.redis.get().await?;
    let members: Vec<String> = (1..=n).map(|i| format!("{}:{i}", t.member)).collect();
    let _: () = deadpool_redis::redis::pipe()
        .cmd("ZREM")
        .arg(state.keys.lookups_minute(id))
        .arg(&members)
        .ignore()
        .cmd("DECRBY")
        .arg(state.keys.lookups_day(id, &t.day))
        .arg(n)
        .ignore()
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// Takes `n` new lookups from the instance's quotas, or answers 429 with Retry-After.
async fn take_quota(state: &AppState, id: &InstanceId, n: usize) -> Result<Taken, ApiError> {
    let now = Utc::now();
    let day = now.format("%Y%m%d").to_string();
    let member = uuid::Uuid::new_v4().to_string();
    let mut conn = state.redis.get().await?;
    let (verdict, wait_ms): (i64, i64) = Script::new(TAKE)
        .key(state.keys.lookups_minute(id))
        .key(state.keys.lookups_day(id, &day))
        .arg(now.timestamp_millis())
        .arg(n)
        .arg(PER_MINUTE)
        .arg(PER_DAY)
        .arg(&member)
        .invoke_async(&mut conn)
        .await?;
    match verdict {
        0 => Ok(Taken { member, day }),
        1 => Err(ApiError::new(ErrorCode::RateLimited, format!("at most {PER_MINUTE} new number lookups a minute"))
            .with_retry_after((wait_ms.max(0) as u64).div_ceil(1000).max(1))),
        _ => {
            let to_midnight = 86_400 - u64::from(now.num_seconds_from_midnight());
            Err(ApiError::new(ErrorCode::RateLimited, format!("at most {PER_DAY} new number lookups a UTC day"))
                .with_retry_after(to_midnight.max(1)))
        }
    }
}
