//! Action-style send routes (interface.md 4.13): `POST /message/send*/{instanceName}` with
//! `X-API-Key` (or Evolution's `apikey`). Each builds the same message `POST
//! {inst}/messages` takes and queues it through the same path; the answer is
//! `{serviceId, messageId}` once queued, with Evolution v2's record beside them (`key`,
//! `message`, `messageType`, `messageTimestamp`, `status`). Statuses: 200, 400 (any
//! refusal, with its code in the envelope) and 404. Evolution's own fields are taken
//! beside the seed's (`text`, `quoted`, `mentioned`, `mentionsEveryOne`, `delay`, base64
//! or multipart media); other fields these routes do not know are ignored.

use axum::extract::State;
use axum::Json;
use base64::Engine;
use domain::message_in::{MediaIn, MessageIn};
use door::gate::SlotHeld;
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
use door::AppState;

mod contact;
mod form;
mod media;
pub use contact::*;
pub use form::*;
pub use media::*;

/// The large-body gate on the send routes that take media: the instance named by
/// `{instanceName}`, with the key as these routes take it (`X-API-Key` or `apikey`),
/// refused as their extractor refuses; what the body gets (too large, too slow, no slot)
/// is 400 with its code.
async fn gate(
    axum::Extension(state): axum::Extension<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::extract::FromRequestParts;
    let resolve: door::gate::Resolve =
        |parts, state| Box::pin(async move { ActionAccess::from_request_parts(parts, state).await.map(|a| a.row.id) });
    door::gate::admit(state, req, next, resolve, as_400).await
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        // The routes that take media bytes (base64 or multipart): the send route's limit
        // and its large-body semaphore, which runs before the body is read.
        .routes(routes!(send_media))
        .routes(routes!(send_audio))
        .routes(routes!(send_sticker))
        .routes(routes!(send_status))
        .routes(routes!(send_ptv))
        .layer(axum::middleware::from_fn(gate))
        .layer(axum::extract::DefaultBodyLimit::max(domain::send::MESSAGES_BODY_LIMIT))
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
        { "type": "object", "properties": { "number": super::schema_ref::<domain::schemas::GroupJid>() } },
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
            let jid = domain::message_in::normalize_jid(&m.to)?;
            if !jid.is_group() {
                return Err(ApiError::validation("mentionsEveryOne needs a group's JID as the number"));
            }
            let g = domain::groups::get(domain::Ctx::new(state, &row.id, domain::Caller::Owner), jid).await?;
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
    let queued = domain::send::queue(a.ctx(state), m, None, holds_slot).await;
    let (msg, _) = queued.map_err(|e| as_400(e.into()))?;
    let hex = &msg.id.as_str()[4..];
    let service_id = format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]);
    let (message_type, message) = evolution_shape::message(msg.kind.as_str(), &msg.content, None);
    Ok(Json(SendActionOut {
        service_id,
        key: EvolutionKey { remote_jid: msg.to_jid.to_string(), from_me: true, id: msg.wa_message_id.clone() },
        message_id: msg.wa_message_id,
        push_name: String::new(),
        message,
        message_type: message_type.to_string(),
        message_timestamp: msg.created_at.timestamp(),
        status: evolution_shape::status(msg.status.as_str()).to_string(),
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
    if let Some(name) = &b.name {
        domain::message_in::check_len("name", name, shared::message::FIELD_LIMIT)?;
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
