//! What a queued message says, typed from the API's validation to the drivers: one
//! serde enum tagged by `type`, stored as the `messages.content` jsonb.

use serde::{Deserialize, Serialize};

use super::{ContactIn, LocationIn, MessageType, PollIn, ReactionIn};
use crate::ids::MediaId;

/// Stored media a message carries (its bytes are in `db::media`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaRef {
    pub id: MediaId,
    pub mime_type: String,
    pub filename: Option<String>,
    pub size: u64,
    pub sha256: String,
}

/// A message's content by type. `M` is its media: `MediaRef` once stored, `()` while
/// the API has validated the message but not stored its media yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content<M = MediaRef> {
    Text {
        text: String,
        #[serde(default)]
        link_preview: bool,
    },
    Image {
        media: M,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caption: Option<String>,
    },
    Video {
        media: M,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caption: Option<String>,
    },
    Document {
        media: M,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caption: Option<String>,
    },
    Audio {
        media: M,
    },
    Voice {
        media: M,
    },
    Sticker {
        media: M,
    },
    Location {
        location: LocationIn,
    },
    Contact {
        contact: ContactIn,
    },
    Poll {
        poll: PollIn,
    },
    Reaction {
        reaction: ReactionIn,
    },
}

impl<M> Content<M> {
    pub fn kind(&self) -> MessageType {
        match self {
            Content::Text { .. } => MessageType::Text,
            Content::Image { .. } => MessageType::Image,
            Content::Video { .. } => MessageType::Video,
            Content::Document { .. } => MessageType::Document,
            Content::Audio { .. } => MessageType::Audio,
            Content::Voice { .. } => MessageType::Voice,
            Content::Sticker { .. } => MessageType::Sticker,
            Content::Location { .. } => MessageType::Location,
            Content::Contact { .. } => MessageType::Contact,
            Content::Poll { .. } => MessageType::Poll,
            Content::Reaction { .. } => MessageType::Reaction,
        }
    }

    /// The media, for the media types.
    pub fn media(&self) -> Option<&M> {
        match self {
            Content::Image { media, .. }
            | Content::Video { media, .. }
            | Content::Document { media, .. }
            | Content::Audio { media }
            | Content::Voice { media }
            | Content::Sticker { media } => Some(media),
            _ => None,
        }
    }

    /// The text a person reads: a text's text, a media's caption.
    pub fn text(&self) -> Option<&str> {
        match self {
            Content::Text { text, .. } => Some(text),
            Content::Image { caption, .. } | Content::Video { caption, .. } | Content::Document { caption, .. } => {
                caption.as_deref()
            }
            _ => None,
        }
    }

    /// The same content with other media (`f` is called for the media types only).
    pub fn map_media<N>(self, f: impl FnOnce(M) -> N) -> Content<N> {
        match self {
            Content::Text { text, link_preview } => Content::Text { text, link_preview },
            Content::Image { media, caption } => Content::Image { media: f(media), caption },
            Content::Video { media, caption } => Content::Video { media: f(media), caption },
            Content::Document { media, caption } => Content::Document { media: f(media), caption },
            Content::Audio { media } => Content::Audio { media: f(media) },
            Content::Voice { media } => Content::Voice { media: f(media) },
            Content::Sticker { media } => Content::Sticker { media: f(media) },
            Content::Location { location } => Content::Location { location },
            Content::Contact { contact } => Content::Contact { contact },
            Content::Poll { poll } => Content::Poll { poll },
            Content::Reaction { reaction } => Content::Reaction { reaction },
        }
    }
}

/// A queued message's content and the message it quotes: `messages.content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outbound<M = MediaRef> {
    #[serde(flatten)]
    pub content: Content<M>,
    /// `msg_...` of a message of this instance, or a network id, to quote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// People the text (or caption) mentions, as JIDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<String>,
}

impl Outbound {
    /// A stored message's content; rows from before the content carried its `type` take
    /// it from the `type` column.
    pub fn from_row(kind: MessageType, content: &serde_json::Value) -> Result<Outbound, serde_json::Error> {
        let mut content = content.clone();
        if let Some(obj) = content.as_object_mut() {
            obj.entry("type").or_insert_with(|| serde_json::Value::String(kind.as_str().to_string()));
        }
        serde_json::from_value(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media() -> MediaRef {
        MediaRef { id: MediaId::new(), mime_type: "image/png".into(), filename: None, size: 3, sha256: "ab".into() }
    }

    #[test]
    fn stored_content_round_trips_and_old_rows_take_their_type_from_the_column() {
        let out = Outbound {
            content: Content::Image { media: media(), caption: Some("c".into()) },
            reply_to: None,
            mentions: vec![],
        };
        let v = serde_json::to_value(&out).unwrap();
        assert_eq!(v["type"], "image");
        assert_eq!(Outbound::from_row(MessageType::Image, &v).unwrap(), out);
        // Before the type was stored in the content.
        let old = serde_json::json!({ "text": "hi", "link_preview": false, "reply_to": "msg_x" });
        let o = Outbound::from_row(MessageType::Text, &old).unwrap();
        assert_eq!(o.content, Content::Text { text: "hi".into(), link_preview: false });
        assert_eq!(o.reply_to.as_deref(), Some("msg_x"));
    }

    #[test]
    fn kinds_media_and_text() {
        let c: Content<()> = Content::Video { media: (), caption: Some("look".into()) };
        assert_eq!(c.kind(), MessageType::Video);
        assert_eq!(c.text(), Some("look"));
        let stored = c.map_media(|()| media());
        assert_eq!(stored.media().unwrap().size, 3);
        let t: Content = Content::Text { text: "t".into(), link_preview: true };
        assert!(t.media().is_none());
    }
}
