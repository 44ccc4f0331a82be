//! Received media's locators: what a message says of its media, encoded so a download
//! can be rebuilt later, and the checks that a locator from the log is one we wrote.

use super::*;

/// Where received media is: its kind and its media message, encoded, so `download`
/// can rebuild what the client downloads from.
pub(super) fn locator(kind: &str, encoded: Vec<u8>) -> String {
    format!("{kind}:{}", base64::engine::general_purpose::STANDARD.encode(encoded))
}

/// A locator back to (kind, the encoded media message).
pub fn parse_locator(l: &str) -> Option<(&str, Vec<u8>)> {
    let (kind, b64) = l.split_once(':')?;
    Some((kind, base64::engine::general_purpose::STANDARD.decode(b64).ok()?))
}

pub(super) fn remote(
    kind: &str,
    encoded: Vec<u8>,
    declared: Option<u64>,
    mime: Option<&String>,
    filename: Option<&String>,
) -> RemoteMedia {
    RemoteMedia {
        locator: locator(kind, encoded),
        mime_type: mime.cloned().unwrap_or_else(|| "application/octet-stream".into()),
        filename: filename.cloned(),
        declared_size: declared,
        limit: shared::message::MessageType::received_media_limit(kind),
    }
}

/// A received media message, checked and cleaned so that downloading it can only reach
/// WhatsApp's media hosts: its `static_url` dropped (the crate fetches it as given), and
/// its `direct_path` a plain path (the crate builds `https://{host}{direct_path}`, so a
/// path such as `@evil.example/x` would send the request, and the media auth token,
/// elsewhere).
#[derive(Debug, Clone)]
pub enum SafeMedia {
    Image(wa::message::ImageMessage),
    Video(wa::message::VideoMessage),
    Audio(wa::message::AudioMessage),
    Document(wa::message::DocumentMessage),
    Sticker(wa::message::StickerMessage),
}

impl SafeMedia {
    pub fn downloadable(&self) -> &dyn Downloadable {
        match self {
            SafeMedia::Image(m) => m,
            SafeMedia::Video(m) => m,
            SafeMedia::Audio(m) => m,
            SafeMedia::Document(m) => m,
            SafeMedia::Sticker(m) => m,
        }
    }
}

/// Whether a sender's `direct_path` is a path on the media host and nothing else: it
/// starts with one `/` and holds only the characters of WhatsApp's paths and queries.
pub fn direct_path_ok(p: &str) -> bool {
    let plain = p.starts_with('/')
        && !p.starts_with("//")
        && p.len() <= 2048
        && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-~?&=%+".contains(&b));
    // And the URL the crate builds from it keeps the host.
    plain
        && url::Url::parse(&format!("https://mmg.whatsapp.net{p}"))
            .is_ok_and(|u| u.host_str() == Some("mmg.whatsapp.net") && u.username().is_empty())
}

/// A stored locator back to a media message that is safe to download, or
/// `media_unavailable` when it cannot be fetched safely (recorded as such, for good).
pub fn safe_media(locator: &str) -> Result<SafeMedia, DriverError> {
    let unsafe_media = || DriverError::new(ErrorCode::MediaUnavailable, "the media's locator is not safe to fetch");
    let (kind, bytes) = parse_locator(locator).ok_or_else(unsafe_media)?;
    let media = match kind {
        "image" => {
            let mut m = wa::message::ImageMessage::decode_from_slice(&bytes).map_err(|_| unsafe_media())?;
            m.static_url = None;
            SafeMedia::Image(m)
        }
        "video" => {
            let mut m = wa::message::VideoMessage::decode_from_slice(&bytes).map_err(|_| unsafe_media())?;
            m.static_url = None;
            SafeMedia::Video(m)
        }
        "audio" => SafeMedia::Audio(wa::message::AudioMessage::decode_from_slice(&bytes).map_err(|_| unsafe_media())?),
        "document" => {
            SafeMedia::Document(wa::message::DocumentMessage::decode_from_slice(&bytes).map_err(|_| unsafe_media())?)
        }
        "sticker" => {
            SafeMedia::Sticker(wa::message::StickerMessage::decode_from_slice(&bytes).map_err(|_| unsafe_media())?)
        }
        _ => return Err(unsafe_media()),
    };
    match media.downloadable().direct_path() {
        Some(p) if direct_path_ok(p) => Ok(media),
        _ => Err(unsafe_media()),
    }
}
