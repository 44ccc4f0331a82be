//! The receive path: what the network tells a session (messages, history, receipts) goes
//! to the local log, fenced on the lease epoch, with its events. Media is downloaded and
//! stored first, so any API pod can serve it; media the network no longer has is
//! recorded as expired. The WhatsApp driver also calls `prepare` and `write` from its
//! inbound durability hook, so a message is logged before the network is told it
//! arrived.

use std::time::Duration;

use shared::db::instances::InstanceState;
use shared::db::log::{self, Source};
use shared::db::media::{self, MediaBody, MediaError};
use shared::ErrorCode;

use shared::db::log::Received;
use shared::ids::InstanceId;

use crate::actor::{fenced, Held, Step};
use crate::driver::{DriverError, Incoming, RemoteMedia, Session};

/// Tries of a log write before the messages are given up (and logged as lost).
const WRITE_TRIES: [Duration; 3] = [Duration::from_millis(200), Duration::from_secs(1), Duration::ZERO];

/// Where received media comes from (the session, or the WhatsApp client directly).
#[async_trait::async_trait]
pub trait Fetch: Send + Sync {
    async fn fetch(&self, media: &RemoteMedia) -> Result<Vec<u8>, DriverError>;
}

struct SessionFetch<'a>(&'a dyn Session);

#[async_trait::async_trait]
impl Fetch for SessionFetch<'_> {
    async fn fetch(&self, media: &RemoteMedia) -> Result<Vec<u8>, DriverError> {
        self.0.download(media).await
    }
}

/// How received media is kept: when a failed download is tried again, and how much an
/// instance may store.
#[derive(Debug, Clone, Copy)]
pub struct MediaPolicy {
    /// The first wait before a failed download is tried again (doubling per try).
    pub retry_base: Duration,
    /// Bytes of media the instance may store (`media.quota_bytes`).
    pub quota: u64,
}

impl Default for MediaPolicy {
    fn default() -> Self {
        MediaPolicy { retry_base: Duration::from_secs(30), quota: 2 * 1024 * 1024 * 1024 }
    }
}

/// The batch as the log keeps it: media not logged before downloaded and stored, the
/// content pointing at it. Media the network no longer has is recorded as expired; a
/// download that fails for a passing reason is stored pending, to be tried again after
/// `retry_in` (`Actor::retry_media`).
pub async fn prepare(
    store: &media::Store,
    instance: &InstanceId,
    batch: Vec<Incoming>,
    fetch: &dyn Fetch,
    policy: MediaPolicy,
) -> Vec<Received> {
    let keys: Vec<(&str, &str)> = batch
        .iter()
        .filter(|i| i.media.is_some())
        .map(|i| (i.message.chat_jid.as_str(), i.message.wa_message_id.as_str()))
        .collect();
    let known = if keys.is_empty() {
        Default::default()
    } else {
        log::known(&store.db, instance, &keys).await.unwrap_or_default()
    };
    let mut msgs = Vec::with_capacity(batch.len());
    for Incoming { mut message, media } in batch {
        if let (Some(remote), false) =
            (media, known.contains(&(message.chat_jid.clone(), message.wa_message_id.clone())))
        {
            let fetched = fetch.fetch(&remote).await;
            let again = serde_json::json!({
                "locator": remote.locator, "mime_type": remote.mime_type, "filename": remote.filename,
                "declared_size": remote.declared_size, "limit": remote.limit,
                "chat_jid": message.chat_jid, "wa_message_id": message.wa_message_id,
            });
            let body = match &fetched {
                Ok(bytes) => MediaBody::Data(bytes),
                Err(e) if e.code == ErrorCode::MediaUnavailable => MediaBody::Expired,
                Err(e) => {
                    tracing::warn!(error = %e, "downloading received media failed; it will be tried again");
                    MediaBody::Pending { remote: &again, retry_in: policy.retry_base }
                }
            };
            let (mime, name) = (&remote.mime_type, remote.filename.as_deref());
            let stored = match media::store(store, instance, media::Direction::Inbound, mime, name, body, policy.quota)
                .await
            {
                Err(MediaError::QuotaExceeded) => {
                    tracing::warn!(instance_id = %instance, "received media is over the instance's quota; logged unavailable");
                    metrics::counter!(crate::metrics::MEDIA_QUOTA_REFUSED, "source" => "received").increment(1);
                    media::store(
                        store,
                        instance,
                        media::Direction::Inbound,
                        mime,
                        name,
                        MediaBody::Expired,
                        policy.quota,
                    )
                    .await
                }
                // The bucket failed: the download is kept pending and tried again, as if
                // the network had not given it.
                Err(MediaError::Objects(e)) => {
                    tracing::warn!(error = %e, "storing received media failed; its download is tried again");
                    let later = MediaBody::Pending { remote: &again, retry_in: policy.retry_base };
                    media::store(store, instance, media::Direction::Inbound, mime, name, later, policy.quota).await
                }
                other => other,
            };
            match stored {
                Ok((_, desc)) => message.content["media"] = desc,
                Err(e) => tracing::warn!(error = %e, "storing received media failed"),
            }
        }
        msgs.push(message);
    }
    msgs
}

/// Tries of a pending download (the first included) before it is recorded as unavailable.
pub const MEDIA_TRIES: i32 = 8;
/// How often an actor looks for pending media when it knows of none (the WhatsApp
/// driver's inbound hook stores media without telling the actor).
const MEDIA_LOOK_EVERY: Duration = Duration::from_secs(300);

/// The wait before try `n + 1` of a download: `base` doubling per failed try, at most 1 h.
pub fn media_backoff(base: Duration, failed_tries: i32) -> Duration {
    shared::backoff::doubling(base, failed_tries.clamp(0, 16) as u32, Duration::from_secs(3600))
}

/// Logs messages, fenced, retrying a failing database a few times. `Ok(None)`: the
/// instance has a new owner.
pub async fn write(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    epoch: i64,
    msgs: &[Received],
    source: Source,
) -> Result<Option<usize>, sqlx::Error> {
    let mut last = None;
    for pause in WRITE_TRIES {
        match log::record_received(db, instance, epoch, msgs, source).await {
            Ok(r) => return Ok(r),
            Err(e) => {
                tracing::warn!(error = %e, "logging received messages failed");
                last = Some(e);
                tokio::time::sleep(pause).await;
            }
        }
    }
    Err(last.expect("at least one try"))
}

/// Received media whose download failed for a passing reason, tried again while the
/// session is up: when to look next.
pub(crate) struct MediaRetry {
    pub(crate) at: tokio::time::Instant,
}

impl MediaRetry {
    pub(crate) fn new() -> MediaRetry {
        // Soon after start: a previous owner may have left downloads pending.
        MediaRetry { at: tokio::time::Instant::now() + Duration::from_secs(2) }
    }

    /// Logs messages from the network, then tells the network they are logged: live
    /// messages by id, a history sync's `chunk` by number. Until then the network
    /// delivers them again on the session's next connect, so a crash, a refused fence
    /// (the new owner gets them) or a failed write loses nothing. A refused fence ends
    /// the actor's hold.
    pub(crate) async fn receive(
        &mut self,
        held: &Held<'_>,
        session: &dyn Session,
        batch: Vec<Incoming>,
        source: Source,
        chunk: Option<u32>,
    ) -> Step {
        let ids: Vec<String> = match chunk {
            None => batch.iter().map(|i| i.message.wa_message_id.clone()).collect(),
            Some(_) => Vec::new(),
        };
        let msgs = prepare(&held.ctx.store, held.id, batch, &SessionFetch(session), held.ctx.media).await;
        if msgs.iter().any(|m| m.content["media"]["pending"] == true) {
            self.at = self.at.min(tokio::time::Instant::now() + held.ctx.media.retry_base);
        }
        match write(&held.ctx.db, held.id, held.epoch, &msgs, source).await {
            Ok(Some(new)) => {
                let source = if source == Source::Live { "live" } else { "history" };
                metrics::counter!(crate::metrics::RECEIVED, "source" => source).increment(new as u64);
                session.logged(match chunk {
                    Some(c) => crate::driver::Logged::HistoryChunk(c),
                    None => crate::driver::Logged::Messages(&ids),
                });
                Step::Continue
            }
            Ok(None) => fenced(Ok(false)),
            Err(e) => {
                tracing::error!(
                    error = %e,
                    n = msgs.len(),
                    "logging received messages failed; unacknowledged, the network delivers them again on the next connect"
                );
                Step::Continue
            }
        }
    }

    /// Tries again one download that is due, records its outcome (fenced) and sets when
    /// to look next. One per round, so the actor's other work (RPCs, sends, events)
    /// interleaves with a backlog; only while connected, so a session that is down
    /// spends no tries.
    pub(crate) async fn retry_media(&mut self, held: &Held<'_>, state: InstanceState, session: &dyn Session) -> Step {
        let later = |base: Duration| tokio::time::Instant::now() + base.max(Duration::from_secs(5));
        if state != InstanceState::Connected {
            self.at = later(held.ctx.media.retry_base);
            return Step::Continue;
        }
        let due = match log::pending_media(&held.ctx.db, held.id, 1).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "reading pending media failed");
                self.at = later(held.ctx.media.retry_base);
                return Step::Continue;
            }
        };
        if let Some(m) = due.first() {
            let r = &m.remote;
            let locator = r["locator"].as_str().unwrap_or_default();
            let remote = RemoteMedia {
                locator: locator.to_string(),
                mime_type: r["mime_type"].as_str().unwrap_or_default().to_string(),
                filename: r["filename"].as_str().map(str::to_string),
                declared_size: r["declared_size"].as_u64(),
                // Rows pending from before the limit was kept: the largest type's.
                limit: r["limit"].as_u64().unwrap_or(shared::message::DOCUMENT_LIMIT as u64),
            };
            let bytes = if locator.is_empty() {
                Err(DriverError::new(ErrorCode::MediaUnavailable, "no locator"))
            } else {
                session.download(&remote).await
            };
            let room = match &bytes {
                Ok(_) => media::usage(&held.ctx.db, held.id)
                    .await
                    .map(|used| held.ctx.media.quota.saturating_sub(used.max(0) as u64))
                    .unwrap_or(0),
                Err(_) => 0,
            };
            let fetched = match &bytes {
                Ok(b) if b.len() as u64 <= room => log::Fetched::Data(b),
                Ok(_) => {
                    tracing::warn!(instance_id = %held.id, "received media is over the instance's quota; recorded as unavailable");
                    metrics::counter!(crate::metrics::MEDIA_QUOTA_REFUSED, "source" => "received").increment(1);
                    log::Fetched::Gone
                }
                Err(e) if e.code == ErrorCode::MediaUnavailable => log::Fetched::Gone,
                Err(_) if m.fetch_attempts + 2 >= MEDIA_TRIES => {
                    tracing::warn!(
                        "received media could not be downloaded after its last try; recorded as unavailable"
                    );
                    log::Fetched::Gone
                }
                Err(_) => log::Fetched::Later(media_backoff(held.ctx.media.retry_base, m.fetch_attempts + 1)),
            };
            match log::resolve_media(
                &held.ctx.store,
                held.id,
                held.epoch,
                m,
                fetched,
                media_backoff(held.ctx.media.retry_base, 3),
            )
            .await
            {
                Ok(true) => {}
                Ok(false) => return fenced(Ok(false)),
                Err(e) => {
                    // Nothing recorded: the row is still due. Wait before the next try
                    // rather than fetching it again at once.
                    tracing::warn!(error = %e, "recording a media download failed");
                    self.at = later(held.ctx.media.retry_base);
                    return Step::Continue;
                }
            }
        }
        // The wait is computed by Postgres, whose clock decided what was due; a round
        // that found nothing due waits at least a second, so clocks apart cannot spin.
        let found = !due.is_empty();
        let now = tokio::time::Instant::now();
        self.at = match log::next_media_retry(&held.ctx.db, held.id).await {
            Ok(Some(wait)) if found => now + wait,
            Ok(Some(wait)) => now + wait.max(Duration::from_secs(1)),
            Ok(None) => now + MEDIA_LOOK_EVERY,
            Err(_) => later(held.ctx.media.retry_base),
        };
        Step::Continue
    }
}

/// A receipt for a sent message (statuses only move forward).
pub(crate) async fn receipt(
    held: &Held<'_>,
    wa_message_id: &str,
    receipt: log::Receipt,
    at: chrono::DateTime<chrono::Utc>,
) -> Step {
    let job = log::ReceiptIn {
        instance: held.id.clone(),
        epoch: held.epoch,
        wa_message_id: wa_message_id.to_string(),
        receipt,
        at,
    };
    if let Err(e) = held.ctx.receipts.call(job).await {
        tracing::warn!(error = %e, "recording a receipt failed");
    }
    Step::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_retries_double_up_to_an_hour() {
        let base = Duration::from_secs(30);
        assert_eq!(media_backoff(base, 0), Duration::from_secs(30));
        assert_eq!(media_backoff(base, 1), Duration::from_secs(60));
        assert_eq!(media_backoff(base, 3), Duration::from_secs(240));
        assert_eq!(media_backoff(base, 7), Duration::from_secs(3600));
        assert_eq!(media_backoff(base, 40), Duration::from_secs(3600), "no overflow");
    }
}
