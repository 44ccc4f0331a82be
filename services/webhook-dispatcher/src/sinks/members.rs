//! Which events an account's sink carries: an event is the account's when its instance
//! was in the account at the event's time (as account webhooks decide it). The spans are
//! read from Postgres (`db::sinks::memberships`), and read again when an event is newer
//! than the last read, at most once a second, so an instance that joined or left since
//! is seen before its events are judged.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use shared::ids::AccountId;

/// How often the spans may be read again.
const REREAD: Duration = Duration::from_secs(1);

/// When an instance joined the account, and left it (none while it is still in it).
type Span = (DateTime<Utc>, Option<DateTime<Utc>>);

pub struct Memberships {
    account: AccountId,
    /// Instance id -> its spans in the account.
    spans: HashMap<String, Vec<Span>>,
    /// Postgres's time when the spans were read: an event made before it is judged by them.
    read_at: Option<DateTime<Utc>>,
    last_read: Option<tokio::time::Instant>,
}

impl Memberships {
    pub fn new(account: AccountId) -> Memberships {
        Memberships { account, spans: HashMap::new(), read_at: None, last_read: None }
    }

    async fn read(&mut self, db: &sqlx::PgPool) -> Result<(), String> {
        if let Some(last) = self.last_read {
            tokio::time::sleep_until(last + REREAD).await;
        }
        let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(db)
            .await
            .map_err(|e| format!("reading the account's instances: {e}"))?;
        let rows = shared::db::sinks::memberships(db, &self.account)
            .await
            .map_err(|e| format!("reading the account's instances: {e}"))?;
        let mut spans: HashMap<String, Vec<_>> = HashMap::new();
        for (instance, joined, left) in rows {
            spans.entry(instance.to_string()).or_default().push((joined, left));
        }
        (self.spans, self.read_at, self.last_read) = (spans, Some(now), Some(tokio::time::Instant::now()));
        Ok(())
    }

    /// Whether the event `envelope` (of `instance`, made `at`) is the account's. An
    /// instance's `instance.created` and `instance.deleted` name the account they happened
    /// in, and are decided by it (as account webhooks decide them).
    pub async fn admits(
        &mut self,
        db: &sqlx::PgPool,
        envelope: &serde_json::Value,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, String> {
        if matches!(envelope["type"].as_str(), Some("instance.created" | "instance.deleted")) {
            return Ok(envelope["data"]["account_id"].as_str() == Some(self.account.as_str()));
        }
        if self.read_at.is_none_or(|r| at >= r) {
            self.read(db).await?;
        }
        Ok(self.holds(instance, at))
    }

    fn holds(&self, instance: &str, at: DateTime<Utc>) -> bool {
        self.spans
            .get(instance)
            .is_some_and(|spans| spans.iter().any(|(joined, left)| at >= *joined && left.is_none_or(|l| at < l)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_the_accounts_while_its_instance_was_in_it() {
        let t = |s: i64| DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let mut m = Memberships::new(AccountId::new());
        m.spans.insert("inst_a".into(), vec![(t(10), Some(t(20))), (t(30), None)]);
        for (at, held) in [(5, false), (10, true), (19, true), (20, false), (25, false), (30, true), (99, true)] {
            assert_eq!(m.holds("inst_a", t(at)), held, "{at}");
        }
        assert!(!m.holds("inst_b", t(15)));
    }
}
