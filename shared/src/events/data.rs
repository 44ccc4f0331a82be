//! Each event type's payload (`data`), as webhooks receive it and the stream shows it.
//! The OpenAPI description's schemas are these types' (`domain::catalog`), so what is
//! emitted and what is documented cannot differ.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{MessageId, WebhookId};

/// `instance.state`: the connection state moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceStateEventData {
    /// `disconnected`, `qr_pending`, `connecting`, `connected`, `logged_out` or `banned`.
    pub state: String,
    pub previous_state: String,
    /// Why, when that needs saying (a temporary ban and until when).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `instance.qr_updated`: a (new) QR code to scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QrUpdatedEventData {
    /// The QR payload (render it, or GET the pairing QR route for a PNG).
    pub qr: String,
    pub expires_at: DateTime<Utc>,
}

/// `instance.created`, `instance.deleted`: an instance came or went (an account's
/// webhooks and stream hear of its own instances').
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceLifecycleEventData {
    /// The instance's name.
    pub name: String,
    /// The account holding it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<crate::ids::AccountId>,
}

/// `instance.connected`: linked and online.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectedEventData {
    /// The account's number, with country code.
    pub phone: String,
    /// `personal` or `business`.
    pub account_type: String,
}

/// `instance.logged_out`, `instance.banned`: no payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EmptyEventData {}

/// `message.delivered`, `message.read`: a receipt for a message this instance sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReceiptEventData {
    /// Our id, when the message went through paceline's queue.
    pub message_id: Option<MessageId>,
    pub wa_message_id: String,
    pub chat_jid: String,
    /// `delivered` or `read`.
    pub status: crate::db::log::Receipt,
    pub at: DateTime<Utc>,
}

/// `message.received`: a message arrived, or was sent from the phone itself (`from_me`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReceivedMessageEventData {
    pub message_id: MessageId,
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    /// The chat's and the sender's hidden ids (`<id>@lid`), when the network addressed
    /// them by one: `chat_jid` and `from_jid` are then their phone-number JIDs when known
    /// (else the same LIDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_lid: Option<String>,
    /// The sender's hidden id, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_lid: Option<String>,
    pub from_me: bool,
    /// A message type of `POST {inst}/messages` (`text`, `image`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The message's content as `GET {inst}/chats/{jid}/messages` shows it.
    pub content: serde_json::Value,
    pub timestamp: DateTime<Utc>,
}

/// `message.edited`: the sender of a logged message edited it (from any device).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageEditedEventData {
    pub message_id: MessageId,
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    /// The chat's and the sender's hidden ids (`<id>@lid`), when the network addressed
    /// them by one: `chat_jid` and `from_jid` are then their phone-number JIDs when known
    /// (else the same LIDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_lid: Option<String>,
    /// The sender's hidden id, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_lid: Option<String>,
    pub from_me: bool,
    /// The new text (or caption).
    pub text: String,
    pub timestamp: DateTime<Utc>,
}

/// `message.deleted`: the sender of a logged message deleted it for everyone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageDeletedEventData {
    pub message_id: MessageId,
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    /// The chat's and the sender's hidden ids (`<id>@lid`), when the network addressed
    /// them by one: `chat_jid` and `from_jid` are then their phone-number JIDs when known
    /// (else the same LIDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_lid: Option<String>,
    /// The sender's hidden id, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_lid: Option<String>,
    pub from_me: bool,
    pub timestamp: DateTime<Utc>,
}

/// `message.media_updated`: received media that was pending (its download failed for a
/// passing reason) was downloaded, or the network turned out not to have it any more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MediaUpdatedEventData {
    pub message_id: MessageId,
    pub wa_message_id: String,
    pub chat_jid: String,
    /// The message's `content.media` now: `size` and `sha256` once downloaded, or
    /// `expired: true`.
    pub media: serde_json::Value,
}

/// `reaction.received`: someone reacted to a message (an empty emoji removes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReactionEventData {
    pub wa_message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    /// The chat's and the sender's hidden ids (`<id>@lid`), when the network addressed
    /// them by one: `chat_jid` and `from_jid` are then their phone-number JIDs when known
    /// (else the same LIDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_lid: Option<String>,
    /// The sender's hidden id, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_lid: Option<String>,
    pub emoji: String,
    pub timestamp: DateTime<Utc>,
}

/// `chat.updated`: a chat's state changed (new message, read, archived, pinned, muted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChatUpdatedEventData {
    pub jid: String,
    pub unread_count: i64,
    pub archived: bool,
    pub pinned: bool,
    pub muted_until: Option<DateTime<Utc>>,
    pub last_message_at: DateTime<Utc>,
    /// The party's hidden id (`<id>@lid`), when the network addressed it by one: `jid` is
    /// its phone-number JID once known, else the same LID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lid: Option<String>,
    /// The chat was deleted (with its messages in the local log), or merged into its
    /// number's chat (a chat keyed by a LID, once its number is known).
    pub deleted: bool,
}

/// `contact.updated`: a contact's name or picture changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContactUpdatedEventData {
    pub jid: String,
    pub name: Option<String>,
    pub push_name: Option<String>,
}

/// A label as `label.updated` carries it: `name` and `color` are absent once deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LabelEventLabel {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<i32>,
    pub deleted: bool,
}

/// `label.updated`: a label was created, edited, deleted, applied or removed, on the
/// phone or through the API (business accounts). Announced once per change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LabelUpdatedEventData {
    pub label: LabelEventLabel,
    /// `edited` (created or changed), `deleted`, `applied` or `removed`.
    pub change: String,
    /// The chats the label is on now (up to 1,000).
    pub chats: Vec<String>,
    /// `applied` and `removed`: the chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_jid: Option<String>,
    /// `applied` and `removed` on one message: its network id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wa_message_id: Option<String>,
}

/// `channel.updated`: a channel's name or description changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelUpdatedEventData {
    pub jid: String,
    pub name: String,
    pub description: Option<String>,
}

/// `instance.risk`: the instance's ban-risk level moved (docs/ban-risk.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstancePausedEventData {
    /// `risk_critical`, `temporary_ban` or `manual` (`POST {inst}/queue/pause`).
    pub reason: String,
    pub score: f64,
    pub level: String,
}

/// `instance.resumed`: the paused queue was resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceResumedEventData {
    /// Why it had been paused.
    pub paused_for: String,
}

/// `attendant.replied`: the attendant queued a reply to a received message (once per
/// message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttendantTokens {
    pub prompt: i64,
    pub completion: i64,
}

/// `attendant.handoff`: the attendant left a chat to a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupUpdatedEventData {
    pub jid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub announce: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked: Option<bool>,
    /// Disappearing messages: seconds (0 is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<u32>,
    /// Who changed it, when the network says.
    pub by: Option<String>,
}

/// `group.participants_updated`: members joined, left, were added, removed, promoted or
/// demoted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupParticipantsEventData {
    pub jid: String,
    /// `added`, `removed`, `promoted`, `demoted`, `joined` (by link) or `left`.
    pub action: String,
    pub participants: Vec<String>,
    /// Who did it (the member itself for `joined` and `left`), when the network says.
    pub by: Option<String>,
}

/// `group.joined` / `group.left`: the account was added to a group (or joined it), or
/// was removed from it (or left).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupMembershipEventData {
    pub jid: String,
    pub subject: String,
    /// Who added or removed the account, when the network says.
    pub by: Option<String>,
}

/// `community.groups_updated`: groups were linked to a community, or unlinked from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CommunityGroupsEventData {
    /// The community.
    pub jid: String,
    /// `linked` or `unlinked`.
    pub action: String,
    pub groups: Vec<String>,
    /// Who did it, when the network says.
    #[serde(default)]
    pub by: Option<String>,
}

/// `call.rejected`: an incoming call was rejected (instance setting `reject_call`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallRejectedEventData {
    pub call_id: String,
    /// The caller's JID.
    pub from: String,
    /// The message sent to the caller (`msg_call`; empty for none).
    pub message: String,
}

/// `webhook.disabled`: an endpoint was disabled after answering 410 or failing too long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookDisabledEventData {
    pub webhook_id: WebhookId,
    pub reason: String,
}
