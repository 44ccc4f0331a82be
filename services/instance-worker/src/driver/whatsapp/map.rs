//! Mappings between paceline's terms and WhatsApp's, free of I/O so each is unit-tested:
//! our message types to `wa::Message` and back, receipts, connect failures, media
//! locators, vCards.

use base64::Engine;
use serde_json::{json, Value};
use shared::jid::Jid;
use shared::ErrorCode;
use whatsapp_rust::buffa::{Message as _, MessageField};
use whatsapp_rust::proto_helpers::MessageExt;
use whatsapp_rust::upload::UploadResponse;
use whatsapp_rust::wacore::appstate::schemas;
use whatsapp_rust::wacore::download::{Downloadable, MediaType};
use whatsapp_rust::wacore::stanza::groups::{GroupNotificationAction, GroupParticipantInfo};
use whatsapp_rust::wacore::types::events::{GroupUpdate, LabelAssociationUpdate, LabelEditUpdate};
use whatsapp_rust::waproto::whatsapp as wa;

use shared::message::{Content, MessageType};

use crate::driver::{DriverError, DriverEvent, Outgoing, Reference, RemoteMedia};

mod changes;
mod labels;
mod media;
pub use changes::*;
pub use labels::*;
pub use media::*;

/// One answer of a registration lookup (usync's contact query), as we read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// The number (its JID's user part, in phone form when the answer came under a LID).
    pub number: String,
    /// The JID to show: the phone form.
    pub jid: String,
    pub registered: bool,
    pub business: bool,
}

/// The answer for `number` if it has an account.
pub fn registered<'a>(number: &str, found: &'a [Registration]) -> Option<&'a Registration> {
    found.iter().find(|r| r.number == number && r.registered)
}

/// A send to a person by number needs an account behind it: without one the network
/// would take the message and deliver it to nobody, so it fails as `invalid_number`.
pub fn must_be_registered(number: &str, found: &[Registration]) -> Result<(), DriverError> {
    match registered(number, found) {
        Some(_) => Ok(()),
        None => Err(DriverError::new(ErrorCode::InvalidNumber, "the number has no WhatsApp account")),
    }
}

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

/// The background of a text status (0xAARRGGBB), WhatsApp's default green.
pub const STATUS_BACKGROUND: u32 = 0xFF1E_6E4F;

/// A status as a WhatsApp message: text goes on a coloured background (an extended
/// text message, as the phone posts it); an image or video is its ordinary message.
pub fn status_message(o: &Outgoing, upload: Option<Uploaded>) -> Result<wa::Message, DriverError> {
    match &o.message.content {
        Content::Text { text, .. } => Ok(wa::Message {
            extended_text_message: MessageField::some(wa::message::ExtendedTextMessage {
                text: Some(text.clone()),
                background_argb: Some(STATUS_BACKGROUND),
                font: Some(wa::message::extended_text_message::FontType::default()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        Content::Image { .. } | Content::Video { .. } => outgoing_message(o, upload),
        _ => Err(invalid("a status is text, an image or a video")),
    }
}

/// Our validated message as a WhatsApp message; media types need their upload.
pub fn outgoing_message(o: &Outgoing, upload: Option<Uploaded>) -> Result<wa::Message, DriverError> {
    let mut m = outgoing_body(o, upload)?;
    let quote = match &o.message.content {
        Content::Reaction { .. } => None,
        _ => o.message.reply_to.as_deref().and_then(|r| o.referenced(r)),
    };
    with_context(&mut m, &o.message.mentions, quote.as_ref(), &o.to_jid);
    Ok(m)
}

/// Adds whom the text or caption mentions, and the message it quotes (its network id,
/// sender and text, and its chat when that is another), as the message's context.
fn with_context(m: &mut wa::Message, mentions: &[String], quote: Option<&Reference>, to_jid: &Jid) {
    if mentions.is_empty() && quote.is_none() {
        return;
    }
    let mut ctx = wa::ContextInfo { mentioned_jid: mentions.to_vec(), ..Default::default() };
    if let Some(q) = quote {
        ctx.stanza_id = Some(q.network_id.clone());
        ctx.participant = q.sender.clone();
        ctx.remote_jid = (q.chat_jid != *to_jid).then(|| q.chat_jid.to_string());
        ctx.quoted_message = match &q.text {
            Some(t) => MessageField::some(wa::Message { conversation: Some(t.clone()), ..Default::default() }),
            None => MessageField::none(),
        };
    }
    if let Some(text) = m.conversation.take() {
        m.extended_text_message = MessageField::some(wa::message::ExtendedTextMessage {
            text: Some(text),
            context_info: MessageField::some(ctx),
            ..Default::default()
        });
    } else if let Some(i) = m.image_message.as_option_mut() {
        i.context_info = MessageField::some(ctx);
    } else if let Some(v) = m.video_message.as_option_mut() {
        v.context_info = MessageField::some(ctx);
    } else if let Some(d) = m.document_message.as_option_mut() {
        d.context_info = MessageField::some(ctx);
    } else if let Some(a) = m.audio_message.as_option_mut() {
        a.context_info = MessageField::some(ctx);
    }
}

fn outgoing_body(o: &Outgoing, upload: Option<Uploaded>) -> Result<wa::Message, DriverError> {
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
        Content::Reaction { reaction: r } => {
            let target = o.reacted_to(&r.message_id)?;
            wa::Message {
                reaction_message: MessageField::some(wa::message::ReactionMessage {
                    key: MessageField::some(wa::MessageKey {
                        remote_jid: Some(o.to_jid.to_string()),
                        from_me: Some(target.from_me),
                        id: Some(target.network_id),
                        // In a group, whose message it was.
                        participant: target.sender.filter(|_| !target.from_me && o.to_jid.is_group()),
                    }),
                    text: Some(r.emoji.clone()),
                    sender_timestamp_ms: Some(chrono::Utc::now().timestamp_millis()),
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
    })
}

/// A received message as the log keeps it: its type, content in the shape
/// `POST messages` takes, and the media still to download. The content also carries
/// `reply_to` (the network id of the message it quotes) and `mentions` (JIDs), when the
/// message has them.
pub fn incoming_content(m: &wa::Message) -> (String, Value, Option<RemoteMedia>) {
    let (kind, mut content, media) = incoming_body(m);
    if let (Some(ctx), Some(o)) = (context_info(m.get_base_message()), content.as_object_mut()) {
        if let Some(id) = ctx.stanza_id.as_ref().filter(|i| !i.is_empty()) {
            o.insert("reply_to".into(), json!(id));
        }
        if !ctx.mentioned_jid.is_empty() {
            o.insert("mentions".into(), json!(ctx.mentioned_jid));
        }
    }
    (kind, content, media)
}

/// The context (quote, mentions) of the message types that carry one.
fn context_info(m: &wa::Message) -> Option<&wa::ContextInfo> {
    m.extended_text_message
        .as_option()
        .and_then(|e| e.context_info.as_option())
        .or_else(|| m.image_message.as_option().and_then(|i| i.context_info.as_option()))
        .or_else(|| m.video_message.as_option().and_then(|v| v.context_info.as_option()))
        .or_else(|| m.audio_message.as_option().and_then(|a| a.context_info.as_option()))
        .or_else(|| m.document_message.as_option().and_then(|d| d.context_info.as_option()))
        .or_else(|| m.sticker_message.as_option().and_then(|s| s.context_info.as_option()))
}

fn incoming_body(m: &wa::Message) -> (String, Value, Option<RemoteMedia>) {
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

/// A 1:1 party's hidden id (LID, without device), when the network named it by one:
/// `jid` itself, or the `alt` it told beside a number.
pub fn lid_form(jid: &whatsapp_rust::Jid, alt: Option<&whatsapp_rust::Jid>) -> Option<String> {
    if jid.is_lid() {
        return Some(jid.to_non_ad_string());
    }
    alt.filter(|a| a.is_lid()).map(whatsapp_rust::Jid::to_non_ad_string)
}

/// A history conversation's chat as the log keys it (the number's JID when the sync told
/// it beside a LID), and its LID.
pub fn history_chat(id: &str, pn: Option<&str>, lid: Option<&str>) -> (String, Option<String>) {
    let parsed = |s: &str| s.parse::<whatsapp_rust::Jid>().ok();
    let Some(jid) = parsed(id) else { return (id.to_string(), None) };
    let alt = if jid.is_lid() { pn.and_then(parsed) } else { lid.and_then(parsed) };
    if jid.server == shared::jid::GROUP_SERVER {
        return (jid.to_non_ad_string(), None);
    }
    (phone_form(&jid, alt.as_ref()), lid_form(&jid, alt.as_ref()))
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

/// A business profile as the routes show it: its first website and category, as the
/// phone shows them.
pub fn business_profile(b: &whatsapp_rust::wacore::iq::business::BusinessProfile) -> shared::contract::BusinessProfile {
    shared::contract::BusinessProfile {
        description: Some(b.description.clone()).filter(|d| !d.is_empty()),
        category: b.categories.first().map(|c| c.name.clone()),
        email: b.email.clone(),
        website: b.website.first().cloned(),
        address: b.address.clone(),
    }
}

/// A group notification as our `group.*` events: member changes (with the account's own
/// joining or leaving as `group.joined` / `group.left`), and subject, description and
/// setting changes. `own` is the account's phone JID; LID members are named by their
/// phone number when the network gives it. Other actions map to nothing.
pub fn group_update(u: &GroupUpdate, own: Option<&whatsapp_rust::Jid>) -> Vec<(&'static str, Value)> {
    let group = u.group_jid.to_string();
    let by = u.participant_pn.as_ref().or(u.participant.as_ref()).map(|j| j.to_string());
    let named = |ps: &[GroupParticipantInfo]| -> Vec<String> {
        ps.iter().map(|p| p.phone_number.as_ref().unwrap_or(&p.jid).to_string()).collect()
    };
    let is_own = |ps: &[GroupParticipantInfo]| {
        own.is_some_and(|o| ps.iter().any(|p| p.phone_number.as_ref().unwrap_or(&p.jid).user == o.user))
    };
    let members = |action: &str, ps: &[GroupParticipantInfo]| {
        // A member added or removed by itself joined (by link) or left.
        let by_self = ps.len() == 1 && by.as_deref() == named(ps).first().map(String::as_str);
        let action = match (action, by_self) {
            ("added", true) => "joined",
            ("removed", true) => "left",
            (a, _) => a,
        };
        json!({ "jid": group, "action": action, "participants": named(ps), "by": by })
    };
    let updated = |field: &str, v: Value| {
        let mut d = json!({ "jid": group, "by": by });
        d[field] = v;
        vec![("group.updated", d)]
    };
    let membership = json!({ "jid": group, "subject": "", "by": by });
    match &u.action {
        GroupNotificationAction::Add { participants, .. } => {
            let mut out = vec![("group.participants_updated", members("added", participants))];
            if is_own(participants) {
                out.push(("group.joined", membership));
            }
            out
        }
        GroupNotificationAction::Remove { participants, .. } => {
            let mut out = vec![("group.participants_updated", members("removed", participants))];
            if is_own(participants) {
                out.push(("group.left", membership));
            }
            out
        }
        GroupNotificationAction::Promote { participants } => {
            vec![("group.participants_updated", members("promoted", participants))]
        }
        GroupNotificationAction::Demote { participants } => {
            vec![("group.participants_updated", members("demoted", participants))]
        }
        GroupNotificationAction::Subject { subject, .. } => updated("subject", json!(subject)),
        GroupNotificationAction::Description { description, .. } => {
            updated("description", json!(description.clone().unwrap_or_default()))
        }
        GroupNotificationAction::Locked { .. } => updated("locked", json!(true)),
        GroupNotificationAction::Unlocked => updated("locked", json!(false)),
        GroupNotificationAction::Announce => updated("announce", json!(true)),
        GroupNotificationAction::NotAnnounce => updated("announce", json!(false)),
        GroupNotificationAction::Link { link_type, raw } => community_link(&group, link_type, raw, "linked", by),
        GroupNotificationAction::Unlink { unlink_type, raw, .. } => {
            community_link(&group, unlink_type, raw, "unlinked", by)
        }
        _ => Vec::new(),
    }
}

/// A community link change as `community.groups_updated`. The `<group jid>` inside names
/// the other side: a `sub_group` notification comes to the community (the groups inside
/// were linked), a `parent_group` one to the group (the community inside); sibling
/// changes map to nothing.
fn community_link(
    group: &str,
    link_type: &str,
    raw: &whatsapp_rust::wacore_binary::Node,
    action: &str,
    by: Option<String>,
) -> Vec<(&'static str, Value)> {
    let named: Vec<String> =
        raw.get_children_by_tag("group").filter_map(|g| g.attrs().optional_jid("jid")).map(|j| j.to_string()).collect();
    let (community, groups) = match (link_type, named.first()) {
        ("sub_group", Some(_)) => (group.to_string(), named),
        ("parent_group", Some(c)) => (c.clone(), vec![group.to_string()]),
        _ => return Vec::new(),
    };
    vec![("community.groups_updated", json!({ "jid": community, "action": action, "groups": groups, "by": by }))]
}

#[cfg(test)]
mod tests;
