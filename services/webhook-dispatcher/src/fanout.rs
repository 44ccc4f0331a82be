//! Fan-out: drains the events stream (a durable JetStream consumer shared by every
//! dispatcher pod, so each event goes to one of them) and turns each event into one
//! delivery per enabled webhook of its instance, or of the instance's account, that
//! wants its type. Deliveries are
//! created claimed by this pod and attempted at once; the JetStream messages are acked
//! only after the deliveries are committed, so an event is never dropped, and one that
//! comes again (a lost ack) finds its deliveries already there and adds nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::RoundError;
use async_nats::jetstream::{self, consumer::pull, AckKind};
use futures::StreamExt;
use shared::bus::Subjects;
use shared::db::deliveries::{self, NewDelivery};
use shared::db::webhooks;
use shared::ids::{EventId, InstanceId};

use crate::executor::{secrets_of, Executor, Job};
use crate::shape;

/// The consumer's name (one per stream, shared by all dispatcher pods).
pub const CONSUMER: &str = "webhook-fanout";
const BATCH: usize = 500;
/// The longest one NATS call may take before it counts as failed.
const NATS_CALL: Duration = Duration::from_secs(10);

/// An event as it came from the stream.
struct Incoming {
    msg: jetstream::Message,
    /// The event's envelope, parsed.
    body: Arc<serde_json::Value>,
    id: EventId,
    instance: InstanceId,
    kind: String,
    created: Option<chrono::DateTime<chrono::Utc>>,
}

fn parse(msg: jetstream::Message) -> Result<Incoming, Box<jetstream::Message>> {
    let v: serde_json::Value = match serde_json::from_slice(&msg.payload) {
        Ok(v) => v,
        Err(_) => return Err(Box::new(msg)),
    };
    let id = v.get("id").and_then(|x| x.as_str()).and_then(|s| EventId::parse(s).ok());
    let instance = v.get("instance_id").and_then(|x| x.as_str()).and_then(|s| InstanceId::parse(s).ok());
    let kind = v.get("type").and_then(|x| x.as_str()).map(str::to_string);
    let created = v.get("created_at").and_then(|x| x.as_str()).and_then(|s| s.parse().ok());
    match (id, instance, kind) {
        (Some(id), Some(instance), Some(kind)) => Ok(Incoming { msg, body: Arc::new(v), id, instance, kind, created }),
        _ => Err(Box::new(msg)),
    }
}

/// Runs the fan-out until `shutdown`.
pub async fn run(
    db: sqlx::PgPool,
    js: jetstream::Context,
    subjects: Subjects,
    exec: Executor,
    shutdown: shared::Shutdown,
) {
    let mut failures = 0u32;
    let mut consumer: Option<jetstream::consumer::Consumer<pull::Config>> = None;
    while !shutdown.is_cancelled() {
        let result = match &consumer {
            Some(c) => fan_out_once(&db, c, &exec, &shutdown).await,
            None => match tokio::time::timeout(NATS_CALL, open(&js, &subjects))
                .await
                .unwrap_or_else(|_| Err(RoundError::Timeout("opening the consumer")))
            {
                Ok(c) => {
                    consumer = Some(c);
                    Ok(())
                }
                Err(e) => Err(e),
            },
        };
        match result {
            Ok(()) => failures = 0,
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %e, "webhook fan-out failed; retrying");
                // Open the consumer again: after a NATS restart the old one's pull
                // requests are gone.
                consumer = None;
                let wait =
                    shared::backoff::doubling(Duration::from_millis(200), failures, Duration::from_millis(6_400));
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

async fn open(
    js: &jetstream::Context,
    subjects: &Subjects,
) -> Result<jetstream::consumer::Consumer<pull::Config>, RoundError> {
    // The relay creates the stream (with its settings); until it has, this is retried.
    let stream = js.get_stream(subjects.events_stream()).await.map_err(RoundError::nats)?;
    stream
        .get_or_create_consumer(
            CONSUMER,
            pull::Config {
                durable_name: Some(CONSUMER.to_string()),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(60),
                max_ack_pending: 20_000,
                ..Default::default()
            },
        )
        .await
        .map_err(RoundError::nats)
}

async fn fan_out_once(
    db: &sqlx::PgPool,
    consumer: &jetstream::consumer::Consumer<pull::Config>,
    exec: &Executor,
    shutdown: &shared::Shutdown,
) -> Result<(), RoundError> {
    let fetch = consumer.fetch().max_messages(BATCH).expires(Duration::from_secs(1)).messages();
    // Every NATS call has a deadline: one that never returns (the connection lost
    // mid-call) becomes an error, and the consumer is opened again.
    let mut msgs = tokio::select! {
        m = tokio::time::timeout(NATS_CALL, fetch) => m.map_err(|_| RoundError::Timeout("fetching"))?.map_err(RoundError::nats)?,
        _ = shutdown.cancelled() => return Ok(()),
    };
    let mut batch = Vec::new();
    // A pull request the server lost (it restarted) never ends on its own: give up on it
    // well after its expiry and start over.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut stalled = false;
    loop {
        let m = match tokio::time::timeout_at(deadline, msgs.next()).await {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(_) => {
                stalled = true;
                break;
            }
        };
        match m {
            Ok(m) => match parse(m) {
                Ok(ev) => batch.push(ev),
                Err(bad) => {
                    tracing::error!(subject = %bad.subject, "an event in the stream is not an event; dropping it");
                    let _ = tokio::time::timeout(NATS_CALL, bad.ack_with(AckKind::Term)).await;
                }
            },
            Err(e) => {
                tracing::debug!(error = %e, "fetch ended early");
                break;
            }
        }
    }
    if batch.is_empty() {
        return if stalled { Err(RoundError::Stalled) } else { Ok(()) };
    }
    let claimed_at = Instant::now();
    let instances: Vec<&str> = {
        let mut v: Vec<&str> = batch.iter().map(|e| e.instance.as_str()).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    // An instance's own webhooks, its account's, and those of accounts it has left
    // (moved, or deleted) for the events it made while in them.
    let hooks = webhooks::active_for(db, &instances).await?;
    let origins: Vec<Arc<webhooks::Origin>> = hooks.iter().map(|h| Arc::new(h.origin.clone())).collect();
    let mut by_instance: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, h) in hooks.iter().enumerate() {
        by_instance.entry(h.instance_id.as_str()).or_default().push(i);
    }
    let mut rows = Vec::new();
    // Each delivery's endpoint as it applies to its event's instance (an account's
    // webhook comes once per instance, with that instance's origin).
    let mut hook_of: HashMap<(String, String), usize> = HashMap::new();
    for ev in &batch {
        let data = &ev.body["data"];
        // An instance's coming and going names the account it was in.
        let held_by =
            matches!(ev.kind.as_str(), "instance.created" | "instance.deleted").then(|| data["account_id"].as_str());
        for &i in by_instance.get(ev.instance.as_str()).into_iter().flatten() {
            let h = &hooks[i];
            if !(h.wants(&ev.kind, ev.created, held_by) && crate::shape::carries(&h.origin, &ev.kind, data)) {
                continue;
            }
            // An account the instance left and came back to lists its webhook twice.
            let std::collections::hash_map::Entry::Vacant(slot) = hook_of.entry((h.id.to_string(), ev.id.to_string()))
            else {
                continue;
            };
            slot.insert(i);
            rows.push(NewDelivery {
                webhook_id: h.id.clone(),
                instance_id: ev.instance.clone(),
                event_id: ev.id.clone(),
                event_type: ev.kind.clone(),
            });
        }
    }
    let s = exec.settings();
    let created = deliveries::insert_claimed(db, &rows, &s.worker_id, s.lock, s.retry_span).await?;
    let event_of: HashMap<&str, &Incoming> = batch.iter().map(|e| (e.id.as_str(), e)).collect();
    for (id, webhook_id, event_id, retry_until, claim_id) in created {
        let Some(ev) = event_of.get(event_id.as_str()) else { continue };
        let Some(&i) = hook_of.get(&(webhook_id.to_string(), event_id.to_string())) else { continue };
        let (h, origin) = (&hooks[i], &origins[i]);
        let job = Job {
            id,
            claim_id,
            url: shape::target(&h.url, &h.origin, &ev.body),
            secrets: secrets_of(h.secret.clone(), h.previous_secret.clone(), h.secret_rotated_at),
            webhook_id,
            event_id: event_id.to_string(),
            body: shape::body(&h.url, origin, &ev.body, Some(&ev.msg.payload)),
            attempts: 0,
            retry_until,
            event_created: ev.created,
            claimed_at,
        };
        exec.submit(job).await;
    }
    for ev in batch {
        // An event not acked comes again and adds nothing; a connection that cannot ack
        // is opened again rather than waited on for the rest of the batch.
        match tokio::time::timeout(NATS_CALL, ev.msg.ack()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(RoundError::nats(e)),
            Err(_) => return Err(RoundError::Timeout("acking")),
        }
    }
    if stalled {
        return Err(RoundError::Stalled);
    }
    Ok(())
}
