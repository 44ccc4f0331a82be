//! One instance's session on this worker: opens it through the driver, keeps the
//! instance row in step with what the network says (every write fenced on the lease
//! epoch), answers RPC requests, and reconnects with backoff.

use std::sync::Arc;
use std::time::Duration;

use crate::db::sessions::{self, Claim};
use futures::StreamExt;
use shared::bus::{RpcReply, RpcRequest, Subjects};
use shared::config::Network;
use shared::contract::{Answer, NetOp, Picture, SetGroupPicture, SetPicture};
use shared::db::instances::InstanceState;
use shared::db::labels::{self, Change};
use shared::db::log::Source;
use shared::ids::InstanceId;
use shared::ErrorCode;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::driver::{Driver, DriverError, DriverEvent, Session};
use crate::metrics::{FENCED_WRITES, RPC, SESSIONS};
use crate::queue::Queue;
use crate::receive::MediaRetry;

mod rpc;

/// Session operations in flight at once per instance (beyond it: retry later).
const RPCS_IN_FLIGHT: usize = 16;
/// Received messages logged in one transaction, at most.
const RECEIVE_BATCH: usize = 200;
/// The longest a session operation may take on this side (the API stops waiting sooner).
const RPC_DEADLINE: Duration = Duration::from_secs(30);

/// Waits between reconnect attempts (the last one repeats).
const RECONNECT: [Duration; 6] = [
    Duration::from_millis(200),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(10),
];

/// What the worker shares with every actor.
pub struct Ctx {
    pub db: sqlx::PgPool,
    /// Media bytes: Postgres, and the bucket when one is configured.
    pub store: shared::db::media::Store,
    pub nats: async_nats::Client,
    pub subjects: Subjects,
    pub sim: Option<Arc<dyn Driver>>,
    pub whatsapp: Arc<dyn Driver>,
    pub default_network: Network,
    /// Deployment-wide pacing settings (grace, jitter, ramp).
    pub pacing: PacingDefaults,
    /// The first wait after a transient send failure (doubling per attempt).
    pub retry_base: Duration,
    /// How received media is kept (retries, the instance's quota).
    pub media: crate::receive::MediaPolicy,
    /// Take queue heads in flight, write the ends of sends and the receipts, batched
    /// across the worker's instances.
    pub starts: crate::batch::Batcher<(InstanceId, i64, bool), shared::db::messages::Start>,
    pub finisher: crate::batch::Batcher<crate::batch::Finish, Option<shared::db::messages::MessageRow>>,
    pub receipts: crate::batch::Batcher<shared::db::log::ReceiptIn, bool>,
    /// Write sessions stopped on request, batched.
    pub stops: crate::batch::Batcher<(InstanceId, i64), bool>,
    /// Paces this worker's connects and reconnects (`worker.connects_per_second`).
    pub connects: crate::connects::Connects,
}

/// Pacing settings that come from the config rather than the instance.
#[derive(Debug, Clone)]
pub struct PacingDefaults {
    pub grace_min: Duration,
    pub grace_max: Duration,
    pub jitter: f64,
    pub ramp: Duration,
    pub ramp_start: f64,
    /// The deployment's ban-risk policies (adaptive pacing, holding first contacts); an
    /// instance's `risk_policy` overrides them.
    pub risk: shared::risk::Policy,
}

/// How an actor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Stopped on request (shutdown or lease lost): the row says `disconnected` if we
    /// still owned it.
    Stopped,
    /// The session ended for good (logged out, banned): the instance no longer runs.
    Ended,
    /// Ownership moved on (a fenced write was refused, or the session was replaced):
    /// nothing more was written.
    Lost,
}

pub(crate) enum Step {
    Continue,
    Reconnect,
    /// Reconnect, but not before then.
    ReconnectAt(chrono::DateTime<chrono::Utc>),
    Exit(Outcome),
}

/// What a fenced write of the instance needs: the worker's context, the instance and the
/// lease epoch it is held under. The queue and the receive path take it from the actor.
pub(crate) struct Held<'a> {
    pub(crate) ctx: &'a Ctx,
    pub(crate) id: &'a InstanceId,
    pub(crate) epoch: i64,
}

/// The actor's `Held`, borrowing only its `ctx` and `id` so `queue` and `media_retry`
/// stay free to borrow mutably.
macro_rules! held {
    ($a:expr) => {
        Held { ctx: &$a.ctx, id: &$a.id, epoch: $a.epoch }
    };
}

pub(crate) struct Actor {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) id: InstanceId,
    pub(crate) epoch: i64,
    pub(crate) state: InstanceState,
    credentials: Option<serde_json::Value>,
    /// The instance's proxy when it was claimed (a change applies at the next claim).
    proxy_url: Option<String>,
    queue: Queue,
    media_retry: MediaRetry,
    /// Places for session operations running beside the loop.
    rpc_slots: Arc<tokio::sync::Semaphore>,
}

/// Runs the instance until `cancel` or until its session ends.
#[tracing::instrument(skip_all, fields(instance_id = %id, epoch = claim.owner_epoch))]
pub async fn run(
    ctx: Arc<Ctx>,
    id: InstanceId,
    claim: Claim,
    cancel: CancellationToken,
    nudge: Arc<tokio::sync::Notify>,
) -> Outcome {
    let driver = match claim.network.as_deref() {
        Some("whatsapp") => Some(ctx.whatsapp.clone()),
        Some("sim") => ctx.sim.clone(),
        _ => match ctx.default_network {
            Network::Sim => ctx.sim.clone(),
            Network::Whatsapp => Some(ctx.whatsapp.clone()),
        },
    };
    let mut actor = Actor {
        state: claim.state,
        credentials: claim.session,
        proxy_url: claim.proxy_url,
        epoch: claim.owner_epoch,
        queue: Queue::new(&ctx.pacing),
        media_retry: MediaRetry::new(),
        rpc_slots: Arc::new(tokio::sync::Semaphore::new(RPCS_IN_FLIGHT)),
        id,
        ctx,
    };
    let mut rpc = match actor.ctx.nats.subscribe(actor.ctx.subjects.instance_rpc(&actor.id)).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "rpc subscribe failed");
            return Outcome::Stopped;
        }
    };
    let mut wake = match actor.ctx.nats.subscribe(actor.ctx.subjects.instance_queue(&actor.id)).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "queue subscribe failed");
            return Outcome::Stopped;
        }
    };
    let outcome = actor.run(driver, &mut rpc, &mut wake, &nudge, &cancel).await;
    let _ = rpc.unsubscribe().await;
    let _ = wake.unsubscribe().await;
    tracing::info!(?outcome, "instance stopped");
    outcome
}

impl Actor {
    async fn run(
        &mut self,
        driver: Option<Arc<dyn Driver>>,
        rpc: &mut async_nats::Subscriber,
        wake: &mut async_nats::Subscriber,
        nudge: &tokio::sync::Notify,
        cancel: &CancellationToken,
    ) -> Outcome {
        let mut attempt = 0usize;
        loop {
            if cancel.is_cancelled() {
                return self.stop().await;
            }
            if let Step::Exit(o) = self.write_state(InstanceState::Connecting, None).await {
                return o;
            }
            let Some(driver) = driver.clone() else {
                tracing::warn!("the sim network is not configured on this worker");
                return self.stop().await;
            };
            let target = crate::driver::OpenTarget {
                instance: self.id.clone(),
                epoch: self.epoch,
                proxy_url: self.proxy_url.clone(),
            };
            let credentials = self.credentials.clone();
            let ctx = self.ctx.clone();
            let open = async move {
                ctx.connects.wait().await;
                driver.open(&target, credentials).await
            };
            let Some(opened) = self.while_idle(rpc, cancel, open).await else {
                return self.stop().await;
            };
            let (session, mut events) = match opened {
                Ok((s, events)) => (Arc::<dyn Session>::from(s), events),
                Err(e) => {
                    tracing::warn!(code = %e.code, detail = %e.detail, "opening the session failed");
                    metrics::counter!(SESSIONS, "kind" => "open_failed").increment(1);
                    let wait = RECONNECT[attempt.min(RECONNECT.len() - 1)];
                    attempt += 1;
                    if self.while_idle(rpc, cancel, tokio::time::sleep(wait)).await.is_none() {
                        return self.stop().await;
                    }
                    continue;
                }
            };
            let step = loop {
                let pump_at = self.queue.wake_at;
                let step = tokio::select! {
                    _ = cancel.cancelled() => {
                        session.close().await;
                        return self.stop().await;
                    }
                    Some(msg) = rpc.next() => self.rpc(&session, msg).await,
                    Some(msg) = wake.next() => {
                        if msg.payload.as_ref() == shared::bus::RULES_CHANGED {
                            self.queue.rules_changed();
                        }
                        self.queue.wake_at = tokio::time::Instant::now();
                        Step::Continue
                    }
                    // The worker's sweep saw messages: look now, unless already waiting
                    // for the pacer (whose time is known).
                    _ = nudge.notified() => {
                        if self.queue.idle {
                            self.queue.wake_at = tokio::time::Instant::now();
                        }
                        Step::Continue
                    }
                    _ = tokio::time::sleep_until(pump_at) => self.queue.pump(&held!(self), &*session).await,
                    _ = tokio::time::sleep_until(self.media_retry.at) => {
                        self.media_retry.retry_media(&held!(self), self.state, &*session).await
                    }
                    ev = events.recv() => match ev {
                        Some(DriverEvent::Message { message }) => self.messages(&*session, message, &mut events).await,
                        Some(ev) => {
                            if matches!(ev, DriverEvent::Connected { .. } | DriverEvent::Paired { .. }) {
                                attempt = 0;
                            }
                            self.event(&*session, ev).await
                        }
                        None => Step::Reconnect,
                    },
                };
                match step {
                    Step::Continue => continue,
                    other => break other,
                }
            };
            session.close().await;
            self.queue.disconnected();
            match step {
                Step::Exit(o) => return o,
                Step::ReconnectAt(at) => {
                    let wait = (at - chrono::Utc::now()).to_std().unwrap_or_default();
                    if self.while_idle(rpc, cancel, tokio::time::sleep(wait)).await.is_none() {
                        return self.stop().await;
                    }
                }
                _ => {
                    let wait = RECONNECT[attempt.min(RECONNECT.len() - 1)];
                    attempt += 1;
                    if self.while_idle(rpc, cancel, tokio::time::sleep(wait)).await.is_none() {
                        return self.stop().await;
                    }
                }
            }
        }
    }

    async fn write_state(&mut self, state: InstanceState, qr: Option<(&str, chrono::DateTime<chrono::Utc>)>) -> Step {
        if self.state == state && qr.is_none() && state != InstanceState::QrPending {
            return Step::Continue;
        }
        let step = fenced(sessions::set_state(&self.ctx.db, &self.id, self.epoch, state, qr).await);
        if matches!(step, Step::Continue) {
            self.state = state;
        }
        step
    }

    /// Stopping on request: leave the row `disconnected` if it is still ours (batched with
    /// the other sessions stopping: a worker shutting down stops all of them at once).
    async fn stop(&mut self) -> Outcome {
        if self.state == InstanceState::Disconnected {
            return Outcome::Stopped;
        }
        match self.ctx.stops.call((self.id.clone(), self.epoch)).await {
            Ok(written) => match fenced(Ok(written)) {
                Step::Exit(o) => o,
                _ => {
                    self.state = InstanceState::Disconnected;
                    Outcome::Stopped
                }
            },
            Err(e) => {
                // Postgres is unreachable: the next owner's claim writes the state anyway.
                tracing::warn!(error = %e, "instance write failed");
                Outcome::Stopped
            }
        }
    }

    async fn event(&mut self, session: &dyn Session, ev: DriverEvent) -> Step {
        let kind = match &ev {
            DriverEvent::Qr { .. } => "qr",
            DriverEvent::Paired { .. } => "paired",
            DriverEvent::Connected { .. } => "connected",
            DriverEvent::PushName(_) => "push_name",
            DriverEvent::LoggedOut => "logged_out",
            DriverEvent::Banned => "banned",
            DriverEvent::TemporarilyBanned { .. } => "temporarily_banned",
            DriverEvent::Replaced => "replaced",
            DriverEvent::Closed { .. } => "closed",
            DriverEvent::Call { .. } => "call",
            DriverEvent::Label { .. } => "label",
            DriverEvent::LabelTarget { .. } => "label_target",
            DriverEvent::Network(_) => "group",
            DriverEvent::Message { .. } => "message",
            DriverEvent::Changed(_) => "changed",
            DriverEvent::Receipt { .. } => "receipt",
            DriverEvent::History { .. } => "history",
        };
        metrics::counter!(SESSIONS, "kind" => kind).increment(1);
        match ev {
            DriverEvent::Qr { code, expires_at } => {
                self.write_state(InstanceState::QrPending, Some((&code, expires_at))).await
            }
            DriverEvent::Paired { credentials, phone, business, push_name } => {
                let (db, name) = (&self.ctx.db, push_name.as_deref());
                let step = fenced(
                    sessions::set_linked(db, &self.id, self.epoch, Some(&credentials), &phone, business, name).await,
                );
                self.credentials = Some(credentials);
                self.state = InstanceState::Connected;
                self.queue.connected();
                tracing::info!(business, "paired");
                step
            }
            DriverEvent::Connected { phone, business, push_name } => {
                let (db, name) = (&self.ctx.db, push_name.as_deref());
                let step = fenced(sessions::set_linked(db, &self.id, self.epoch, None, &phone, business, name).await);
                self.state = InstanceState::Connected;
                self.queue.connected();
                step
            }
            DriverEvent::PushName(name) => {
                fenced(sessions::set_push_name(&self.ctx.db, &self.id, self.epoch, &name).await)
            }
            DriverEvent::LoggedOut => self.end(InstanceState::LoggedOut).await,
            DriverEvent::Banned => self.end(InstanceState::Banned).await,
            DriverEvent::TemporarilyBanned { until } => {
                tracing::warn!(%until, "the network paused the account");
                let reason =
                    format!("temporarily banned until {}", until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
                match fenced(sessions::set_paused(&self.ctx.db, &self.id, self.epoch, &reason).await) {
                    Step::Continue => {
                        self.state = InstanceState::Disconnected;
                        Step::ReconnectAt(until)
                    }
                    other => other,
                }
            }
            DriverEvent::Replaced => {
                tracing::warn!("session replaced by another connection");
                Step::Exit(Outcome::Lost)
            }
            DriverEvent::Closed { reason } => {
                tracing::info!(%reason, "session closed; reconnecting");
                Step::Reconnect
            }
            DriverEvent::Call { call_id, from } => {
                match sessions::call_settings(&self.ctx.db, &self.id).await {
                    Ok(Some((true, msg))) => {
                        let text = Some(msg.clone()).filter(|m| !m.is_empty());
                        match session.reject_call(&call_id, text).await {
                            Ok(()) => {
                                let data = shared::events::CallRejectedEventData { call_id, from, message: msg };
                                let event = shared::events::Event::CallRejected(data);
                                let written =
                                    shared::db::outbox::insert_fenced(&self.ctx.db, &self.id, self.epoch, &event).await;
                                if let Err(e) = written {
                                    tracing::warn!(error = %e, "recording the rejected call failed");
                                }
                            }
                            Err(e) => tracing::warn!(error = %e, "rejecting a call failed"),
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "reading call settings failed"),
                }
                Step::Continue
            }
            DriverEvent::Label { label_id, name, color, deleted } => {
                let change = if deleted { Change::Delete { label_id } } else { Change::Edit { label_id, name, color } };
                fenced(labels::apply(&self.ctx.db, &self.id, Some(self.epoch), &change).await.map(|r| r.is_some()))
            }
            DriverEvent::LabelTarget { label_id, jid, wa_message_id, labeled } => {
                let change = Change::Target { label_id, chat_jid: jid, wa_message_id, labeled };
                fenced(labels::apply(&self.ctx.db, &self.id, Some(self.epoch), &change).await.map(|r| r.is_some()))
            }
            DriverEvent::Network(event) => {
                fenced(shared::db::outbox::insert_fenced(&self.ctx.db, &self.id, self.epoch, &event).await)
            }
            DriverEvent::Message { message } => {
                // A chat that writes in may free its held first-contact sends.
                self.queue.wrote_in();
                self.media_retry.receive(&held!(self), session, vec![message], Source::Live, None).await
            }
            DriverEvent::Changed(c) => {
                fenced(shared::db::log::apply_change(&self.ctx.db, &self.id, self.epoch, &c).await)
            }
            DriverEvent::History { messages, chunk, progress } => {
                if let Some((done, total)) = progress {
                    tracing::info!(done, total, "history sync");
                }
                self.media_retry.receive(&held!(self), session, messages, Source::History, chunk).await
            }
            DriverEvent::Receipt { wa_message_id, receipt, at } => {
                crate::receive::receipt(&held!(self), &wa_message_id, receipt, at).await
            }
        }
    }

    /// A received message and those right behind it (up to `RECEIVE_BATCH`), logged in
    /// one transaction; an event of another kind behind them is handled after.
    async fn messages(
        &mut self,
        session: &dyn Session,
        first: crate::driver::Incoming,
        events: &mut tokio::sync::mpsc::Receiver<DriverEvent>,
    ) -> Step {
        let mut batch = vec![first];
        let mut behind = None;
        while batch.len() < RECEIVE_BATCH {
            match events.try_recv() {
                Ok(DriverEvent::Message { message }) => batch.push(message),
                Ok(other) => {
                    behind = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        metrics::counter!(SESSIONS, "kind" => "message").increment(batch.len() as u64);
        // A chat that writes in may free its held first-contact sends.
        self.queue.wrote_in();
        let step = self.media_retry.receive(&held!(self), session, batch, Source::Live, None).await;
        match (step, behind) {
            (Step::Continue, Some(ev)) => self.event(session, ev).await,
            (step, _) => step,
        }
    }

    async fn end(&mut self, state: InstanceState) -> Step {
        tracing::info!(state = state.as_str(), "session ended");
        match fenced(sessions::set_ended(&self.ctx.db, &self.id, self.epoch, state).await) {
            Step::Continue => {
                self.state = state;
                Step::Exit(Outcome::Ended)
            }
            other => other,
        }
    }

    /// Waits for `fut` (a session opening, a pause before reconnecting) while answering
    /// requests at once as "no session yet", so callers get 409 rather than waiting out
    /// the RPC timeout. `None`: cancelled first.
    async fn while_idle<F: std::future::Future>(
        &mut self,
        rpc: &mut async_nats::Subscriber,
        cancel: &CancellationToken,
        fut: F,
    ) -> Option<F::Output> {
        tokio::pin!(fut);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return None,
                out = &mut fut => return Some(out),
                Some(msg) = rpc.next() => self.rpc_without_session(msg).await,
            }
        }
    }
}

/// Applies a fenced write's result: refused means someone else owns the instance now.
pub(crate) fn fenced(r: Result<bool, sqlx::Error>) -> Step {
    match r {
        Ok(true) => {
            metrics::counter!(FENCED_WRITES, "result" => "applied").increment(1);
            Step::Continue
        }
        Ok(false) => {
            metrics::counter!(FENCED_WRITES, "result" => "rejected").increment(1);
            tracing::warn!("fenced write refused: the instance has a new owner");
            Step::Exit(Outcome::Lost)
        }
        Err(e) => {
            // Postgres is unreachable: keep the session; the next change retries.
            tracing::warn!(error = %e, "instance write failed");
            Step::Continue
        }
    }
}

/// The stored media a picture change names, read for the driver: it must be this
/// instance's, and a JPEG of at most [`Picture::LIMIT`].
async fn stored_picture(
    store: &shared::db::media::Store,
    id: &InstanceId,
    media_id: Option<shared::ids::MediaId>,
) -> Result<Option<Picture>, DriverError> {
    let Some(media_id) = media_id else { return Ok(None) };
    let row = store
        .get(&media_id)
        .await
        .map_err(|_| DriverError::new(ErrorCode::WorkerError, "the picture could not be read"))?
        .filter(|r| &r.instance_id == id)
        .ok_or_else(|| DriverError::new(ErrorCode::ValidationFailed, "the picture is gone"))?;
    Picture::jpeg(&row.data).map(Some).map_err(|why| DriverError::new(ErrorCode::ValidationFailed, why))
}
