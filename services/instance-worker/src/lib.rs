//! The instance worker: claims instance leases in Redis, runs each instance's session
//! through a network driver and its paced send queue.
//!
//! This milestone provides the service shell only: it connects to Postgres, Redis and
//! NATS, announces itself, and stops cleanly. Leases, drivers and the queue arrive with
//! the worker/netsim and send-queue issues.

use std::time::Duration;

use anyhow::Context;
use shared::config::Role;
use shared::{bus, db, kv, Config, Shutdown};

/// How often a worker announces itself on the bus.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// Runs the worker until `shutdown`.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    config.validate(Role::Worker)?;
    let pool = db::connect(&config).await.context("connecting to postgres")?;
    if config.migrate_on_start {
        db::migrate(&pool).await.context("applying migrations")?;
    }
    let redis = kv::connect(&config).context("configuring redis")?;
    let nats = bus::connect(&config, "worker").await.context("connecting to nats")?;
    let subject = bus::Subjects::new(&config).pods("worker");
    let pod = uuid::Uuid::new_v4().to_string();
    tracing::info!(network = %config.network, "worker started");
    let mut tick = tokio::time::interval(HEARTBEAT);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {
                let ready = kv::is_ready(&redis).await;
                let body = serde_json::json!({ "pod": pod, "redis": ready, "network": config.network.to_string() });
                if let Err(e) = nats.publish(subject.clone(), body.to_string().into()).await {
                    tracing::warn!(error = %e, "heartbeat publish failed");
                }
            }
        }
    }
    bus::flush_bounded(&nats).await;
    pool.close().await;
    tracing::info!("worker stopped");
    Ok(())
}
