//! Sessions signed out before their time. A session lives in its sealed cookie, so
//! signing out clears the cookie in that browser, and also lists the session here (in
//! Redis, shared by every console pod) until it could have ended anyway: a copy of the
//! cookie then opens nothing on any pod. Each request with a session is checked; when
//! Redis does not answer in time the page is refused (503), never served unchecked.

use std::time::Duration;

use deadpool_redis::{redis, Pool};
use shared::kv::Keys;

use crate::session::Session;

/// The longest a check or a listing may wait for Redis.
const DEADLINE: Duration = Duration::from_secs(2);
/// Kept this much longer than the session could last.
const MARGIN: Duration = Duration::from_secs(300);

#[derive(Clone)]
pub struct Ended {
    redis: Pool,
    keys: Keys,
}

/// Redis did not answer (in time).
#[derive(Debug)]
pub struct Unavailable;

impl Ended {
    pub fn new(redis: Pool, keys: Keys) -> Ended {
        Ended { redis, keys }
    }

    /// Lists `s` as ended for `lasts` (until it could have ended anyway, and a margin for
    /// clocks that differ between pods).
    pub async fn end(&self, s: &Session, lasts: Duration) -> Result<(), Unavailable> {
        let key = self.keys.console_ended(&s.digest());
        let ttl = (lasts + MARGIN).as_secs();
        self.run::<()>(redis::cmd("SET").arg(&key).arg(1).arg("EX").arg(ttl)).await
    }

    /// Whether `s` was signed out.
    pub async fn is_ended(&self, s: &Session) -> Result<bool, Unavailable> {
        let key = self.keys.console_ended(&s.digest());
        self.run::<bool>(redis::cmd("EXISTS").arg(&key)).await
    }

    async fn run<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> Result<T, Unavailable> {
        let call = async {
            let mut conn = self.redis.get().await.map_err(|e| tracing::warn!(error = %e, "redis pool"))?;
            cmd.query_async::<T>(&mut conn).await.map_err(|e| tracing::warn!(error = %e, "redis"))
        };
        match tokio::time::timeout(DEADLINE, call).await {
            Ok(Ok(v)) => Ok(v),
            _ => Err(Unavailable),
        }
    }
}
