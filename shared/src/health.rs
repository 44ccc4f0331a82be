//! The probes a process serves on its metrics listener, where kubelet needs no token:
//! `/healthz` (alive) and `/readyz` (every role this process runs has started and its
//! backends answer). Each role registers its check once it has connected; until every
//! expected role has, and from the moment shutdown starts, the process is not ready.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

/// A role's readiness check: its backends answer.
pub type Check = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

/// How long one check may take before it counts as failed.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

fn checks() -> &'static Mutex<Vec<(&'static str, Check)>> {
    static CHECKS: Mutex<Vec<(&'static str, Check)>> = Mutex::new(Vec::new());
    &CHECKS
}

/// Registers (or replaces) `role`'s check: the role has started.
pub fn register(role: &'static str, check: Check) {
    let mut all = checks().lock().expect("health checks");
    all.retain(|(r, _)| *r != role);
    all.push((role, check));
}

/// Each expected role's state: `None` not started, `Some(ok)` its check's answer.
pub async fn readiness(roles: &[&'static str]) -> Vec<(&'static str, Option<bool>)> {
    let registered: Vec<(&'static str, Check)> = checks().lock().expect("health checks").clone();
    let mut out = Vec::new();
    for role in roles {
        let state = match registered.iter().find(|(r, _)| r == role) {
            Some((_, check)) => Some(tokio::time::timeout(CHECK_TIMEOUT, check()).await.unwrap_or(false)),
            None => None,
        };
        out.push((*role, state));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_role_is_ready_once_registered_and_while_its_check_passes() {
        assert_eq!(readiness(&["probe-a"]).await, [("probe-a", None)]);
        register("probe-a", Arc::new(|| Box::pin(async { true })));
        register("probe-b", Arc::new(|| Box::pin(async { false })));
        assert_eq!(readiness(&["probe-a", "probe-b"]).await, [("probe-a", Some(true)), ("probe-b", Some(false))]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_that_hangs_counts_as_failed() {
        register("probe-slow", Arc::new(|| Box::pin(std::future::pending())));
        assert_eq!(readiness(&["probe-slow"]).await, [("probe-slow", Some(false))]);
    }
}
