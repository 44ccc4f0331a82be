//! Mappings between paceline's terms and WhatsApp's, free of I/O so each is unit-tested:
//! our message types to `wa::Message` and back, receipts, connect failures, media
//! locators, vCards.

use base64::Engine;
use serde_json::{json, Value};
use shared::ErrorCode;
use whatsapp_rust::buffa::{Message as _, MessageField};
use whatsapp_rust::proto_helpers::MessageExt;
use whatsapp_rust::upload::UploadResponse;
use whatsapp_rust::wacore::download::{Downloadable, MediaType};
use whatsapp_rust::waproto::whatsapp as wa;

use shared::message::{Content, MessageType};

use crate::driver::{DriverError, Outgoing, RemoteMedia};

/// The upload type of a media message type.
pub fn media_type(kind: MessageType) -> Option<MediaType> {
    Some(match kind {
        MessageType::Image => MediaType::Image,
        MessageType::Video => MediaType::Video,
        MessageType::Audio | MessageType::Voice => MediaType::Audio,
        MessageType::Document => MediaType::Document,
        MessageType::Sticker => MediaType::Sticker,
        _ => return None,
    })
}

/// A vCard 3.0 for a shared contact.
pub fn vcard(name: &str, phone: &str, email: Option<&str>) -> String {
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    let mut v = format!("BEGIN:VCARD\nVERSION:3.0\nFN:{name}\nTEL;type=CELL;waid={digits}:+{digits}\n");
    if let Some(e) = email {
        v.push_str(&format!("EMAIL:{e}\n"));
    }
    v.push_str("END:VCARD");
    v
}

fn invalid(detail: &str) -> DriverError {
    DriverError::new(ErrorCode::ValidationFailed, detail)
}

/// An uploaded media's reference (what the media message carries).
#[derive(Debug, Clone)]
pub struct Uploaded {
    pub url: String,
    pub direct_path: String,
    pub media_key: [u8; 32],
    pub file_enc_sha256: [u8; 32],
    pub file_sha256: [u8; 32],
    pub file_length: u64,
    pub media_key_timestamp: i64,
}

impl From<UploadResponse> for Uploaded {
    fn from(u: UploadResponse) -> Self {
        Uploaded {
            url: u.url,
            direct_path: u.direct_path,
            media_key: u.media_key,
            file_enc_sha256: u.file_enc_sha256,
            file_sha256: u.file_sha256,
            file_length: u.file_length,
            media_key_timestamp: u.media_key_timestamp,
        }
    }
}

/// A media message of type `$ty` with the upload's reference and extra fields.
macro_rules! media_fields {
    ($ty:path, $u:expr, $mime:expr, $default_mime:expr, { $($field:ident),* }) => {{
        let u = $u;
        $ty {
            url: Some(u.url),
            direct_path: Some(u.direct_path),
            media_key: Some(u.media_key.to_vec()),
            file_sha256: Some(u.file_sha256.to_vec()),
            file_enc_sha256: Some(u.file_enc_sha256.to_vec()),
            file_length: Some(u.file_length),
            media_key_timestamp: Some(u.media_key_timestamp),
            mimetype: Some($mime.unwrap_or_else(|| $default_mime.to_string())),
            $($field,)*
            ..Default::default()
        }
    }};
}

/// Our validated message as a WhatsApp message; media types need their upload.
pub fn outgoing_message(o: &Outgoing, upload: Option<Uploaded>) -> Result<wa::Message, DriverError> {
    let content = &o.message.content;
    let mime = content.media().map(|m| m.mime_type.clone());
    let caption = match content {
        Content::Image { caption, .. } | Content::Video { caption, .. } | Content::Document { caption, .. } => {
            caption.clone()
        }
        _ => None,
    };
    let need_upload = || invalid("media messages need their upload");
    Ok(match content {
        Content::Text { text, .. } => wa::Message { conversation: Some(text.clone()), ..Default::default() },
        Content::Image { .. } => {
            let u = upload.ok_or_else(need_upload)?;
            wa::Message {
                image_message: MessageField::some(media_fields!(wa::message::ImageMessage, u, mime, "image/jpeg", {
                    caption
                })),
                ..Default::default()
            }
        }
        Content::Video { .. } => {
            let u = upload.ok_or_else(need_upload)?;
            wa::Message {
                video_message: MessageField::some(media_fields!(wa::message::VideoMessage, u, mime, "video/mp4", {
                    caption
                })),
                ..Default::default()
            }
        }
        Content::Audio { .. } | Content::Voice { .. } => {
            let u = upload.ok_or_else(need_upload)?;
            let ptt = Some(matches!(content, Content::Voice { .. }));
            wa::Message {
                audio_message: MessageField::some(media_fields!(
                    wa::message::AudioMessage,
                    u,
                    mime,
                    "audio/ogg; codecs=opus",
                    { ptt }
                )),
                ..Default::default()
            }
        }
        Content::Document { media, .. } => {
            let u = upload.ok_or_else(need_upload)?;
            let file_name = media.filename.clone();
            wa::Message {
                document_message: MessageField::some(
                    media_fields!(wa::message::DocumentMessage, u, mime, "application/octet-stream", { caption, file_name }),
                ),
                ..Default::default()
            }
        }
        Content::Sticker { .. } => {
            let u = upload.ok_or_else(need_upload)?;
            wa::Message {
                sticker_message: MessageField::some(media_fields!(
                    wa::message::StickerMessage,
                    u,
                    mime,
                    "image/webp",
                    {}
                )),
                ..Default::default()
            }
        }
        Content::Location { location: l } => wa::Message {
            location_message: MessageField::some(wa::message::LocationMessage {
                degrees_latitude: Some(l.latitude),
                degrees_longitude: Some(l.longitude),
                name: l.name.clone(),
                address: l.address.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        Content::Contact { contact: k } => wa::Message {
            contact_message: MessageField::some(wa::message::ContactMessage {
                display_name: Some(k.name.clone()),
                vcard: Some(vcard(&k.name, &k.phone, k.email.as_deref())),
                ..Default::default()
            }),
            ..Default::default()
        },
        Content::Poll { poll: p } => {
            let options = p
                .values
                .iter()
                .map(|v| wa::message::poll_creation_message::Option {
                    option_name: Some(v.clone()),
                    ..Default::default()
                })
                .collect();
            let poll = wa::message::PollCreationMessage {
                name: Some(p.name.clone()),
                options,
                selectable_options_count: Some(p.selectable_count),
                ..Default::default()
            };
            // The secret lets recipients encrypt their votes to us.
            let mut secret = vec![0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut secret);
            wa::Message {
                poll_creation_message_v3: MessageField::some(poll),
                message_context_info: MessageField::some(wa::MessageContextInfo {
                    message_secret: Some(secret),
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        Content::Reaction { reaction: r } => wa::Message {
            reaction_message: MessageField::some(wa::message::ReactionMessage {
                key: MessageField::some(wa::MessageKey {
                    remote_jid: Some(o.to_jid.clone()),
                    // Ids we pre-assign start with 3EB0: a reaction to one of ours.
                    from_me: Some(r.message_id.starts_with("3EB0")),
                    id: Some(r.message_id.clone()),
                    ..Default::default()
                }),
                text: Some(r.emoji.clone()),
                sender_timestamp_ms: Some(chrono::Utc::now().timestamp_millis()),
                ..Default::default()
            }),
            ..Default::default()
        },
    })
}

/// Where received media is: its kind and its media message, encoded, so `download`
/// can rebuild what the client downloads from.
fn locator(kind: &str, encoded: Vec<u8>) -> String {
    format!("{kind}:{}", base64::engine::general_purpose::STANDARD.encode(encoded))
}

/// A locator back to (kind, the encoded media message).
pub fn parse_locator(l: &str) -> Option<(&str, Vec<u8>)> {
    let (kind, b64) = l.split_once(':')?;
    Some((kind, base64::engine::general_purpose::STANDARD.decode(b64).ok()?))
}

fn remote(
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

/// A received message as the log keeps it: its type, content in the shape
/// `POST messages` takes, and the media still to download.
pub fn incoming_content(m: &wa::Message) -> (String, Value, Option<RemoteMedia>) {
    let m = m.get_base_message();
    if is_protocol(m) {
        return ("protocol".into(), json!({}), None);
    }
    if let Some(t) = m.conversation.as_ref() {
        return ("text".into(), json!({ "text": t }), None);
    }
    if let Some(e) = m.extended_text_message.as_option() {
        return ("text".into(), json!({ "text": e.text.clone().unwrap_or_default() }), None);
    }
    if let Some(i) = m.image_message.as_option() {
        let media = remote("image", i.encode_to_vec(), i.file_length, i.mimetype.as_ref(), None);
        return ("image".into(), json!({ "caption": i.caption }), Some(media));
    }
    if let Some(v) = m.video_message.as_option() {
        let media = remote("video", v.encode_to_vec(), v.file_length, v.mimetype.as_ref(), None);
        return ("video".into(), json!({ "caption": v.caption }), Some(media));
    }
    if let Some(a) = m.audio_message.as_option() {
        let kind = if a.ptt == Some(true) { "voice" } else { "audio" };
        let media = remote("audio", a.encode_to_vec(), a.file_length, a.mimetype.as_ref(), None);
        return (kind.into(), json!({}), Some(media));
    }
    if let Some(d) = m.document_message.as_option() {
        let media = remote("document", d.encode_to_vec(), d.file_length, d.mimetype.as_ref(), d.file_name.as_ref());
        return ("document".into(), json!({ "caption": d.caption }), Some(media));
    }
    if let Some(s) = m.sticker_message.as_option() {
        let media = remote("sticker", s.encode_to_vec(), s.file_length, s.mimetype.as_ref(), None);
        return ("sticker".into(), json!({}), Some(media));
    }
    if let Some(l) = m.location_message.as_option() {
        let loc = json!({ "latitude": l.degrees_latitude, "longitude": l.degrees_longitude, "name": l.name, "address": l.address });
        return ("location".into(), json!({ "location": loc }), None);
    }
    if let Some(c) = m.contact_message.as_option() {
        return ("contact".into(), json!({ "contact": { "name": c.display_name, "vcard": c.vcard } }), None);
    }
    if let Some(r) = m.reaction_message.as_option() {
        let target = r.key.as_option().and_then(|k| k.id.clone());
        return (
            "reaction".into(),
            json!({ "reaction": { "message_id": target, "emoji": r.text.clone().unwrap_or_default() } }),
            None,
        );
    }
    for p in [&m.poll_creation_message, &m.poll_creation_message_v2, &m.poll_creation_message_v3] {
        if let Some(p) = p.as_option() {
            let values: Vec<Option<String>> = p.options.iter().map(|o| o.option_name.clone()).collect();
            let poll = json!({ "name": p.name, "values": values, "selectable_count": p.selectable_options_count });
            return ("poll".into(), json!({ "poll": poll }), None);
        }
    }
    ("unsupported".into(), json!({}), None)
}

/// Messages that are not messages to a person: edits, revokes, poll votes, key shares
/// and other protocol traffic. They are not logged (nor counted as unread).
pub fn is_protocol(m: &wa::Message) -> bool {
    // (A sender-key distribution rides along with real group messages: not listed.)
    m.protocol_message.as_option().is_some()
        || m.poll_update_message.as_option().is_some()
        || m.enc_reaction_message.as_option().is_some()
        || m.keep_in_chat_message.as_option().is_some()
}

/// A 1:1 party's JID in the form the log keys chats by: the phone-number JID when the
/// network addressed it by LID and told us the number (`alt`), without device.
pub fn phone_form(jid: &whatsapp_rust::Jid, alt: Option<&whatsapp_rust::Jid>) -> String {
    match alt {
        Some(a) if jid.is_lid() && a.is_pn() => a.to_non_ad_string(),
        _ => jid.to_non_ad_string(),
    }
}

/// A receipt type as the log's status, when it is one we track.
pub fn receipt_status(t: &whatsapp_rust::types::presence::ReceiptType) -> Option<shared::db::log::Receipt> {
    use shared::db::log::Receipt;
    use whatsapp_rust::types::presence::ReceiptType as R;
    match t {
        R::Delivered => Some(Receipt::Delivered),
        R::Read | R::ReadSelf | R::Played | R::PlayedSelf => Some(Receipt::Read),
        _ => None,
    }
}

/// What a connect failure means for the instance: the session ended for good (logged
/// out or banned), or it may be retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    LoggedOut,
    Banned,
    Retry(String),
}

pub fn connect_failure(reason: &whatsapp_rust::types::events::ConnectFailureReason) -> Failure {
    use whatsapp_rust::types::events::ConnectFailureReason as R;
    if matches!(reason, R::AccountLocked) {
        // WhatsApp locks banned accounts: the number is unusable until appealed.
        return Failure::Banned;
    }
    if reason.is_logged_out() {
        return Failure::LoggedOut;
    }
    Failure::Retry(format!("connect failure: {reason:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Media;

    fn media() -> Media {
        Media {
            mime_type: "application/x-test".into(),
            filename: Some("f.bin".into()),
            sha256: String::new(),
            data: vec![1],
        }
    }

    /// An outgoing message of type `kind` with `content` (media types carry `media()`).
    fn out(kind: &str, content: Value) -> Outgoing {
        let mut content = content;
        content["type"] = json!(kind);
        let is_media = MessageType::from_name(kind).and_then(MessageType::media_limit).is_some();
        if is_media {
            content["media"] = Value::Null;
        }
        let c: Content<()> = serde_json::from_value(content).unwrap();
        Outgoing {
            network_id: "3EB0AA".into(),
            to_jid: shared::jid::Jid::user("5511999990002").as_str().into(),
            message: shared::message::Outbound { content: c.map_media(|()| media()), reply_to: None },
        }
    }

    fn upload() -> Uploaded {
        Uploaded {
            url: "https://mmg.whatsapp.net/x".into(),
            direct_path: "/v/x".into(),
            media_key: [1; 32],
            file_enc_sha256: [2; 32],
            file_sha256: [3; 32],
            file_length: 10,
            media_key_timestamp: 5,
        }
    }

    /// Our type -> WhatsApp -> our type keeps the type and content.
    #[test]
    fn every_type_round_trips_through_the_network_message() {
        let cases = [
            ("text", json!({ "text": "hello" }), json!({ "text": "hello" })),
            (
                "location",
                json!({ "location": { "latitude": -23.5, "longitude": -46.6, "name": "SP", "address": "Av" } }),
                json!({ "location": { "latitude": -23.5, "longitude": -46.6, "name": "SP", "address": "Av" } }),
            ),
            (
                "reaction",
                json!({ "reaction": { "message_id": "ABC", "emoji": "👍" } }),
                json!({ "reaction": { "message_id": "ABC", "emoji": "👍" } }),
            ),
            (
                "poll",
                json!({ "poll": { "name": "lunch?", "values": ["pizza", "sushi"], "selectable_count": 1 } }),
                json!({ "poll": { "name": "lunch?", "values": ["pizza", "sushi"], "selectable_count": 1 } }),
            ),
        ];
        for (kind, content, back) in cases {
            let m = outgoing_message(&out(kind, content), None).unwrap();
            let (k, c, media) = incoming_content(&m);
            assert_eq!((k.as_str(), &c), (kind, &back), "{kind}");
            assert!(media.is_none());
        }
        let m = outgoing_message(
            &out("contact", json!({ "contact": { "name": "Ana", "phone": "+55 11 99999-0009" } })),
            None,
        )
        .unwrap();
        let (k, c, _) = incoming_content(&m);
        assert_eq!(k, "contact");
        assert_eq!(c["contact"]["name"], "Ana");
        assert!(c["contact"]["vcard"].as_str().unwrap().contains("waid=5511999990009"));
        let poll = outgoing_message(&out("poll", json!({ "poll": { "name": "p", "values": ["a"] } })), None).unwrap();
        assert_eq!(poll.message_context_info.as_option().unwrap().message_secret.as_ref().unwrap().len(), 32);
        let r =
            outgoing_message(&out("reaction", json!({ "reaction": { "message_id": "3EB0FF", "emoji": "" } })), None)
                .unwrap();
        assert_eq!(r.reaction_message.as_option().unwrap().key.as_option().unwrap().from_me, Some(true));
    }

    #[test]
    fn media_types_carry_their_upload_and_come_back_with_a_locator() {
        for (kind, back) in [
            ("image", "image"),
            ("video", "video"),
            ("audio", "audio"),
            ("voice", "voice"),
            ("document", "document"),
            ("sticker", "sticker"),
        ] {
            let caption =
                if ["image", "video", "document"].contains(&kind) { json!({ "caption": "c" }) } else { json!({}) };
            let o = out(kind, caption);
            assert!(outgoing_message(&o, None).is_err(), "{kind} needs its upload");
            assert!(media_type(MessageType::from_name(kind).unwrap()).is_some());
            let m = outgoing_message(&o, Some(upload())).unwrap();
            let (k, c, media) = incoming_content(&m);
            assert_eq!(k, back);
            let media = media.unwrap();
            assert_eq!(media.mime_type, "application/x-test");
            let (lk, bytes) = parse_locator(&media.locator).unwrap();
            assert!(!bytes.is_empty() && ["image", "video", "audio", "document", "sticker"].contains(&lk));
            if ["image", "video", "document"].contains(&kind) {
                assert_eq!(c["caption"], "c", "{kind}");
            }
            if kind == "document" {
                assert_eq!(media.filename.as_deref(), Some("f.bin"));
            }
        }
        assert!(media_type(MessageType::Text).is_none());
    }

    /// A stranger's image message with the given download references, as received.
    fn crafted_image(direct_path: Option<&str>, static_url: Option<&str>, file_length: Option<u64>) -> RemoteMedia {
        let m = wa::Message {
            image_message: MessageField::some(wa::message::ImageMessage {
                url: Some("https://mmg.whatsapp.net/o1/v/x".into()),
                direct_path: direct_path.map(str::to_string),
                static_url: static_url.map(str::to_string),
                media_key: Some(vec![7; 32]),
                file_enc_sha256: Some(vec![1; 32]),
                file_sha256: Some(vec![2; 32]),
                file_length,
                mimetype: Some("image/jpeg".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        incoming_content(&m).2.expect("an image carries media")
    }

    #[test]
    fn crafted_locators_are_refused_and_static_urls_dropped() {
        let good = "/v/t62.7118-24/12345_67890_n.enc?ccb=11-4&oh=01_Q5Aa&oe=65A1B2C3&_nc_sid=5e03e0";
        // A plain path passes, with the sender's static_url gone.
        let media = crafted_image(Some(good), Some("http://169.254.169.254/latest/meta-data"), Some(1000));
        let SafeMedia::Image(m) = safe_media(&media.locator).unwrap() else { panic!("an image") };
        assert_eq!(m.static_url, None, "static_url is never fetched");
        assert_eq!(m.direct_path.as_deref(), Some(good));
        assert_eq!((media.declared_size, media.limit), (Some(1000), 16 * 1024 * 1024));
        for hostile in [
            "@evil.example/x",
            "//evil.example/x",
            "evil.example/x",
            "/x@evil.example",
            "/\\evil.example/x",
            "/x#frag",
            "/x y",
            "/x\r\nHost: evil",
            "",
        ] {
            let media = crafted_image(Some(hostile), None, Some(1000));
            let e = safe_media(&media.locator).unwrap_err();
            assert_eq!(e.code, ErrorCode::MediaUnavailable, "{hostile:?}");
        }
        // No direct_path at all: only the static_url was left, and it is not used.
        let media = crafted_image(None, Some("https://mmg.whatsapp.net/x"), Some(1000));
        assert_eq!(safe_media(&media.locator).unwrap_err().code, ErrorCode::MediaUnavailable);
        // Garbage instead of a locator.
        assert!(safe_media("image:!!!").is_err());
        assert!(safe_media("carousel:AAAA").is_err());
    }

    #[test]
    fn the_declared_length_caps_a_download_and_the_type_bounds_it() {
        let p = Some("/v/t62/x.enc");
        assert_eq!(crafted_image(p, None, Some(5000)).cap().unwrap(), 5000);
        assert_eq!(crafted_image(p, None, None).cap().unwrap(), 16 * 1024 * 1024, "the type's limit");
        let huge = crafted_image(p, None, Some(10 * 1024 * 1024 * 1024));
        assert_eq!(huge.cap().unwrap_err().code, ErrorCode::MediaUnavailable, "declared over the type's limit");
    }

    #[test]
    fn wrapped_and_extended_messages_are_unwrapped() {
        let inner = wa::Message {
            extended_text_message: MessageField::some(wa::message::ExtendedTextMessage {
                text: Some("hi".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let wrapped = wa::Message {
            ephemeral_message: MessageField::some(wa::message::FutureProofMessage {
                message: MessageField::some(inner),
            }),
            ..Default::default()
        };
        assert_eq!(incoming_content(&wrapped).1, json!({ "text": "hi" }));
        assert_eq!(incoming_content(&wa::Message::default()).0, "unsupported");
        let revoke = wa::Message { protocol_message: MessageField::some(Default::default()), ..Default::default() };
        assert!(is_protocol(&revoke));
        assert_eq!(incoming_content(&revoke).0, "protocol");
    }

    #[test]
    fn receipts_and_failures_map_to_our_states() {
        use shared::db::log::Receipt;
        use whatsapp_rust::types::events::ConnectFailureReason as F;
        use whatsapp_rust::types::presence::ReceiptType as R;
        assert_eq!(receipt_status(&R::Delivered), Some(Receipt::Delivered));
        assert_eq!(receipt_status(&R::Read), Some(Receipt::Read));
        assert_eq!(receipt_status(&R::Played), Some(Receipt::Read));
        assert_eq!(receipt_status(&R::Retry), None);
        assert_eq!(connect_failure(&F::LoggedOut), Failure::LoggedOut);
        assert_eq!(connect_failure(&F::UnknownLogout), Failure::LoggedOut);
        assert_eq!(connect_failure(&F::AccountLocked), Failure::Banned);
        assert!(matches!(connect_failure(&F::ServiceUnavailable), Failure::Retry(_)));
        assert!(matches!(connect_failure(&F::TempBanned), Failure::Retry(_)));
    }

    #[test]
    fn lid_chats_are_keyed_by_their_phone_number() {
        let lid: whatsapp_rust::Jid = "100000012345678@lid".parse().unwrap();
        let pn: whatsapp_rust::Jid = shared::jid::Jid::user("5511999990001:3").as_str().parse().unwrap();
        assert_eq!(phone_form(&lid, Some(&pn)), shared::jid::Jid::user("5511999990001").as_str());
        assert_eq!(phone_form(&lid, None), "100000012345678@lid", "no number known: the LID stays");
        assert_eq!(phone_form(&pn, None), shared::jid::Jid::user("5511999990001").as_str(), "devices dropped");
        let group: whatsapp_rust::Jid = "1203630@g.us".parse().unwrap();
        assert_eq!(phone_form(&group, Some(&pn)), "1203630@g.us");
    }

    #[test]
    fn vcards_name_the_number() {
        assert_eq!(
            vcard("Ana", "+55 (11) 9999", Some("a@x")),
            "BEGIN:VCARD\nVERSION:3.0\nFN:Ana\nTEL;type=CELL;waid=55119999:+55119999\nEMAIL:a@x\nEND:VCARD"
        );
    }
}
