//! The receive path: what the network tells a session (messages, history, receipts) goes
//! to the local log, fenced on the lease epoch, with its events. Media is downloaded and
//! stored first, so any API pod can serve it; media the network no longer has is
//! recorded as expired. The WhatsApp driver also calls `prepare` and `write` from its
//! inbound durability hook, so a message is logged before the network is told it
//! arrived.

use std::time::Duration;

use shared::db::log::{self, Source};
use shared::db::messages;
use shared::ErrorCode;

use shared::db::log::Received;
use shared::ids::InstanceId;

use crate::actor::{Actor, Step};
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

/// The batch as the log keeps it: media not logged before downloaded and stored (or
/// recorded as unavailable), the content pointing at it.
pub async fn prepare(db: &sqlx::PgPool, instance: &InstanceId, batch: Vec<Incoming>, fetch: &dyn Fetch) -> Vec<Received> {
    let keys: Vec<(&str, &str)> = batch
        .iter()
        .filter(|i| i.media.is_some())
        .map(|i| (i.message.chat_jid.as_str(), i.message.wa_message_id.as_str()))
        .collect();
    let known = if keys.is_empty() { Default::default() } else { log::known(db, instance, &keys).await.unwrap_or_default() };
    let mut msgs = Vec::with_capacity(batch.len());
    for Incoming { mut message, media } in batch {
        if let (Some(remote), false) = (media, known.contains(&(message.chat_jid.clone(), message.wa_message_id.clone()))) {
            let data = match fetch.fetch(&remote).await {
                Ok(bytes) => Some(bytes),
                Err(e) if e.code == ErrorCode::MediaUnavailable => None,
                Err(e) => {
                    tracing::warn!(error = %e, "downloading received media failed; recorded as unavailable");
                    None
                }
            };
            match messages::store_media(db, instance, &remote.mime_type, remote.filename.as_deref(), data.as_deref()).await {
                Ok((_, desc)) => message.content["media"] = desc,
                Err(e) => tracing::warn!(error = %e, "storing received media failed"),
            }
        }
        msgs.push(message);
    }
    msgs
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

impl Actor {
    /// Logs messages from the network; a refused fence ends the actor's hold.
    pub(crate) async fn receive(&mut self, session: &dyn Session, batch: Vec<Incoming>, source: Source) -> Step {
        let msgs = prepare(&self.ctx.db, &self.id, batch, &SessionFetch(session)).await;
        match write(&self.ctx.db, &self.id, self.epoch, &msgs, source).await {
            Ok(Some(_)) => Step::Continue,
            Ok(None) => self.fenced(Ok(false)),
            Err(e) => {
                tracing::error!(error = %e, n = msgs.len(), "logging received messages failed; they are lost");
                Step::Continue
            }
        }
    }

    /// A receipt for a sent message (statuses only move forward).
    pub(crate) async fn receipt(&mut self, wa_message_id: &str, status: &str, at: chrono::DateTime<chrono::Utc>) -> Step {
        if let Err(e) = log::apply_receipt(&self.ctx.db, &self.id, self.epoch, wa_message_id, status, at).await {
            tracing::warn!(error = %e, "recording a receipt failed");
        }
        Step::Continue
    }
}
