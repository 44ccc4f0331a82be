//! What a delivery sends, by its webhook's format (README, "Coming from Evolution API"):
//! our event envelope as it is, or Evolution API v2's payload (`shared::evolution`) to
//! the URL Evolution would use (`webhook_by_events` appends the event's name). An
//! Evolution `send.message` carries the message's content, read from the queue; with
//! `webhook_base64` a received media's bytes come along (up to [`BASE64_LIMIT`]).

use bytes::Bytes;
use shared::db::webhooks::Origin;
use shared::ids::{InstanceId, MediaId, MessageId};

/// The largest media whose bytes an Evolution payload carries in base64; larger media
/// comes without them (its `url` is in the message).
pub const BASE64_LIMIT: u64 = 10 * 1024 * 1024;

/// The URL and body of a delivery of `payload` (the event's envelope) to `url`.
pub async fn delivery(
    db: &sqlx::PgPool,
    server_url: &str,
    url: &str,
    origin: &Origin,
    payload: &serde_json::Value,
) -> (String, Bytes) {
    let ours = || (url.to_string(), Bytes::from(serde_json::to_vec(payload).expect("json serializes")));
    if !origin.shape.is_evolution() {
        return ours();
    }
    let instance = payload["instance_id"].as_str().and_then(|i| InstanceId::parse(i).ok());
    let data = &payload["data"];
    let sent = match (payload["type"].as_str(), &instance) {
        (Some("message.sent"), Some(inst)) => sent_content(db, inst, data).await,
        _ => None,
    };
    let base64 = match (origin.shape.base64, &instance) {
        (true, Some(inst)) => media_base64(db, inst, &data["content"]["media"]).await,
        _ => None,
    };
    let sender = origin.phone.as_deref().map(|p| String::from(shared::jid::Jid::user(p)));
    let o = shared::evolution::Origin {
        instance_name: &origin.instance_name,
        sender: sender.as_deref(),
        server_url,
        destination: url,
    };
    let sent_ref = sent.as_ref().map(|(k, c)| (k.as_str(), c));
    match shared::evolution::webhook_payload(payload, &o, sent_ref, base64.as_deref()) {
        Some((event, body)) => {
            let to = if origin.shape.by_events {
                format!("{}/{}", url.trim_end_matches('/'), shared::evolution::by_events_path(event))
            } else {
                url.to_string()
            };
            (to, Bytes::from(serde_json::to_vec(&body).expect("json serializes")))
        }
        // (The fan-out only makes deliveries of events Evolution has.)
        None => ours(),
    }
}

/// A sent message's type and content, from the queue.
async fn sent_content(
    db: &sqlx::PgPool,
    instance: &InstanceId,
    data: &serde_json::Value,
) -> Option<(String, serde_json::Value)> {
    let id = MessageId::parse(data["id"].as_str()?).ok()?;
    match shared::db::messages::get(db, instance, &id).await {
        Ok(Some(m)) => Some((m.kind, m.content)),
        Ok(None) => None,
        Err(e) => {
            tracing::debug!(error = %e, "reading a sent message's content failed");
            None
        }
    }
}

/// A received media's bytes in base64, when the instance holds them and they are small
/// enough.
async fn media_base64(db: &sqlx::PgPool, instance: &InstanceId, media: &serde_json::Value) -> Option<String> {
    use base64::Engine;
    if media["size"].as_u64().is_none_or(|s| s > BASE64_LIMIT) {
        return None;
    }
    let id = MediaId::parse(media["id"].as_str()?).ok()?;
    match shared::db::media::get(db, &id).await {
        Ok(Some(m)) if &m.instance_id == instance => Some(base64::engine::general_purpose::STANDARD.encode(&m.data)),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, "reading media for a webhook failed");
            None
        }
    }
}
