//! The event catalog as documentation: each type's meaning and payload shape. The
//! OpenAPI description lists every type under `webhooks` (OpenAPI 3.1), with the event
//! envelope and the type's `data` schema; `shared::events::EVENT_TYPES` is the list that
//! filters are checked against, and a test keeps the two equal.

use chrono::{DateTime, Utc};
use serde::Serialize;
use shared::ids::{EventId, InstanceId, MessageId, WebhookId};
use utoipa::ToSchema;

/// An event type of the catalog (`shared::events::EVENT_TYPES`).
pub struct EventType;

impl utoipa::PartialSchema for EventType {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(shared::events::EVENT_TYPES.iter().copied()))
            .description(Some("An event type of the catalog"))
            .into()
    }
}

impl ToSchema for EventType {}

/// Every event: the webhook request body and the `data` of a real-time stream item.
#[derive(Debug, Serialize, ToSchema)]
pub struct Event {
    /// `evt_...`: also the `webhook-id` header and the stream item's `id`.
    pub id: EventId,
    /// One of the catalog's types.
    #[serde(rename = "type")]
    #[schema(value_type = EventType, example = "message.sent")]
    pub kind: String,
    pub instance_id: InstanceId,
    pub created_at: DateTime<Utc>,
    /// The type's payload (see its schema).
    pub data: serde_json::Value,
}

/// `instance.state`: the connection state moved.
#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceStateEventData {
    /// `disconnected`, `qr_pending`, `connecting`, `connected`, `logged_out` or `banned`.
    pub state: String,
    pub previous_state: String,
    /// Why, when that needs saying (a temporary ban and until when).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `instance.qr_updated`: a (new) QR code to scan.
#[derive(Debug, Serialize, ToSchema)]
pub struct QrUpdatedEventData {
    /// The QR payload (render it, or GET the pairing QR route for a PNG).
    pub qr: String,
    pub expires_at: DateTime<Utc>,
}

/// `instance.connected`: linked and online.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectedEventData {
    /// The account's number, with country code.
    pub phone: String,
    /// `personal` or `business`.
    pub account_type: String,
}

/// `instance.logged_out`, `instance.banned`: no payload.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmptyEventData {}

/// `message.delivered`, `message.read`: a receipt for a message this instance sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReceiptEventData {
    /// Our id, when the message went through paceline's queue.
    pub message_id: Option<MessageId>,
    pub wa_message_id: String,
    pub chat_jid: String,
    /// `delivered` or `read`.
    pub status: String,
    pub at: DateTime<Utc>,
}

/// `message.received`: a message arrived, or was sent from the phone itself (`from_me`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ReceivedMessageEventData {
    pub message_id: MessageId,
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    pub from_me: bool,
    /// A message type of `POST {inst}/messages` (`text`, `image`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The message's content as `GET {inst}/chats/{jid}/messages` shows it.
    pub content: serde_json::Value,
    pub timestamp: DateTime<Utc>,
}

/// `message.media_updated`: received media that was pending (its download failed for a
/// passing reason) was downloaded, or the network turned out not to have it any more.
#[derive(Debug, Serialize, ToSchema)]
pub struct MediaUpdatedEventData {
    pub message_id: MessageId,
    pub wa_message_id: String,
    pub chat_jid: String,
    /// The message's `content.media` now: `size` and `sha256` once downloaded, or
    /// `expired: true`.
    pub media: serde_json::Value,
}

/// `reaction.received`: someone reacted to a message (an empty emoji removes it).
#[derive(Debug, Serialize, ToSchema)]
pub struct ReactionEventData {
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    pub emoji: String,
    pub timestamp: DateTime<Utc>,
}

/// `chat.updated`: a chat's state changed (new message, read, archived, pinned, muted).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatUpdatedEventData {
    pub jid: String,
    pub unread_count: i64,
    pub archived: bool,
    pub pinned: bool,
    pub muted_until: Option<DateTime<Utc>>,
    pub last_message_at: DateTime<Utc>,
    /// The chat was deleted (with its messages in the local log).
    pub deleted: bool,
}

/// `contact.updated`: a contact's name or picture changed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactUpdatedEventData {
    pub jid: String,
    pub name: Option<String>,
    pub push_name: Option<String>,
}

/// A label as `label.updated` carries it: `name` and `color` are absent once deleted.
#[derive(Debug, Serialize, ToSchema)]
pub struct LabelEventLabel {
    pub id: String,
    pub name: Option<String>,
    pub color: Option<i32>,
    pub deleted: bool,
}

/// `label.updated`: a label was created, edited, deleted, applied or removed, on the
/// phone or through the API (business accounts). Announced once per change.
#[derive(Debug, Serialize, ToSchema)]
pub struct LabelUpdatedEventData {
    pub label: LabelEventLabel,
    /// `edited` (created or changed), `deleted`, `applied` or `removed`.
    pub change: String,
    /// The chats the label is on now (up to 1,000).
    pub chats: Vec<String>,
    /// `applied` and `removed`: the chat.
    pub chat_jid: Option<String>,
    /// `applied` and `removed` on one message: its network id.
    pub wa_message_id: Option<String>,
}

/// `channel.updated`: a channel's name or description changed.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelUpdatedEventData {
    pub jid: String,
    pub name: String,
    pub description: Option<String>,
}

/// `instance.risk`: the instance's ban-risk level moved (docs/ban-risk.md).
#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceRiskEventData {
    /// 0-100.
    pub score: f64,
    /// `low`, `elevated`, `high` or `critical`.
    pub level: String,
    pub previous_level: String,
    /// The signals adding the most, largest first (at most 3).
    pub reasons: Vec<String>,
    pub recommendation: String,
}

/// `instance.paused`: a policy paused the queue; `POST {inst}/queue/resume` resumes it.
#[derive(Debug, Serialize, ToSchema)]
pub struct InstancePausedEventData {
    /// `risk_critical` or `temporary_ban`.
    pub reason: String,
    pub score: f64,
    pub level: String,
}

/// `instance.resumed`: the paused queue was resumed.
#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceResumedEventData {
    /// Why it had been paused.
    pub paused_for: String,
}

/// `attendant.replied`: the attendant queued a reply to a received message (once per
/// message).
#[derive(Debug, Serialize, ToSchema)]
pub struct AttendantRepliedEventData {
    pub chat_jid: String,
    /// The received message answered.
    pub message_id: MessageId,
    /// The queued reply: its `message.*` events follow.
    pub reply_message_id: MessageId,
    /// `openai` or `webhook`.
    pub provider: String,
    /// As the provider reported them (0 when it did not).
    pub tokens: AttendantTokens,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AttendantTokens {
    pub prompt: i64,
    pub completion: i64,
}

/// `attendant.handoff`: the attendant left a chat to a human.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttendantHandoffEventData {
    pub chat_jid: String,
    /// The message that caused it: the contact's keyword, or the reply from the phone.
    pub message_id: MessageId,
    /// `keyword`, `human_reply` or `bot_loop` (the chat's last messages were automatic on
    /// both sides).
    pub reason: String,
    /// Paused until then, or until `POST {inst}/attendant/chats/{jid}/resume`.
    pub until: DateTime<Utc>,
}

/// `attendant.failed`: a message that called for an answer got none.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttendantFailedEventData {
    pub chat_jid: String,
    pub message_id: MessageId,
    /// `timeout`, `unreachable`, `refused_address`, `http_status`, `bad_answer`,
    /// `too_large`, `bad_config`, `reply_limit`, `budget` (the instance's
    /// replies or tokens per hour or day), `outside_send_window` or `queue_refused`.
    pub reason: String,
    /// In words; never the provider's URL, key or answer.
    pub detail: String,
}

/// `group.updated`: a group's subject, description or settings changed (only the fields
/// that changed are present).
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupUpdatedEventData {
    pub jid: String,
    pub subject: Option<String>,
    pub description: Option<String>,
    pub announce: Option<bool>,
    pub locked: Option<bool>,
    /// Who changed it.
    pub by: String,
}

/// `group.participants_updated`: members joined, left, were added, removed, promoted or
/// demoted.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupParticipantsEventData {
    pub jid: String,
    /// `added`, `removed`, `promoted`, `demoted`, `joined` (by link) or `left`.
    pub action: String,
    pub participants: Vec<String>,
    /// Who did it (the member itself for `joined` and `left`).
    pub by: String,
}

/// `group.joined` / `group.left`: the account was added to a group (or joined it), or
/// was removed from it (or left).
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupMembershipEventData {
    pub jid: String,
    pub subject: String,
    pub by: String,
}

/// `community.groups_updated`: groups were linked to a community, or unlinked from it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommunityGroupsEventData {
    /// The community.
    pub jid: String,
    /// `linked` or `unlinked`.
    pub action: String,
    pub groups: Vec<String>,
    /// Who did it, when the network says.
    pub by: Option<String>,
}

/// `call.rejected`: an incoming call was rejected (instance setting `reject_call`).
#[derive(Debug, Serialize, ToSchema)]
pub struct CallRejectedEventData {
    pub call_id: String,
    /// The caller's JID.
    pub from: String,
    /// The message sent to the caller (`msg_call`; empty for none).
    pub message: String,
}

/// `webhook.disabled`: an endpoint was disabled after answering 410 or failing too long.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookDisabledEventData {
    pub webhook_id: WebhookId,
    pub reason: String,
}

/// (type, meaning, schema of `data`): every type paceline emits.
pub const CATALOG: &[(&str, &str, &str)] = &[
    ("message.queued", "A message was accepted into the send queue.", "MessageOut"),
    ("message.sent", "The network accepted a queued message; `wa_message_id` is set.", "MessageOut"),
    ("message.failed", "A queued message failed for good; `error` says why.", "MessageOut"),
    ("message.delivered", "A sent message reached the recipient's device.", "ReceiptEventData"),
    ("message.read", "The recipient read a sent message.", "ReceiptEventData"),
    ("message.received", "A message arrived, or was sent from the phone itself.", "ReceivedMessageEventData"),
    (
        "message.media_updated",
        "Received media that was pending was downloaded (or is gone for good).",
        "MediaUpdatedEventData",
    ),
    ("reaction.received", "Someone reacted to a message.", "ReactionEventData"),
    ("status.received", "A contact posted a status (its chat is `status@broadcast`).", "ReceivedMessageEventData"),
    (
        "channel.post_received",
        "A channel the account follows published a post (its chat is the channel's JID).",
        "ReceivedMessageEventData",
    ),
    ("instance.state", "The instance's connection state moved.", "InstanceStateEventData"),
    ("instance.qr_updated", "A new QR code is on show for pairing.", "QrUpdatedEventData"),
    ("instance.connected", "The instance is linked and online.", "ConnectedEventData"),
    ("instance.logged_out", "The device was unlinked; pairing again is needed.", "EmptyEventData"),
    ("instance.banned", "The network banned the account.", "EmptyEventData"),
    ("instance.risk", "The instance's ban-risk level moved.", "InstanceRiskEventData"),
    (
        "instance.paused",
        "A policy paused the instance's queue (critical risk, a temporary ban); messages stay queued.",
        "InstancePausedEventData",
    ),
    ("instance.resumed", "The instance's paused queue was resumed.", "InstanceResumedEventData"),
    ("chat.updated", "A chat changed: new message, read, archived, pinned or muted.", "ChatUpdatedEventData"),
    ("contact.updated", "A contact's name changed.", "ContactUpdatedEventData"),
    ("label.updated", "A label changed, or was applied or removed (business accounts).", "LabelUpdatedEventData"),
    ("group.updated", "A group's subject, description or settings changed.", "GroupUpdatedEventData"),
    (
        "group.participants_updated",
        "Members of a group joined, left, were added, removed, promoted or demoted.",
        "GroupParticipantsEventData",
    ),
    ("group.joined", "The account was added to a group, or joined one.", "GroupMembershipEventData"),
    ("group.left", "The account was removed from a group, or left one.", "GroupMembershipEventData"),
    ("community.groups_updated", "Groups were linked to a community or unlinked from it.", "CommunityGroupsEventData"),
    (
        "channel.updated",
        "A channel the account follows, owns or administers changed its name or description.",
        "ChannelUpdatedEventData",
    ),
    ("call.rejected", "An incoming call was rejected per the instance's settings.", "CallRejectedEventData"),
    ("attendant.replied", "The AI attendant queued a reply to a received message.", "AttendantRepliedEventData"),
    ("attendant.handoff", "The AI attendant left a chat to a human.", "AttendantHandoffEventData"),
    ("attendant.failed", "A message that called for the AI attendant's answer got none.", "AttendantFailedEventData"),
    (
        "webhook.disabled",
        "A webhook endpoint was disabled (410 Gone, or failing too long).",
        "WebhookDisabledEventData",
    ),
];

/// The OpenAPI 3.1 `webhooks` object: one POST per event type.
pub fn webhooks_object() -> serde_json::Value {
    let headers = serde_json::json!([
        { "name": "webhook-id", "in": "header", "required": true, "description": "The event id (`evt_...`), the same on every attempt: de-duplicate on it.", "schema": { "type": "string" } },
        { "name": "webhook-timestamp", "in": "header", "required": true, "description": "Unix seconds of this attempt.", "schema": { "type": "string" } },
        { "name": "webhook-signature", "in": "header", "required": true, "description": "Standard Webhooks signatures, space-separated `v1,<base64 HMAC-SHA256 of id.timestamp.body>`: one per secret while a rotated-out secret is honoured (24 h).", "schema": { "type": "string" } },
    ]);
    let mut out = serde_json::Map::new();
    for (kind, meaning, schema) in CATALOG {
        let body = serde_json::json!({
            "allOf": [
                { "$ref": "#/components/schemas/Event" },
                { "type": "object", "properties": {
                    "type": { "const": kind },
                    "data": { "$ref": format!("#/components/schemas/{schema}") }
                } }
            ]
        });
        out.insert(
            kind.to_string(),
            serde_json::json!({ "post": {
                "summary": kind,
                "description": meaning,
                "parameters": headers,
                "requestBody": { "required": true, "content": { "application/json": { "schema": body } } },
                "responses": {
                    "2XX": { "description": "received; any other answer is retried with backoff (410 disables the endpoint)" }
                }
            } }),
        );
    }
    serde_json::Value::Object(out)
}
