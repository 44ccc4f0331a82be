//! The receive path: what the network tells a session (messages, history, receipts) goes
//! to the local log, fenced on the lease epoch, with its events. Media is downloaded and
//! stored first, so any API pod can serve it; media the network no longer has is
//! recorded as expired.

use std::time::Duration;

use shared::db::log::{self, Source};
use shared::db::messages;
use shared::ErrorCode;

use crate::actor::{Actor, Step};
use crate::driver::{Incoming, Session};

/// Tries of a log write before the messages are given up (and logged as lost).
const WRITE_TRIES: [Duration; 3] = [Duration::from_millis(200), Duration::from_secs(1), Duration::ZERO];

impl Actor {
    /// Logs messages from the network; a refused fence ends the actor's hold.
    pub(crate) async fn receive(&mut self, session: &dyn Session, batch: Vec<Incoming>, source: Source) -> Step {
        let mut msgs = Vec::with_capacity(batch.len());
        let known = self.known(&batch).await;
        for Incoming { mut message, media } in batch {
            if let (Some(remote), false) = (media, known.contains(&(message.chat_jid.clone(), message.wa_message_id.clone()))) {
                let data = match session.download(&remote).await {
                    Ok(bytes) => Some(bytes),
                    Err(e) if e.code == ErrorCode::MediaUnavailable => None,
                    Err(e) => {
                        tracing::warn!(error = %e, "downloading received media failed; recorded as unavailable");
                        None
                    }
                };
                match messages::store_media(&self.ctx.db, &self.id, &remote.mime_type, remote.filename.as_deref(), data.as_deref()).await {
                    Ok((_, desc)) => message.content["media"] = desc,
                    Err(e) => tracing::warn!(error = %e, "storing received media failed"),
                }
            }
            msgs.push(message);
        }
        for pause in WRITE_TRIES {
            match log::record_received(&self.ctx.db, &self.id, self.epoch, &msgs, source).await {
                Ok(Some(_)) => return Step::Continue,
                Ok(None) => return self.fenced(Ok(false)),
                Err(e) if !pause.is_zero() => {
                    tracing::warn!(error = %e, "logging received messages failed; retrying");
                    tokio::time::sleep(pause).await;
                }
                Err(e) => tracing::error!(error = %e, n = msgs.len(), "logging received messages failed; they are lost"),
            }
        }
        Step::Continue
    }

    /// (chat, network id) of the batch's media messages already in the log: their media
    /// was stored the first time.
    async fn known(&self, batch: &[Incoming]) -> std::collections::HashSet<(String, String)> {
        let keys: Vec<(&str, &str)> = batch
            .iter()
            .filter(|i| i.media.is_some())
            .map(|i| (i.message.chat_jid.as_str(), i.message.wa_message_id.as_str()))
            .collect();
        if keys.is_empty() {
            return Default::default();
        }
        log::known(&self.ctx.db, &self.id, &keys).await.unwrap_or_default()
    }

    /// A receipt for a sent message (statuses only move forward).
    pub(crate) async fn receipt(&mut self, wa_message_id: &str, status: &str, at: chrono::DateTime<chrono::Utc>) -> Step {
        if let Err(e) = log::apply_receipt(&self.ctx.db, &self.id, self.epoch, wa_message_id, status, at).await {
            tracing::warn!(error = %e, "recording a receipt failed");
        }
        Step::Continue
    }
}
