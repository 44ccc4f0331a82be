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
use serde_json::{json, Value};
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
    /// Milliseconds Evolution waits before sending (0-300000), a number or a string of
    /// digits. Accepted; paceline's pacing decides when the message goes.
    #[schema(value_type = super::Delay, required = false)]
    pub delay: Option<serde_json::Value>,
    /// The message to quote: its `key.id` (the network id, or `msg_...`).
    pub quoted: Option<QuotedIn>,
    /// People the text mentions: phone numbers with country code, or JIDs of persons (up
    /// to 256).
    #[schema(max_items = 256, value_type = Option<Vec<super::EvoPerson>>)]
    pub mentioned: Option<Vec<String>>,
    /// In a group (`number` a group's JID): mention every member.
    pub mentions_every_one: Option<bool>,
}

/// The rule of [`SendOptions`] that names the body's `number`: `mentionsEveryOne` needs a
/// group's JID.
fn everyone_rule() -> Value {
    json!({ "anyOf": [
        { "type": "object", "properties": { "mentionsEveryOne": { "enum": [false, null] } } },
        { "type": "object", "properties": { "number": super::schema_ref::<crate::schemas::GroupJid>() } },
    ] })
}

/// Evolution's quoted message.
#[derive(Debug, Deserialize, ToSchema)]
pub struct QuotedIn {
    pub key: QuotedKey,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct QuotedKey {
    /// The quoted message's network id (or `msg_...`), up to 128 bytes.
    #[schema(max_length = 128)]
    pub id: String,
}

impl SendOptions {
    /// Sets the quote and mentions on `m` (every member of the group, with
    /// `mentionsEveryOne`), after checking `delay`.
    async fn apply(self, state: &AppState, row: &InstanceRow, m: &mut MessageIn) -> Result<(), ApiError> {
        super::check_delay(self.delay.as_ref())?;
        m.reply_to = self.quoted.map(|q| q.key.id);
        let mut mentions = self.mentioned.unwrap_or_default();
        if self.mentions_every_one == Some(true) {
            let jid = crate::message_in::normalize_jid(&m.to)?;
            if shared::jid::server_of(&jid) != shared::jid::GROUP_SERVER {
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
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// The text (up to 65,536 bytes); literal `\n` sequences become line breaks. One of
    /// `message` and `text`.
    #[schema(min_length = 1, max_length = 65_536)]
    pub message: Option<String>,
    /// Evolution's name for `message`.
    #[schema(min_length = 1, max_length = 65_536)]
    pub text: Option<String>,
    #[serde(default)]
    pub link_preview: Option<bool>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// `schema` required, and not null, in an object.
fn given(name: &str, schema: Value) -> Value {
    json!({ "type": "object", "required": [name], "properties": { name: schema } })
}

super::described!(
    /// Body of `sendText`: the text as exactly one of `message` and `text`.
    SendTextBody refs = [SendTextIn],
    json!({ "allOf": [
        super::schema_ref::<SendTextIn>(),
        { "oneOf": [given("message", json!({ "type": "string" })), given("text", json!({ "type": "string" }))] },
        everyone_rule(),
    ] })
);

/// Send a text.
#[utoipa::path(post, path = "/message/sendText/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendTextBody,
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
    /// Phone with country code (or a JID).
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// The seed's fields: one card from `contactName` and `contactPhone` (up to 1,024
    /// bytes, not blank).
    #[schema(min_length = 1, max_length = 1024, pattern = r"[^\s\u0085]")]
    pub contact_name: Option<String>,
    /// The card's phone number with country code.
    #[schema(value_type = Option<super::EvoRecipient>)]
    pub contact_phone: Option<String>,
    /// Up to 1,024 bytes (with `contactName`).
    #[schema(max_length = 1024)]
    pub organization: Option<String>,
    /// Up to 1,024 bytes (with `contactName`).
    #[schema(max_length = 1024)]
    pub email: Option<String>,
    /// Up to 1,024 bytes (with `contactName`).
    #[schema(max_length = 1024)]
    pub url: Option<String>,
    /// Evolution's: the card (one per message).
    #[schema(min_items = 1, max_items = 1, value_type = Option<Vec<EvolutionContactCard>>)]
    pub contact: Option<Vec<EvolutionContact>>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// One contact card as Evolution takes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvolutionContact {
    /// Up to 1,024 bytes, not blank.
    #[schema(min_length = 1, max_length = 1024, pattern = r"[^\s\u0085]")]
    pub full_name: String,
    /// The contact's WhatsApp number (digits); `phoneNumber` when absent.
    #[schema(value_type = Option<super::EvoRecipient>)]
    pub wuid: Option<String>,
    /// The card's phone number with country code.
    #[schema(value_type = Option<super::EvoRecipient>)]
    pub phone_number: Option<String>,
    /// Up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub organization: Option<String>,
    /// Up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub email: Option<String>,
    /// Up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub url: Option<String>,
}

super::described!(
    /// One contact card as Evolution takes it: with `phoneNumber`, `wuid`, or both.
    EvolutionContactCard refs = [EvolutionContact],
    json!({ "allOf": [
        super::schema_ref::<EvolutionContact>(),
        { "anyOf": [given("phoneNumber", json!({ "type": "string" })), given("wuid", json!({ "type": "string" }))] },
    ] })
);

super::described!(
    /// Body of `sendContact`: `contactName` and `contactPhone`, or Evolution's `contact`.
    SendContactBody refs = [SendContactIn],
    json!({ "allOf": [
        super::schema_ref::<SendContactIn>(),
        { "oneOf": [
            { "type": "object", "required": ["contactName", "contactPhone"], "properties": {
                "contactName": { "type": "string" }, "contactPhone": { "type": "string" }, "contact": { "type": "null" } } },
            { "type": "object", "required": ["contact"], "properties": {
                "contact": { "type": "array" }, "contactName": { "type": "null" }, "contactPhone": { "type": "null" } } },
        ] },
        everyone_rule(),
    ] })
);

/// The longest text field of a contact card, in bytes (`POST {inst}/messages`' limit).
const CARD_FIELD_LIMIT: usize = 1024;

/// Send a contact card (the contact need not be saved).
#[utoipa::path(post, path = "/message/sendContact/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendContactBody,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_contact(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendContactIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    // The card's fields given at the top are checked whichever form the card takes.
    for (field, v) in [("organization", &b.organization), ("email", &b.email), ("url", &b.url)] {
        if v.as_ref().is_some_and(|v| v.len() > CARD_FIELD_LIMIT) {
            return Err(ApiError::validation(format!("{field} must be at most {CARD_FIELD_LIMIT} bytes")));
        }
    }
    let card = match (b.contact_name, b.contact_phone, b.contact) {
        (Some(name), Some(phone), None) => {
            ContactIn { name, phone, organization: b.organization, email: b.email, url: b.url }
        }
        (None, None, Some(mut list)) if list.len() == 1 => {
            let c = list.remove(0);
            // `wuid` is checked also when `phoneNumber` is the one used.
            if let Some(w) = &c.wuid {
                crate::message_in::normalize_jid(w)
                    .map_err(|_| ApiError::validation("contact.wuid must be a phone number with country code"))?;
            }
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
    #[schema(value_type = Option<super::EvoRecipient>)]
    pub phone: Option<String>,
    /// An emoji (at most 16 characters); empty removes the reaction.
    #[schema(max_length = 16)]
    pub reaction: String,
    /// The message reacted to: its network id, or `msg_...` (1-128 bytes).
    #[schema(min_length = 1, max_length = 128)]
    pub message_id: Option<String>,
    /// Evolution's: the message reacted to (`remoteJid` is the chat).
    pub key: Option<ReactionKey>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReactionKey {
    /// The chat: a phone number or JID.
    #[schema(value_type = super::EvoRecipient)]
    pub remote_jid: String,
    /// The message's network id, or `msg_...` (1-128 bytes).
    #[schema(min_length = 1, max_length = 128)]
    pub id: String,
    pub from_me: Option<bool>,
}

super::described!(
    /// Body of `sendReaction`: `phone` and `messageId`, or Evolution's `key`.
    SendReactionBody refs = [SendReactionIn],
    json!({ "allOf": [
        super::schema_ref::<SendReactionIn>(),
        { "oneOf": [
            { "type": "object", "required": ["phone", "messageId"], "properties": {
                "phone": { "type": "string" }, "messageId": { "type": "string" }, "key": { "type": "null" } } },
            { "type": "object", "required": ["key"], "properties": {
                "key": { "type": "object" }, "phone": { "type": "null" }, "messageId": { "type": "null" } } },
        ] },
    ] })
);

/// React to a message.
#[utoipa::path(post, path = "/message/sendReaction/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendReactionBody,
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
    /// Phone with country code (or a JID).
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// The place's name, up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub title: Option<String>,
    /// Evolution's name for `title` (taken when `title` is not given).
    #[schema(max_length = 1024)]
    pub name: Option<String>,
    /// Up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub address: Option<String>,
    #[schema(minimum = -90, maximum = 90)]
    pub latitude: f64,
    #[schema(minimum = -180, maximum = 180)]
    pub longitude: f64,
    #[serde(flatten)]
    pub options: SendOptions,
}

super::described!(
    /// Body of `sendLocation`.
    SendLocationBody refs = [SendLocationIn],
    json!({ "allOf": [super::schema_ref::<SendLocationIn>(), everyone_rule()] })
);

/// Send a location.
#[utoipa::path(post, path = "/message/sendLocation/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendLocationBody,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_location(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendLocationIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    // `name` is checked also when `title` is the one used.
    if b.name.as_ref().is_some_and(|n| n.len() > CARD_FIELD_LIMIT) {
        return Err(ApiError::validation(format!("name must be at most {CARD_FIELD_LIMIT} bytes")));
    }
    let mut m = MessageIn::new(b.number, MessageType::Location);
    let name = b.title.or(b.name);
    m.location = Some(LocationIn { latitude: b.latitude, longitude: b.longitude, name, address: b.address });
    queue(&s, &a, m, b.options, false).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendPollIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// The poll's question: up to 256 bytes, not blank.
    #[schema(min_length = 1, max_length = 256, pattern = r"[^\s\u0085]")]
    pub name: String,
    /// How many options one may choose, 1-12 (default 1); more than there are options
    /// allows all of them.
    #[serde(default = "one")]
    #[schema(minimum = 1, maximum = 12)]
    pub selectable_count: u32,
    /// 2 to 12 distinct options, each up to 100 bytes and not blank.
    #[schema(schema_with = poll_values_schema)]
    pub values: Vec<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

fn poll_values_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(json!({
        "type": "array", "minItems": 2, "maxItems": 12, "uniqueItems": true,
        "items": { "type": "string", "minLength": 1, "maxLength": 100, "pattern": super::NOT_BLANK },
        "description": "2 to 12 distinct options, each up to 100 bytes and not blank.",
    }))
}

super::described!(
    /// Body of `sendPoll`.
    SendPollBody refs = [SendPollIn],
    json!({ "allOf": [super::schema_ref::<SendPollIn>(), everyone_rule()] })
);

/// The most options a poll has.
const POLL_OPTIONS_MAX: u32 = 12;

fn one() -> u32 {
    1
}

/// Send a poll.
#[utoipa::path(post, path = "/message/sendPoll/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendPollBody,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_poll(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendPollIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    if !(1..=POLL_OPTIONS_MAX).contains(&b.selectable_count) {
        return Err(ApiError::validation(format!("selectableCount must be 1-{POLL_OPTIONS_MAX}")));
    }
    // More choices than options allows choosing all of them.
    let options = u32::try_from(b.values.len()).unwrap_or(u32::MAX);
    let selectable_count = if options >= 2 { b.selectable_count.min(options) } else { b.selectable_count };
    let mut m = MessageIn::new(b.number, MessageType::Poll);
    m.poll = Some(PollIn { name: b.name, values: b.values, selectable_count });
    queue(&s, &a, m, b.options, false).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendMediaIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// Up to 1,024 characters (not sent with audio).
    #[schema(max_length = 1024)]
    pub caption: Option<String>,
    /// An http(s) address of the file, or its bytes in base64 (a `data:` URL or bare, with
    /// `mimetype`). With a multipart body, the `file` part instead.
    #[schema(required = true, schema_with = any_media_schema)]
    pub media: Option<String>,
    /// `image`, `video`, `document` or `audio`; when absent, chosen from the file's name
    /// (images and videos by theirs, when `mimetype` agrees; PDF, spreadsheets and
    /// anything else as a document).
    #[schema(schema_with = mediatype_schema)]
    pub mediatype: Option<String>,
    /// The file's MIME type (`type/subtype`, up to 127 bytes), of the family `mediatype`
    /// names; required with bare base64.
    #[schema(max_length = 127)]
    pub mimetype: Option<String>,
    /// A plain file name: 1-255 bytes, no `/` or backslash.
    #[schema(min_length = 1, max_length = 255, pattern = r"^[^/\\]+$")]
    pub file_name: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// A media field's forms: an http(s) URL (fetched: a public address), a `data:` URL with
/// base64 (of a MIME type of `family`, any when empty), or bare base64 (when `bare`).
fn media_forms(family: &str, bare: bool, description: &str) -> Value {
    let mime = if family.is_empty() { "[^,/;]{1,63}/[^,]{0,63}".to_string() } else { format!("{family}/[^,]{{0,63}}") };
    let mut forms = vec![
        json!({ "type": "string", "pattern": super::HTTP_URL_PATTERN }),
        json!({ "type": "string", "pattern": format!("^data:{mime};base64,{}$", super::BASE64_BODY) }),
    ];
    if bare {
        forms.push(json!({ "type": "string", "pattern": format!("^{}$", super::BASE64_BODY) }));
    }
    json!({ "oneOf": forms, "description": description })
}

fn any_media_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(media_forms(
        "",
        true,
        "An http(s) address of the file, or its bytes in base64 (a `data:` URL, or bare with `mimetype`). With a multipart body, the `file` part instead.",
    ))
}

const MEDIA_TYPES: [&str; 4] = ["image", "video", "document", "audio"];

fn mediatype_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(super::string_enum(
        &MEDIA_TYPES,
        "`image`, `video`, `document` or `audio`; when absent, chosen from the file's name (images and videos by theirs, when `mimetype` agrees; anything else as a document).",
    ))
}

fn mediatype_form_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(
        json!({ "type": "string", "enum": MEDIA_TYPES, "description": "`image`, `video`, `document` or `audio` (see the JSON body)." }),
    )
}

/// The rule of a media body whose bytes come as `field` (or, in a form, a `file` part,
/// which wins over `field` and comes with `mimetype`): its MIME type (`mimetype`, or else
/// a `data:` URL's) is of the family its kind needs, and bare base64 comes with
/// `mimetype`. `kinds` are the `mediatype` values (none: the body has no `mediatype`;
/// `null` among them: it may be left out) with the family each needs (empty: any). The
/// alternatives are whole, so a generator picks one and fills it in.
fn mime_rule(field: &str, kinds: &[(&[Value], &str)], form: bool) -> Value {
    let mut alternatives = Vec::new();
    for (mediatypes, family) in kinds {
        let (mime, url) = if family.is_empty() {
            ("/".to_string(), "^(https?://|data:)".to_string())
        } else {
            (format!("^{family}/"), format!("^(https?://|data:{family}/)"))
        };
        let typed = json!({ "type": "object", "required": ["mimetype"], "properties": {
            "mimetype": { "type": "string", "pattern": mime } } });
        let untyped = json!({ "type": "object", "required": [field], "properties": {
            "mimetype": { "type": "null" }, field: { "type": "string", "pattern": url } } });
        for mut alternative in [typed, untyped] {
            if !mediatypes.is_empty() {
                alternative["properties"]["mediatype"] = json!({ "enum": mediatypes });
                if !mediatypes.contains(&Value::Null) {
                    alternative["required"].as_array_mut().expect("required").push(json!("mediatype"));
                }
            }
            alternatives.push(alternative);
        }
    }
    let rule = json!({ "anyOf": alternatives });
    if form {
        // A file part comes with `mimetype` (a form has no null: the untyped case has none).
        return json!({ "allOf": [rule, { "dependentRequired": { "file": ["mimetype"] } }] });
    }
    rule
}

/// `sendMedia`'s rule: the MIME type fits `mediatype` (any for a document, or when the
/// kind is chosen from the file's name).
fn media_rules(form: bool) -> Value {
    mime_rule(
        "media",
        &[
            (&[json!("image")], "image"),
            (&[json!("video")], "video"),
            (&[json!("audio")], "audio"),
            (&[json!("document"), Value::Null], ""),
        ],
        form,
    )
}

/// The file field, or a multipart `file` part (which wins when both are given).
fn file_or(field: &str) -> Value {
    json!({ "anyOf": [given(field, json!({ "type": "string" })), given("file", json!({}))] })
}

super::described!(
    /// Body of `sendMedia` as JSON.
    SendMediaBody refs = [SendMediaIn],
    json!({ "allOf": [super::schema_ref::<SendMediaIn>(), media_rules(false), everyone_rule()] })
);

super::described!(
    /// `sendMedia` as `multipart/form-data`: the file as `media` or as the `file` part.
    SendMediaFormBody refs = [SendMediaForm],
    json!({ "allOf": [super::schema_ref::<SendMediaForm>(), file_or("media"), media_rules(true)] })
);

/// A `data:` URL's MIME type.
fn data_url_mime(value: &str) -> Option<&str> {
    value.strip_prefix("data:").and_then(|r| r.split_once(";base64,")).map(|(mt, _)| mt)
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
    request_body(content((SendMediaBody = "application/json"), (SendMediaFormBody = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_media(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendMediaIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let media = b.media.ok_or_else(|| ApiError::validation("give the file as `media` (a URL or base64) or `file`"))?;
    if b.caption.as_ref().is_some_and(|c| c.chars().count() > shared::message::CAPTION_LIMIT) {
        return Err(ApiError::validation(format!(
            "caption must be at most {} characters",
            shared::message::CAPTION_LIMIT
        )));
    }
    let kind = match b.mediatype.as_deref() {
        Some("image") => MessageType::Image,
        Some("video") => MessageType::Video,
        Some("document") => MessageType::Document,
        Some("audio") => MessageType::Audio,
        Some(_) => return Err(ApiError::validation("mediatype must be image, video, document or audio")),
        None => {
            // A kind the name suggests but the MIME type contradicts goes as a document.
            let named = media_kind(b.file_name.as_deref().unwrap_or(&media));
            let mime = b.mimetype.as_deref().or_else(|| data_url_mime(&media));
            match (named.mime_family(), mime) {
                (Some(family), Some(mime)) if !mime.starts_with(family) => MessageType::Document,
                _ => named,
            }
        }
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
    /// Phone with country code (or a JID).
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// An http(s) address of an audio file (MP3, OGG, M4A, ...; up to 64 MB), or its bytes
    /// in base64 (a `data:` URL, or bare with `mimetype`); sent as a voice note. With a
    /// multipart body, the `file` part instead.
    #[schema(required = true, schema_with = audio_schema)]
    pub audio: Option<String>,
    /// The audio's MIME type (`audio/...`, up to 127 bytes): required with bare base64 or
    /// a `file` part not typed as audio.
    #[schema(max_length = 127, pattern = "^audio/")]
    pub mimetype: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

fn audio_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(media_forms(
        "audio",
        true,
        "An http(s) address of an audio file (up to 64 MB), or its bytes in base64 (a `data:audio/...` URL, or bare with `mimetype`).",
    ))
}

super::described!(
    /// Body of `sendWhatsAppAudio` as JSON.
    SendAudioBody refs = [SendAudioIn],
    json!({ "allOf": [super::schema_ref::<SendAudioIn>(), mime_rule("audio", &[(&[], "audio")], false), everyone_rule()] })
);

super::described!(
    /// `sendWhatsAppAudio` as `multipart/form-data`: the file as `audio` or as the `file`
    /// part.
    SendAudioFormBody refs = [SendAudioForm],
    json!({ "allOf": [super::schema_ref::<SendAudioForm>(), file_or("audio"), mime_rule("audio", &[(&[], "audio")], true)] })
);

/// Send a voice note from an audio file.
#[utoipa::path(post, path = "/message/sendWhatsAppAudio/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendAudioBody = "application/json"), (SendAudioFormBody = "multipart/form-data"))),
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
    m.media = Some(media_in(audio, b.mimetype, None));
    queue(&s, &a, m, b.options, held.is_some()).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendStickerIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// An http(s) address of a WebP image, or its bytes in base64 (up to 16 MB). With a
    /// multipart body, the `file` part instead.
    #[schema(required = true, schema_with = sticker_schema)]
    pub sticker: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

fn sticker_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(media_forms(
        "",
        true,
        "An http(s) address of a WebP image, or its bytes in base64 (bare or a `data:` URL; up to 16 MB).",
    ))
}

super::described!(
    /// Body of `sendSticker` as JSON.
    SendStickerBody refs = [SendStickerIn],
    json!({ "allOf": [super::schema_ref::<SendStickerIn>(), everyone_rule()] })
);

super::described!(
    /// `sendSticker` as `multipart/form-data`: the file as `sticker` or as the `file` part.
    SendStickerFormBody refs = [SendStickerForm],
    json!({ "allOf": [super::schema_ref::<SendStickerForm>(), file_or("sticker")] })
);

/// Send a sticker (a WebP image).
#[utoipa::path(post, path = "/message/sendSticker/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendStickerBody = "application/json"), (SendStickerFormBody = "multipart/form-data"))),
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
    #[schema(schema_with = status_type_schema)]
    pub kind: String,
    /// The text (up to 65,536 bytes), or the media's http(s) URL or `data:` URL.
    pub content: String,
    /// With an image or video: up to 1,024 characters.
    #[schema(max_length = 1024)]
    pub caption: Option<String>,
    /// Accepted; statuses go to the account's contacts (as `POST /v1/instances/{id}/status`).
    pub all_contacts: Option<bool>,
    /// Accepted and ignored.
    pub status_jid_list: Option<Vec<String>>,
    /// Accepted and ignored.
    pub background_color: Option<String>,
    /// Accepted and ignored.
    #[schema(value_type = Option<Value>)]
    pub font: Option<serde_json::Value>,
}

fn status_type_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(json!({
        "type": "string", "enum": ["text", "image", "video"],
        "description": "`text`, `image` or `video` (`audio` is refused).",
    }))
}

super::described!(
    /// Body of `sendStatus`: a text, or an image or video by URL (or a `data:` URL).
    EvoStatusBody refs = [EvoStatusIn],
    json!({ "allOf": [super::schema_ref::<EvoStatusIn>(), { "oneOf": [
        { "type": "object", "required": ["type", "content"], "properties": {
            "type": { "enum": ["text"] },
            "content": { "type": "string", "minLength": 1, "maxLength": 65_536 },
            "caption": { "type": "null" } } },
        { "type": "object", "required": ["type", "content"], "properties": {
            "type": { "enum": ["image"] }, "content": media_forms("image", false, "the image") } },
        { "type": "object", "required": ["type", "content"], "properties": {
            "type": { "enum": ["video"] }, "content": media_forms("video", false, "the video") } },
    ] }] })
);

/// Post a status (as `POST /v1/instances/{id}/status`): queued and paced like any send.
#[utoipa::path(post, path = "/message/sendStatus/{instanceName}", tag = "evolution", operation_id = "evolution_message_sendStatus",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoStatusBody,
    responses((status = 200, description = "queued: `{key, status, messageId, serviceId}`", body = Object), super::EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_status(
    State(s): State<AppState>,
    a: super::ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionJson(b): ActionJson<EvoStatusIn>,
) -> Result<Json<serde_json::Value>, ApiError> {
    use crate::routes::status::{StatusIn, StatusType};
    if b.kind == "text" && b.content.len() > shared::message::TEXT_LIMIT {
        let limit = shared::message::TEXT_LIMIT;
        return Err(ApiError::validation(format!("content (a text) must be at most {limit} bytes")));
    }
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
    /// Phone with country code (or a JID).
    #[schema(value_type = super::EvoRecipient)]
    pub number: String,
    /// An http(s) address of an MP4 video, or its bytes in base64 (up to 64 MB). With a
    /// multipart body, the `file` part instead.
    #[schema(required = true, schema_with = ptv_schema)]
    pub video: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

fn ptv_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(media_forms(
        "",
        true,
        "An http(s) address of an MP4 video, or its bytes in base64 (bare or a `data:` URL; up to 64 MB).",
    ))
}

super::described!(
    /// Body of `sendPtv` as JSON.
    SendPtvBody refs = [SendPtvIn],
    json!({ "allOf": [super::schema_ref::<SendPtvIn>(), everyone_rule()] })
);

super::described!(
    /// `sendPtv` as `multipart/form-data`: the file as `video` or as the `file` part.
    SendPtvFormBody refs = [SendPtvForm],
    json!({ "allOf": [super::schema_ref::<SendPtvForm>(), file_or("video")] })
);

impl FileField for SendPtvIn {
    const FILE_FIELD: &'static str = "video";
    const FAMILY: &'static str = "";
    const FORM_FIELDS: &'static [&'static str] = &[];
}

/// A round video note: sent as an ordinary video (paceline's messages have no round
/// kind; README, "Coming from Evolution API").
#[utoipa::path(post, path = "/message/sendPtv/{instanceName}", tag = "evolution", operation_id = "evolution_message_sendPtv",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendPtvBody = "application/json"), (SendPtvFormBody = "multipart/form-data"))),
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
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        #[allow(dead_code)]
        pub struct $name {
            /// Phone with country code (or a JID).
            #[schema(value_type = super::EvoRecipient)]
            pub number: String,
            /// The file's bytes (or give the URL or base64 in the text field; this part
            /// wins when both are given).
            #[schema(value_type = String, format = Binary, min_length = 1, required = false)]
            pub file: Option<Vec<u8>>,
            $($(#[$fdoc])* pub $field: Option<String>,)*
            /// Milliseconds Evolution waits before sending (0-300000); pacing decides.
            #[schema(value_type = String, required = false, pattern = "^([0-2]?[0-9]{1,5}|300000)$")]
            pub delay: Option<String>,
        }
    };
}

multipart_form!(
    /// `sendMedia`'s fields as `multipart/form-data`.
    SendMediaForm {
        /// Up to 1,024 characters (not sent with audio).
        #[schema(value_type = String, required = false, max_length = 1024)]
        caption,
        /// An http(s) address of the file, or its bytes in base64 (a `data:` URL, or bare
        /// with `mimetype`); or the `file` part instead.
        #[schema(schema_with = any_media_schema)]
        media,
        /// `image`, `video`, `document` or `audio` (see the JSON body).
        #[schema(schema_with = mediatype_form_schema)]
        mediatype,
        /// The file's MIME type (up to 127 bytes), of the family `mediatype` names;
        /// required with bare base64 or a `file` part.
        #[schema(value_type = String, required = false, max_length = 127)]
        mimetype,
        /// A plain file name: 1-255 bytes, no `/` or backslash.
        #[schema(value_type = String, required = false, min_length = 1, max_length = 255, pattern = r"^[^/\\]+$")]
        file_name,
    }
);
multipart_form!(
    /// `sendWhatsAppAudio`'s fields as `multipart/form-data`.
    SendAudioForm {
        /// An http(s) address of an audio file, or its bytes in base64 (a `data:audio/...`
        /// URL, or bare with `mimetype`); or the `file` part instead.
        #[schema(schema_with = audio_schema)]
        audio,
        /// The audio's MIME type (`audio/...`): required with bare base64 or a `file` part.
        #[schema(value_type = String, required = false, max_length = 127, pattern = "^audio/")]
        mimetype,
    }
);
multipart_form!(
    /// `sendSticker`'s fields as `multipart/form-data`.
    SendStickerForm {
        /// An http(s) address of a WebP image, or its bytes in base64; or the `file` part
        /// instead.
        #[schema(schema_with = sticker_schema)]
        sticker,
    }
);
multipart_form!(
    /// `sendPtv`'s fields as `multipart/form-data`.
    SendPtvForm {
        /// An http(s) address of an MP4 video, or its bytes in base64; or the `file` part
        /// instead.
        #[schema(schema_with = ptv_schema)]
        video,
    }
);

/// A body as JSON or, as Evolution's clients send media, `multipart/form-data`: its text
/// parts become string fields, and its `file` part, in base64, the field `file_field`
/// names (`T::FILE_FIELD`). Every refusal is 400.
pub struct ActionBody<T>(pub T);

/// The field a multipart body's `file` part fills.
pub trait FileField {
    const FILE_FIELD: &'static str;
    /// The MIME family of a `data:` URL in that field (empty: any).
    const FAMILY: &'static str;
    /// The form's other text fields, besides `number` and `delay`.
    const FORM_FIELDS: &'static [&'static str];
}

impl FileField for SendMediaIn {
    const FILE_FIELD: &'static str = "media";
    const FAMILY: &'static str = "";
    const FORM_FIELDS: &'static [&'static str] = &["caption", "mediatype", "mimetype", "fileName"];
}

impl FileField for SendAudioIn {
    const FILE_FIELD: &'static str = "audio";
    const FAMILY: &'static str = "audio";
    const FORM_FIELDS: &'static [&'static str] = &["mimetype"];
}

impl FileField for SendStickerIn {
    const FILE_FIELD: &'static str = "sticker";
    const FAMILY: &'static str = "";
    const FORM_FIELDS: &'static [&'static str] = &[];
}

/// Whether `s` has one of the forms [`media_forms`] declares (bare base64 taken): an
/// http(s) URL, a `data:` URL of a type of `family` (any when empty), or base64.
fn media_shape_ok(s: &str, family: &str) -> bool {
    let base64 = |d: &str| !d.is_empty() && base64::engine::general_purpose::STANDARD.decode(d).is_ok();
    if s.starts_with("http://") || s.starts_with("https://") {
        // As `HTTP_URL_PATTERN` reads one: printable ASCII that parses, with a host.
        return s.bytes().all(|b| b.is_ascii_graphic()) && url::Url::parse(s).is_ok_and(|u| u.host_str().is_some());
    }
    if let Some((mime, data)) = s.strip_prefix("data:").and_then(|r| r.split_once(";base64,")) {
        let Some((kind, sub)) = mime.split_once('/') else { return false };
        let kind_ok = if family.is_empty() {
            (1..=63).contains(&kind.chars().count()) && !kind.contains([',', ';'])
        } else {
            kind == family
        };
        return kind_ok && sub.chars().count() <= 63 && !sub.contains(',') && base64(data);
    }
    base64(s)
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
        // The `file` part wins over the field it fills, in whichever order they come; the
        // field is checked all the same.
        let mut file_part = false;
        let mut file_text: Option<String> = None;
        while let Some(part) = form.next_field().await.map_err(|e| bad(&e))? {
            let Some(name) = part.name().map(str::to_string) else { continue };
            let known = ["number", "delay", "file", T::FILE_FIELD].contains(&name.as_str())
                || T::FORM_FIELDS.contains(&name.as_str());
            if !known {
                let shown: String = name.chars().take(40).collect();
                return Err(as_400(ApiError::validation(format!("unknown form field {shown:?}"))));
            }
            if name == "file" {
                file_part = true;
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
                if text.contains('\0') || name.contains('\0') {
                    return Err(as_400(ApiError::validation("form fields must not contain the NUL character")));
                }
                if name == T::FILE_FIELD {
                    file_text = Some(text);
                } else {
                    fields.insert(name, serde_json::Value::String(text));
                }
            }
        }
        if let Some(text) = file_text {
            if !file_part {
                fields.insert(T::FILE_FIELD.into(), serde_json::Value::String(text));
            } else if !media_shape_ok(&text, T::FAMILY) {
                let field = T::FILE_FIELD;
                return Err(as_400(ApiError::validation(format!(
                    "{field} must be an http(s) URL or base64 (bare or a data: URL)"
                ))));
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

    /// A form's file field, given beside a `file` part, is checked as the description
    /// declares it.
    #[test]
    fn media_shapes() {
        for ok in ["https://example.com/a.webp", "http://x", "data:image/webp;base64,AAAA", "AA==", "/9j/"] {
            assert!(media_shape_ok(ok, ""), "{ok}");
        }
        for bad in
            ["", "https://", "https:// x", "ftp://x", "data:;base64,AAAA", "data:image/png;base64,", "AB==", "a b"]
        {
            assert!(!media_shape_ok(bad, ""), "{bad}");
        }
        assert!(media_shape_ok("data:audio/ogg;base64,AAAA", "audio"));
        assert!(!media_shape_ok("data:image/png;base64,AAAA", "audio"));
    }
}
