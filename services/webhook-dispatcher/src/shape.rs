//! What a delivery sends, by its webhook's format (docs/evolution.md):
//! our event envelope as it is, or Evolution API v2's payload (`evolution_shape`) to
//! the URL Evolution would use (`webhook_by_events` appends the event's name). An
//! Evolution `send.message` carries the message's content, read from the queue; with
//! `webhook_base64` a received media's bytes come along (up to [`BASE64_LIMIT`], as
//! stored, whatever the event said of its size).
//!
//! An Evolution body is built when its attempt starts, never while the job waits in its
//! endpoint's queue: a waiting job holds only the event's envelope. A body with media
//! first takes its size from the pod's [`Budget`] of body bytes, then reads the media a
//! chunk at a time, encoding each into the body's one buffer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::TryStreamExt;
use shared::db::media::{self, Base64Pieces, Hole, Meta};
use shared::db::webhooks::{Origin, WebhookFormat};
use shared::ids::{InstanceId, MediaId, MessageId};
use tokio::sync::Notify;

use crate::metrics as m;

/// The largest media whose bytes an Evolution payload carries in base64; larger media
/// comes without them (its `url` is in the message).
pub const BASE64_LIMIT: u64 = 10 * 1024 * 1024;

/// What a job will send.
#[derive(Debug, Clone)]
pub enum Body {
    /// Our envelope: the stream's bytes as they are.
    Ready(Bytes),
    /// An Evolution-format payload, built from the event's envelope when its attempt
    /// starts.
    Evolution { envelope: Arc<serde_json::Value>, origin: Arc<Origin>, hook_url: String },
}

/// Whether a webhook of this origin's format carries the event: ours carries every type;
/// an Evolution-format one only those Evolution has, under one of the names it was given.
pub fn carries(origin: &Origin, kind: &str, data: &serde_json::Value) -> bool {
    match origin.shape.format {
        WebhookFormat::Paceline => true,
        WebhookFormat::Evolution => match evolution_shape::event_name(kind, data) {
            None => false,
            Some(dotted) => {
                let named = &origin.shape.evolution_events;
                named.is_empty() || named.contains(&evolution_shape::upper(dotted))
            }
        },
    }
}

/// The URL a delivery of `envelope` goes to: the webhook's, plus the event's name for an
/// Evolution webhook with `webhook_by_events`. Cheap: nothing is read.
pub fn target(url: &str, origin: &Origin, envelope: &serde_json::Value) -> String {
    if !(origin.shape.is_evolution() && origin.shape.by_events) {
        return url.to_string();
    }
    let kind = envelope["type"].as_str().unwrap_or_default();
    match evolution_shape::event_name(kind, &envelope["data"]) {
        Some(event) => format!("{}/{}", url.trim_end_matches('/'), evolution_shape::by_events_path(event)),
        None => url.to_string(),
    }
}

/// The job's body for a webhook of this origin: ours is the event's bytes now, an
/// Evolution one is built later ([`build`]).
pub fn body(url: &str, origin: &Arc<Origin>, envelope: &Arc<serde_json::Value>, raw: Option<&Bytes>) -> Body {
    if origin.shape.is_evolution() {
        return Body::Evolution { envelope: envelope.clone(), origin: origin.clone(), hook_url: url.to_string() };
    }
    Body::Ready(raw.cloned().unwrap_or_else(|| Bytes::from(ours(envelope))))
}

/// A built body and the budget it holds until it is dropped.
pub struct Built {
    pub bytes: Bytes,
    pub _held: Option<Held>,
}

/// Why a body was not built.
#[derive(Debug, PartialEq, Eq)]
pub enum NotBuilt {
    /// The pod's body budget stayed full until `by`: the job goes back, unattempted.
    Busy,
}

/// Builds an Evolution body (`hook_url` the webhook's URL, without the event's name).
/// Its media's bytes are added only when the instance holds them, stored at most
/// [`BASE64_LIMIT`], and the budget gives room for them before `by`.
pub async fn build(
    store: &media::Store,
    server_url: &str,
    hook_url: &str,
    origin: &Origin,
    envelope: &serde_json::Value,
    budget: &Budget,
    by: tokio::time::Instant,
) -> Result<Built, NotBuilt> {
    let instance = envelope["instance_id"].as_str().and_then(|i| InstanceId::parse(i).ok());
    let data = &envelope["data"];
    let sent = match (envelope["type"].as_str(), &instance) {
        (Some("message.sent"), Some(inst)) => sent_content(&store.db, inst, data).await,
        _ => None,
    };
    let media = match (origin.shape.base64, &instance) {
        (true, Some(inst)) => stored_media(&store.db, inst, &data["content"]["media"]).await,
        _ => None,
    };
    let sender = origin.phone.as_deref().map(|p| String::from(shared::jid::Jid::user(p)));
    let o = evolution_shape::Origin {
        instance_name: &origin.instance_name,
        sender: sender.as_deref(),
        server_url,
        destination: hook_url,
    };
    let sent_ref = sent.as_ref().map(|(k, c)| (k.as_str(), c));
    let payload = |base64: Option<&str>| {
        evolution_shape::webhook_payload(envelope, &o, sent_ref, base64)
            .map(|(_, body)| serde_json::to_vec(&body).expect("json serializes"))
    };
    let plain = || Built { bytes: Bytes::from(payload(None).unwrap_or_else(|| ours(envelope))), _held: None };
    let (Some((id, size)), Some(inst)) = (media, instance.as_ref()) else { return Ok(plain()) };
    let hole = Hole::default();
    let Some((prefix, suffix)) = payload(Some(hole.marker())).and_then(|j| hole.cut(j)) else { return Ok(plain()) };
    let total = prefix.len() + suffix.len() + Base64Pieces::encoded_len(size) as usize;
    if total as u64 > budget.per_instance() {
        // Never fits: the payload goes without the bytes, as for media over the limit.
        return Ok(plain());
    }
    let held = budget.take(inst, total as u64, by).await.ok_or(NotBuilt::Busy)?;
    let mut out = Vec::with_capacity(total);
    let mut pieces = std::pin::pin!(media::base64_stream(store.clone(), id, prefix, suffix));
    loop {
        match pieces.try_next().await {
            Ok(Some(p)) if out.len() + p.len() <= total => out.extend_from_slice(&p),
            Ok(None) if out.len() == total => return Ok(Built { bytes: Bytes::from(out), _held: Some(held) }),
            Ok(_) => break,
            Err(e) => {
                tracing::debug!(error = %e, "reading media for a webhook failed");
                break;
            }
        }
    }
    // Gone or changed meanwhile (retention): without the bytes.
    Ok(plain())
}

/// Our envelope's bytes.
fn ours(envelope: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(envelope).expect("json serializes")
}

/// A sent message's type and content, from the queue.
async fn sent_content(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    data: &serde_json::Value,
) -> Option<(String, serde_json::Value)> {
    let id = MessageId::parse(data["id"].as_str()?).ok()?;
    match shared::db::messages::get(db, instance, &id).await {
        Ok(Some(m)) => Some((m.kind.as_str().to_string(), m.content)),
        Ok(None) => None,
        Err(e) => {
            tracing::debug!(error = %e, "reading a sent message's content failed");
            None
        }
    }
}

/// A received media the instance holds, with its stored size, when that is at most
/// [`BASE64_LIMIT`] (the event's `size` is not trusted: it is 0 while a download is
/// pending).
async fn stored_media(db: &sqlx::PgPool, instance: &InstanceId, media: &serde_json::Value) -> Option<(MediaId, u64)> {
    let id = MediaId::parse(media["id"].as_str()?).ok()?;
    match media::meta_of(db, instance, &id).await {
        Ok(Some(Meta::Stored { size, .. })) if size <= BASE64_LIMIT => Some((id, size)),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, "reading media for a webhook failed");
            None
        }
    }
}

/// The bytes of built bodies one dispatcher pod may hold at once
/// (`webhooks.body_bytes_in_flight`), and at most half of them for one instance, so a
/// tenant whose endpoint never answers holds a bounded part of the pod, and never all
/// of it. The gauge `paceline_webhook_body_bytes_in_flight` shows what is held.
#[derive(Clone)]
pub struct Budget(Arc<BudgetInner>);

struct BudgetInner {
    limit: u64,
    held: Mutex<(u64, HashMap<InstanceId, u64>)>,
    freed: Notify,
}

/// Bytes taken from a [`Budget`], given back when dropped.
pub struct Held {
    budget: Budget,
    instance: InstanceId,
    n: u64,
}

impl Budget {
    pub fn new(limit: u64) -> Budget {
        Budget(Arc::new(BudgetInner { limit, held: Mutex::new((0, HashMap::new())), freed: Notify::new() }))
    }

    /// The most one instance may hold.
    pub fn per_instance(&self) -> u64 {
        self.0.limit / 2
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.0.held.lock().expect("budget").0
    }

    fn try_take(&self, instance: &InstanceId, n: u64) -> bool {
        let mut g = self.0.held.lock().expect("budget");
        let mine = g.1.get(instance).copied().unwrap_or(0);
        if g.0 + n > self.0.limit || mine + n > self.per_instance() {
            return false;
        }
        g.0 += n;
        *g.1.entry(instance.clone()).or_insert(0) += n;
        metrics::gauge!(m::BODY_BYTES).set(g.0 as f64);
        true
    }

    /// Takes `n` bytes for `instance`, waiting until `by` for room; `None` if none came.
    pub async fn take(&self, instance: &InstanceId, n: u64, by: tokio::time::Instant) -> Option<Held> {
        loop {
            let freed = self.0.freed.notified();
            if self.try_take(instance, n) {
                return Some(Held { budget: self.clone(), instance: instance.clone(), n });
            }
            if tokio::time::timeout_at(by, freed).await.is_err() {
                return None;
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut g = self.budget.0.held.lock().expect("budget");
        g.0 -= self.n;
        if let Some(mine) = g.1.get_mut(&self.instance) {
            *mine -= self.n;
            if *mine == 0 {
                g.1.remove(&self.instance);
            }
        }
        metrics::gauge!(m::BODY_BYTES).set(g.0 as f64);
        drop(g);
        self.budget.0.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn inst() -> InstanceId {
        InstanceId::new()
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_bounds_the_pod_and_each_instance() {
        let b = Budget::new(100);
        let (a, c) = (inst(), inst());
        let soon = || tokio::time::Instant::now() + Duration::from_secs(1);
        let a1 = b.take(&a, 50, soon()).await.expect("half for one instance");
        assert!(b.take(&a, 1, soon()).await.is_none(), "no more than half for one instance");
        let c1 = b.take(&c, 50, soon()).await.expect("the other half for another");
        assert_eq!(b.held(), 100);
        let third = inst();
        // Waits until room is given back.
        let waiter = {
            let b = b.clone();
            let third = third.clone();
            tokio::spawn(async move { b.take(&third, 30, tokio::time::Instant::now() + Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiter.is_finished());
        drop(a1);
        let t = waiter.await.unwrap().expect("room came");
        assert_eq!(b.held(), 80);
        drop((t, c1));
        assert_eq!(b.held(), 0);
        assert!(b.0.held.lock().unwrap().1.is_empty());
    }
}
