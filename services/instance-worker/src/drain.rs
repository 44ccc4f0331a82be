//! A stopping worker's handover: its instances given to the other workers a batch at a
//! time, as fast as they connect them, so each instance is without a session only for its
//! own handoff while the rest keep sending.

use std::collections::HashSet;
use std::time::Duration;

use rand::seq::SliceRandom;
use shared::ids::InstanceId;

use crate::{Worker, STOP_GRACE};

/// How long a stopping worker hands its instances over a batch at a time (the chart
/// gives a worker 20 s: this, then `STOP_GRACE` for what is left).
const DRAIN: Duration = Duration::from_secs(8);
/// The longest a stopping worker waits for a batch to be claimed elsewhere before it
/// hands over the next.
const CATCH_UP: Duration = Duration::from_secs(1);
/// A stopping worker's batches are this far apart.
const DRAIN_TICK: Duration = Duration::from_millis(200);

impl Worker {
    /// Hands every instance over a batch at a time: each batch's sessions stopped, their
    /// leases released and the others woken to claim them, while the rest keep running.
    /// A batch is what one worker connects in a `DRAIN_TICK` (`worker.connects_per_second`),
    /// at most one a tick, and the next goes once nine in ten of the last are claimed
    /// elsewhere (at most `CATCH_UP` later): in a rolling update only the fresh worker may
    /// have room, and batches at its connect pace never queue behind each other there. So
    /// an instance goes without a session only for its own handoff, not for the whole
    /// worker's. What is left after `DRAIN` (or everything, with no other worker alive)
    /// is stopped and released at once.
    pub(crate) async fn shutdown(&mut self) {
        // Out of the live set first, so the others' shares grow to take these instances.
        let others = self.leases.heartbeat().await.map(|n| n.saturating_sub(1)).unwrap_or(0);
        let _ = self.leases.leave().await;
        let ticks_a_second = (Duration::from_secs(1).as_millis() / DRAIN_TICK.as_millis()) as usize;
        let per_tick = (self.connect_rate.max(1) as usize).div_ceil(ticks_a_second);
        let mut left: Vec<InstanceId> = self.held.keys().cloned().collect();
        left.shuffle(&mut rand::thread_rng());
        let drain_until = tokio::time::Instant::now() + DRAIN;
        while !left.is_empty() {
            let tick = tokio::time::Instant::now();
            let n = if others == 0 || tick >= drain_until { left.len() } else { per_tick.min(left.len()) };
            let batch: Vec<InstanceId> = left.drain(..n).collect();
            let stuck = self.hand_over(&batch, left.is_empty()).await;
            if !stuck.is_empty() {
                // Sessions that would not stop: they and the rest go at once.
                let mut rest = stuck;
                rest.append(&mut left);
                self.hand_over(&rest, true).await;
                break;
            }
            if !left.is_empty() {
                tokio::time::sleep_until(tick + DRAIN_TICK).await;
                self.caught_up(&batch, (tick + CATCH_UP).min(drain_until)).await;
            }
        }
    }

    /// Waits until nine in ten of `batch` are claimed by other workers, or `until`.
    async fn caught_up(&self, batch: &[InstanceId], until: tokio::time::Instant) {
        let need = (batch.len() * 9).div_ceil(10) as i64;
        while tokio::time::Instant::now() < until {
            match crate::db::sessions::claimed_elsewhere(&self.ctx.db, batch, &self.worker_id).await {
                Ok(n) if n >= need => return,
                Ok(_) => {}
                Err(e) => return tracing::debug!(error = %e, "reading the handover's progress failed"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the sessions of `batch` (those still held) and gives each lease back as soon
    /// as its session has stopped: whatever stopped together is released in one Redis
    /// call (a few hundred keys each) and the other workers are woken. Returns the
    /// sessions that did not stop within `STOP_GRACE`, whose leases are kept (a lease is
    /// never given up under a session still open); with `last` (every session is
    /// stopping) they are aborted and released too.
    async fn hand_over(&mut self, batch: &[InstanceId], last: bool) -> Vec<InstanceId> {
        let mut waiting: HashSet<InstanceId> = HashSet::new();
        for id in batch {
            if let Some((c, _)) = self.held.get(id) {
                c.cancel();
                waiting.insert(id.clone());
            }
        }
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        while !waiting.is_empty() {
            match tokio::time::timeout_at(deadline, self.actors.join_next_with_id()).await {
                Ok(Some(done)) => {
                    let mut stopped: Vec<InstanceId> = self.finished(done).into_iter().collect();
                    // And every other session that has stopped by now.
                    while let Some(Some(done)) = futures::FutureExt::now_or_never(self.actors.join_next_with_id()) {
                        stopped.extend(self.finished(done));
                    }
                    // Of the batch, or ended on its own meanwhile (logged out, lease lost):
                    // given back either way.
                    for id in &stopped {
                        waiting.remove(id);
                    }
                    self.give_back(&stopped).await;
                }
                Ok(None) => break,
                Err(_) if last => {
                    tracing::warn!("sessions did not stop in time; releasing leases anyway");
                    self.actors.abort_all();
                    let stuck: Vec<InstanceId> = waiting.drain().collect();
                    self.give_back(&stuck).await;
                }
                Err(_) => {
                    tracing::warn!("sessions did not stop in time; the rest are stopped at once");
                    break;
                }
            }
        }
        waiting.into_iter().collect()
    }

    /// Releases the leases of `ids` and wakes the other workers to claim them.
    async fn give_back(&self, ids: &[InstanceId]) {
        if ids.is_empty() {
            return;
        }
        for id in ids {
            self.renewer.forget(id);
        }
        if let Err(e) = self.leases.release_many(ids).await {
            tracing::warn!(error = %e, "releasing the leases failed; they lapse after their TTL");
        }
        let _ = self.ctx.nats.publish(self.ctx.subjects.workers_wake(), self.handoff.clone()).await;
    }
}
