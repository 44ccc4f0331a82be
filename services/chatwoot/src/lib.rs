//! The Chatwoot bridge (issue #37): each instance's chats in a Chatwoot inbox of the API
//! channel kind, and its agents' replies out through the paced queue.
//!
//! It runs as its own role, `paceline chatwoot` (also inside `paceline dev`): Chatwoot
//! calls reach tenants' servers and take their time, so they never run in an API
//! request. Two loops:
//! - **intake**: a durable JetStream consumer (`chatwoot`, shared by every pod) reads
//!   `message.received`, `reaction.received`, `message.edited`, `message.deleted`,
//!   `message.sent` (messages sent from elsewhere, shown as outgoing) and
//!   `message.failed`, and writes a job for
//!   each one an instance's inbox carries (`chatwoot_jobs`, keyed by the event, so a
//!   redelivered event makes none), then acks. The API's webhook route writes the jobs
//!   for what Chatwoot tells (agents' messages, conversations resolved). The consumer
//!   exists only while some instance or account has Chatwoot settings, so a gateway
//!   without Chatwoot pays nothing in NATS for it.
//! - **work**: claims due jobs (the oldest of each instance only, so an instance's
//!   messages reach Chatwoot in order), does them, and writes each outcome under its
//!   claim. Chatwoot down or slow: the job waits with backoff in Postgres (visible as
//!   `paceline_chatwoot_backlog`), and nothing after it in that instance goes first.
//!   A job finds what an earlier try made before making anything, so nothing is made
//!   twice (see `jobs`).

pub mod client;
pub mod jobs;
pub mod render;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, consumer::pull};
use chrono::Utc;
use futures::StreamExt;
use serde_json::{json, Value};
use shared::db::chatwoot::{self as rows, Kind, Outcome};
use shared::fetch::GuardedClient;
use shared::ids::InstanceId;
use shared::{Config, Shutdown};

use domain::Core;

use self::jobs::Step;

/// The durable consumer every bridge pod shares.
pub const CONSUMER: &str = "chatwoot";
pub const JOBS: &str = "paceline_chatwoot_jobs_total";
pub const BACKLOG: &str = "paceline_chatwoot_backlog";
pub const OLDEST: &str = "paceline_chatwoot_oldest_job_seconds";

/// Agents' files one pod handles at once.
const FILES_AT_ONCE: usize = 2;
/// How long jobs in flight get at shutdown before they are handed back.
const GRACE: Duration = Duration::from_secs(5);
/// How long finished jobs are kept.
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest one NATS call may take.
const NATS_CALL: Duration = Duration::from_secs(10);
/// How often the intake looks whether any instance or account has Chatwoot settings.
const WATCH: Duration = Duration::from_secs(2);
/// How far back a newly made consumer starts reading.
const LOOKBACK: Duration = Duration::from_secs(300);
/// The events the bridge reads.
const EVENTS: [&str; 6] =
    ["message.received", "reaction.received", "message.edited", "message.deleted", "message.sent", "message.failed"];

pub fn describe() {
    metrics::describe_counter!(JOBS, "Chatwoot bridge jobs tried, by kind and result (done, retry, failed)");
    metrics::describe_gauge!(BACKLOG, "Chatwoot bridge jobs waiting, over every instance");
    metrics::describe_gauge!(OLDEST, "age of the oldest Chatwoot bridge job waiting");
    metrics::describe_histogram!(
        client::REQUEST_SECONDS,
        metrics::Unit::Seconds,
        "Chatwoot API calls' duration, by operation"
    );
}

pub struct Bridge {
    pub(crate) core: Core,
    /// Clients for Chatwoot's API on public addresses, and on one the admin allowed
    /// private; neither follows redirects (the token would go along).
    pub(crate) public: GuardedClient,
    pub(crate) private: GuardedClient,
    /// Fetches agents' files at an allowed private Chatwoot (redirects checked by hand).
    pub(crate) files: reqwest::Client,
    /// Agents' files handled at once (each may be held whole while it is queued).
    pub(crate) file_slots: tokio::sync::Semaphore,
    pod: String,
}

/// Runs the bridge role until `shutdown`.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    describe();
    let core = Core::connect(config, &shutdown, shared::config::Role::Chatwoot, "chatwoot").await?;
    let b = Arc::new(Bridge {
        public: GuardedClient::without_redirects(core.config.allow_private_targets, client::CALL_TIMEOUT * 10),
        private: GuardedClient::without_redirects(true, client::CALL_TIMEOUT * 10),
        files: shared::fetch::guarded_builder(true)
            .timeout(client::CALL_TIMEOUT * 10)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .context("building the HTTP client")?,
        file_slots: tokio::sync::Semaphore::new(FILES_AT_ONCE),
        pod: format!("cw_{}", uuid::Uuid::new_v4().simple()),
        core,
    });
    shared::health::register(
        "chatwoot",
        vec![
            shared::health::postgres(b.core.db.clone()),
            shared::health::redis(b.core.redis.clone()),
            shared::health::nats(b.core.nats.clone()),
        ],
    );
    let intake = tokio::spawn(intake(b.clone(), shutdown.clone()));
    let gauges = tokio::spawn(gauges(b.clone(), shutdown.clone()));
    work(&b, &shutdown).await;
    let _ = intake.await;
    let _ = gauges.await;
    if let Err(e) = rows::release(&b.core.db, &b.pod).await {
        tracing::warn!(error = %e, "could not hand back the chatwoot jobs in hand");
    }
    tracing::info!("chatwoot bridge stopped");
    Ok(())
}

/// Reads events into jobs until shutdown, reopening the consumer after a failure. The
/// consumer exists only while some instance or account has Chatwoot settings: with none,
/// it is removed (a stale one from an earlier build too), so the stream neither filters
/// every message event for it nor keeps them until it reads them. Once settings appear it
/// is made again, from `LOOKBACK` before, so what happened since is still read.
async fn intake(b: Arc<Bridge>, shutdown: Shutdown) {
    let mut failures = 0u32;
    // Whether this pod has seen the consumer gone since it last read (none yet).
    let mut gone = false;
    while !shutdown.is_cancelled() {
        let step = match rows::in_use(&b.core.db).await {
            Ok(true) => {
                gone = false;
                consume(&b, &shutdown).await
            }
            Ok(false) if gone => Ok(()),
            Ok(false) => shared::bus::drop_events_consumer(&b.core.nats, &b.core.subjects, CONSUMER, NATS_CALL)
                .await
                .map(|dropped| {
                    gone = true;
                    if dropped {
                        tracing::info!("no chatwoot settings: the chatwoot consumer is removed");
                    }
                })
                .map_err(anyhow::Error::msg),
            Err(e) => Err(e.into()),
        };
        let wait = match step {
            Ok(()) => {
                failures = 0;
                WATCH
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %e, "chatwoot consumer failed; retrying");
                shared::backoff::doubling(Duration::from_millis(200), failures, Duration::from_millis(6_400))
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Reads events into jobs until shutdown or until no instance or account has Chatwoot
/// settings any more (looked at every `WATCH`).
async fn consume(b: &Bridge, shutdown: &Shutdown) -> anyhow::Result<()> {
    let subjects = &b.core.subjects;
    let config = pull::Config {
        durable_name: Some(CONSUMER.to_string()),
        filter_subjects: EVENTS.iter().map(|k| subjects.events_filter(None, Some(k))).collect(),
        // Made when settings first appear: events from a little before, so an inbox set
        // up to `LOOKBACK` before the consumer was made still gets them.
        deliver_policy: jetstream::consumer::DeliverPolicy::ByStartTime {
            start_time: time::OffsetDateTime::now_utc() - LOOKBACK,
        },
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_secs(60),
        max_ack_pending: 10_000,
        ..Default::default()
    };
    let consumer =
        shared::bus::events_consumer(&b.core.nats, subjects, config, NATS_CALL).await.map_err(anyhow::Error::msg)?;
    let mut looked = tokio::time::Instant::now();
    loop {
        if looked.elapsed() >= WATCH {
            looked = tokio::time::Instant::now();
            if !rows::in_use(&b.core.db).await? {
                return Ok(());
            }
        }
        let batch = consumer.fetch().max_messages(500).expires(Duration::from_secs(1)).messages();
        let mut batch = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            b = tokio::time::timeout(NATS_CALL, batch) => b.context("fetching timed out")?.context("fetching")?,
        };
        let mut msgs = Vec::new();
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                m = tokio::time::timeout(Duration::from_secs(5), batch.next()) => m,
            };
            match next {
                Ok(Some(Ok(m))) => msgs.push(m),
                Ok(Some(Err(e))) => anyhow::bail!("pulling: {e}"),
                Ok(None) => break,
                Err(_) => anyhow::bail!("a fetch stalled"),
            }
        }
        if msgs.is_empty() {
            continue;
        }
        if let Err(e) = take(b, &msgs).await {
            // Back at once (not after the ack wait), so they are not passed by later ones.
            for m in &msgs {
                let _ = m.ack_with(async_nats::jetstream::AckKind::Nak(None)).await;
            }
            return Err(e);
        }
        for m in &msgs {
            let _ = m.ack().await;
        }
    }
}

/// A job an event makes: the instance, what, its key, its payload, when the event was.
type EventJob = (InstanceId, Kind, String, Value, Option<chrono::DateTime<Utc>>);

/// The job an event makes for an instance's inbox, if any.
fn job_of(v: &Value) -> Option<EventJob> {
    let id = InstanceId::parse(v.get("instance_id")?.as_str()?).ok()?;
    let event = v.get("id")?.as_str()?.to_string();
    let data = v.get("data")?.clone();
    // When it happened on the network (as an import orders the log's messages), else
    // when the event was made.
    let at = ["/data/timestamp", "/data/sent_at", "/created_at"]
        .iter()
        .find_map(|p| v.pointer(p).and_then(|t| serde_json::from_value(t.clone()).ok()));
    let (kind, key, payload) = match v.get("type")?.as_str()? {
        "message.received" => {
            let key = data.get("message_id")?.as_str()?.to_string();
            (Kind::Inbound, key, json!({ "event": "message", "data": data }))
        }
        "reaction.received" => (Kind::Inbound, event, json!({ "event": "reaction", "data": data })),
        "message.edited" => (Kind::Inbound, event, json!({ "event": "edited", "data": data })),
        "message.deleted" => (Kind::Inbound, event, json!({ "event": "deleted", "data": data })),
        // Sent from elsewhere (the API, the attendant, Evolution's routes): shown to the
        // agents as outgoing; an agent's own message is in Chatwoot already.
        "message.sent" => {
            let ours =
                data.get("client_message_id").and_then(Value::as_str).is_some_and(|c| c.starts_with("chatwoot-"));
            if ours {
                return None;
            }
            let msg = data.get("id")?.as_str()?.to_string();
            let sent = json!({
                "message_id": msg, "chat_jid": data.get("to")?, "wa_message_id": data.get("wa_message_id")?,
                "from_me": true, "type": data.get("type")?,
            });
            (Kind::Inbound, msg, json!({ "event": "sent", "data": sent }))
        }
        "message.failed" => {
            let ours =
                data.get("client_message_id").and_then(Value::as_str).is_some_and(|c| c.starts_with("chatwoot-"));
            if !ours {
                return None;
            }
            (Kind::Status, event, json!({ "event": "failed", "data": data }))
        }
        _ => return None,
    };
    Some((id, kind, key, payload, at))
}

/// Writes the jobs of a batch of events (for the instances with an inbox), in one
/// transaction; an unreadable event is dropped.
async fn take(b: &Bridge, msgs: &[jetstream::Message]) -> anyhow::Result<()> {
    let jobs: Vec<EventJob> = msgs
        .iter()
        .filter_map(|m| serde_json::from_slice::<Value>(&m.payload).ok())
        .filter_map(|v| job_of(&v))
        .collect();
    if jobs.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = jobs.iter().map(|j| j.0.to_string()).collect::<HashSet<_>>().into_iter().collect();
    // Inboxes made from an account's settings: for instances that joined the account
    // since, and gone for those that left it.
    rows::drop_strays(&b.core.db, Some(&ids)).await?;
    for (id, account) in rows::unmade(&b.core.db, &ids).await? {
        // One account's broken settings never stop the others' events.
        if let Err(e) = domain::chatwoot::account::inherit(&b.core, &id, &account).await {
            tracing::warn!(instance = %id, error = %e, "could not make a chatwoot inbox from the account's settings");
        }
    }
    let inboxes = rows::many(&b.core.db, &ids).await?;
    let mut tx = b.core.db.begin().await?;
    for (id, kind, key, mut payload, at) in jobs {
        let Some(inbox) = inboxes.iter().find(|i| i.instance_id == id) else { continue };
        let chat = payload.pointer("/data/chat_jid").and_then(Value::as_str).map(str::to_string);
        if kind == Kind::Inbound && chat.is_none() {
            continue;
        }
        payload["generation"] = json!(inbox.generation);
        rows::enqueue(&mut *tx, &id, kind, &key, &payload, at).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Claims and does jobs until shutdown: a slot freed by a job is filled at once, so a
/// slow Chatwoot holds only its own instances' jobs.
async fn work(b: &Arc<Bridge>, shutdown: &Shutdown) {
    let slots = b.core.config.chatwoot.concurrency.max(1) as usize;
    let mut tasks = tokio::task::JoinSet::new();
    let mut idle = 0u32;
    while !shutdown.is_cancelled() {
        while tasks.try_join_next().is_some() {}
        let room = slots.saturating_sub(tasks.len());
        let claimed = if room == 0 {
            Vec::new()
        } else {
            match rows::claim(&b.core.db, &b.pod, b.lock().as_millis() as u64, room as i64).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming chatwoot jobs failed");
                    Vec::new()
                }
            }
        };
        if claimed.is_empty() {
            idle = (idle + 1).min(4);
            let pause = Duration::from_millis(100 * u64::from(idle));
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(pause) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
            continue;
        }
        idle = 0;
        for job in claimed {
            let b = b.clone();
            tasks.spawn(async move {
                // A job never outlives its claim: another pod could take it over.
                let deadline = b.lock().mul_f64(0.75);
                let step = match tokio::time::timeout(deadline, b.run(&job)).await {
                    Ok(s) => s,
                    Err(_) => Step::Later(Duration::ZERO, "the job took too long".into()),
                };
                b.finish(&job, step).await;
            });
        }
    }
    // Jobs in flight get a short grace; what is still running is handed back (`release`).
    let all = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(GRACE, all).await.is_err() {
        tasks.abort_all();
    }
}

impl Bridge {
    /// How long a claim holds a job.
    fn lock(&self) -> Duration {
        self.core.config.chatwoot.lock.max(Duration::from_secs(4))
    }

    async fn finish(&self, job: &rows::Job, step: Step) {
        let kind = format!("{:?}", job.kind).to_lowercase();
        let outcome = match step {
            Step::Done => Outcome::Done,
            Step::Fail(error) => Outcome::Failed { error },
            Step::Later(wait, error) => {
                let age = (Utc::now() - job.first_try_at).to_std().unwrap_or_default();
                let cfg = &self.core.config.chatwoot;
                if age > cfg.retry_span {
                    Outcome::Failed { error: format!("gave up after {} tries: {error}", job.attempts) }
                } else if wait.is_zero() && error.is_empty() {
                    // Ready now (e.g. its media finished downloading): at once.
                    Outcome::Retry { at: Utc::now(), error }
                } else {
                    let wait = if wait.is_zero() {
                        backoff(job.attempts, cfg.retry_base, cfg.retry_max)
                    } else {
                        chrono::Duration::from_std(wait).unwrap_or_default()
                    };
                    Outcome::Retry { at: Utc::now() + wait, error }
                }
            }
        };
        let result = match &outcome {
            Outcome::Done => "done",
            Outcome::Retry { .. } => "retry",
            Outcome::Failed { .. } => "failed",
        };
        metrics::counter!(JOBS, "kind" => kind, "result" => result).increment(1);
        let error = match &outcome {
            Outcome::Done => None,
            Outcome::Retry { error, .. } | Outcome::Failed { error } => Some(error.as_str()).filter(|e| !e.is_empty()),
        };
        if let Outcome::Failed { error } = &outcome {
            tracing::warn!(instance = %job.instance_id, job = job.seq, error = %error, "a chatwoot job was given up");
        }
        match rows::finish(&self.core.db, &self.pod, job, &outcome).await {
            Ok(true) => {}
            Ok(false) => tracing::info!(job = job.seq, "a chatwoot job's claim was lost; another pod has it"),
            Err(e) => tracing::warn!(error = %e, "could not record a chatwoot job's outcome; it is tried again"),
        }
        if result != "retry" || error.is_some() {
            let _ = rows::set_error(&self.core.db, &job.instance_id, if result == "done" { None } else { error }).await;
        }
    }
}

/// The wait after `attempts` tries: `base` doubling to `max`, less up to a fifth.
fn backoff(attempts: i32, base: Duration, max: Duration) -> chrono::Duration {
    let wait = shared::backoff::doubling(base, (attempts.max(1) - 1) as u32, max);
    let jitter = rand::random::<f64>() * 0.2;
    chrono::Duration::from_std(wait.mul_f64(1.0 - jitter)).unwrap_or_else(|_| chrono::Duration::seconds(600))
}

/// Publishes the backlog's size and age, and prunes finished jobs.
async fn gauges(b: Arc<Bridge>, shutdown: Shutdown) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    let mut n = 0u64;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Ok((count, oldest)) = rows::backlog(&b.core.db).await {
            metrics::gauge!(BACKLOG).set(count as f64);
            metrics::gauge!(OLDEST).set(oldest);
        }
        n += 1;
        if n.is_multiple_of(120) {
            let before = Utc::now() - chrono::Duration::from_std(KEEP).unwrap_or_default();
            if let Err(e) = rows::prune(&b.core.db, before).await {
                tracing::warn!(error = %e, "pruning chatwoot jobs failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_become_jobs() {
        let one = format!("1@{}", shared::jid::USER_SERVER);
        let ev = |t: &str, data: Value| {
            json!({"id": "evt_1", "type": t, "instance_id": "inst_01a21c814fd7741bba4f97daf15a6a28",
            "created_at": "2026-11-27T10:00:00Z", "data": data})
        };
        let (_, k, key, _, at) =
            job_of(&ev("message.received", json!({"message_id": "msg_1", "chat_jid": one}))).unwrap();
        assert_eq!((k, key.as_str()), (Kind::Inbound, "msg_1"));
        assert_eq!(at.unwrap().to_rfc3339(), "2026-11-27T10:00:00+00:00");
        let (_, _, _, _, at) = job_of(&ev(
            "message.received",
            json!({"message_id": "msg_1", "chat_jid": one, "timestamp": "2026-11-27T09:59:58Z"}),
        ))
        .unwrap();
        assert_eq!(at.unwrap().to_rfc3339(), "2026-11-27T09:59:58+00:00");
        let (_, k, key, p, _) = job_of(&ev("reaction.received", json!({"wa_message_id": "W"}))).unwrap();
        assert_eq!((k, key.as_str(), p["event"].as_str()), (Kind::Inbound, "evt_1", Some("reaction")));
        assert!(job_of(&ev("message.failed", json!({"id": "msg_2", "client_message_id": "mine"}))).is_none());
        let (_, k, _, _, _) =
            job_of(&ev("message.failed", json!({"id": "msg_2", "client_message_id": "chatwoot-1-2"}))).unwrap();
        assert_eq!(k, Kind::Status);
        assert!(job_of(&ev("message.delivered", json!({}))).is_none());
        let sent = json!({"id": "msg_3", "to": one, "wa_message_id": "W3", "type": "text"});
        let (_, k, key, p, _) = job_of(&ev("message.sent", sent.clone())).unwrap();
        assert_eq!((k, key.as_str(), p["data"]["chat_jid"].as_str()), (Kind::Inbound, "msg_3", Some(one.as_str())));
        let mut agent = sent;
        agent["client_message_id"] = json!("chatwoot-1-9");
        assert!(job_of(&ev("message.sent", agent)).is_none());
        assert!(job_of(&json!({"type": "message.received"})).is_none());
    }

    #[test]
    fn backoff_doubles_to_its_cap() {
        let s = |n| backoff(n, Duration::from_secs(2), Duration::from_secs(600)).num_milliseconds();
        assert!((1_600..=2_000).contains(&s(1)));
        assert!((3_200..=4_000).contains(&s(2)));
        assert!((480_000..=600_000).contains(&s(30)));
    }
}
