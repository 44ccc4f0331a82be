//! Event sinks (issue #39): each enabled sink's events published into its RabbitMQ
//! broker, by one dispatcher pod at a time under a claim (`db::sinks`).
//!
//! A sink reads the events stream from its cursor with an ordered consumer filtered to
//! its instance's subjects (an account's sink: every instance's, each event kept when its
//! instance was in the account then, `members.rs`), so its events go in the order the
//! relay published them (the order event streams and webhooks see). Each batch is published with publisher
//! confirms, and the cursor moves past it only once every message of it was confirmed,
//! under the pod's claim and the settings' generation: a broker down, restarted or
//! refusing, or a pod killed, makes the events since the cursor go again (at least once,
//! never skipped). Backoff while failing doubles from 1 s to `rabbitmq.retry_max`; the
//! claim is renewed meanwhile, so another pod takes the sink only when this one is gone.

pub mod amqp;
mod members;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::DeliverPolicy};
use futures::StreamExt;
use shared::db::sinks::{self as rows, Owner, SinkRow, RABBITMQ};
use shared::db::webhooks::{Origin, Shape, WebhookFormat};
use shared::sealed::Sealer;
use shared::{bus::Subjects, Config, Shutdown};
use tokio::task::JoinSet;

use crate::metrics as m;
use crate::shape;
use amqp::{AmqpError, Layout, Outgoing, Publisher};

/// Messages published before their confirms are awaited together.
const BATCH: usize = 256;
/// How long a batch waits for more events before it is confirmed.
const LINGER: Duration = Duration::from_millis(100);
/// A batch's confirms are awaited (and the cursor moved) at least this often.
const FLUSH_WITHIN: Duration = Duration::from_secs(1);
/// ... or once this many events (wanted or not) were read past the cursor.
const BACKLOG_STEP: u64 = 2_000;
/// How often a pod looks for sinks nobody delivers.
const CLAIM_EVERY: Duration = Duration::from_secs(2);
/// Sinks one pod delivers at once.
const MAX_RUNNING: usize = 512;

/// A running sink's events not yet confirmed, and (while it fails) since when the oldest
/// of them has waited.
type Progress = (u64, Option<chrono::DateTime<chrono::Utc>>);

/// What every sink task needs.
#[derive(Clone)]
pub struct Ctx {
    pub db: sqlx::PgPool,
    pub js: jetstream::Context,
    pub subjects: Subjects,
    pub media: shared::db::media::Store,
    pub pod: String,
    pub lock: Duration,
    pub retry_max: Duration,
    /// The deployment's broker (`rabbitmq.url`).
    pub deployment_url: Option<String>,
    pub allow_private: bool,
    pub server_url: String,
    pub sealer: Option<Sealer>,
    budget: shape::Budget,
    /// Per running sink: its events not yet confirmed (from the consumer), and since when
    /// the oldest of them has waited while it fails.
    state: Arc<Mutex<HashMap<String, Progress>>>,
}

impl Ctx {
    pub fn new(
        config: &Config,
        db: sqlx::PgPool,
        js: jetstream::Context,
        media: shared::db::media::Store,
        pod: String,
    ) -> Ctx {
        Ctx {
            db,
            js,
            subjects: Subjects::new(config),
            media,
            pod,
            lock: config.rabbitmq.lock.max(Duration::from_secs(3)),
            retry_max: config.rabbitmq.retry_max.max(Duration::from_secs(1)),
            deployment_url: config.rabbitmq.url.clone(),
            allow_private: config.allow_private_targets,
            server_url: config.server_url(),
            sealer: Sealer::from_config(config),
            budget: shape::Budget::new(16 * 1024 * 1024),
            state: Arc::default(),
        }
    }
}

/// Claims sinks and delivers each in a task of its own until shutdown.
pub async fn run(ctx: Ctx, shutdown: Shutdown) {
    let mut tasks: JoinSet<()> = JoinSet::new();
    // The sink each task delivers, by task: a task that panicked is forgotten too.
    let mut running: HashMap<tokio::task::Id, String> = HashMap::new();
    let mut tick = tokio::time::interval(CLAIM_EVERY);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                let task = match &done {
                    Ok((task, ())) => *task,
                    Err(e) => e.id(),
                };
                if let Some(id) = running.remove(&task) {
                    if done.is_err() {
                        tracing::error!(owner = %id, "a sink's task failed; its claim is given back");
                        let _ = rows::release(&ctx.db, &id, RABBITMQ, &ctx.pod).await;
                    }
                    ctx.state.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                }
            }
            _ = tick.tick() => {
                let room = MAX_RUNNING.saturating_sub(running.len());
                if room > 0 {
                    match rows::claim(&ctx.db, &ctx.pod, ctx.lock.as_millis() as i64, room as i64).await {
                        Ok(claimed) => {
                            for row in claimed {
                                if running.values().any(|id| *id == row.owner_id) {
                                    // Its former task (an older generation) still ends here:
                                    // give the claim back, to be taken once it has.
                                    let _ = rows::release(&ctx.db, &row.owner_id, RABBITMQ, &ctx.pod).await;
                                    continue;
                                }
                                let id = row.owner_id.clone();
                                let (ctx, shutdown) = (ctx.clone(), shutdown.clone());
                                let task = tasks.spawn(async move { deliver(&ctx, row, &shutdown).await });
                                running.insert(task.id(), id);
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "claiming sinks failed; trying again"),
                    }
                }
                gauges(&ctx).await;
            }
        }
    }
    while tasks.join_next().await.is_some() {}
}

async fn gauges(ctx: &Ctx) {
    if let Ok((all, failing)) = rows::counts(&ctx.db).await {
        metrics::gauge!(m::SINKS, "state" => "enabled").set(all as f64);
        metrics::gauge!(m::SINKS, "state" => "failing").set(failing as f64);
    }
    let state = ctx.state.lock().unwrap_or_else(|p| p.into_inner());
    let backlog: u64 = state.values().map(|(n, _)| n).sum();
    let oldest = state.values().filter_map(|(_, at)| *at).min();
    metrics::gauge!(m::SINK_BACKLOG).set(backlog as f64);
    let age = oldest.map_or(0.0, |at| (chrono::Utc::now() - at).num_milliseconds().max(0) as f64 / 1000.0);
    metrics::gauge!(m::SINK_OLDEST).set(age);
}

/// How a sink's task ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Shut down: the claim is given back.
    Stopped,
    /// The claim is no longer this pod's under this generation (settings changed, turned
    /// off, removed, or taken after a stall).
    Lost,
}

/// What a sink publishes with, resolved from its row.
struct Target {
    url: url::Url,
    allow_private: bool,
    layout: Layout,
    origin: Option<Origin>,
}

fn target(ctx: &Ctx, row: &SinkRow, name: String, phone: Option<String>) -> Result<Target, String> {
    let (url, allow_private) = match &row.url_sealed {
        Some(sealed) => {
            let sealer = ctx.sealer.as_ref().ok_or("no key to open the broker's address with")?;
            let url = domain::sinks::open_url(sealer, &row.owner_id, sealed)
                .ok_or("the stored broker address does not open")?;
            let private =
                ctx.allow_private || (row.private_host.is_some() && row.private_host.as_deref() == url.host_str());
            (url, private)
        }
        // The deployment's own broker is the operator's: wherever it is.
        None => {
            let raw = ctx.deployment_url.as_deref().ok_or("the deployment has no broker (rabbitmq.url)")?;
            (url::Url::parse(raw).map_err(|_| "the deployment's rabbitmq.url is not a URL")?, true)
        }
    };
    let (layout, origin) = match row.format {
        WebhookFormat::Paceline => (Layout::Ours { queue: row.queue.clone() }, None),
        WebhookFormat::Evolution => {
            let shape = Shape {
                format: WebhookFormat::Evolution,
                by_events: false,
                base64: false,
                evolution_events: row.evolution_events.clone(),
            };
            (Layout::Evolution, Some(Origin { shape, instance_name: name, phone }))
        }
    };
    Ok(Target { url, allow_private, layout, origin })
}

/// Delivers one sink until shutdown or until its claim is lost.
async fn deliver(ctx: &Ctx, row: SinkRow, shutdown: &Shutdown) {
    let (id, generation) = (row.owner_id.clone(), row.generation);
    let mut cursor = row.cursor_seq.max(0) as u64;
    let mut backoff = Duration::from_secs(1);
    let end = loop {
        let before = cursor;
        // The claim is renewed all along (through connecting, publishing and waiting for
        // confirms), and the attempt ends the moment it is lost.
        let res = tokio::select! {
            r = attempt(ctx, &row, &mut cursor, shutdown) => r,
            _ = keep_claim(ctx, &id, generation) => Ok(End::Lost),
        };
        let err = match res {
            Ok(end) => break end,
            Err(e) => e,
        };
        if cursor > before {
            backoff = Duration::from_secs(1);
        }
        {
            // Failing: its oldest unconfirmed event has waited at least since now.
            let mut state = ctx.state.lock().unwrap_or_else(|p| p.into_inner());
            state.entry(id.clone()).or_default().1.get_or_insert_with(chrono::Utc::now);
        }
        tracing::warn!(owner = %id, error = %err, "publishing to the sink failed; trying again");
        metrics::counter!(m::SINK_FAILURES).increment(1);
        let _ = rows::failed(&ctx.db, &id, RABBITMQ, &ctx.pod, generation, &err).await;
        if let Some(end) = wait(ctx, &id, generation, backoff, shutdown).await {
            break end;
        }
        backoff = (backoff * 2).min(ctx.retry_max);
    };
    if end == End::Stopped || end == End::Lost {
        // Another pod (or this one, under the new generation) takes it at once.
        let _ = rows::release(&ctx.db, &id, RABBITMQ, &ctx.pod).await;
    }
    tracing::debug!(owner = %id, ?end, "sink task ended");
}

/// Waits `d` while renewing the claim; `Some` when the task must end.
async fn wait(ctx: &Ctx, id: &str, generation: i64, d: Duration, shutdown: &Shutdown) -> Option<End> {
    let until = tokio::time::Instant::now() + d;
    loop {
        let step = (ctx.lock / 3).min(until.saturating_duration_since(tokio::time::Instant::now()));
        if step.is_zero() {
            return None;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Some(End::Stopped),
            _ = tokio::time::sleep(step) => {}
        }
        if renew(ctx, id, generation).await == Ok(false) {
            return Some(End::Lost);
        }
    }
}

async fn renew(ctx: &Ctx, id: &str, generation: i64) -> Result<bool, ()> {
    let call = rows::renew(&ctx.db, id, RABBITMQ, &ctx.pod, generation, ctx.lock.as_millis() as i64);
    match tokio::time::timeout(ctx.lock / 3, call).await {
        Ok(Ok(held)) => Ok(held),
        _ => Err(()),
    }
}

/// Renews the claim every third of the lock; returns when it is lost, or when no renewal
/// succeeded for two thirds of it (Postgres unreachable: another pod may take it soon).
async fn keep_claim(ctx: &Ctx, id: &str, generation: i64) {
    let mut held_until = tokio::time::Instant::now() + ctx.lock * 2 / 3;
    loop {
        tokio::time::sleep(ctx.lock / 3).await;
        match renew(ctx, id, generation).await {
            Ok(true) => held_until = tokio::time::Instant::now() + ctx.lock * 2 / 3,
            Ok(false) => return,
            Err(()) if tokio::time::Instant::now() >= held_until => return,
            Err(()) => {}
        }
    }
}

/// One connection's worth of delivering: `Err` (a text without credentials) to back off
/// and start again from the cursor.
async fn attempt(ctx: &Ctx, row: &SinkRow, cursor: &mut u64, shutdown: &Shutdown) -> Result<End, String> {
    let (name, phone) = match row.owner() {
        Some(Owner::Instance(id)) => {
            let inst =
                shared::db::instances::get(&ctx.db, &id).await.map_err(|e| format!("reading the instance: {e}"))?;
            let Some(inst) = inst else { return Ok(End::Lost) };
            (inst.name, inst.phone)
        }
        // An account's sink is in paceline's format: no instance name in its messages.
        Some(Owner::Account(_)) => (String::new(), None),
        None => return Ok(End::Lost),
    };
    let t = target(ctx, row, name, phone)?;
    let mut publisher = Publisher::connect(&t.url, t.allow_private, &row.exchange, t.layout.clone(), &row.owner_id)
        .await
        .map_err(|e| e.to_string())?;
    let res = publish_from(ctx, row, &t, &mut publisher, cursor, shutdown).await;
    publisher.close().await;
    res
}

async fn publish_from(
    ctx: &Ctx,
    row: &SinkRow,
    t: &Target,
    publisher: &mut Publisher,
    cursor: &mut u64,
    shutdown: &Shutdown,
) -> Result<End, String> {
    let id = row.owner_id.as_str();
    // An account's sink reads every instance's events and keeps its own.
    let mut members = match row.owner() {
        Some(Owner::Account(a)) => Some(members::Memberships::new(a)),
        _ => None,
    };
    let stream =
        ctx.js.get_stream(ctx.subjects.events_stream()).await.map_err(|e| format!("the events stream: {e}"))?;
    let (first, newest) = (stream.cached_info().state.first_sequence, stream.cached_info().state.last_sequence);
    if *cursor > newest {
        // The stream was made anew (its sequence started over): from its start.
        tracing::warn!(owner = %id, cursor = *cursor, newest, "the events stream was reset; the sink starts over");
        metrics::counter!(m::SINK_GAPS).increment(1);
        *cursor = first.saturating_sub(1);
    } else if *cursor + 1 < first {
        tracing::warn!(owner = %id, cursor = *cursor, first, "a sink's events older than the stream's retention are gone");
        metrics::counter!(m::SINK_GAPS).increment(1);
    }
    let config = pull::OrderedConfig {
        filter_subject: ctx.subjects.events_filter(members.is_none().then_some(id), None),
        deliver_policy: DeliverPolicy::ByStartSequence { start_sequence: *cursor + 1 },
        ..Default::default()
    };
    let consumer = stream.create_consumer(config).await.map_err(|e| format!("opening the events: {e}"))?;
    let mut messages = consumer.messages().await.map_err(|e| format!("reading the events: {e}"))?;
    let mut pending = Vec::new();
    let mut last = *cursor;
    let mut oldest: Option<chrono::DateTime<chrono::Utc>> = None;
    // When the batch's first message was read: a batch is confirmed within a second even
    // while events keep coming.
    let mut batch_since: Option<tokio::time::Instant> = None;
    loop {
        let due =
            batch_since.is_some_and(|t| t.elapsed() >= FLUSH_WITHIN) || last.saturating_sub(*cursor) >= BACKLOG_STEP;
        if due {
            track(ctx, id, pending.len() as u64, oldest);
            if !flush(ctx, row, &mut pending, cursor, last).await? {
                return Ok(End::Lost);
            }
            (oldest, batch_since) = (None, None);
        }
        let next = tokio::select! {
            _ = shutdown.cancelled() => {
                flush(ctx, row, &mut pending, cursor, last).await?;
                return Ok(End::Stopped);
            }
            n = tokio::time::timeout(LINGER, messages.next()) => n,
        };
        let msg = match next {
            Err(_) => {
                if last > *cursor && !flush(ctx, row, &mut pending, cursor, last).await? {
                    return Ok(End::Lost);
                }
                (oldest, batch_since) = (None, None);
                track(ctx, id, 0, None);
                continue;
            }
            Ok(None) => return Err("the events stream ended".into()),
            Ok(Some(Err(e))) => return Err(format!("reading the events: {e}")),
            Ok(Some(Ok(msg))) => msg,
        };
        let (seq, behind) = msg
            .info()
            .map(|i| (i.stream_sequence, i.pending))
            .map_err(|e| format!("an event without its sequence: {e}"))?;
        if seq <= last {
            // The ordered consumer started over by itself (NATS restarted): go again from
            // the cursor rather than from wherever it started.
            return Err("the events consumer restarted".into());
        }
        batch_since.get_or_insert_with(tokio::time::Instant::now);
        let envelope: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap_or_default();
        let kind = envelope["type"].as_str().unwrap_or_default();
        let instance = envelope["instance_id"].as_str().unwrap_or_default();
        let at = envelope["created_at"].as_str().and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok());
        let mut wanted = (row.events.is_empty() || row.events.iter().any(|e| e == kind))
            && t.origin.as_ref().is_none_or(|o| shape::carries(o, kind, &envelope["data"]));
        if let (true, Some(m)) = (wanted, members.as_mut()) {
            wanted = match at {
                Some(at) => m.admits(&ctx.db, &envelope, instance, at).await?,
                None => false,
            };
        }
        if wanted {
            oldest = oldest.or(at);
            let body = match &t.origin {
                None => msg.payload.to_vec(),
                Some(origin) => evolution_body(ctx, origin, &row.exchange, &envelope).await,
            };
            let evolution_event = evolution_shape::event_name(kind, &envelope["data"]);
            // An account's messages are routed under the account, then the instance.
            let route = match &members {
                Some(_) => format!("{id}.{instance}"),
                None => id.to_string(),
            };
            let out = Outgoing {
                id: envelope["id"].as_str().unwrap_or_default(),
                route: &route,
                instance,
                kind,
                evolution_event,
                at: at.map_or(0, |a| a.timestamp()),
                body: &body,
            };
            match publisher.publish(&out).await {
                Ok(confirm) => pending.push(confirm),
                Err(e) => {
                    track(ctx, id, behind + 1 + pending.len() as u64, oldest);
                    return Err(e.to_string());
                }
            }
        }
        last = seq;
        if pending.len() >= BATCH {
            track(ctx, id, behind + pending.len() as u64, oldest);
            if !flush(ctx, row, &mut pending, cursor, last).await? {
                return Ok(End::Lost);
            }
            (oldest, batch_since) = (None, None);
        }
    }
}

/// The sink's backlog (its events not yet confirmed) and, while it fails, since when the
/// oldest of them has waited, for the gauges.
fn track(ctx: &Ctx, id: &str, backlog: u64, oldest: Option<chrono::DateTime<chrono::Utc>>) {
    ctx.state.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string(), (backlog, oldest));
}

/// Waits for every pending confirm, then moves the cursor to `last`; false when the
/// claim is no longer this pod's. `Err` when the broker did not confirm one.
async fn flush(
    ctx: &Ctx,
    row: &SinkRow,
    pending: &mut Vec<lapin::PublisherConfirm>,
    cursor: &mut u64,
    last: u64,
) -> Result<bool, String> {
    let n = pending.len();
    for c in pending.drain(..) {
        if let Err(e) = amqp::confirmed(c).await {
            metrics::counter!(m::SINK_PUBLISHED, "result" => "failed").increment(1);
            return Err(match e {
                AmqpError::Nacked => "the broker refused a message (nack)".into(),
                e => e.to_string(),
            });
        }
    }
    metrics::counter!(m::SINK_PUBLISHED, "result" => "confirmed").increment(n as u64);
    if last <= *cursor {
        return Ok(true);
    }
    let moved = rows::advance(&ctx.db, &row.owner_id, RABBITMQ, &ctx.pod, row.generation, last as i64, n as i64)
        .await
        .map_err(|e| format!("recording progress: {e}"))?;
    if moved {
        *cursor = last;
    }
    Ok(moved)
}

/// An Evolution-format body: Evolution's RabbitMQ message (`event`, `instance`, `data`,
/// `server_url`, `date_time`, `sender`), without a webhook's `destination`.
async fn evolution_body(ctx: &Ctx, origin: &Origin, exchange: &str, envelope: &serde_json::Value) -> Vec<u8> {
    let by = tokio::time::Instant::now() + Duration::from_secs(5);
    let built = shape::build(&ctx.media, &ctx.server_url, exchange, origin, envelope, &ctx.budget, by).await;
    let bytes = match built {
        Ok(b) => b.bytes.to_vec(),
        Err(_) => serde_json::to_vec(envelope).expect("json serializes"),
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut v) => {
            if let Some(o) = v.as_object_mut() {
                o.remove("destination");
            }
            serde_json::to_vec(&v).expect("json serializes")
        }
        Err(_) => bytes,
    }
}
