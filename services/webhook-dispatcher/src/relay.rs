//! The outbox relay: publishes events committed in Postgres to JetStream, with
//! `Nats-Msg-Id` = the event id, in batches of commits told apart by Postgres snapshots
//! (`db::outbox::page`), and moves its position past a page only after JetStream acked
//! it, in the transaction that locked the position. A crash or a NATS outage between the
//! commit of an event and its publish loses nothing (the position stays and the page is
//! sent again), and JetStream's de-duplication window drops the repeats. Nothing is
//! written to the events' own rows.

use std::time::Duration;

use async_nats::jetstream;
use shared::bus::Subjects;
use shared::db::outbox;
use shared::db::usage::EventUsage;

use crate::error::RoundError;

use crate::metrics::{RELAY_LAG, RELAY_PUBLISHED};

/// The longest one NATS call may take before it counts as failed.
const NATS_CALL: Duration = Duration::from_secs(10);
/// Events per transaction.
const BATCH: i64 = 500;
/// Waits when there is nothing to publish, and after a failure (doubling to the last).
const IDLE: Duration = Duration::from_millis(100);
const BACKOFF: [Duration; 5] = [
    Duration::from_millis(200),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
];
/// Runs the relay until `shutdown`.
pub async fn run(
    db: sqlx::PgPool,
    js: jetstream::Context,
    subjects: Subjects,
    max_bytes: u64,
    shutdown: shared::Shutdown,
) {
    let mut failures = 0usize;
    let mut stream_ready = false;
    loop {
        if !stream_ready {
            match tokio::time::timeout(NATS_CALL, shared::bus::configure_events_stream(&js, &subjects, max_bytes))
                .await
                .unwrap_or_else(|_| Err(shared::bus::StreamError::Timeout))
            {
                Ok(_) => stream_ready = true,
                Err(e) => tracing::warn!(error = %e, "creating the events stream failed"),
            }
        }
        let round = if stream_ready { relay_once(&db, &js, &subjects).await.map(Some) } else { Ok(None) };
        let wait = match round {
            // No stream yet: try again as after a failure.
            Ok(None) => {
                failures += 1;
                BACKOFF[(failures - 1).min(BACKOFF.len() - 1)]
            }
            Ok(Some(n)) => {
                failures = 0;
                if n as i64 == BATCH {
                    Duration::ZERO
                } else {
                    IDLE
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "publishing events failed; they stay in the outbox");
                failures += 1;
                BACKOFF[(failures - 1).min(BACKOFF.len() - 1)]
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Publishes one page; returns how many events went out.
async fn relay_once(db: &sqlx::PgPool, js: &jetstream::Context, subjects: &Subjects) -> Result<usize, RoundError> {
    let mut tx = db.begin().await?;
    // Another relay is publishing: this one waits its turn.
    let Some(at) = outbox::lock_position(&mut tx).await? else { return Ok(0) };
    if at.ahead {
        return Err(RoundError::PositionAhead);
    }
    let events = outbox::page(&mut tx, &at, BATCH).await?;
    // Nothing new since the last batch: the position may stay where it is (the next batch
    // then starts from it), so an idle relay writes nothing.
    if events.is_empty() && at.first_page() {
        return Ok(0);
    }
    let mut acks = Vec::with_capacity(events.len());
    for ev in &events {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, ev.id.as_str());
        let payload = serde_json::to_vec(&ev.payload).expect("json serializes");
        // Every NATS call has a deadline: a call that never returns (a connection lost
        // mid-call) must become an error the loop retries, not a silent stall.
        let ack = tokio::time::timeout(
            NATS_CALL,
            js.publish_with_headers(subjects.event(ev.instance_id.as_str(), &ev.kind), headers, payload.into()),
        )
        .await
        .map_err(|_| RoundError::Timeout("publishing"))?
        .map_err(RoundError::nats)?;
        acks.push(ack);
    }
    let mut published = Vec::with_capacity(events.len());
    for (ev, ack) in events.iter().zip(acks) {
        let ack = tokio::time::timeout(Duration::from_secs(10), ack)
            .await
            .map_err(|_| RoundError::Timeout("the publish ack"))?
            .map_err(RoundError::nats)?;
        published.push((ev.id.clone(), ack.sequence));
    }
    // A short page ends its batch: the next round takes a new snapshot.
    let last = if events.len() as i64 == BATCH { events.last() } else { None };
    outbox::published(&mut tx, &at, &published, last).await?;
    // The events' usage counts in the same transaction: once, with their publication.
    let usage: Vec<_> =
        events.iter().filter_map(|e| EventUsage::of(e.instance_id.as_str(), &e.kind, &e.payload)).collect();
    shared::db::usage::count_events(&mut tx, &usage).await?;
    tx.commit().await?;
    if let Some(created) = events.last().and_then(|e| e.payload.get("created_at")).and_then(|c| c.as_str()) {
        if let Ok(t) = created.parse::<chrono::DateTime<chrono::Utc>>() {
            metrics::gauge!(RELAY_LAG).set((chrono::Utc::now() - t).num_milliseconds().max(0) as f64 / 1000.0);
        }
    }
    metrics::counter!(RELAY_PUBLISHED).increment(events.len() as u64);
    Ok(events.len())
}
