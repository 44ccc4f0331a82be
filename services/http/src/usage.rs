//! API requests per instance and token kind, counted in this pod and added to the daily
//! usage in Postgres every second (`db::usage::add_requests`), and once more when the
//! pod stops. A pod that is killed outright loses at most its last second of counts.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use shared::ids::InstanceId;

use crate::extract::Principal;

/// How often counts go to Postgres.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct RequestCounts {
    counts: Mutex<HashMap<InstanceId, [i64; 4]>>,
}

impl RequestCounts {
    /// One request on `instance`'s routes by `by`.
    pub fn record(&self, instance: &InstanceId, by: &Principal) {
        let slot = match by {
            Principal::Admin => 0,
            Principal::Instance { .. } => 1,
            Principal::Key { .. } => 2,
            Principal::Account { .. } => 3,
        };
        let mut map = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(instance.clone()).or_default()[slot] += 1;
    }

    /// Writes what was counted since the last flush; on failure it is kept for the next.
    pub async fn flush(&self, db: &sqlx::PgPool) {
        let taken: Vec<(InstanceId, [i64; 4])> =
            std::mem::take(&mut *self.counts.lock().unwrap_or_else(|p| p.into_inner())).into_iter().collect();
        if taken.is_empty() {
            return;
        }
        if let Err(e) = shared::db::usage::add_requests(db, &taken).await {
            tracing::warn!(error = %e, "writing request counts failed; kept for the next flush");
            let mut map = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            for (i, c) in taken {
                let e = map.entry(i).or_default();
                for k in 0..4 {
                    e[k] += c[k];
                }
            }
        }
    }

    /// Flushes every [`FLUSH_EVERY`] until `shutdown`.
    pub async fn run(state: crate::AppState) {
        loop {
            tokio::select! {
                _ = state.shutdown.cancelled() => return,
                _ = tokio::time::sleep(FLUSH_EVERY) => {}
            }
            state.requests.flush(&state.db).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_add_up_by_instance_and_kind() {
        let c = RequestCounts::default();
        let (a, b) = (InstanceId::new(), InstanceId::new());
        c.record(&a, &Principal::Admin);
        c.record(&a, &Principal::Instance { id: a.clone(), name: "a".into() });
        c.record(&a, &Principal::Instance { id: a.clone(), name: "a".into() });
        c.record(&b, &Principal::Admin);
        c.record(&b, &Principal::Account { id: shared::ids::AccountId::new(), name: "c".into(), suspended: false });
        let map = c.counts.lock().unwrap();
        assert_eq!(map[&a], [1, 2, 0, 0]);
        assert_eq!(map[&b], [1, 0, 0, 1]);
    }
}
