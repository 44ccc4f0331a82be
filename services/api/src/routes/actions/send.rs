//! Action-style send routes (interface.md 4.13): `POST /message/send*/{instanceName}` with
//! `X-API-Key` (or Evolution's `apikey`). Each builds the same message `POST
//! {inst}/messages` takes and queues it through the same path; the answer is
//! `{serviceId, messageId}` once queued, with Evolution v2's record beside them (`key`,
//! `message`, `messageType`, `messageTimestamp`, `status`). Statuses: 200, 400 (any
//! refusal, with its code in the envelope) and 404. Evolution's own fields are taken
//! beside the seed's (`text`, `quoted`, `mentioned`, `mentionsEveryOne`, `delay`, base64
//! or multipart media); other fields these routes do not know are ignored.

use crate::message_in::{MediaIn, MessageIn};
use crate::semaphore::SlotHeld;
use axum::extract::State;
use axum::Json;
use base64::Engine;
use serde::{Deserialize, Serialize};
use shared::db::instances::InstanceRow;
use shared::error::ErrorBody;
use shared::message::{ContactIn, LocationIn, MessageType, PollIn, ReactionIn};
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{as_400, ActionAccess, ActionInstance, ActionJson};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        // The routes that take media bytes (base64 or multipart): the send route's limit
        // and its large-body semaphore, which runs before the body is read.
        .routes(routes!(send_media))
        .routes(routes!(send_audio))
        .routes(routes!(send_sticker))
        .routes(routes!(send_status))
        .routes(routes!(send_ptv))
        .layer(axum::middleware::from_fn(crate::semaphore::gate))
        .layer(axum::extract::DefaultBodyLimit::max(crate::service::messages::MESSAGES_BODY_LIMIT))
        .routes(routes!(send_text))
        .routes(routes!(send_contact))
        .routes(routes!(send_reaction))
        .routes(routes!(send_location))
        .routes(routes!(send_poll))
        .routes(routes!(send_list))
        .routes(routes!(send_buttons))
}

/// The refusals of every action route: 400 for any invalid data (its code in the
/// envelope), 401 for a missing or invalid key, 404 for an unknown instance.
#[derive(utoipa::IntoResponses)]
pub enum ActionErrors {
    /// Invalid data: `validation_failed`, `media_too_large`, `media_fetch_failed`, ...
    #[response(
        status = 400,
        description = "invalid data; the envelope's `code` tells which (e.g. `validation_failed`, `media_too_large`, `media_fetch_failed`)"
    )]
    Invalid(ErrorBody),
    #[response(status = 401, description = "`unauthorized`: missing or invalid X-API-Key")]
    Unauthorized(ErrorBody),
    #[response(status = 404, description = "`instance_not_found`")]
    NotFound(ErrorBody),
}

/// Answer of every send action: ours, and Evolution v2's record of the message.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendActionOut {
    /// Our reference (the message id in UUID form; `msg_` + its 32 hex digits is the id on `/v1`).
    pub service_id: String,
    /// The message's id on the network, assigned before sending.
    pub message_id: String,
    /// Evolution's key: `remoteJid`, `fromMe` (true), `id` (= `messageId`).
    pub key: EvolutionKey,
    pub push_name: String,
    /// Evolution's message object (`conversation`, `imageMessage`, ...).
    #[schema(value_type = Object)]
    pub message: serde_json::Value,
    /// `conversation`, `imageMessage`, `locationMessage`, ...
    pub message_type: String,
    /// Seconds since the epoch, when it was accepted.
    pub message_timestamp: i64,
    /// `PENDING`: queued; the result comes later (`GET /v1/instances/{id}/messages/{msg_id}`,
    /// or the `send.message` and `messages.update` webhooks).
    pub status: String,
    /// Our `inst_...` id.
    pub instance_id: String,
    pub source: String,
}

/// Evolution's message key.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvolutionKey {
    pub remote_jid: String,
    pub from_me: bool,
    pub id: String,
}

/// Evolution's options every send takes.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendOptions {
    /// Milliseconds Evolution waits before sending (0-300000), a number or a numeric
    /// string. Accepted; paceline's pacing decides when the message goes.
    #[schema(value_type = Option<u32>)]
    pub delay: Option<serde_json::Value>,
    /// The message to quote: its `key.id` (the network id, or `msg_...`).
    pub quoted: Option<QuotedIn>,
    /// Numbers (or JIDs) the text mentions.
    pub mentioned: Option<Vec<String>>,
    /// In a group: mention every member.
    pub mentions_every_one: Option<bool>,
}

/// Evolution's quoted message.
#[derive(Debug, Deserialize, ToSchema)]
pub struct QuotedIn {
    pub key: QuotedKey,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct QuotedKey {
    /// The quoted message's network id (or `msg_...`).
    pub id: String,
}

/// The longest `delay` Evolution clients may ask for (5 minutes).
const DELAY_MAX_MS: u64 = 300_000;

impl SendOptions {
    /// Sets the quote and mentions on `m` (every member of the group, with
    /// `mentionsEveryOne`), after checking `delay`.
    async fn apply(self, state: &AppState, row: &InstanceRow, m: &mut MessageIn) -> Result<(), ApiError> {
        if let Some(d) = &self.delay {
            let ms = d.as_u64().or_else(|| d.as_str().and_then(|s| s.trim().parse().ok()));
            if ms.is_none_or(|ms| ms > DELAY_MAX_MS) {
                return Err(ApiError::validation(format!("delay must be 0-{DELAY_MAX_MS} milliseconds")));
            }
        }
        m.reply_to = self.quoted.map(|q| q.key.id);
        let mut mentions = self.mentioned.unwrap_or_default();
        if self.mentions_every_one == Some(true) {
            let jid = crate::message_in::normalize_jid(&m.to)?;
            if !jid.ends_with("@g.us") {
                return Err(ApiError::validation("mentionsEveryOne needs a group's JID as the number"));
            }
            let g: crate::service::groups::GroupOut =
                crate::rpc::net(state, &row.id, shared::bus::NetOp::Group { jid }).await?;
            mentions.extend(g.participants.into_iter().map(|p| p.jid));
        }
        if !mentions.is_empty() {
            m.mentions = Some(mentions);
        }
        Ok(())
    }
}

async fn queue(
    state: &AppState,
    a: &ActionAccess,
    mut m: MessageIn,
    options: SendOptions,
    holds_slot: bool,
) -> Result<Json<SendActionOut>, ApiError> {
    let row = &a.row;
    options.apply(state, row, &mut m).await.map_err(as_400)?;
    let by = crate::service::messages::Sender::Caller(&a.principal);
    let (msg, _) = crate::service::messages::queue(state, &row.id, by, m, None, holds_slot).await.map_err(as_400)?;
    let hex = &msg.id.as_str()[4..];
    let service_id = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]);
    let (message_type, message) = shared::evolution::message(&msg.kind, &msg.content, None);
    Ok(Json(SendActionOut {
        service_id,
        key: EvolutionKey { remote_jid: msg.to_jid.clone(), from_me: true, id: msg.wa_message_id.clone() },
        message_id: msg.wa_message_id,
        push_name: String::new(),
        message,
        message_type: message_type.to_string(),
        message_timestamp: msg.created_at.timestamp(),
        status: shared::evolution::status(msg.status.as_str()).to_string(),
        instance_id: row.id.to_string(),
        source: "unknown".into(),
    }))
}

/// Literal `\n` (and `\r\n`) sequences become line breaks.
fn newlines(s: &str) -> String {
    s.replace("\\r\\n", "\n").replace("\\n", "\n")
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendTextIn {
    /// Phone with country code (or a JID).
    pub number: String,
    /// The text; literal `\n` sequences become line breaks. One of `message` and `text`.
    pub message: Option<String>,
    /// Evolution's name for `message`.
    pub text: Option<String>,
    #[serde(default)]
    pub link_preview: Option<bool>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// Send a text.
#[utoipa::path(post, path = "/message/sendText/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendTextIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_text(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendTextIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let text = match (b.message, b.text) {
        (Some(t), None) | (None, Some(t)) => t,
        _ => return Err(ApiError::validation("give the text as one of `message` and `text`")),
    };
    let mut m = MessageIn::new(b.number, MessageType::Text);
    m.text = Some(newlines(&text));
    m.link_preview = b.link_preview;
    queue(&s, &a, m, b.options, false).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendContactIn {
    pub number: String,
    /// The seed's fields: one card from `contactName` and `contactPhone`.
    pub contact_name: Option<String>,
    pub contact_phone: Option<String>,
    pub organization: Option<String>,
    pub email: Option<String>,
    pub url: Option<String>,
    /// Evolution's: the card (one per message).
    pub contact: Option<Vec<EvolutionContact>>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// One contact card as Evolution takes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvolutionContact {
    pub full_name: String,
    /// The contact's WhatsApp number (digits); `phoneNumber` when absent.
    pub wuid: Option<String>,
    pub phone_number: Option<String>,
    pub organization: Option<String>,
    pub email: Option<String>,
    pub url: Option<String>,
}

/// Send a contact card (the contact need not be saved).
#[utoipa::path(post, path = "/message/sendContact/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendContactIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_contact(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendContactIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let card = match (b.contact_name, b.contact_phone, b.contact) {
        (Some(name), Some(phone), None) => {
            ContactIn { name, phone, organization: b.organization, email: b.email, url: b.url }
        }
        (None, None, Some(mut list)) if list.len() == 1 => {
            let c = list.remove(0);
            let phone =
                c.phone_number.or(c.wuid).ok_or_else(|| ApiError::validation("contact needs phoneNumber or wuid"))?;
            ContactIn { name: c.full_name, phone, organization: c.organization, email: c.email, url: c.url }
        }
        (None, None, Some(_)) => {
            return Err(ApiError::validation("contact must hold exactly one card (one card per message)"))
        }
        _ => return Err(ApiError::validation("give contactName and contactPhone, or Evolution's contact")),
    };
    let mut m = MessageIn::new(b.number, MessageType::Contact);
    m.contact = Some(card);
    queue(&s, &a, m, b.options, false).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendReactionIn {
    /// The seed's: the chat (a phone or JID) and the message (`messageId`).
    pub phone: Option<String>,
    /// An emoji; empty removes the reaction.
    pub reaction: String,
    /// The message reacted to: its network id, or `msg_...`.
    pub message_id: Option<String>,
    /// Evolution's: the message reacted to (`remoteJid` is the chat).
    pub key: Option<ReactionKey>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReactionKey {
    pub remote_jid: String,
    pub id: String,
    pub from_me: Option<bool>,
}

/// React to a message.
#[utoipa::path(post, path = "/message/sendReaction/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendReactionIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_reaction(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendReactionIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let (chat, target) = match (b.phone, b.message_id, b.key) {
        (Some(phone), Some(id), None) => (phone, id),
        (None, None, Some(k)) => (k.remote_jid, k.id),
        _ => return Err(ApiError::validation("give phone and messageId, or Evolution's key")),
    };
    let mut m = MessageIn::new(chat, MessageType::Reaction);
    m.reaction = Some(ReactionIn { message_id: target, emoji: b.reaction });
    queue(&s, &a, m, SendOptions::default(), false).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendLocationIn {
    pub number: String,
    pub title: Option<String>,
    /// Evolution's name for `title`.
    pub name: Option<String>,
    pub address: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// Send a location.
#[utoipa::path(post, path = "/message/sendLocation/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendLocationIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_location(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendLocationIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.number, MessageType::Location);
    let name = b.title.or(b.name);
    m.location = Some(LocationIn { latitude: b.latitude, longitude: b.longitude, name, address: b.address });
    queue(&s, &a, m, b.options, false).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendPollIn {
    pub number: String,
    /// The poll's question.
    pub name: String,
    #[serde(default = "one")]
    pub selectable_count: u32,
    pub values: Vec<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

fn one() -> u32 {
    1
}

/// Send a poll.
#[utoipa::path(post, path = "/message/sendPoll/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendPollIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_poll(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendPollIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.number, MessageType::Poll);
    m.poll = Some(PollIn { name: b.name, values: b.values, selectable_count: b.selectable_count });
    queue(&s, &a, m, b.options, false).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendMediaIn {
    pub number: String,
    pub caption: Option<String>,
    /// An http(s) address of the file, or its bytes in base64 (a `data:` URL or bare).
    /// With a multipart body, the `file` part instead.
    pub media: Option<String>,
    /// `image`, `video`, `document` or `audio`; when absent, chosen from the file's name
    /// (images and videos by theirs; PDF, spreadsheets and anything else as a document).
    pub mediatype: Option<String>,
    pub mimetype: Option<String>,
    pub file_name: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// Where a media field's bytes come from: an http(s) URL, or base64 (bare or in a
/// `data:` URL, whose type is taken when `mimetype` is absent).
fn media_in(value: String, mime_type: Option<String>, filename: Option<String>) -> MediaIn {
    if value.starts_with("http://") || value.starts_with("https://") {
        return MediaIn { url: Some(value), data: None, mime_type, filename };
    }
    let (mime_type, data) = match value.strip_prefix("data:").and_then(|r| r.split_once(";base64,")) {
        Some((mt, data)) => (mime_type.or(Some(mt.to_string())), data.to_string()),
        None => (mime_type, value),
    };
    MediaIn { url: None, data: Some(data), mime_type, filename }
}

/// Send an image, a video, a document (PDF, .xlsx, .xls, ...) or an audio file, from a
/// URL, base64, or a multipart `file` part.
#[utoipa::path(post, path = "/message/sendMedia/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendMediaIn = "application/json"), (SendMediaForm = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_media(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendMediaIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let media = b.media.ok_or_else(|| ApiError::validation("give the file as `media` (a URL or base64) or `file`"))?;
    let kind = match b.mediatype.as_deref() {
        Some("image") => MessageType::Image,
        Some("video") => MessageType::Video,
        Some("document") => MessageType::Document,
        Some("audio") => MessageType::Audio,
        Some(_) => return Err(ApiError::validation("mediatype must be image, video, document or audio")),
        None => media_kind(b.file_name.as_deref().unwrap_or(&media)),
    };
    let mut m = MessageIn::new(b.number, kind);
    m.caption = b.caption.filter(|c| !c.is_empty() && kind != MessageType::Audio);
    m.media = Some(media_in(media, b.mimetype, b.file_name));
    queue(&s, &a, m, b.options, held.is_some()).await
}

/// The media kind from a file name or URL's extension.
fn media_kind(name: &str) -> MessageType {
    let path = name.split(['?', '#']).next().unwrap_or(name).to_ascii_lowercase();
    let ext = path.rsplit('.').next().unwrap_or("");
    match ext {
        "jpg" | "jpeg" | "png" | "gif" | "webp" | "bmp" => MessageType::Image,
        "mp4" | "mov" | "3gp" | "mkv" | "webm" | "avi" => MessageType::Video,
        _ => MessageType::Document,
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendAudioIn {
    pub number: String,
    /// An http(s) address of an audio file (MP3, OGG, M4A, ...; up to 64 MB), or its bytes
    /// in base64; sent as a voice note. With a multipart body, the `file` part instead.
    pub audio: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// Send a voice note from an audio file.
#[utoipa::path(post, path = "/message/sendWhatsAppAudio/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendAudioIn = "application/json"), (SendAudioForm = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_audio(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendAudioIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let audio = b.audio.ok_or_else(|| ApiError::validation("give the audio as `audio` (a URL or base64) or `file`"))?;
    let mut m = MessageIn::new(b.number, MessageType::Voice);
    m.media = Some(media_in(audio, None, None));
    queue(&s, &a, m, b.options, held.is_some()).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendStickerIn {
    pub number: String,
    /// An http(s) address of a WebP image, or its bytes in base64. With a multipart body,
    /// the `file` part instead.
    pub sticker: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// Send a sticker (a WebP image).
#[utoipa::path(post, path = "/message/sendSticker/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendStickerIn = "application/json"), (SendStickerForm = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_sticker(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendStickerIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let sticker =
        b.sticker.ok_or_else(|| ApiError::validation("give the sticker as `sticker` (a URL or base64) or `file`"))?;
    let mut m = MessageIn::new(b.number, MessageType::Sticker);
    m.media = Some(media_in(sticker, Some("image/webp".into()), None));
    queue(&s, &a, m, b.options, held.is_some()).await
}

/// Body of `POST /message/sendStatus/{instanceName}` (Evolution's `StatusMessage`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoStatusIn {
    /// `text`, `image` or `video` (`audio` is refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text, or the media's URL or base64.
    pub content: String,
    pub caption: Option<String>,
    /// Accepted; statuses go to the account's contacts (as `POST /v1/instances/{id}/status`).
    pub all_contacts: Option<bool>,
    pub status_jid_list: Option<Vec<String>>,
    pub background_color: Option<String>,
    #[schema(value_type = Option<u32>)]
    pub font: Option<serde_json::Value>,
}

/// Post a status (as `POST /v1/instances/{id}/status`): queued and paced like any send.
#[utoipa::path(post, path = "/message/sendStatus/{instanceName}", tag = "evolution", operation_id = "evolution_message_sendStatus",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoStatusIn,
    responses((status = 200, description = "queued: `{key, status, messageId, serviceId}`", body = Object), super::EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_status(
    State(s): State<AppState>,
    a: super::ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionJson(b): ActionJson<EvoStatusIn>,
) -> Result<Json<serde_json::Value>, ApiError> {
    use crate::routes::status::{StatusIn, StatusType};
    let (kind, text, media) = match b.kind.as_str() {
        "text" => (StatusType::Text, Some(b.content), None),
        "image" => (StatusType::Image, None, Some(media_in(b.content, None, None))),
        "video" => (StatusType::Video, None, Some(media_in(b.content, None, None))),
        _ => return Err(ApiError::validation("type must be text, image or video (audio statuses are not offered)")),
    };
    let body = StatusIn { kind, text, media, caption: b.caption, client_message_id: None };
    let (_, Json(m)) =
        crate::routes::status::post(State(s), a.access(), held, crate::extract::ValidatedJson(body)).await?;
    // (The network id shows once sent: `GET /v1/instances/{id}/messages/{serviceId}`.)
    Ok(Json(serde_json::json!({
        "key": { "remoteJid": shared::jid::STATUS_JID, "fromMe": true, "id": m.wa_message_id },
        "status": shared::evolution::status(m.status.as_str()),
        "serviceId": m.id,
        "messageTimestamp": m.created_at.timestamp(),
    })))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendPtvIn {
    pub number: String,
    /// An http(s) address of an MP4 video, or its bytes in base64. With a multipart body,
    /// the `file` part instead.
    pub video: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

impl FileField for SendPtvIn {
    const FILE_FIELD: &'static str = "video";
}

/// A round video note: sent as an ordinary video (paceline's messages have no round
/// kind; README, "Coming from Evolution API").
#[utoipa::path(post, path = "/message/sendPtv/{instanceName}", tag = "evolution", operation_id = "evolution_message_sendPtv",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendPtvIn = "application/json"), (SendPtvForm = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_ptv(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendPtvIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let video = b.video.ok_or_else(|| ApiError::validation("give the video as `video` (a URL or base64) or `file`"))?;
    let mut m = MessageIn::new(b.number, MessageType::Video);
    m.media = Some(media_in(video, Some("video/mp4".into()), None));
    queue(&s, &a, m, b.options, held.is_some()).await
}

/// What WhatsApp does with list and button messages from a linked device: it no longer
/// shows them, so paceline does not send them.
const INTERACTIVE_REFUSED: &str =
    "list and button messages are not delivered by WhatsApp from linked devices; send a text or a poll instead";

/// List messages: refused (400) as WhatsApp no longer delivers them from linked devices.
#[utoipa::path(post, path = "/message/sendList/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content = Object, description = "Evolution's list message (refused)"),
    responses(ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_list(ActionInstance(_row): ActionInstance) -> Result<Json<SendActionOut>, ApiError> {
    Err(ApiError::validation(INTERACTIVE_REFUSED))
}

/// Button messages: refused (400) as WhatsApp no longer delivers them from linked devices.
#[utoipa::path(post, path = "/message/sendButtons/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content = Object, description = "Evolution's button message (refused)"),
    responses(ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_buttons(ActionInstance(_row): ActionInstance) -> Result<Json<SendActionOut>, ApiError> {
    Err(ApiError::validation(INTERACTIVE_REFUSED))
}

/// The multipart forms of the media routes, as the description shows them (a form is
/// read into the JSON body's type, `ActionBody`): the other fields as text parts, the
/// file's bytes in the `file` part instead of the URL or base64 field.
macro_rules! multipart_form {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize, ToSchema)]
        #[serde(rename_all = "camelCase")]
        #[allow(dead_code)]
        pub struct $name {
            /// Phone with country code (or a JID).
            pub number: String,
            /// The file's bytes (or give the URL or base64 in the text field).
            #[schema(value_type = Option<String>, format = Binary)]
            pub file: Option<Vec<u8>>,
            $($(#[$fdoc])* pub $field: Option<String>,)*
            /// Milliseconds Evolution waits before sending (0-300000); pacing decides.
            pub delay: Option<String>,
        }
    };
}

multipart_form!(
    /// `sendMedia` as `multipart/form-data`.
    SendMediaForm { caption, media, mediatype, mimetype, file_name }
);
multipart_form!(
    /// `sendWhatsAppAudio` as `multipart/form-data`.
    SendAudioForm { audio }
);
multipart_form!(
    /// `sendSticker` as `multipart/form-data`.
    SendStickerForm { sticker }
);
multipart_form!(
    /// `sendPtv` as `multipart/form-data`.
    SendPtvForm { video }
);

/// A body as JSON or, as Evolution's clients send media, `multipart/form-data`: its text
/// parts become string fields, and its `file` part, in base64, the field `file_field`
/// names (`T::FILE_FIELD`). Every refusal is 400.
pub struct ActionBody<T>(pub T);

/// The field a multipart body's `file` part fills.
pub trait FileField {
    const FILE_FIELD: &'static str;
}

impl FileField for SendMediaIn {
    const FILE_FIELD: &'static str = "media";
}

impl FileField for SendAudioIn {
    const FILE_FIELD: &'static str = "audio";
}

impl FileField for SendStickerIn {
    const FILE_FIELD: &'static str = "sticker";
}

impl<S, T> axum::extract::FromRequest<S> for ActionBody<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned + FileField,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let multipart = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("multipart/form-data"));
        if !multipart {
            return ActionJson::<T>::from_request(req, state).await.map(|ActionJson(t)| ActionBody(t));
        }
        let bad = |e: &dyn std::fmt::Display| as_400(ApiError::validation(format!("unreadable multipart body: {e}")));
        let mut form = axum::extract::Multipart::from_request(req, state).await.map_err(|e| bad(&e))?;
        let mut fields = serde_json::Map::new();
        while let Some(part) = form.next_field().await.map_err(|e| bad(&e))? {
            let Some(name) = part.name().map(str::to_string) else { continue };
            if name == "file" {
                let mime = part.content_type().map(str::to_string);
                let bytes = part.bytes().await.map_err(|e| bad(&e))?;
                let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                // A part typed as a file's type gives the type when no field does.
                if let Some(mt) = mime.filter(|m| m != "application/octet-stream") {
                    fields.entry("mimetype").or_insert(serde_json::Value::String(mt));
                }
                fields.insert(T::FILE_FIELD.into(), serde_json::Value::String(data));
            } else {
                let text = part.text().await.map_err(|e| bad(&e))?;
                fields.insert(name, serde_json::Value::String(text));
            }
        }
        serde_json::from_value(serde_json::Value::Object(fields))
            .map(ActionBody)
            .map_err(|e| as_400(ApiError::validation(format!("invalid body: {e}"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_kind_from_extension() {
        assert_eq!(media_kind("https://x/a.JPG?x=1"), MessageType::Image);
        assert_eq!(media_kind("https://x/v.mp4"), MessageType::Video);
        assert_eq!(media_kind("https://x/report.xlsx"), MessageType::Document);
        assert_eq!(media_kind("https://x/sheet.xls"), MessageType::Document);
        assert_eq!(media_kind("https://x/doc.pdf"), MessageType::Document);
        assert_eq!(newlines("a\\nb\\r\\nc"), "a\nb\nc");
    }
}
