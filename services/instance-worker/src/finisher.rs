//! The ends of sends, written together: one writer per worker takes every outcome its
//! actors report while the previous batch was being written and writes them in one
//! transaction (`messages::finish_many`): fenced per instance, with their events and log
//! rows. A thousand instances sending at once then cost Postgres a few commits a second
//! instead of a thousand, and no actor waits longer than one batch.

use shared::db::messages::{self, Finishing, MessageRow, Outcome};
use shared::ids::{InstanceId, MessageId};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::FINISH_BATCH;

/// Outcomes per transaction at most.
const MAX_BATCH: usize = 256;

struct Job {
    id: MessageId,
    instance: InstanceId,
    epoch: i64,
    /// `None`: sent; else the failure (`<code>: <detail>`).
    error: Option<String>,
    reply: oneshot::Sender<Result<Option<MessageRow>, String>>,
}

/// A handle on the worker's writer; the writer stops when every handle is gone.
#[derive(Clone)]
pub struct Finisher {
    tx: mpsc::Sender<Job>,
}

impl Finisher {
    pub fn start(db: sqlx::PgPool) -> Finisher {
        let (tx, rx) = mpsc::channel(4 * MAX_BATCH);
        tokio::spawn(write(db, rx));
        Finisher { tx }
    }

    /// Ends the message (`messages::finish_many`) in the next batch. `Err` carries
    /// the database's error (the whole batch failed; nothing of it was written).
    pub async fn finish(
        &self,
        id: &MessageId,
        instance: &InstanceId,
        epoch: i64,
        outcome: Outcome<'_>,
    ) -> Result<Option<MessageRow>, String> {
        let (reply, answer) = oneshot::channel();
        let error = match outcome {
            Outcome::Sent => None,
            Outcome::Failed { error } => Some(error.to_string()),
        };
        let job = Job { id: id.clone(), instance: instance.clone(), epoch, error, reply };
        self.tx.send(job).await.map_err(|_| "the worker is stopping".to_string())?;
        answer.await.map_err(|_| "the worker is stopping".to_string())?
    }
}

async fn write(db: sqlx::PgPool, mut rx: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        metrics::histogram!(FINISH_BATCH).record(batch.len() as f64);
        let items: Vec<Finishing> = batch
            .iter()
            .map(|j| Finishing {
                id: &j.id,
                instance: &j.instance,
                epoch: j.epoch,
                outcome: match &j.error {
                    None => Outcome::Sent,
                    Some(error) => Outcome::Failed { error },
                },
            })
            .collect();
        let result = messages::finish_many(&db, &items).await;
        drop(items);
        match result {
            Ok(rows) => {
                for (job, row) in batch.drain(..).zip(rows) {
                    let _ = job.reply.send(Ok(row));
                }
            }
            Err(e) => {
                let e = e.to_string();
                for job in batch.drain(..) {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}
