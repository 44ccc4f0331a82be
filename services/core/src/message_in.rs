//! The request body of `POST {inst}/messages` and its validation against interface.md's
//! limits, into the typed content the queue stores (`shared::message::Outbound`).

use std::time::Duration;

use base64::Engine;
use rand::Rng;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use shared::message::{
    ContactIn, Content, LocationIn, MessageType, Outbound, PollIn, ReactionIn, CAPTION_LIMIT, CLIENT_ID_LIMIT,
    EXPIRES_DEFAULT, EXPIRES_MAX, EXPIRES_MIN, TEXT_LIMIT,
};
use shared::ErrorCode;

use crate::{Error, Result};
use utoipa::ToSchema;

/// Media of a message: a URL to fetch, or the bytes in base64.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MediaIn {
    /// http(s) URL; never a private, loopback or link-local address.
    pub url: Option<String>,
    /// The bytes, base64.
    pub data: Option<String>,
    pub mime_type: Option<String>,
    pub filename: Option<String>,
}

/// Body of `POST {inst}/messages`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageIn {
    /// A phone number with country code, a JID, or `status@broadcast` (a status).
    #[schema(value_type = crate::schemas::Recipient)]
    pub to: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub text: Option<String>,
    pub link_preview: Option<bool>,
    pub media: Option<MediaIn>,
    pub caption: Option<String>,
    pub location: Option<LocationIn>,
    pub contact: Option<ContactIn>,
    pub poll: Option<PollIn>,
    pub reaction: Option<ReactionIn>,
    /// `msg_...` of a message of this instance, or a network id, to quote.
    pub reply_to: Option<String>,
    /// People the text or caption mentions (phone numbers with country code, or JIDs; up
    /// to 256). Write them in the text as `@<number>` for the app to highlight them.
    #[schema(max_items = 256)]
    pub mentions: Option<Vec<String>>,
    /// Idempotency key, at most 128 characters.
    #[schema(min_length = 1, max_length = 128)]
    pub client_message_id: Option<String>,
    /// `1m` to `168h` (default `24h`).
    pub expires_after: Option<String>,
}

impl MessageIn {
    /// A message of `kind` to `to` with nothing else set: what the action routes and the
    /// attendant fill in.
    pub fn new(to: String, kind: MessageType) -> MessageIn {
        MessageIn {
            to,
            kind,
            text: None,
            link_preview: None,
            media: None,
            caption: None,
            location: None,
            contact: None,
            poll: None,
            reaction: None,
            reply_to: None,
            mentions: None,
            client_message_id: None,
            expires_after: None,
        }
    }
}

/// Where the media bytes come from after validation.
#[derive(Debug, Clone)]
pub enum MediaSource {
    Bytes { data: Vec<u8>, mime_type: String, filename: Option<String> },
    Url { url: url::Url, mime_type: Option<String>, filename: Option<String> },
}

/// A message that passed validation; its media (if any) is still to be stored.
#[derive(Debug, Clone)]
pub struct Validated {
    pub to_jid: shared::jid::Jid,
    /// The content, its media a placeholder until stored (`Content::map_media`).
    pub message: Outbound<()>,
    pub media: Option<MediaSource>,
    pub client_message_id: Option<String>,
    pub expires_after: Duration,
}

impl Validated {
    pub fn kind(&self) -> MessageType {
        self.message.content.kind()
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(msg)
}

fn too_large(what: &str) -> Error {
    Error::refused(ErrorCode::MediaTooLarge, format!("{what} is over its size limit"))
}

/// A JID from a phone number or a JID (`shared::jid`).
pub fn normalize_jid(to: &str) -> Result<shared::jid::Jid> {
    if to.trim() == shared::jid::STATUS_JID {
        return Ok(shared::jid::Jid::status());
    }
    shared::jid::Jid::parse(to).map_err(|_| bad("`to` must be a phone number with country code or a JID"))
}

/// Parses `30s`, `5m`, `24h`, `1h30m`, `90` (seconds).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(n) = s.parse::<u64>() {
        return Some(Duration::from_secs(n));
    }
    let mut total = 0u64;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        total = total.checked_add(match c {
            's' => n,
            'm' => n.checked_mul(60)?,
            'h' => n.checked_mul(3600)?,
            'd' => n.checked_mul(86_400)?,
            _ => return None,
        })?;
    }
    num.is_empty().then_some(Duration::from_secs(total))
}

/// 400 when `field`'s value `v` is over `max` bytes.
pub fn check_len(field: &str, v: &str, max: usize) -> Result<()> {
    if v.len() > max {
        return Err(bad(format!("{field} must be at most {max} bytes")));
    }
    Ok(())
}

fn forbid(m: &MessageIn, kind: MessageType) -> Result<()> {
    let present = [
        ("text", m.text.is_some() && kind != MessageType::Text),
        ("link_preview", m.link_preview.is_some() && kind != MessageType::Text),
        ("media", m.media.is_some() && kind.media_limit().is_none()),
        (
            "caption",
            m.caption.is_some() && !matches!(kind, MessageType::Image | MessageType::Video | MessageType::Document),
        ),
        ("location", m.location.is_some() && kind != MessageType::Location),
        ("contact", m.contact.is_some() && kind != MessageType::Contact),
        ("poll", m.poll.is_some() && kind != MessageType::Poll),
        ("reaction", m.reaction.is_some() && kind != MessageType::Reaction),
    ];
    if let Some((field, _)) = present.iter().find(|(_, p)| *p) {
        return Err(bad(format!("`{field}` does not apply to type {}", kind.as_str())));
    }
    Ok(())
}

/// Where a media field's bytes come from, checked against `kind`'s limit and MIME
/// family: exactly one of `url` (http or https; its address is checked when fetched)
/// and `data` (base64, with its `mime_type`).
pub fn media_source(md: MediaIn, kind: MessageType) -> Result<MediaSource> {
    let limit = kind.media_limit().ok_or_else(|| bad(format!("type {} carries no media", kind.as_str())))?;
    if let Some(f) = &md.filename {
        if f.is_empty() || f.len() > 255 || f.contains(['/', '\\', '\0']) {
            return Err(bad("media.filename must be a plain file name of 1-255 bytes"));
        }
    }
    if let Some(mt) = &md.mime_type {
        let ok = mt.len() <= 127 && mt.contains('/') && kind.mime_family().is_none_or(|f| mt.starts_with(f));
        if !ok {
            return Err(bad(format!("media.mime_type does not fit type {}", kind.as_str())));
        }
    }
    Ok(match (md.url, md.data) {
        (Some(_), Some(_)) | (None, None) => return Err(bad("media needs exactly one of `url` and `data`")),
        (Some(u), None) => {
            let url = url::Url::parse(&u).map_err(|_| bad("media.url must be an http or https URL"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(bad("media.url must be an http or https URL"));
            }
            MediaSource::Url { url, mime_type: md.mime_type, filename: md.filename }
        }
        (None, Some(d)) => {
            // Base64 of the limit is 4/3 of it: refuse before decoding.
            if d.len() / 4 * 3 > limit + 3 {
                return Err(too_large("media"));
            }
            let data = base64::engine::general_purpose::STANDARD
                .decode(d.trim())
                .map_err(|_| bad("media.data must be base64"))?;
            if data.is_empty() {
                return Err(bad("media.data is empty"));
            }
            if data.len() > limit {
                return Err(too_large("media"));
            }
            let mime_type = md.mime_type.ok_or_else(|| bad("media.mime_type is required with media.data"))?;
            MediaSource::Bytes { data, mime_type, filename: md.filename }
        }
    })
}

/// Validates a message against the limits; media URLs are checked for form here and
/// fetched (with the SSRF guard) by the caller.
pub fn validate(m: MessageIn) -> Result<Validated> {
    let to_jid = normalize_jid(&m.to)?;
    let kind = m.kind;
    forbid(&m, kind)?;
    if let Some(id) = &m.client_message_id {
        if id.is_empty() || id.chars().count() > CLIENT_ID_LIMIT {
            return Err(bad(format!("client_message_id must be 1-{CLIENT_ID_LIMIT} characters")));
        }
    }
    let expires_after = match &m.expires_after {
        None => EXPIRES_DEFAULT,
        Some(s) => parse_duration(s)
            .filter(|d| (EXPIRES_MIN..=EXPIRES_MAX).contains(d))
            .ok_or_else(|| bad("expires_after must be a duration from 1m to 168h, e.g. 30m or 24h"))?,
    };
    if let Some(r) = &m.reply_to {
        check_len("reply_to", r, 128)?;
    }
    let mentions = mentions(m.mentions.as_deref().unwrap_or_default())?;
    let mut media = None;
    let content: Content<()> = match kind {
        MessageType::Text => {
            let text = m.text.as_deref().filter(|t| !t.is_empty()).ok_or_else(|| bad("type text needs `text`"))?;
            if text.len() > TEXT_LIMIT {
                return Err(Error::refused(
                    ErrorCode::MediaTooLarge,
                    format!("text must be at most {TEXT_LIMIT} bytes"),
                ));
            }
            Content::Text { text: text.to_string(), link_preview: m.link_preview.unwrap_or(false) }
        }
        MessageType::Location => {
            let l = m.location.ok_or_else(|| bad("type location needs `location`"))?;
            if !(-90.0..=90.0).contains(&l.latitude) || !(-180.0..=180.0).contains(&l.longitude) {
                return Err(bad("location latitude must be -90..90 and longitude -180..180"));
            }
            for (f, v) in [("location.name", &l.name), ("location.address", &l.address)] {
                if let Some(v) = v {
                    check_len(f, v, shared::message::FIELD_LIMIT)?;
                }
            }
            Content::Location { location: l }
        }
        MessageType::Contact => {
            let c = m.contact.ok_or_else(|| bad("type contact needs `contact`"))?;
            if c.name.trim().is_empty() {
                return Err(bad("contact.name must not be empty"));
            }
            normalize_jid(&c.phone).map_err(|_| bad("contact.phone must be a phone number with country code"))?;
            for (f, v) in [
                ("contact.name", Some(&c.name)),
                ("contact.organization", c.organization.as_ref()),
                ("contact.email", c.email.as_ref()),
                ("contact.url", c.url.as_ref()),
            ] {
                if let Some(v) = v {
                    check_len(f, v, shared::message::FIELD_LIMIT)?;
                }
            }
            Content::Contact { contact: c }
        }
        MessageType::Poll => {
            let p = m.poll.ok_or_else(|| bad("type poll needs `poll`"))?;
            if p.name.trim().is_empty() || p.name.len() > 256 {
                return Err(bad("poll.name must be 1-256 bytes"));
            }
            if !(2..=12).contains(&p.values.len()) {
                return Err(bad("poll.values must have 2-12 options"));
            }
            if p.values.iter().any(|v| v.trim().is_empty() || v.len() > 100) {
                return Err(bad("each poll option must be 1-100 bytes"));
            }
            let distinct: std::collections::HashSet<&String> = p.values.iter().collect();
            if distinct.len() != p.values.len() {
                return Err(bad("poll options must be distinct"));
            }
            if p.selectable_count == 0 || p.selectable_count as usize > p.values.len() {
                return Err(bad("poll.selectable_count must be between 1 and the number of options"));
            }
            Content::Poll { poll: p }
        }
        MessageType::Reaction => {
            let r = m.reaction.ok_or_else(|| bad("type reaction needs `reaction`"))?;
            if r.message_id.is_empty() || r.message_id.len() > 128 {
                return Err(bad("reaction.message_id must be 1-128 characters"));
            }
            if r.emoji.chars().count() > 16 {
                return Err(bad("reaction.emoji must be one emoji (or empty to remove)"));
            }
            Content::Reaction { reaction: r }
        }
        media_kind => {
            let md = m.media.ok_or_else(|| bad(format!("type {} needs `media`", media_kind.as_str())))?;
            if let Some(c) = &m.caption {
                if c.chars().count() > CAPTION_LIMIT {
                    return Err(bad(format!("caption must be at most {CAPTION_LIMIT} characters")));
                }
            }
            media = Some(media_source(md, media_kind)?);
            let caption = m.caption;
            match media_kind {
                MessageType::Image => Content::Image { media: (), caption },
                MessageType::Video => Content::Video { media: (), caption },
                MessageType::Document => Content::Document { media: (), caption },
                MessageType::Audio => Content::Audio { media: () },
                MessageType::Voice => Content::Voice { media: () },
                _ => Content::Sticker { media: () },
            }
        }
    };
    Ok(Validated {
        to_jid,
        message: Outbound { content, reply_to: m.reply_to, mentions },
        media,
        client_message_id: m.client_message_id,
        expires_after,
    })
}

/// The most people one message mentions.
const MENTIONS_LIMIT: usize = 256;

/// Mentions as person JIDs, each once, in the order given.
fn mentions(given: &[String]) -> Result<Vec<String>> {
    if given.len() > MENTIONS_LIMIT {
        return Err(bad(format!("at most {MENTIONS_LIMIT} mentions")));
    }
    let mut out: Vec<String> = Vec::with_capacity(given.len());
    for m in given {
        let jid = shared::jid::Jid::parse(m)
            .ok()
            .filter(|j| j.is_person())
            .ok_or_else(|| bad("each mention must be a person's phone number with country code or JID"))?;
        let jid = String::from(jid);
        if !out.contains(&jid) {
            out.push(jid);
        }
    }
    Ok(out)
}

/// A fingerprint of what a message says, to tell an idempotent replay from a reuse of
/// the key with other content. Media counts by its bytes' hash or URL.
pub fn content_hash(v: &Validated, media_sha256: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(v.to_jid.as_str().as_bytes());
    h.update(b"\0");
    h.update(v.kind().as_str().as_bytes());
    h.update(b"\0");
    // The content as it was written before it carried its type and media slot, so a
    // fingerprint stays the same across versions.
    let mut content = serde_json::to_value(&v.message).expect("content serializes");
    if let Some(obj) = content.as_object_mut() {
        obj.remove("type");
        obj.remove("media");
    }
    h.update(content.to_string().as_bytes());
    h.update(b"\0");
    match (&v.media, media_sha256) {
        (_, Some(sha)) => h.update(sha.as_bytes()),
        (Some(MediaSource::Url { url, .. }), None) => h.update(url.as_str().as_bytes()),
        _ => {}
    }
    h.update(b"\0");
    h.update(v.expires_after.as_secs().to_string().as_bytes());
    hex::encode(h.finalize())
}

/// A network message id, assigned before the first attempt (WhatsApp's web form).
pub fn new_network_id() -> String {
    let mut b = [0u8; 9];
    rand::thread_rng().fill(&mut b);
    format!("3EB0{}", hex::encode_upper(b))
}

#[cfg(test)]
mod tests;
