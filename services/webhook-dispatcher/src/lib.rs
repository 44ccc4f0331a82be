//! The webhook dispatcher. Today it runs the outbox relay (`relay`): events committed in
//! Postgres go to JetStream with `Nats-Msg-Id` = event id. Fanning events out to
//! webhooks, with the delivery log, comes with the webhooks issue.

pub mod metrics;
pub mod relay;

use anyhow::Context;
use shared::config::Role;
use shared::{bus, db, Config, Shutdown};

/// Runs the dispatcher until `shutdown`.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    config.validate(Role::Dispatcher)?;
    metrics::describe();
    let pool = db::connect(&config).await.context("connecting to postgres")?;
    if config.migrate_on_start {
        db::migrate(&pool).await.context("applying migrations")?;
    }
    let nats = bus::connect(&config, "dispatcher").await.context("connecting to nats")?;
    let js = async_nats::jetstream::new(nats.clone());
    tracing::info!("dispatcher started");
    relay::run(pool.clone(), js, bus::Subjects::new(&config), shutdown).await;
    bus::flush_bounded(&nats).await;
    pool.close().await;
    tracing::info!("dispatcher stopped");
    Ok(())
}
