//! Chatwoot's webhook (`POST /v1/chatwoot/webhook/{secret}`): the URL's secret finds the
//! inbox (by its hash, so no comparison leaks it), and an agent's message is queued for
//! the bridge as a job keyed by the inbox's generation and Chatwoot's message id, so a
//! retried or repeated webhook queues nothing more (a resolution is queued each time: it
//! only forgets a conversation). The recipient of an agent's message is never read from the
//! payload: the bridge takes it from the conversation it mapped.

use serde_json::{json, Value};
use shared::db::chatwoot::{self as rows, Kind};

use super::{sealer, Stored};
use crate::{Core, Error, Result};

/// Attachments taken from one agent message.
const ATTACHMENTS_LIMIT: usize = 10;

/// What a webhook led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Queued for the bridge.
    Queued,
    /// Queued before (Chatwoot retried or repeated it).
    Repeated,
    /// Nothing to do: another event, a private note, an incoming message, one the bridge
    /// made, another inbox's, or the inbox is disabled.
    Ignored,
}

/// Takes one webhook of the inbox whose secret is `secret`.
pub async fn receive(core: &Core, secret: &str, body: &[u8]) -> Result<Received> {
    let row =
        rows::by_hook(&core.db, &shared::auth::hash_token(secret)).await?.ok_or(Error::NotFound("chatwoot webhook"))?;
    let s = Stored::open(row, &sealer(&core.config)?)?;
    if let Some(account) = &s.from_account {
        // An inbox made from an account's settings speaks for the instance only while the
        // instance is in that account.
        let now = shared::db::accounts::of_instance(&core.db, &s.instance_id).await?.flatten();
        if now.as_ref().map(|a| a.as_str()) != Some(account.as_str()) {
            return Ok(Received::Ignored);
        }
    }
    let v: Value = serde_json::from_slice(body).map_err(|_| Error::invalid("the body must be a JSON object"))?;
    if !v.is_object() {
        return Err(Error::invalid("the body must be a JSON object"));
    }
    let Some((kind, key, payload)) = job_of(&s, &v) else {
        return Ok(Received::Ignored);
    };
    Ok(if rows::enqueue(&core.db, &s.instance_id, kind, &key, &payload, None).await? {
        Received::Queued
    } else {
        Received::Repeated
    })
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// The job a webhook calls for, if any.
pub fn job_of(s: &Stored, v: &Value) -> Option<(Kind, String, Value)> {
    if !s.config.enabled {
        return None;
    }
    let inbox = v.pointer("/inbox/id").or_else(|| v.pointer("/conversation/inbox_id")).and_then(int);
    if s.inbox_id.is_some() && inbox.is_some() && inbox != s.inbox_id {
        return None;
    }
    let account = v.pointer("/account/id").and_then(int);
    if account.is_some_and(|a| a != s.config.account_id) {
        return None;
    }
    let conversation = v.pointer("/conversation/id").and_then(int)?;
    match v.get("event").and_then(Value::as_str)? {
        "message_created" => {
            let outgoing = match v.get("message_type") {
                Some(Value::String(t)) => t == "outgoing",
                Some(n) => n.as_i64() == Some(1),
                None => false,
            };
            let private = v.get("private").and_then(Value::as_bool).unwrap_or(false);
            // Messages the bridge made carry their source; agents' carry none.
            let made_here = v.get("source_id").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
            if !outgoing || private || made_here {
                return None;
            }
            let id = v.get("id").and_then(int)?;
            let attachments: Vec<Value> = v
                .get("attachments")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .take(ATTACHMENTS_LIMIT)
                        .filter_map(|x| {
                            let url = x.get("data_url").and_then(Value::as_str)?;
                            Some(json!({
                                "data_url": url,
                                "file_type": x.get("file_type").and_then(Value::as_str).unwrap_or("file"),
                                "file_size": x.get("file_size").and_then(int),
                            }))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let sender = v
                .pointer("/sender/available_name")
                .or_else(|| v.pointer("/sender/name"))
                .and_then(Value::as_str)
                .map(|n| n.chars().take(100).collect::<String>());
            let content = v.get("content").and_then(Value::as_str).unwrap_or_default();
            if content.trim().is_empty() && attachments.is_empty() {
                return None;
            }
            let payload = json!({
                "generation": s.generation,
                "message_id": id,
                "conversation_id": conversation,
                "content": content,
                "attachments": attachments,
                "sender": sender,
                "in_reply_to": v.pointer("/content_attributes/in_reply_to").and_then(int),
            });
            Some((Kind::Outbound, format!("{}-{id}", s.generation), payload))
        }
        "conversation_status_changed" | "conversation_resolved" => {
            let status = v.get("status").or_else(|| v.pointer("/conversation/status")).and_then(Value::as_str);
            if status != Some("resolved") || s.config.reopen_conversation {
                return None;
            }
            let key = format!("{conversation}-{}", uuid::Uuid::now_v7());
            Some((Kind::Resolved, key, json!({ "generation": s.generation, "conversation_id": conversation })))
        }
        _ => None,
    }
}
