//! Batching of accepted messages: requests that arrive together are queued by one
//! statement (`db::messages::enqueue`), sharing its round trip and its commit. A batch
//! is whatever is waiting when a statement can start, so a lone request goes at once
//! and a busy pod writes many messages per commit. Each request still gets its own
//! answer only after the commit.

use std::sync::Arc;

use shared::db::messages::{self, NewMessage, Queued};
use shared::ErrorCode;

use crate::{Error, Result};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Most messages in one statement.
const MAX_BATCH: usize = 256;
/// Statements in flight at once.
const CONCURRENT: usize = 4;

/// A message to queue and where its result goes (a failed batch fails each of its jobs).
type Job = (NewMessage, oneshot::Sender<Result<Queued, std::sync::Arc<sqlx::Error>>>);

#[derive(Clone)]
pub struct Enqueuer {
    tx: mpsc::Sender<Job>,
}

impl Enqueuer {
    /// Starts the collector; it ends when the last `Enqueuer` is dropped.
    pub fn start(pool: sqlx::PgPool) -> Enqueuer {
        let (tx, mut rx) = mpsc::channel::<Job>(4 * MAX_BATCH);
        tokio::spawn(async move {
            let permits = Arc::new(Semaphore::new(CONCURRENT));
            while let Some(first) = rx.recv().await {
                let Ok(permit) = permits.clone().acquire_owned().await else { break };
                // Take what queued up while we waited for a free statement.
                let mut jobs = vec![first];
                while jobs.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(job) => jobs.push(job),
                        Err(_) => break,
                    }
                }
                let pool = pool.clone();
                tokio::spawn(async move {
                    let (batch, replies): (Vec<NewMessage>, Vec<_>) = jobs.into_iter().unzip();
                    match messages::enqueue(&pool, &batch).await {
                        Ok(results) => {
                            for (reply, result) in replies.into_iter().zip(results) {
                                let _ = reply.send(Ok(result));
                            }
                        }
                        Err(e) => {
                            let e = std::sync::Arc::new(e);
                            for reply in replies {
                                let _ = reply.send(Err(e.clone()));
                            }
                        }
                    }
                    drop(permit);
                });
            }
        });
        Enqueuer { tx }
    }

    /// Queues one message (in whatever batch it lands in).
    pub async fn enqueue(&self, m: NewMessage) -> Result<Queued> {
        let (tx, rx) = oneshot::channel();
        self.tx.send((m, tx)).await.map_err(|_| {
            Error::refused(ErrorCode::ShuttingDown, "the server is shutting down; retry on another pod")
        })?;
        rx.await
            .map_err(|_| Error::internal("the enqueuer stopped"))?
            .map_err(|e| Error::internal(format_args!("enqueue: {e}")))
    }
}

/// Wakes an instance's worker at most once per `WAKE_EVERY` from this pod: a burst of
/// accepts for one instance is one NATS message. A message accepted between two wakes is
/// still found: the worker reads its queue head again after each send and polls it every
/// second when idle.
#[derive(Default)]
pub struct Wakes(std::sync::Mutex<std::collections::HashMap<shared::ids::InstanceId, tokio::time::Instant>>);

pub const WAKE_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

impl Wakes {
    /// Whether to publish a wake-up for `id` now (and note it).
    pub fn due(&self, id: &shared::ids::InstanceId) -> bool {
        let now = tokio::time::Instant::now();
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(id).is_some_and(|at| now.duration_since(*at) < WAKE_EVERY) {
            return false;
        }
        if map.len() > 10_000 {
            map.retain(|_, at| now.duration_since(*at) < WAKE_EVERY);
        }
        map.insert(id.clone(), now);
        true
    }
}

#[cfg(test)]
mod wake_tests {
    #[tokio::test(start_paused = true)]
    async fn one_wake_per_instance_per_window() {
        let w = super::Wakes::default();
        let (a, b) = (shared::ids::InstanceId::new(), shared::ids::InstanceId::new());
        assert!(w.due(&a));
        assert!(!w.due(&a), "coalesced");
        assert!(w.due(&b), "another instance");
        tokio::time::advance(super::WAKE_EVERY - std::time::Duration::from_millis(1)).await;
        assert!(!w.due(&a), "still the same window");
        tokio::time::advance(std::time::Duration::from_millis(1)).await;
        assert!(w.due(&a), "the next window");
    }
}
