//! Writes that many actors make, done together: one writer task per kind takes every
//! job that arrived while its previous batch was being written and writes them in one
//! transaction. A thousand instances sending at once then cost Postgres a few commits a
//! second instead of a thousand, and no actor waits longer than one batch. The worker
//! has four: the starts of sends (`messages::start_heads`), their ends
//! (`messages::finish_many`), receipts
//! (`log::apply_receipts`) and sessions stopped on request (`sessions::set_stopped_many`:
//! a worker shutting down with 10,000 sessions writes them in a few transactions instead
//! of queueing 10,000 on its pool).

use std::future::Future;

use shared::db::log::{self, ReceiptIn};
use shared::db::messages::{self, Finishing, MessageRow, Outcome, Start};
use shared::ids::{InstanceId, MessageId};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::WRITE_BATCH;

/// Jobs per transaction at most.
const MAX_BATCH: usize = 256;

type Reply<R> = oneshot::Sender<Result<R, String>>;

/// A handle on one writer; the writer stops when every handle is gone.
pub struct Batcher<J, R> {
    tx: mpsc::Sender<(J, Reply<R>)>,
}

impl<J, R> Clone for Batcher<J, R> {
    fn clone(&self) -> Self {
        Batcher { tx: self.tx.clone() }
    }
}

impl<J: Send + 'static, R: Send + 'static> Batcher<J, R> {
    /// Starts the writer: `write` gets each batch and answers one result per job, in
    /// order, or the error that failed the whole batch (nothing of it written).
    pub fn start<F, Fut>(name: &'static str, write: F) -> Self
    where
        F: Fn(Vec<J>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Vec<R>, sqlx::Error>> + Send,
    {
        let (tx, mut rx) = mpsc::channel::<(J, Reply<R>)>(4 * MAX_BATCH);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
                metrics::histogram!(WRITE_BATCH, "writer" => name).record(batch.len() as f64);
                let (jobs, replies): (Vec<J>, Vec<Reply<R>>) = batch.drain(..).unzip();
                match write(jobs).await {
                    Ok(results) => {
                        for (reply, r) in replies.into_iter().zip(results) {
                            let _ = reply.send(Ok(r));
                        }
                    }
                    Err(e) => {
                        let e = e.to_string();
                        for reply in replies {
                            let _ = reply.send(Err(e.clone()));
                        }
                    }
                }
            }
        });
        Batcher { tx }
    }

    /// Queues the job for the next batch and waits for its result.
    pub async fn call(&self, job: J) -> Result<R, String> {
        let (reply, answer) = oneshot::channel();
        self.tx.send((job, reply)).await.map_err(|_| "the worker is stopping".to_string())?;
        answer.await.map_err(|_| "the worker is stopping".to_string())?
    }
}

/// The end of one send.
pub struct Finish {
    pub id: MessageId,
    pub instance: InstanceId,
    pub epoch: i64,
    /// `None`: sent; else the failure: the error table's code and what happened.
    pub error: Option<(String, String)>,
}

/// The worker's writer of the ends of sends: `None` when the instance has a new owner.
pub fn finisher(db: sqlx::PgPool) -> Batcher<Finish, Option<MessageRow>> {
    Batcher::start("finish", move |jobs: Vec<Finish>| {
        let db = db.clone();
        async move {
            let items: Vec<Finishing> = jobs
                .iter()
                .map(|j| Finishing {
                    id: &j.id,
                    instance: &j.instance,
                    epoch: j.epoch,
                    outcome: match &j.error {
                        None => Outcome::Sent,
                        Some((code, detail)) => Outcome::Failed { code, detail },
                    },
                })
                .collect();
            messages::finish_many(&db, &items).await
        }
    })
}

/// The worker's starter of sends: each instance's queue head taken in flight
/// (`messages::start_heads`), for (instance, lease epoch, hold first contacts). A
/// thousand instances due in the same second take their heads in a few statements.
pub fn starts(db: sqlx::PgPool) -> Batcher<(InstanceId, i64, bool), Start> {
    Batcher::start("start", move |jobs: Vec<(InstanceId, i64, bool)>| {
        let db = db.clone();
        async move { messages::start_heads(&db, &jobs).await }
    })
}

/// The worker's writer of receipts: whether each changed its message.
pub fn receipts(db: sqlx::PgPool) -> Batcher<ReceiptIn, bool> {
    Batcher::start("receipts", move |jobs: Vec<ReceiptIn>| {
        let db = db.clone();
        async move { log::apply_receipts(&db, &jobs).await }
    })
}

/// The worker's writer of sessions stopped on request (instance, lease epoch): whether the
/// epoch still owned the row.
pub fn stops(db: sqlx::PgPool) -> Batcher<(InstanceId, i64), bool> {
    Batcher::start("stops", move |jobs: Vec<(InstanceId, i64)>| {
        let db = db.clone();
        async move { crate::db::sessions::set_stopped_many(&db, &jobs).await }
    })
}
