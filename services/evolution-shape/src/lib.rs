//! Evolution API v2 shapes (docs/evolution.md): our messages and
//! events as Evolution clients read them. Pure: the API's Evolution routes answer with
//! these, and the dispatcher turns an event into Evolution's webhook payload for a
//! webhook in the `evolution` format. Evolution's names (`key`, `messageType`,
//! `messages.upsert`, ...) follow its v2 sources (`src/api/integrations/channel/whatsapp/
//! whatsapp.baileys.service.ts`, `src/api/types/wa.types.ts`).

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// Evolution's events (the names `webhook/set` takes) and ours each one carries.
pub const EVENTS: &[(&str, &[&str])] = &[
    ("QRCODE_UPDATED", &["instance.qr_updated"]),
    ("CONNECTION_UPDATE", &["instance.state"]),
    ("MESSAGES_UPSERT", &["message.received", "reaction.received", "status.received", "channel.post_received"]),
    ("MESSAGES_UPDATE", &["message.delivered", "message.read", "message.failed"]),
    ("SEND_MESSAGE", &["message.sent"]),
    ("CONTACTS_UPDATE", &["contact.updated"]),
    ("CHATS_UPDATE", &["chat.updated"]),
    ("GROUPS_UPSERT", &["group.joined"]),
    ("GROUP_UPDATE", &["group.updated"]),
    ("GROUP_PARTICIPANTS_UPDATE", &["group.participants_updated"]),
    ("LABELS_EDIT", &["label.updated"]),
    ("LABELS_ASSOCIATION", &["label.updated"]),
    ("CALL", &["call.rejected"]),
];

/// Evolution's event names that paceline has no counterpart for: accepted by
/// `webhook/set` (and shown back), never sent.
pub const SILENT_EVENTS: &[&str] = &[
    "APPLICATION_STARTUP",
    "MESSAGES_SET",
    "MESSAGES_EDITED",
    "MESSAGES_DELETE",
    "CONTACTS_SET",
    "CONTACTS_UPSERT",
    "PRESENCE_UPDATE",
    "CHATS_SET",
    "CHATS_UPSERT",
    "CHATS_DELETE",
    "LOGOUT_INSTANCE",
    "REMOVE_INSTANCE",
    "TYPEBOT_START",
    "TYPEBOT_CHANGE_STATUS",
];

/// Whether `name` is one of Evolution's event names.
pub fn known_event(name: &str) -> bool {
    EVENTS.iter().any(|(e, _)| *e == name) || SILENT_EVENTS.contains(&name)
}

/// Our event types that Evolution's `names` carry (all of ours that have a counterpart
/// when `names` is empty).
pub fn our_events(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = EVENTS
        .iter()
        .filter(|(e, _)| names.is_empty() || names.iter().any(|n| n == e))
        .flat_map(|(_, ours)| ours.iter().map(|s| s.to_string()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Evolution's name for one of our events, as its payload's `event` says it
/// (`messages.upsert`); `None` when Evolution has no such event. A label applied or
/// removed is `labels.association`, any other label change `labels.edit`.
pub fn event_name(kind: &str, data: &Value) -> Option<&'static str> {
    Some(match kind {
        "instance.qr_updated" => "qrcode.updated",
        "instance.state" => "connection.update",
        "message.received" | "reaction.received" | "status.received" | "channel.post_received" => "messages.upsert",
        "message.delivered" | "message.read" | "message.failed" => "messages.update",
        "message.sent" => "send.message",
        "contact.updated" => "contacts.update",
        "chat.updated" => "chats.update",
        "group.joined" => "groups.upsert",
        "group.updated" => "groups.update",
        "group.participants_updated" => "group-participants.update",
        "label.updated" => match data["change"].as_str() {
            Some("applied" | "removed") => "labels.association",
            _ => "labels.edit",
        },
        "call.rejected" => "call",
        _ => return None,
    })
}

/// The `UPPER_CASE` name `webhook/set` takes for a dotted one (`messages.upsert` ->
/// `MESSAGES_UPSERT`), and the path segment `webhook_by_events` appends
/// (`messages-upsert`).
pub fn upper(dotted: &str) -> String {
    dotted.replace(['.', '-'], "_").to_ascii_uppercase()
}

pub fn by_events_path(dotted: &str) -> String {
    dotted.replace(['.', '_'], "-").to_ascii_lowercase()
}

/// Our message types behind one of Evolution's `messageType`s (none when unknown).
pub fn our_kinds(message_type: &str) -> Vec<&'static str> {
    match message_type {
        "conversation" | "extendedTextMessage" => vec!["text"],
        "imageMessage" => vec!["image"],
        "videoMessage" => vec!["video"],
        "documentMessage" | "documentWithCaptionMessage" => vec!["document"],
        "audioMessage" => vec!["audio", "voice"],
        "stickerMessage" => vec!["sticker"],
        "locationMessage" => vec!["location"],
        "contactMessage" => vec!["contact"],
        "pollCreationMessage" | "pollCreationMessageV3" => vec!["poll"],
        "reactionMessage" => vec!["reaction"],
        _ => vec![],
    }
}

/// Evolution's message status for ours.
pub fn status(ours: &str) -> &'static str {
    match ours {
        "queued" | "in_flight" => "PENDING",
        "sent" => "SERVER_ACK",
        "delivered" => "DELIVERY_ACK",
        "read" => "READ",
        "played" => "PLAYED",
        _ => "ERROR",
    }
}

/// `messageType` and `message` for a message of our `kind` with `content` (as `POST
/// {inst}/messages` takes it and the history shows it). `base64`: the media's bytes,
/// added as `message.base64` (Evolution's `webhook_base64`).
pub fn message(kind: &str, content: &Value, base64: Option<&str>) -> (&'static str, Value) {
    let s = |v: &Value| v.as_str().map(str::to_string);
    let media = &content["media"];
    let mut media_fields = Map::new();
    if let Some(m) = s(&media["mime_type"]) {
        media_fields.insert("mimetype".into(), Value::String(m));
    }
    if let Some(u) = s(&media["url"]) {
        media_fields.insert("url".into(), Value::String(u));
    }
    if let Some(n) = media["size"].as_u64() {
        media_fields.insert("fileLength".into(), json!(n.to_string()));
    }
    if let Some(h) = s(&media["sha256"]) {
        media_fields.insert("fileSha256".into(), Value::String(h));
    }
    if let Some(c) = s(&content["caption"]) {
        media_fields.insert("caption".into(), Value::String(c));
    }
    let (ty, body) = match kind {
        "text" => ("conversation", Value::String(s(&content["text"]).unwrap_or_default())),
        "image" => ("imageMessage", Value::Object(media_fields)),
        "video" => ("videoMessage", Value::Object(media_fields)),
        "document" => {
            let mut f = media_fields;
            if let Some(n) = s(&media["filename"]) {
                f.insert("fileName".into(), Value::String(n.clone()));
                f.insert("title".into(), Value::String(n));
            }
            ("documentMessage", Value::Object(f))
        }
        "audio" | "voice" => {
            let mut f = media_fields;
            f.insert("ptt".into(), Value::Bool(kind == "voice"));
            ("audioMessage", Value::Object(f))
        }
        "sticker" => ("stickerMessage", Value::Object(media_fields)),
        "location" => {
            let l = &content["location"];
            let mut f = Map::new();
            f.insert("degreesLatitude".into(), l["latitude"].clone());
            f.insert("degreesLongitude".into(), l["longitude"].clone());
            for k in ["name", "address"] {
                if let Some(v) = s(&l[k]) {
                    f.insert(k.into(), Value::String(v));
                }
            }
            ("locationMessage", Value::Object(f))
        }
        "contact" => {
            let c = &content["contact"];
            let name = s(&c["name"]).unwrap_or_default();
            ("contactMessage", json!({ "displayName": name, "vcard": vcard(c) }))
        }
        "poll" => {
            let p = &content["poll"];
            let options: Vec<Value> = p["values"]
                .as_array()
                .map(|v| v.iter().map(|o| json!({ "optionName": o })).collect())
                .unwrap_or_default();
            (
                "pollCreationMessage",
                json!({ "name": p["name"], "options": options, "selectableOptionsCount": p["selectable_count"] }),
            )
        }
        "reaction" => {
            let r = &content["reaction"];
            let id = r["message_id"].clone();
            ("reactionMessage", json!({ "key": { "id": id }, "text": r["emoji"] }))
        }
        _ => ("unknown", Value::Object(Map::new())),
    };
    let field = if ty == "conversation" { "conversation" } else { ty };
    let mut message = Map::new();
    message.insert(field.into(), body);
    if let Some(b) = base64 {
        message.insert("base64".into(), Value::String(b.to_string()));
    }
    (ty, Value::Object(message))
}

/// A contact card's vCard (what Evolution's `contactMessage.vcard` carries).
fn vcard(c: &Value) -> String {
    let s = |k: &str| c[k].as_str().unwrap_or("").replace(['\r', '\n'], " ");
    let digits: String = s("phone").chars().filter(char::is_ascii_digit).collect();
    let mut v = format!("BEGIN:VCARD\nVERSION:3.0\nFN:{}\n", s("name"));
    if !s("organization").is_empty() {
        v += &format!("ORG:{};\n", s("organization"));
    }
    if !s("email").is_empty() {
        v += &format!("EMAIL:{}\n", s("email"));
    }
    if !s("url").is_empty() {
        v += &format!("URL:{}\n", s("url"));
    }
    v += &format!("TEL;type=CELL;type=VOICE;waid={digits}:+{digits}\nEND:VCARD");
    v
}

/// Evolution's `key` of a message.
pub fn key(remote_jid: &str, from_me: bool, id: &str, participant: Option<&str>) -> Value {
    let mut k = json!({ "remoteJid": remote_jid, "fromMe": from_me, "id": id });
    if let Some(p) = participant {
        k["participant"] = Value::String(p.to_string());
    }
    k
}

/// Baileys' addressing fields in a message `key`, from an event's `chat_lid` and
/// `from_lid`: `remoteJidAlt` and `participantAlt` (the hidden id beside a number), and
/// `addressingMode` (`lid` when the JID itself is a hidden id, its number unknown; else
/// `pn`). Nothing is added when no party was addressed by a hidden id.
pub fn addressing(key: &mut Value, d: &Value) {
    let lid_of = |jid: &str, lid: &Value| lid.as_str().filter(|l| *l != jid).map(str::to_string);
    let remote = key["remoteJid"].as_str().unwrap_or_default().to_string();
    let participant = key["participant"].as_str().map(str::to_string);
    let who = participant.as_deref().unwrap_or(&remote);
    let named_by_lid = d["chat_lid"].is_string() || (participant.is_some() && d["from_lid"].is_string());
    if !named_by_lid {
        return;
    }
    if let Some(alt) = lid_of(&remote, &d["chat_lid"]) {
        key["remoteJidAlt"] = Value::String(alt);
    }
    if let Some(p) = &participant {
        if let Some(alt) = lid_of(p, &d["from_lid"]) {
            key["participantAlt"] = Value::String(alt);
        }
    }
    let hidden = shared::jid::is_lid_jid(who);
    key["addressingMode"] = Value::String(if hidden { "lid" } else { "pn" }.into());
}

/// A message record as Evolution shows it (the send answer, `findMessages`, and the
/// webhooks' message events).
pub struct Record<'a> {
    pub remote_jid: &'a str,
    pub from_me: bool,
    pub id: &'a str,
    /// The sender, in groups.
    pub participant: Option<&'a str>,
    pub kind: &'a str,
    pub content: &'a Value,
    pub timestamp: DateTime<Utc>,
    /// Our status (`queued`, `sent`, `delivered`, ...), when known.
    pub status: Option<&'a str>,
    pub instance_id: &'a str,
    pub base64: Option<&'a str>,
}

impl Record<'_> {
    pub fn to_json(&self) -> Value {
        let (ty, message) = message(self.kind, self.content, self.base64);
        let mut v = json!({
            "key": key(self.remote_jid, self.from_me, self.id, self.participant),
            "pushName": "",
            "message": message,
            "messageType": ty,
            "messageTimestamp": self.timestamp.timestamp(),
            "instanceId": self.instance_id,
            "source": "unknown",
        });
        if let Some(s) = self.status {
            v["status"] = Value::String(status(s).to_string());
        }
        v
    }
}

/// Evolution's connection state for our instance state: `open`, `connecting` or `close`.
pub fn connection_state(ours: &str) -> &'static str {
    match ours {
        "connected" => "open",
        "connecting" | "qr_pending" => "connecting",
        _ => "close",
    }
}

/// Where a webhook payload comes from and goes to.
pub struct Origin<'a> {
    pub instance_name: &'a str,
    /// The account's own JID, once paired (Evolution's `sender`).
    pub sender: Option<&'a str>,
    pub server_url: &'a str,
    pub destination: &'a str,
}

/// Evolution's webhook payload for one of our events (`envelope`: `{id, type,
/// instance_id, created_at, data}`); `sent`: for `message.sent`, the message's (kind,
/// content), which the event does not carry; `base64`: received media's bytes, with
/// `webhook_base64`. `None` when Evolution has no such event.
pub fn webhook_payload(
    envelope: &Value,
    origin: &Origin<'_>,
    sent: Option<(&str, &Value)>,
    base64: Option<&str>,
) -> Option<(&'static str, Value)> {
    let kind = envelope["type"].as_str()?;
    let d = &envelope["data"];
    let event = event_name(kind, d)?;
    let instance_id = envelope["instance_id"].as_str().unwrap_or_default();
    let at: DateTime<Utc> = envelope["created_at"].as_str().and_then(|t| t.parse().ok()).unwrap_or_else(Utc::now);
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let data = match kind {
        "message.received" | "status.received" | "channel.post_received" => {
            let chat = str_of(&d["chat_jid"]);
            let from = str_of(&d["from_jid"]);
            let group = shared::jid::is_group_jid(&chat);
            let ts = d["timestamp"].as_str().and_then(|t| t.parse().ok()).unwrap_or(at);
            let mut r = Record {
                remote_jid: &chat,
                from_me: d["from_me"].as_bool().unwrap_or(false),
                id: d["wa_message_id"].as_str().unwrap_or_default(),
                participant: group.then_some(from.as_str()),
                kind: d["type"].as_str().unwrap_or_default(),
                content: &d["content"],
                timestamp: ts,
                status: None,
                instance_id,
                base64,
            }
            .to_json();
            addressing(&mut r["key"], d);
            r
        }
        "reaction.received" => {
            // (The event names the message reacted to, not the reaction's own id.)
            let chat = str_of(&d["chat_jid"]);
            let from = str_of(&d["from_jid"]);
            let content = json!({ "reaction": { "message_id": d["wa_message_id"], "emoji": d["emoji"] } });
            let mut r = Record {
                remote_jid: &chat,
                from_me: false,
                id: d["wa_message_id"].as_str().unwrap_or_default(),
                participant: shared::jid::is_group_jid(&chat).then_some(from.as_str()),
                kind: "reaction",
                content: &content,
                timestamp: at,
                status: None,
                instance_id,
                base64: None,
            }
            .to_json();
            r["message"]["reactionMessage"]["key"]["remoteJid"] = Value::String(chat.clone());
            addressing(&mut r["key"], d);
            r
        }
        "message.sent" => {
            let to = str_of(&d["to"]);
            let (k, content) = sent.unwrap_or((d["type"].as_str().unwrap_or_default(), &Value::Null));
            let ts = d["sent_at"].as_str().and_then(|t| t.parse().ok()).unwrap_or(at);
            Record {
                remote_jid: &to,
                from_me: true,
                id: d["wa_message_id"].as_str().unwrap_or_default(),
                participant: None,
                kind: k,
                content,
                timestamp: ts,
                status: Some("sent"),
                instance_id,
                base64: None,
            }
            .to_json()
        }
        "message.delivered" | "message.read" | "message.failed" => {
            let ours = match kind {
                "message.delivered" => "delivered",
                "message.read" => "read",
                _ => "failed",
            };
            let id = d["wa_message_id"].as_str().map(str::to_string).unwrap_or_default();
            let remote = d["chat_jid"].as_str().or(d["to"].as_str()).unwrap_or_default().to_string();
            json!({
                "messageId": d["message_id"],
                "keyId": id,
                "remoteJid": remote,
                "fromMe": true,
                "status": status(ours),
                "instanceId": instance_id,
            })
        }
        "instance.state" => {
            let state = connection_state(d["state"].as_str().unwrap_or_default());
            let reason = match d["state"].as_str() {
                Some("connected") => 200,
                Some("logged_out") => 401,
                Some("banned") => 403,
                _ => 428,
            };
            json!({ "instance": origin.instance_name, "state": state, "statusReason": reason })
        }
        "instance.qr_updated" => json!({
            "qrcode": {
                "instance": origin.instance_name,
                "pairingCode": Value::Null,
                "code": d["qr"],
                "base64": d["base64"],
            }
        }),
        "group.joined" => json!([{ "id": d["jid"], "subject": d["subject"] }]),
        "group.updated" => {
            let mut g = d.clone();
            if let Some(o) = g.as_object_mut() {
                if let Some(j) = o.remove("jid") {
                    o.insert("id".into(), j);
                }
            }
            json!([g])
        }
        "group.participants_updated" => {
            let action = match d["action"].as_str() {
                Some("added" | "joined") => "add",
                Some("removed" | "left") => "remove",
                Some("promoted") => "promote",
                Some("demoted") => "demote",
                _ => "update",
            };
            json!({ "id": d["jid"], "participants": d["participants"], "action": action, "author": d["by"] })
        }
        "label.updated" => {
            let l = &d["label"];
            match event {
                "labels.association" => json!({
                    "type": if d["change"] == "applied" { "add" } else { "remove" },
                    "chatId": d["chat_jid"],
                    "labelId": l["id"],
                    "instance": origin.instance_name,
                }),
                _ => json!({
                    "id": l["id"],
                    "name": l["name"],
                    "color": l["color"],
                    "deleted": d["change"] == "deleted",
                }),
            }
        }
        _ => d.clone(),
    };
    Some((
        event,
        json!({
            "event": event,
            "instance": origin.instance_name,
            "data": data,
            "destination": origin.destination,
            "date_time": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "sender": origin.sender,
            "server_url": origin.server_url,
            // Evolution sends the instance's key here; paceline never puts a token in a payload.
            "apikey": Value::Null,
        }),
    ))
}

#[cfg(test)]
mod tests;
