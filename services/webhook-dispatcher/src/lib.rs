//! The webhook dispatcher: the outbox relay (`relay`: events committed in Postgres go to
//! JetStream), the fan-out (`fanout`: events from JetStream become deliveries, one per
//! matching webhook), the executor (`executor`: signed attempts, endpoints isolated from
//! each other, outcomes written in batches), the retry scanner (`retry`) and the pruning
//! of events and deliveries past their retention (`retention`), and the roll-up of
//! events and deliveries into the daily usage counts (`usage`), and each instance's
//! ban-risk evaluation (`risk`). Any number of
//! dispatcher pods can run: the relay locks outbox rows, the fan-out shares one durable
//! consumer, and deliveries are claimed in Postgres.

pub mod attempt;
pub mod error;
pub mod executor;
pub mod fanout;
pub mod metrics;
pub mod relay;
pub mod retention;
pub mod retry;
pub mod shape;
pub mod signing;
pub mod sinks;
pub mod usage;

use anyhow::Context;
use shared::config::Role;
use shared::db::deliveries;
use shared::{bus, db, Config, Shutdown};

/// Runs the dispatcher until `shutdown`.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    config.validate(Role::Dispatcher)?;
    metrics::describe();
    let pool = db::connect(&config).await.context("connecting to postgres")?;
    db::prepare(&pool, &config, &shutdown).await.context("preparing the database schema")?;
    let nats = bus::connect(&config, "dispatcher").await.context("connecting to nats")?;
    shared::health::register(
        "dispatcher",
        vec![shared::health::postgres(pool.clone()), shared::health::nats(nats.clone())],
    );
    let js = async_nats::jetstream::new(nats.clone());
    let subjects = bus::Subjects::new(&config);
    let worker_id = format!("dsp_{}", uuid_like());
    let settings = executor::Settings::from_config(&config, worker_id.clone());
    let media = db::media::Store::new(pool.clone(), &config.media_store).map_err(anyhow::Error::msg)?;
    if media.objects().is_some() {
        shared::health::report("dispatcher", "media_store", shared::health::media_store(media.clone()));
    }
    let (exec, writer) = executor::Executor::start(media.clone(), settings);
    tracing::info!("dispatcher started");

    let max_bytes = config.events.stream_max_bytes;
    let relay = tokio::spawn(relay::run(pool.clone(), js.clone(), subjects.clone(), max_bytes, shutdown.clone()));
    let sink_ctx = sinks::Ctx::new(&config, pool.clone(), js.clone(), media.clone(), worker_id.clone());
    let sinks = tokio::spawn(sinks::run(sink_ctx, shutdown.clone()));
    let fanout = tokio::spawn(fanout::run(pool.clone(), js, subjects.clone(), exec.clone(), shutdown.clone()));
    let retry = tokio::spawn(retry::run(pool.clone(), exec.clone(), shutdown.clone()));
    let retention = tokio::spawn(retention::run(media, config.media_retention(), shutdown.clone()));
    let usage = tokio::spawn(usage::run(pool.clone(), config.usage.rollup_interval, shutdown.clone()));
    let policy = domain::risk::Policy {
        nats: nats.clone(),
        subjects,
        deployment: config.risk_policy(),
        per_instance_metrics: config.metrics.per_instance,
    };
    let risk = tokio::spawn(domain::risk::run(pool.clone(), config.risk.interval, policy, shutdown.clone()));
    shutdown.cancelled().await;
    let _ = tokio::join!(relay, fanout, retry, retention, usage, risk, sinks);
    // Attempts in flight get a short grace; what is left is handed back to other pods.
    let grace = (config.api.shutdown_timeout / 3).min(config.webhooks.timeout);
    exec.close(grace).await;
    writer.finish().await;
    match deliveries::release(&pool, &worker_id).await {
        Ok(n) if n > 0 => tracing::info!(n, "handed unfinished deliveries back"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "handing deliveries back failed; their claims lapse instead"),
    }
    bus::flush_bounded(&nats).await;
    pool.close().await;
    tracing::info!("dispatcher stopped");
    Ok(())
}

/// A random id for this pod's claims.
fn uuid_like() -> String {
    use rand::Rng;
    format!("{:032x}", rand::thread_rng().gen::<u128>())
}
