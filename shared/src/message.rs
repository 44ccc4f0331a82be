//! Outgoing messages: interface.md's limits, the message types and the typed content the
//! queue stores (the API validates requests into it: `api::message_in`). Media bytes are kept apart (the
//! `media` table); `content` holds everything else.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod content;
pub use content::{Content, MediaRef, Outbound};

/// Limits of interface.md part 8.
pub const TEXT_LIMIT: usize = 64 * 1024;
pub const CAPTION_LIMIT: usize = 1024;
/// The longest text field of a location or a contact card (bytes).
pub const FIELD_LIMIT: usize = 1024;
pub const IMAGE_LIMIT: usize = 16 * 1024 * 1024;
pub const VIDEO_AUDIO_LIMIT: usize = 64 * 1024 * 1024;
pub const DOCUMENT_LIMIT: usize = 100 * 1024 * 1024;
pub const CLIENT_ID_LIMIT: usize = 128;
pub const EXPIRES_MIN: Duration = Duration::from_secs(60);
pub const EXPIRES_MAX: Duration = Duration::from_secs(168 * 3600);
pub const EXPIRES_DEFAULT: Duration = Duration::from_secs(24 * 3600);

/// The message types.
// Stored as their names (`messages.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum MessageType {
    Text,
    Image,
    Video,
    Audio,
    Voice,
    Document,
    Sticker,
    Location,
    Contact,
    Poll,
    Reaction,
}

impl MessageType {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Text => "text",
            MessageType::Image => "image",
            MessageType::Video => "video",
            MessageType::Audio => "audio",
            MessageType::Voice => "voice",
            MessageType::Document => "document",
            MessageType::Sticker => "sticker",
            MessageType::Location => "location",
            MessageType::Contact => "contact",
            MessageType::Poll => "poll",
            MessageType::Reaction => "reaction",
        }
    }

    /// The type named `name` (`image`, `voice`, ...), if it is one.
    pub fn from_name(name: &str) -> Option<MessageType> {
        serde_json::from_value(serde_json::Value::String(name.to_string())).ok()
    }

    /// The most received media of a message type may bring: its send limit, and the
    /// largest (documents') for a type that has none.
    pub fn received_media_limit(name: &str) -> u64 {
        Self::from_name(name).and_then(Self::media_limit).unwrap_or(DOCUMENT_LIMIT) as u64
    }

    /// Media types and their size limit.
    pub fn media_limit(self) -> Option<usize> {
        match self {
            MessageType::Image | MessageType::Sticker => Some(IMAGE_LIMIT),
            MessageType::Video | MessageType::Audio | MessageType::Voice => Some(VIDEO_AUDIO_LIMIT),
            MessageType::Document => Some(DOCUMENT_LIMIT),
            _ => None,
        }
    }

    /// The MIME family a media type must have (documents take any).
    pub fn mime_family(self) -> Option<&'static str> {
        match self {
            MessageType::Image | MessageType::Sticker => Some("image/"),
            MessageType::Video => Some("video/"),
            MessageType::Audio | MessageType::Voice => Some("audio/"),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LocationIn {
    pub latitude: f64,
    pub longitude: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ContactIn {
    pub name: String,
    pub phone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PollIn {
    pub name: String,
    pub values: Vec<String>,
    #[serde(default = "one")]
    pub selectable_count: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReactionIn {
    /// `msg_...` of this instance, or a network message id.
    pub message_id: String,
    /// One emoji; empty removes the reaction.
    pub emoji: String,
}
