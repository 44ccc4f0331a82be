//! The event catalog as documentation: each type's meaning, with the schema of its
//! payload, the type `shared::events::Event` emits it with. The OpenAPI description
//! lists every type under `webhooks` (OpenAPI 3.1), with the event envelope and the
//! type's `data` schema; `shared::events::EVENT_TYPES` is the list that filters are
//! checked against, and a test keeps the two equal.

use chrono::{DateTime, Utc};
use serde::Serialize;
use shared::ids::{EventId, InstanceId};
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

pub use shared::events::data::*;

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
    (
        "message.edited",
        "The sender of a message edited it; the local log's copy has the new text and `edited_at`.",
        "MessageEditedEventData",
    ),
    (
        "message.deleted",
        "The sender of a message deleted it for everyone; the local log's copy is kept, with `deleted_at`.",
        "MessageDeletedEventData",
    ),
    ("reaction.received", "Someone reacted to a message.", "ReactionEventData"),
    ("status.received", "A contact posted a status (its chat is `status@broadcast`).", "ReceivedMessageEventData"),
    (
        "channel.post_received",
        "A channel the account follows published a post (its chat is the channel's JID).",
        "ReceivedMessageEventData",
    ),
    ("instance.created", "An instance was created (in its account, if any).", "InstanceLifecycleEventData"),
    (
        "instance.deleted",
        "An instance was deleted; it reaches its account's webhooks and stream too.",
        "InstanceLifecycleEventData",
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
