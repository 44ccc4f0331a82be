//! Batching of accepted messages: requests that arrive together are queued by one
//! statement (`db::messages::enqueue`), sharing its round trip and its commit. A batch
//! is whatever is waiting when a statement can start, so a lone request goes at once
//! and a busy pod writes many messages per commit. Each request still gets its own
//! answer only after the commit.

use std::sync::Arc;

use shared::db::messages::{self, NewMessage, Queued};
use shared::ApiError;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Most messages in one statement.
const MAX_BATCH: usize = 256;
/// Statements in flight at once.
const CONCURRENT: usize = 4;

type Job = (NewMessage, oneshot::Sender<Result<Queued, String>>);

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
                            for reply in replies {
                                let _ = reply.send(Err(e.to_string()));
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
    pub async fn enqueue(&self, m: NewMessage) -> Result<Queued, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send((m, tx)).await.map_err(|_| ApiError::shutting_down())?;
        rx.await.map_err(|_| ApiError::internal("the enqueuer stopped"))?.map_err(|e| ApiError::internal(format_args!("enqueue: {e}")))
    }
}
