//! NATS: the connection and every subject name. Only this module formats subjects.

use std::time::Duration;

use crate::Config;

/// Connects to NATS, naming the connection after the role.
pub async fn connect(config: &Config, role: &str) -> Result<async_nats::Client, async_nats::ConnectError> {
    async_nats::ConnectOptions::new()
        .name(format!("paceline-{role}"))
        .connection_timeout(Duration::from_secs(5))
        .connect(config.nats_url.as_str())
        .await
}

/// Builds subjects under the configured prefix (tests give each test its own).
#[derive(Debug, Clone)]
pub struct Subjects {
    prefix: String,
}

impl Subjects {
    pub fn new(config: &Config) -> Self {
        Subjects { prefix: config.subject_prefix.clone() }
    }

    /// Liveness announcements of every pod, `<prefix>.pods.<role>`.
    pub fn pods(&self, role: &str) -> String {
        format!("{}.pods.{role}", self.prefix)
    }
}

/// Whether the client is connected right now (used by `/readyz`).
pub async fn is_ready(client: &async_nats::Client) -> bool {
    client.connection_state() == async_nats::connection::State::Connected
        && tokio::time::timeout(Duration::from_secs(2), client.flush()).await.is_ok_and(|r| r.is_ok())
}

/// Flushes pending publishes, giving up after `FLUSH_TIMEOUT` (NATS may be down while
/// we stop; shutting down must not wait for it to come back).
pub async fn flush_bounded(client: &async_nats::Client) {
    if tokio::time::timeout(FLUSH_TIMEOUT, client.flush()).await.is_err() {
        tracing::warn!("nats flush timed out");
    }
}

/// How long a flush may take on shutdown.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);
