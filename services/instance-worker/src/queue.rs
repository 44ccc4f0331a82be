//! The send queue of one instance, run inside its actor: strictly in order, paced, each
//! transition fenced and written with its outbox event. A message found `in_flight` (its
//! sender died mid-send) is sent again under the same network id; the network
//! de-duplicates (invariant 3).

use std::time::Duration;

use crate::db::sessions;
use chrono::Utc;
use shared::db::messages::{self, MessageRow, Outcome as Finish, Start};
use shared::message::Outbound;
use shared::ErrorCode;
use tokio::time::Instant;

use crate::actor::{fenced, Held, PacingDefaults, Step};
use crate::driver::{DriverError, Media, MediaBytes, Outgoing, Session};
use crate::metrics::{PACING_DELAY, SENDS, SEND_LATENCY, SEND_LATENESS};
use crate::pacer::{Pacer, Rules, SendWindow};

/// How often an idle queue looks at Postgres by itself. A wake-up NATS lost is found
/// within a second by the worker's sweep (one statement for all its instances), so
/// thousands of idle instances do not each poll Postgres (at 30 s, 10,000 idle
/// instances still made 333 queries a second).
const IDLE_POLL: Duration = Duration::from_secs(300);
/// How often pacing settings are re-read from the instance row.
const RULES_TTL: Duration = Duration::from_secs(5);
/// Attempts of a message before a transient failure becomes final.
pub const MAX_ATTEMPTS: i32 = 5;
/// How soon a send whose database read failed is built again.
const READ_RETRY: Duration = Duration::from_secs(2);
/// The longest wait between attempts.
const RETRY_CAP: Duration = Duration::from_secs(30);
/// A send the network refused for its rate: the first wait is this many times
/// `queue_retry_base` (30 s at the default), doubling up to [`RATE_LIMIT_CAP`]; never
/// failed for it (it may still expire).
const RATE_LIMIT_FACTOR: u32 = 60;
const RATE_LIMIT_CAP: Duration = Duration::from_secs(15 * 60);
/// Bounds of how long before its send time the next message is prepared (read and
/// marked in flight), so the database's latency is not added to the paced gap.
const LEAD_MIN: Duration = Duration::from_millis(20);
const LEAD_MAX: Duration = Duration::from_secs(1);
/// How often a queue whose messages all wait (first contacts held at a high risk) looks
/// again: to find an expired one, or a chat that wrote in meanwhile.
const HOLD_POLL: Duration = Duration::from_secs(30);
/// A queue known to hold messages is not read again before preparing, when preparing is
/// at most this far off (a head's expiry may then be noticed up to this late).
const BLIND: Duration = Duration::from_secs(5);

pub struct Queue {
    pub pacer: Pacer,
    pub wake_at: Instant,
    /// The last look found the queue empty (only a wake-up or the idle poll looks again).
    pub idle: bool,
    defaults: PacingDefaults,
    rules_at: Option<Instant>,
    connected: bool,
    /// A policy holds the queue (critical risk, a temporary ban): nothing is sent.
    paused: bool,
    /// First-contact sends wait (a high risk): the head skips them (`messages::head`).
    hold: bool,
    /// The head, already marked in flight, waiting for its send time.
    prepared: Option<MessageRow>,
    /// How long preparing takes (moving average), to start it that much ahead, twice over.
    prepare_time: Duration,
}

impl Queue {
    pub fn new(defaults: &PacingDefaults) -> Queue {
        let rules = Rules {
            min_interval: Duration::from_secs(2),
            max_per_minute: 20,
            jitter: defaults.jitter,
            grace_min: defaults.grace_min,
            grace_max: defaults.grace_max,
            ramp: defaults.ramp,
            ramp_start: defaults.ramp_start,
            window: None,
        };
        Queue {
            pacer: Pacer::new(rules),
            wake_at: Instant::now(),
            idle: false,
            defaults: defaults.clone(),
            rules_at: None,
            connected: false,
            paused: false,
            hold: false,
            prepared: None,
            prepare_time: LEAD_MIN,
        }
    }

    /// How long before the send time the next message is prepared.
    fn lead(&self) -> Duration {
        (self.prepare_time * 2).clamp(LEAD_MIN, LEAD_MAX)
    }

    /// The session is (re)connected: a new grace period starts, and the queue looks now.
    pub fn connected(&mut self) {
        self.connected = true;
        self.pacer.connected(Instant::now(), &mut rand::thread_rng());
        self.wake_at = Instant::now();
    }

    /// The session dropped: nothing is sent until it is back and a new grace has passed.
    pub fn disconnected(&mut self) {
        self.connected = false;
        self.pacer.disconnected();
    }

    /// A message came in: while first contacts are held, its chat's may go now.
    pub fn wrote_in(&mut self) {
        if self.hold {
            self.idle = false;
            self.wake_at = self.wake_at.min(Instant::now() + Duration::from_millis(50));
        }
    }

    /// The instance's pacing or pause changed: read them again at the next look.
    pub fn rules_changed(&mut self) {
        self.rules_at = None;
    }

    async fn refresh_rules(&mut self, held: &Held<'_>) {
        if self.rules_at.is_some_and(|t| t.elapsed() < RULES_TTL) {
            return;
        }
        let Ok(Some(p)) = sessions::pacing(&held.ctx.db, held.id).await else { return };
        let d = &self.defaults;
        let window = match (p.send_window_start, p.send_window_end, p.time_zone.parse::<chrono_tz::Tz>()) {
            (Some(start), Some(end), Ok(tz)) => Some(SendWindow { start, end, tz }),
            _ => None,
        };
        // Adaptive pacing: slower as the ban risk rises, and first contacts held when
        // high (one rule with the API's record).
        let policy = d.risk.with(p.risk_policy.as_ref().map(|o| &o.0));
        let level = p.risk_level.as_deref().and_then(shared::risk::parse_level);
        let (interval, per_minute) = shared::risk::effective_pacing(
            p.min_interval_ms.max(0) as u32,
            p.max_per_minute.max(1) as u32,
            level,
            policy.slowdown,
        );
        self.paused = p.queue_paused_reason.is_some();
        let hold = policy.holds_first_contacts(level);
        if hold != self.hold {
            tracing::info!(hold, "first-contact sends held or released by the ban-risk policy");
            self.hold = hold;
            if !hold {
                // Held messages may go now.
                self.idle = false;
            }
        }
        self.pacer.set_rules(Rules {
            min_interval: Duration::from_millis(u64::from(interval)),
            max_per_minute: per_minute,
            jitter: d.jitter,
            grace_min: d.grace_min,
            grace_max: d.grace_max,
            ramp: d.ramp,
            ramp_start: d.ramp_start,
            window,
        });
        self.rules_at = Some(Instant::now());
    }

    /// Looks at the queue head: expires it, waits for the pacer, or sends it. The head is
    /// prepared (taken and marked in flight in one statement) up to [`Self::lead`] before
    /// its send time, so at that time only the network call remains; and a queue known
    /// not to be empty is not read again while its send time is near ([`BLIND`]).
    pub(crate) async fn pump(&mut self, held: &Held<'_>, session: &dyn Session) -> Step {
        let now = Instant::now();
        // When this pump was meant to run (a wake-up by a new message is not late).
        let meant = self.wake_at.min(now);
        self.wake_at = now + IDLE_POLL;
        let wall = Utc::now();
        self.refresh_rules(held).await;
        if !self.connected || self.paused {
            // Nothing goes out; only the head's expiry matters.
            // (A prepared head stays prepared: this actor started it.)
            let (head, ours) = match self.prepared.take() {
                Some(m) => (Some(m), true),
                None => match self.read_head(held).await {
                    Ok(h) => (h, false),
                    Err(step) => return step,
                },
            };
            let Some(head) = head else { return Step::Continue };
            if head.expires_at <= wall {
                return self.fail(held, &head, ErrorCode::MessageExpired, "not sent before expires_after").await;
            }
            self.wake_at = now + (head.expires_at - wall).to_std().unwrap_or_default().min(IDLE_POLL);
            if ours {
                self.prepared = Some(head);
            }
            return Step::Continue;
        }
        let Some(at) = self.pacer.next_at(now, wall) else { return Step::Continue };
        let m = match self.prepared.take() {
            Some(m) => m,
            None => {
                let prepare_at = at.checked_sub(self.lead()).unwrap_or(now);
                if prepare_at > now {
                    if prepare_at <= now + BLIND && !self.idle {
                        self.wake_at = prepare_at;
                        return Step::Continue;
                    }
                    // Far off: look at the head for its expiry (and whether there is one).
                    let head = match self.read_head(held).await {
                        Ok(Some(h)) => h,
                        Ok(None) | Err(_) => return Step::Continue,
                    };
                    if head.expires_at <= wall {
                        return self
                            .fail(held, &head, ErrorCode::MessageExpired, "not sent before expires_after")
                            .await;
                    }
                    self.wake_at = prepare_at.min(now + (head.expires_at - wall).to_std().unwrap_or_default());
                    return Step::Continue;
                }
                match held.ctx.starts.call((held.id.clone(), held.epoch, self.hold)).await {
                    Ok(Start::Started(m)) => {
                        self.idle = false;
                        self.prepare_time = (self.prepare_time * 3 + now.elapsed()) / 4;
                        *m
                    }
                    Ok(Start::Fenced) => return fenced(Ok(false)),
                    // Nothing eligible when the batch ran; one queued since goes next.
                    Ok(Start::Empty) => {
                        if let Ok(Some(_)) = self.read_head(held).await {
                            self.wake_at = Instant::now();
                        }
                        return Step::Continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "starting a send failed");
                        return Step::Continue;
                    }
                }
            }
        };
        if m.expires_at <= wall {
            return self.fail(held, &m, ErrorCode::MessageExpired, "not sent before expires_after").await;
        }
        if at > Instant::now() {
            // Prepared ahead: send at the pacer's time (or expire first).
            self.wake_at = at.min(now + (m.expires_at - wall).to_std().unwrap_or_default());
            self.prepared = Some(m);
            return Step::Continue;
        }
        let delay = (wall - m.created_at).to_std().unwrap_or_default();
        metrics::histogram!(PACING_DELAY).record(delay.as_secs_f64());
        let out = match self.outgoing(held, &m).await {
            Ok(o) => o,
            Err(step) => return step,
        };
        let send_at = Instant::now();
        metrics::histogram!(SEND_LATENESS).record(send_at.saturating_duration_since(at.max(meant)).as_secs_f64());
        let result = session.send(&out).await;
        if matches!(&result, Err(e) if e.media_unreadable) {
            // Its media could not be read: nothing went out; wait for the store.
            return self.read_later(&m);
        }
        metrics::histogram!(SEND_LATENCY).record(send_at.elapsed().as_secs_f64());
        // From the end of the send: the recipient never sees two closer than the gap.
        self.pacer.sent(Instant::now(), &mut rand::thread_rng());
        self.wake_at = Instant::now();
        match result {
            Ok(()) => self.finish(held, &m, Finish::Sent, "sent").await,
            // The queue never answers 429: the network's rate limit is waited out.
            Err(e) if e.code == ErrorCode::RateLimited => self.wait_out_rate_limit(held, &m).await,
            Err(e) if e.is_permanent() || m.attempts >= MAX_ATTEMPTS => {
                self.fail(held, &m, queue_code(e.code), &e.detail).await
            }
            Err(e) => self.retry(held, &m, e),
        }
    }

    /// The queue's head (and whether the queue is idle).
    async fn read_head(&mut self, held: &Held<'_>) -> Result<Option<MessageRow>, Step> {
        match messages::head(&held.ctx.db, held.id, self.hold).await {
            Ok(None) if self.hold => {
                // Everything left waits for the hold: look again now and then.
                self.idle = false;
                self.wake_at = self.wake_at.min(Instant::now() + HOLD_POLL);
                Ok(None)
            }
            Ok(h) => {
                self.idle = h.is_none();
                Ok(h)
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the queue failed");
                Err(Step::Continue)
            }
        }
    }

    /// A read the send needs failed (the database or the bucket is away): keep the message prepared,
    /// still in flight and in order, and build it again shortly. No attempt is spent.
    fn read_later(&mut self, m: &MessageRow) -> Step {
        metrics::counter!(crate::metrics::READS_FAILED).increment(1);
        self.prepared = Some(m.clone());
        self.wake_at = Instant::now() + READ_RETRY;
        Step::Continue
    }

    /// The network refused the send for its rate: the message stays in flight and in
    /// order, and is tried again after a long wait (which the instance's other sends
    /// share: they come after it).
    async fn wait_out_rate_limit(&mut self, held: &Held<'_>, m: &MessageRow) -> Step {
        metrics::counter!(SENDS, "result" => "rate_limited").increment(1);
        match messages::note_rate_limited(&held.ctx.db, held.id, held.epoch, &m.id).await {
            Ok(true) => {}
            Ok(false) => return fenced(Ok(false)),
            // The note feeds a risk signal only: the wait goes on without it.
            Err(e) => tracing::warn!(error = %e, "noting a rate-limited send failed"),
        }
        let base = held.ctx.retry_base.saturating_mul(RATE_LIMIT_FACTOR);
        let wait = shared::backoff::doubling(base, (m.attempts.clamp(1, 12) - 1) as u32, RATE_LIMIT_CAP);
        tracing::info!(message_id = %m.id, attempt = m.attempts, wait_ms = wait.as_millis() as u64, "the network's rate limit; waiting");
        self.wake_at = Instant::now() + wait;
        Step::Continue
    }

    fn retry(&mut self, held: &Held<'_>, m: &MessageRow, e: DriverError) -> Step {
        metrics::counter!(SENDS, "result" => "retried").increment(1);
        tracing::info!(message_id = %m.id, code = %e.code, attempt = m.attempts, "send failed; retrying");
        let wait = shared::backoff::doubling(held.ctx.retry_base, (m.attempts.clamp(1, 16) - 1) as u32, RETRY_CAP);
        self.wake_at = Instant::now() + wait;
        if e.code == ErrorCode::InstanceNotConnected {
            // The connection is gone: reopen it; the message stays in flight.
            return Step::Reconnect;
        }
        Step::Continue
    }

    /// Builds what the driver sends; its media's bytes are read by the driver as it sends.
    async fn outgoing(&mut self, held: &Held<'_>, m: &MessageRow) -> Result<Outgoing, Step> {
        let message = match m.outbound() {
            Ok(message) => message,
            Err(_) => {
                return Err(self
                    .fail(held, m, ErrorCode::ValidationFailed, "the message's content is unreadable")
                    .await)
            }
        };
        let media = match message.content.media() {
            None => None,
            Some(r) => match held.ctx.store.open(&r.id).await {
                Ok(Some(stored)) => {
                    let row = stored.row();
                    Some(Media {
                        mime_type: row.mime_type.clone(),
                        filename: row.filename.clone(),
                        sha256: row.sha256.clone(),
                        size: row.size.max(0) as u64,
                        bytes: MediaBytes::Stored(stored),
                    })
                }
                Ok(None) => {
                    return Err(self.fail(held, m, ErrorCode::ValidationFailed, "the message's media is gone").await)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "loading media failed");
                    return Err(self.read_later(m));
                }
            },
        };
        // The message it reacts to or quotes, by the network's id: a `msg_` id means
        // nothing there. One the log does not know goes as given (a network id) or not
        // at all (a `msg_` id).
        let target = match &message.content {
            shared::message::Content::Reaction { reaction } => Some(reaction.message_id.as_str()),
            _ => message.reply_to.as_deref(),
        };
        let reference = match target {
            None => None,
            Some(t) => match shared::db::log::referenced(&held.ctx.db, held.id, m.to_jid.as_str(), t).await {
                Ok(r) => r.map(crate::driver::Reference::from_row),
                Err(e) => {
                    tracing::warn!(error = %e, "reading the quoted message failed");
                    return Err(self.read_later(m));
                }
            },
        };
        let content = message.content.map_media(|_| media.expect("media types have their media"));
        Ok(Outgoing {
            network_id: m.wa_message_id.clone(),
            to_jid: m.to_jid.clone(),
            message: Outbound { content, reply_to: message.reply_to, mentions: message.mentions },
            reference,
        })
    }

    async fn fail(&mut self, held: &Held<'_>, m: &MessageRow, code: ErrorCode, detail: &str) -> Step {
        self.finish(held, m, Finish::Failed { code: code.as_str(), detail }, code.as_str()).await
    }

    async fn finish(&mut self, held: &Held<'_>, m: &MessageRow, outcome: Finish<'_>, result: &'static str) -> Step {
        let error = match outcome {
            Finish::Sent => None,
            Finish::Failed { code, detail } => Some((code.to_string(), detail.to_string())),
        };
        let job = crate::batch::Finish { id: m.id.clone(), instance: held.id.clone(), epoch: held.epoch, error };
        match held.ctx.finisher.call(job).await {
            Ok(Some(row)) => {
                metrics::counter!(SENDS, "result" => result).increment(1);
                self.wake_at = self.wake_at.min(Instant::now() + Duration::from_millis(1));
                let payload = serde_json::to_vec(&row.view()).expect("serializes");
                if let Err(e) = held.ctx.nats.publish(held.ctx.subjects.message_result(&row.id), payload.into()).await {
                    tracing::debug!(error = %e, "result publish failed");
                }
                Step::Continue
            }
            Ok(None) => fenced(Ok(false)),
            Err(e) => {
                tracing::warn!(error = %e, "recording a send failed");
                Step::Continue
            }
        }
    }
}

/// The code a send fails with: one of those the interface names for the queue
/// (`invalid_number`, `validation_failed`, `forbidden`, `instance_not_connected`,
/// `worker_timeout`, `message_expired`, `worker_error`); a driver's other codes map to the
/// nearest of them.
pub fn queue_code(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::InvalidNumber
        | ErrorCode::ValidationFailed
        | ErrorCode::Forbidden
        | ErrorCode::InstanceNotConnected
        | ErrorCode::WorkerTimeout
        | ErrorCode::MessageExpired
        | ErrorCode::WorkerError => code,
        // A recipient (a group, a channel) the network does not know.
        ErrorCode::NotFound => ErrorCode::InvalidNumber,
        ErrorCode::MediaTooLarge => ErrorCode::ValidationFailed,
        ErrorCode::InstanceBanned => ErrorCode::InstanceNotConnected,
        _ => ErrorCode::WorkerError,
    }
}
