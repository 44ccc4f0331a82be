//! Action-style send routes (interface.md 4.13): `POST /message/send*/{instanceName}` with
//! `X-API-Key`. Each builds the same message `POST {inst}/messages` takes and queues it
//! through the same path; the answer is `{serviceId, messageId}` once queued. Statuses:
//! 200, 400 (any refusal, with its code in the envelope) and 404. Fields these routes do
//! not know are ignored, as Evolution-style clients send extras (`delay`, ...).

use crate::message_in::{MediaIn, MessageIn};
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::db::instances::InstanceRow;
use shared::error::ErrorBody;
use shared::message::{ContactIn, LocationIn, MessageType, PollIn, ReactionIn};
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{as_400, ActionInstance, ActionJson};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send_text))
        .routes(routes!(send_contact))
        .routes(routes!(send_reaction))
        .routes(routes!(send_location))
        .routes(routes!(send_poll))
        .routes(routes!(send_media))
        .routes(routes!(send_audio))
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

/// Answer of every send action.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendActionOut {
    /// Our reference (the message id in UUID form; `msg_` + its 32 hex digits is the id on `/v1`).
    pub service_id: String,
    /// The message's id on the network, assigned before sending.
    pub message_id: String,
}

async fn queue(state: &AppState, row: &InstanceRow, m: MessageIn) -> Result<Json<SendActionOut>, ApiError> {
    let (msg, _) = crate::service::messages::queue(state, &row.id, m, None, false).await.map_err(as_400)?;
    let hex = &msg.id.as_str()[4..];
    let service_id = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]);
    Ok(Json(SendActionOut { service_id, message_id: msg.wa_message_id }))
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
    /// The text; literal `\n` sequences become line breaks.
    pub message: String,
    #[serde(default)]
    pub link_preview: Option<bool>,
}

/// Send a text.
#[utoipa::path(post, path = "/message/sendText/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendTextIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = [])))]
async fn send_text(
    State(s): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<SendTextIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.number, MessageType::Text);
    m.text = Some(newlines(&b.message));
    m.link_preview = b.link_preview;
    queue(&s, &row, m).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendContactIn {
    pub number: String,
    pub contact_name: String,
    pub contact_phone: String,
    pub organization: Option<String>,
    pub email: Option<String>,
    pub url: Option<String>,
}

/// Send a contact card (the contact need not be saved).
#[utoipa::path(post, path = "/message/sendContact/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendContactIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = [])))]
async fn send_contact(
    State(s): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<SendContactIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.number, MessageType::Contact);
    m.contact = Some(ContactIn {
        name: b.contact_name,
        phone: b.contact_phone,
        organization: b.organization,
        email: b.email,
        url: b.url,
    });
    queue(&s, &row, m).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendReactionIn {
    pub phone: String,
    /// An emoji; empty removes the reaction.
    pub reaction: String,
    /// The message reacted to: its network id, or `msg_...`.
    pub message_id: String,
}

/// React to a message.
#[utoipa::path(post, path = "/message/sendReaction/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendReactionIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = [])))]
async fn send_reaction(
    State(s): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<SendReactionIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.phone, MessageType::Reaction);
    m.reaction = Some(ReactionIn { message_id: b.message_id, emoji: b.reaction });
    queue(&s, &row, m).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendLocationIn {
    pub number: String,
    pub title: Option<String>,
    pub address: Option<String>,
    pub latitude: f64,
    pub longitude: f64,
}

/// Send a location.
#[utoipa::path(post, path = "/message/sendLocation/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendLocationIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = [])))]
async fn send_location(
    State(s): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<SendLocationIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.number, MessageType::Location);
    m.location = Some(LocationIn { latitude: b.latitude, longitude: b.longitude, name: b.title, address: b.address });
    queue(&s, &row, m).await
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
}

fn one() -> u32 {
    1
}

/// Send a poll.
#[utoipa::path(post, path = "/message/sendPoll/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendPollIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = [])))]
async fn send_poll(
    State(s): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<SendPollIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.number, MessageType::Poll);
    m.poll = Some(PollIn { name: b.name, values: b.values, selectable_count: b.selectable_count });
    queue(&s, &row, m).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendMediaIn {
    pub number: String,
    pub caption: Option<String>,
    /// http(s) address of the file.
    pub media: String,
    /// `image`, `video` or `document`; when absent, chosen from the file's extension
    /// (images and videos by theirs; PDF, spreadsheets and anything else as a document).
    pub mediatype: Option<String>,
    pub mimetype: Option<String>,
    pub file_name: Option<String>,
}

/// Send an image, a video or a document (PDF, .xlsx, .xls, ...) from a URL.
#[utoipa::path(post, path = "/message/sendMedia/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendMediaIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = [])))]
async fn send_media(
    State(s): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<SendMediaIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let kind = match b.mediatype.as_deref() {
        Some("image") => MessageType::Image,
        Some("video") => MessageType::Video,
        Some("document") => MessageType::Document,
        Some(_) => return Err(ApiError::validation("mediatype must be image, video or document")),
        None => media_kind(b.file_name.as_deref().unwrap_or(&b.media)),
    };
    let mut m = MessageIn::new(b.number, kind);
    m.caption = b.caption.filter(|c| !c.is_empty());
    m.media = Some(MediaIn { url: Some(b.media), data: None, mime_type: b.mimetype, filename: b.file_name });
    queue(&s, &row, m).await
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
    /// http(s) address of an audio file (MP3, OGG, M4A, ...; up to 64 MB); sent as a voice note.
    pub audio: String,
}

/// Send a voice note from an audio file's URL.
#[utoipa::path(post, path = "/message/sendWhatsAppAudio/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendAudioIn,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = [])))]
async fn send_audio(
    State(s): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<SendAudioIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let mut m = MessageIn::new(b.number, MessageType::Voice);
    m.media = Some(MediaIn { url: Some(b.audio), data: None, mime_type: None, filename: None });
    queue(&s, &row, m).await
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
