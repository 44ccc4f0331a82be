//! Evolution v2's chat routes about chats' state, contacts, the account's profile and
//! privacy (docs/evolution.md): each calls the core's operation (`domain::chats`,
//! `domain::contacts`, `domain::profile`, as `/v1` does) and answers in Evolution's shapes
//! (`src/api/controllers/chat.controller.ts`).
//! Deleting and editing a sent message are `domain::messages` (`/v1`'s
//! `POST {inst}/messages/{msg_id}/revoke` and `PATCH {inst}/messages/{msg_id}`).

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use shared::jid::Jid;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ActionAccess, ActionJson, EvolutionErrors};
use domain::{chats, contacts, profile};
use door::AppState;
use shared::db::log::ChatChange;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(mark_message_as_read))
        .routes(routes!(mark_chat_unread))
        .routes(routes!(archive_chat))
        .routes(routes!(send_presence))
        .routes(routes!(fetch_profile_picture_url))
        .routes(routes!(fetch_profile))
        .routes(routes!(fetch_business_profile))
        .routes(routes!(update_profile_name))
        .routes(routes!(update_profile_status))
        .routes(routes!(update_profile_picture))
        .routes(routes!(remove_profile_picture))
        .routes(routes!(fetch_privacy_settings))
        .routes(routes!(update_privacy_settings))
        .routes(routes!(update_block_status))
        .routes(routes!(delete_message_for_everyone))
        .routes(routes!(update_message))
}

fn jid(s: &str) -> Result<Jid, ApiError> {
    Jid::parse(s).map_err(|_| ApiError::validation("the number must be a phone number with country code or a JID"))
}

fn success() -> Json<Value> {
    Json(json!({ "update": "success" }))
}

/// A message key as Evolution sends it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoReadKey {
    /// The chat: a phone number or JID.
    #[schema(value_type = Jid)]
    pub remote_jid: String,
    pub from_me: Option<bool>,
    pub id: Option<String>,
}

/// Body of `markMessageAsRead`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoReadIn {
    /// 1 to 100 messages; their chats are read.
    #[schema(min_items = 1, max_items = 100)]
    pub read_messages: Vec<EvoReadKey>,
}

/// Mark messages read: their chats are read up to the newest (as `POST
/// /v1/instances/{id}/chats/{jid}/read`).
#[utoipa::path(post, path = "/chat/markMessageAsRead/{instanceName}", tag = "evolution", operation_id = "evolution_chat_markMessageAsRead",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoReadIn,
    responses((status = 200, description = "`{message, read: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn mark_message_as_read(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoReadIn>,
) -> Result<Json<Value>, ApiError> {
    if b.read_messages.is_empty() || b.read_messages.len() > 100 {
        return Err(ApiError::validation("readMessages must hold 1-100 messages"));
    }
    let mut chats: Vec<Jid> = b.read_messages.iter().map(|k| jid(&k.remote_jid)).collect::<Result<_, _>>()?;
    chats.sort();
    chats.dedup();
    for c in chats {
        chats::apply(a.ctx(&state), c, ChatChange { read: Some(true), ..Default::default() }).await?;
    }
    Ok(Json(json!({ "message": "Read messages", "read": "success" })))
}

/// Body of `markChatUnread` and `archiveChat`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoChatIn {
    /// The chat: a phone number or JID (or `lastMessage.key.remoteJid`).
    #[schema(value_type = Option<Jid>)]
    pub chat: Option<String>,
    /// The chat's last message, Evolution's record: its `key.remoteJid` names the chat
    /// when `chat` does not; its other fields are ignored.
    pub last_message: Option<EvoLastMessage>,
    /// `archiveChat`: archive (true) or unarchive.
    pub archive: Option<bool>,
}

/// The `lastMessage` of `markChatUnread` and `archiveChat`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoLastMessage {
    pub key: Option<EvoLastKey>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoLastKey {
    /// The chat: a phone number or JID.
    #[schema(value_type = Option<Jid>)]
    pub remote_jid: Option<String>,
}

super::described!(
    /// Body of `markChatUnread` and `archiveChat`: `chat`, or `lastMessage.key.remoteJid`.
    EvoChatBody refs = [EvoChatIn],
    json!({ "allOf": [super::schema_ref::<EvoChatIn>(), { "anyOf": [
        { "type": "object", "required": ["chat"], "properties": { "chat": { "type": "string" } } },
        { "type": "object", "required": ["lastMessage"], "properties": { "lastMessage": {
            "type": "object", "required": ["key"], "properties": { "key": {
                "type": "object", "required": ["remoteJid"], "properties": { "remoteJid": { "type": "string" } } } } } } },
    ] }] })
);

impl EvoChatIn {
    fn chat(&self) -> Result<Jid, ApiError> {
        let from_last = self.last_message.as_ref().and_then(|m| m.key.as_ref()).and_then(|k| k.remote_jid.as_deref());
        // A chat given both ways: the last message's is checked too.
        let from_last = from_last.map(jid).transpose()?;
        match (self.chat.as_deref(), from_last) {
            (Some(c), _) => jid(c),
            (None, Some(j)) => Ok(j),
            (None, None) => Err(ApiError::validation("chat is required (or lastMessage.key.remoteJid)")),
        }
    }
}

async fn patch_chat(state: AppState, a: &ActionAccess, j: Jid, change: ChatChange) -> Result<(), ApiError> {
    Ok(chats::apply(a.ctx(&state), j, change).await?)
}

/// Mark a chat unread (as `PATCH /v1/instances/{id}/chats/{jid}` with `read: false`).
#[utoipa::path(post, path = "/chat/markChatUnread/{instanceName}", tag = "evolution", operation_id = "evolution_chat_markChatUnread",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoChatBody,
    responses((status = 200, description = "`{chatId, markedChatUnread: true}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn mark_chat_unread(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoChatIn>,
) -> Result<Json<Value>, ApiError> {
    let j = b.chat()?;
    let chat = String::from(j.clone());
    patch_chat(state, &a, j, ChatChange { read: Some(false), ..Default::default() }).await?;
    Ok(Json(json!({ "chatId": chat, "markedChatUnread": true })))
}

/// Archive or unarchive a chat (as `PATCH /v1/instances/{id}/chats/{jid}`).
#[utoipa::path(post, path = "/chat/archiveChat/{instanceName}", tag = "evolution", operation_id = "evolution_chat_archiveChat",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoChatBody,
    responses((status = 200, description = "`{chatId, archived}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn archive_chat(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoChatIn>,
) -> Result<Json<Value>, ApiError> {
    let j = b.chat()?;
    let chat = String::from(j.clone());
    let archived = b.archive.unwrap_or(true);
    patch_chat(state, &a, j, ChatChange { archived: Some(archived), ..Default::default() }).await?;
    Ok(Json(json!({ "chatId": chat, "archived": archived })))
}

/// Body of `sendPresence`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoChatPresenceIn {
    /// The chat: a phone number or JID.
    #[schema(value_type = Jid)]
    pub number: String,
    /// `composing` (typing) or `paused` (stopped); `recording` shows as typing, and
    /// `available` and `unavailable` as stopped.
    #[schema(value_type = EvoChatPresence)]
    pub presence: String,
    /// Milliseconds to show it, 0-300000 (accepted; the indicator stays until `paused` or
    /// a message).
    #[schema(value_type = super::Delay, required = false)]
    pub delay: Option<Value>,
}

super::described!(
    /// What `sendPresence` shows in a chat.
    EvoChatPresence,
    json!({ "type": "string", "enum": ["composing", "recording", "paused", "available", "unavailable"] })
);

/// Show or clear the typing indicator in a chat.
#[utoipa::path(post, path = "/chat/sendPresence/{instanceName}", tag = "evolution", operation_id = "evolution_chat_sendPresence",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoChatPresenceIn,
    responses((status = 200, description = "`{presence}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_presence(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoChatPresenceIn>,
) -> Result<Json<Value>, ApiError> {
    let composing = match b.presence.as_str() {
        "composing" | "recording" => true,
        "paused" | "available" | "unavailable" => false,
        _ => return Err(ApiError::validation("presence must be composing, recording or paused")),
    };
    super::check_delay(b.delay.as_ref())?;
    domain::chats::typing(a.ctx(&state), jid(&b.number)?, composing).await?;
    Ok(Json(json!({ "presence": b.presence })))
}

/// Body of the routes that name one contact.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoNumberIn {
    /// A person: a phone number with country code, or a JID.
    #[schema(value_type = super::EvoPerson)]
    pub number: String,
}

/// A contact's profile picture URL (as `GET /v1/instances/{id}/contacts/{jid}/picture`).
#[utoipa::path(post, path = "/chat/fetchProfilePictureUrl/{instanceName}", tag = "evolution", operation_id = "evolution_chat_fetchProfilePictureUrl",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoNumberIn,
    responses((status = 200, description = "`{wuid, profilePictureUrl}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn fetch_profile_picture_url(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoNumberIn>,
) -> Result<Json<Value>, ApiError> {
    let p = contacts::picture(a.ctx(&state), jid(&b.number)?).await?;
    Ok(Json(json!({ "wuid": p.jid, "profilePictureUrl": p.url })))
}

/// A contact's profile: about text, picture, business profile.
#[utoipa::path(post, path = "/chat/fetchProfile/{instanceName}", tag = "evolution", operation_id = "evolution_chat_fetchProfile",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoNumberIn,
    responses((status = 200, description = "`{wuid, numberExists, picture, status, isBusiness, ...}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn fetch_profile(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoNumberIn>,
) -> Result<Json<Value>, ApiError> {
    let j = jid(&b.number)?;
    let p = contacts::profile(a.ctx(&state), j.clone()).await?;
    let pic = contacts::picture(a.ctx(&state), j).await?;
    let business = p.business_profile;
    Ok(Json(json!({
        "wuid": p.jid,
        "numberExists": true,
        "picture": pic.url,
        "status": { "status": p.about },
        "isBusiness": business.is_some(),
        "email": business.as_ref().map(|b| b.email.clone()),
        "description": business.as_ref().map(|b| b.description.clone()),
        "website": business.as_ref().map(|b| b.website.clone()),
    })))
}

/// A contact's business profile.
#[utoipa::path(post, path = "/chat/fetchBusinessProfile/{instanceName}", tag = "evolution", operation_id = "evolution_chat_fetchBusinessProfile",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoNumberIn,
    responses((status = 200, description = "`{isBusiness, email, description, website, address, category}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn fetch_business_profile(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoNumberIn>,
) -> Result<Json<Value>, ApiError> {
    let p = contacts::profile(a.ctx(&state), jid(&b.number)?).await?;
    let bp = p.business_profile;
    let b = bp.as_ref();
    Ok(Json(json!({
        "wuid": p.jid,
        "isBusiness": bp.is_some(),
        "email": b.and_then(|b| b.email.clone()),
        "description": b.and_then(|b| b.description.clone()),
        "website": b.and_then(|b| b.website.clone()),
        "address": b.and_then(|b| b.address.clone()),
        "category": b.and_then(|b| b.category.clone()),
    })))
}

/// Body of `updateProfileName`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoNameIn {
    /// The account's display name, 1-25 characters.
    #[schema(min_length = 1, max_length = 25, pattern = r"\S")]
    pub name: String,
}

/// The account's display name (as `PATCH /v1/instances/{id}/profile`).
#[utoipa::path(post, path = "/chat/updateProfileName/{instanceName}", tag = "evolution", operation_id = "evolution_chat_updateProfileName",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoNameIn,
    responses((status = 200, description = "`{update: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_profile_name(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoNameIn>,
) -> Result<Json<Value>, ApiError> {
    let _profile = profile::change(a.ctx(&state), Some(b.name), None).await?;
    Ok(success())
}

/// Body of `updateProfileStatus`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoStatusTextIn {
    /// The about text, up to 139 characters; empty clears it.
    #[schema(max_length = 139)]
    pub status: String,
}

/// The account's about text (as `PATCH /v1/instances/{id}/profile`).
#[utoipa::path(post, path = "/chat/updateProfileStatus/{instanceName}", tag = "evolution", operation_id = "evolution_chat_updateProfileStatus",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoStatusTextIn,
    responses((status = 200, description = "`{update: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_profile_status(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoStatusTextIn>,
) -> Result<Json<Value>, ApiError> {
    let _profile = profile::change(a.ctx(&state), None, Some(b.status)).await?;
    Ok(success())
}

/// Body of `updateProfilePicture`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoPictureIn {
    /// An http(s) URL of a JPEG image (of at most 5 MiB), never a private, loopback or
    /// link-local address.
    #[schema(value_type = super::EvoHttpUrl)]
    pub picture: String,
}

/// The account's picture, from a URL (as `PUT /v1/instances/{id}/profile/picture`).
#[utoipa::path(post, path = "/chat/updateProfilePicture/{instanceName}", tag = "evolution", operation_id = "evolution_chat_updateProfilePicture",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoPictureIn,
    responses((status = 200, description = "`{update: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_profile_picture(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoPictureIn>,
) -> Result<Json<Value>, ApiError> {
    let media = domain::message_in::MediaIn { url: Some(b.picture), data: None, mime_type: None, filename: None };
    domain::pictures::set(&state, &a.row.id, media, false, None).await?;
    Ok(success())
}

/// Remove the account's picture.
#[utoipa::path(delete, path = "/chat/removeProfilePicture/{instanceName}", tag = "evolution", operation_id = "evolution_chat_removeProfilePicture",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "`{update: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn remove_profile_picture(State(state): State<AppState>, a: ActionAccess) -> Result<Json<Value>, ApiError> {
    let _profile = profile::delete_picture(a.ctx(&state)).await?;
    Ok(success())
}

/// The account's privacy settings (Baileys' names, as `GET /v1/instances/{id}/privacy`).
#[utoipa::path(get, path = "/chat/fetchPrivacySettings/{instanceName}", tag = "evolution", operation_id = "evolution_chat_fetchPrivacySettings",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "`{readreceipts, profile, status, online, last, groupadd, ...}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn fetch_privacy_settings(State(state): State<AppState>, a: ActionAccess) -> Result<Json<Value>, ApiError> {
    let p = profile::privacy(a.ctx(&state)).await?;
    Ok(Json(json!(p.0)))
}

/// Change privacy settings (the same names and values as `PATCH /v1/instances/{id}/privacy`).
#[utoipa::path(post, path = "/chat/updatePrivacySettings/{instanceName}", tag = "evolution", operation_id = "evolution_chat_updatePrivacySettings",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = profile::PrivacyPatch,
    responses((status = 200, description = "`{update: \"success\", data}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_privacy_settings(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<profile::PrivacyPatch>,
) -> Result<Json<Value>, ApiError> {
    let p = profile::set_privacy(a.ctx(&state), b).await?;
    Ok(Json(json!({ "update": "success", "data": p.0 })))
}

/// Body of `updateBlockStatus`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoBlockIn {
    /// A person: a phone number with country code, or a JID.
    #[schema(value_type = super::EvoPerson)]
    pub number: String,
    /// `block` or `unblock`.
    #[schema(value_type = EvoBlockStatus)]
    pub status: String,
}

super::described!(
    /// `updateBlockStatus`'s `status`.
    EvoBlockStatus,
    json!({ "type": "string", "enum": ["block", "unblock"] })
);

/// Block or unblock a contact (as `POST /v1/instances/{id}/contacts/{jid}/block|unblock`).
#[utoipa::path(post, path = "/message/updateBlockStatus/{instanceName}", tag = "evolution", operation_id = "evolution_message_updateBlockStatus",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoBlockIn,
    responses((status = 200, description = "`{block: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_block_status(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoBlockIn>,
) -> Result<Json<Value>, ApiError> {
    let j = jid(&b.number)?;
    let blocked = match b.status.as_str() {
        "block" => true,
        "unblock" => false,
        _ => return Err(ApiError::validation("status must be block or unblock")),
    };
    let _blocked = contacts::block(a.ctx(&state), j, blocked).await?;
    Ok(Json(json!({ "block": "success" })))
}

/// Evolution's key of one of the account's own messages.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoOwnKey {
    /// The network id.
    #[schema(min_length = 1, max_length = 128)]
    pub id: String,
    /// The chat: a phone number or JID.
    #[schema(value_type = Jid)]
    pub remote_jid: String,
    /// Only the account's own messages: true (or left out).
    #[schema(schema_with = from_me_schema)]
    pub from_me: Option<bool>,
    pub participant: Option<String>,
}

fn from_me_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(json!({
        "oneOf": [{ "type": "null" }, { "type": "boolean", "const": true }],
        "description": "Only the account's own messages: true (or left out)."
    }))
}

impl EvoOwnKey {
    fn checked(self) -> Result<(Jid, String), ApiError> {
        if self.from_me == Some(false) {
            return Err(ApiError::validation("only the account's own messages (fromMe true)"));
        }
        Ok((jid(&self.remote_jid)?, self.id))
    }
}

/// Delete one of the account's own messages for everyone in the chat.
#[utoipa::path(delete, path = "/chat/deleteMessageForEveryone/{instanceName}", tag = "evolution", operation_id = "evolution_chat_deleteMessageForEveryone",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoOwnKey,
    responses((status = 200, description = "`{key, revoked: true}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn delete_message_for_everyone(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoOwnKey>,
) -> Result<Json<Value>, ApiError> {
    let (jid, wa_message_id) = b.checked()?;
    let key = evolution_shape::key(jid.as_str(), true, &wa_message_id, None);
    domain::messages::revoke(a.ctx(&state), jid, &wa_message_id).await?;
    Ok(Json(json!({ "key": key, "revoked": true })))
}

/// Body of `updateMessage`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoEditIn {
    /// The chat (a phone number or JID); `key.remoteJid` when absent.
    #[schema(value_type = Option<Jid>)]
    pub number: Option<String>,
    pub key: EvoOwnKey,
    /// The new text (1-4096 characters, not all white space).
    #[schema(min_length = 1, max_length = 4096, pattern = r"[^\s\u0085]")]
    pub text: String,
}

/// Replace the text of one of the account's own text messages.
#[utoipa::path(post, path = "/chat/updateMessage/{instanceName}", tag = "evolution", operation_id = "evolution_chat_updateMessage",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoEditIn,
    responses((status = 200, description = "`{key, edited: true}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_message(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoEditIn>,
) -> Result<Json<Value>, ApiError> {
    let number = b.number.as_deref().map(jid).transpose()?;
    let (key_jid, wa_message_id) = b.key.checked()?;
    let jid = number.unwrap_or(key_jid);
    let key = evolution_shape::key(jid.as_str(), true, &wa_message_id, None);
    domain::messages::edit(a.ctx(&state), jid, &wa_message_id, &b.text).await?;
    Ok(Json(json!({ "key": key, "edited": true })))
}
