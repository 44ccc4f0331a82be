//! The webhook dispatcher: drains delivery subjects from JetStream, signs and posts each
//! event to its endpoints, and records every attempt in the delivery log.
//!
//! This milestone provides the service shell only: it connects to Postgres and NATS and
//! stops cleanly. Deliveries arrive with the webhooks issue.

use anyhow::Context;
use shared::config::Role;
use shared::{bus, db, Config, Shutdown};

/// Runs the dispatcher until `shutdown`.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    config.validate(Role::Dispatcher)?;
    let pool = db::connect(&config).await.context("connecting to postgres")?;
    if config.migrate_on_start {
        db::migrate(&pool).await.context("applying migrations")?;
    }
    let nats = bus::connect(&config, "dispatcher").await.context("connecting to nats")?;
    tracing::info!("dispatcher started");
    shutdown.cancelled().await;
    bus::flush_bounded(&nats).await;
    pool.close().await;
    tracing::info!("dispatcher stopped");
    Ok(())
}
