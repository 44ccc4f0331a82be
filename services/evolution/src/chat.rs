//! Evolution v2's chat routes (docs/evolution.md), each a mapping onto
//! what `/v1` does: number checks (the same quota), the local log's messages and chats,
//! the contacts the session knows. Shapes follow Evolution v2's
//! `src/api/controllers/chat.controller.ts` and its Prisma records.

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use shared::db::log::{self, Find};
use shared::ids::MessageId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::EvolutionErrors;
use super::{ActionAccess, ActionBody, ActionInstance, ActionJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(whatsapp_numbers))
        .routes(routes!(check_is_whatsapp_number))
        .routes(routes!(find_messages))
        .routes(routes!(find_chats))
        .routes(routes!(find_contacts))
        .routes(routes!(find_status_message))
        .routes(routes!(get_base64_from_media_message))
}

/// Body of `POST /chat/whatsappNumbers/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoNumbersIn {
    /// Phone numbers with country code: 1 to 10 a call, within the instance's lookup quota
    /// (as `POST /v1/instances/{id}/check-numbers`).
    #[schema(min_items = 1, max_items = 10, value_type = Vec<domain::schemas::PhoneNumber>)]
    pub numbers: Vec<String>,
}

/// One answer of `whatsappNumbers`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvoNumberOut {
    pub exists: bool,
    /// The account's JID (the number's person JID when it has none).
    pub jid: String,
    pub number: String,
}

async fn numbers(state: AppState, a: ActionAccess, b: EvoNumbersIn) -> Result<Json<Vec<EvoNumberOut>>, ApiError> {
    let results = domain::numbers::check(a.ctx(&state), &b.numbers).await?;
    Ok(Json(
        results
            .into_iter()
            .map(|r| {
                let jid = r.jid.unwrap_or_else(|| {
                    let digits: String = r.number.chars().filter(char::is_ascii_digit).collect();
                    shared::jid::Jid::user(&digits).into()
                });
                EvoNumberOut { exists: r.exists, jid, number: r.number }
            })
            .collect(),
    ))
}

/// Which numbers have a WhatsApp account.
#[utoipa::path(post, path = "/chat/whatsappNumbers/{instanceName}", tag = "evolution", operation_id = "evolution_chat_whatsappNumbers",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoNumbersIn,
    responses((status = 200, description = "an answer per number", body = Vec<EvoNumberOut>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn whatsapp_numbers(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoNumbersIn>,
) -> Result<Json<Vec<EvoNumberOut>>, ApiError> {
    numbers(state, a, b).await
}

/// The same as `whatsappNumbers` (the name Evolution's Python client calls).
#[utoipa::path(post, path = "/chat/checkIsWhatsappNumber/{instanceName}", tag = "evolution", operation_id = "evolution_chat_checkIsWhatsappNumber",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoNumbersIn,
    responses((status = 200, description = "an answer per number", body = Vec<EvoNumberOut>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn check_is_whatsapp_number(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoNumbersIn>,
) -> Result<Json<Vec<EvoNumberOut>>, ApiError> {
    numbers(state, a, b).await
}

/// Body of `POST /chat/findMessages/{instanceName}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct EvoFindMessagesIn {
    #[serde(rename = "where", default)]
    pub filter: EvoMessageWhere,
    /// Page number, from 1 (default 1).
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub page: Option<u32>,
    /// Records a page, 1-200 (default 50): Evolution's name for the page size.
    #[schema(minimum = 1, maximum = 200)]
    pub offset: Option<u32>,
}

/// The highest page number the find routes take.
const PAGE_MAX: u32 = 1_000_000;

/// The page number asked for, from 1 (default 1).
fn page_of(page: Option<u32>) -> Result<u32, ApiError> {
    match page {
        None => Ok(1),
        Some(p) if (1..=PAGE_MAX).contains(&p) => Ok(p),
        Some(_) => Err(ApiError::validation(format!("page must be 1-{PAGE_MAX}"))),
    }
}

/// Evolution's `where`: each field present narrows the search.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoMessageWhere {
    /// Our `msg_...` id.
    #[schema(value_type = Option<MessageId>)]
    pub id: Option<String>,
    pub key: Option<EvoWhereKey>,
    /// `conversation`, `imageMessage`, ...
    pub message_type: Option<String>,
    /// `{gte, lte}`: RFC 3339 times or seconds since the epoch.
    #[schema(value_type = Option<EvoTimeBounds>)]
    pub message_timestamp: Option<Value>,
}

super::described!(
    /// Evolution's `messageTimestamp` filter: `gte` and `lte`, each an RFC 3339 time or
    /// seconds since the epoch (to the end of year 9999).
    EvoTimeBounds,
    json!({
        "type": "object",
        "description": "`{gte, lte}`: each an RFC 3339 time or seconds since the epoch",
        "properties": { "gte": time_bound_schema(), "lte": time_bound_schema() },
    })
);

/// The last second of year 9999: the latest a time bound may be.
const TIME_MAX: i64 = 253_402_300_799;

fn time_bound_schema() -> Value {
    json!({ "oneOf": [
        { "type": "null" },
        { "type": "integer", "minimum": 0, "maximum": TIME_MAX },
        { "type": "string", "format": "date-time" },
    ] })
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoWhereKey {
    /// The chat: a phone number or JID.
    #[schema(value_type = Option<super::EvoRecipient>)]
    pub remote_jid: Option<String>,
    pub from_me: Option<bool>,
    /// The network id.
    pub id: Option<String>,
}

/// Evolution's page of messages.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvoFindMessagesOut {
    pub messages: EvoMessagePage,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoMessagePage {
    pub total: i64,
    pub pages: i64,
    pub current_page: i64,
    /// Evolution's message records (`id`, `key`, `message`, `messageType`,
    /// `messageTimestamp`, `status`, ...).
    #[schema(value_type = Vec<Object>)]
    pub records: Vec<Value>,
}

fn time_bound(v: &Value) -> Result<Option<DateTime<Utc>>, ApiError> {
    match v {
        Value::Null => Ok(None),
        Value::Number(_) => super::whole_number(v)
            .and_then(|s| i64::try_from(s).ok())
            .filter(|s| *s <= TIME_MAX)
            .and_then(|s| DateTime::from_timestamp(s, 0))
            .map(Some)
            .ok_or_else(bad_time),
        Value::String(s) => s.parse().map(Some).map_err(|_| bad_time()),
        _ => Err(bad_time()),
    }
}

fn bad_time() -> ApiError {
    ApiError::validation("messageTimestamp bounds must be RFC 3339 times or seconds since the epoch")
}

/// The instance's messages from the local log, newest first, paged by number.
#[utoipa::path(post, path = "/chat/findMessages/{instanceName}", tag = "evolution", operation_id = "evolution_chat_findMessages",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoFindMessagesIn,
    responses((status = 200, description = "a page of messages", body = EvoFindMessagesOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_messages(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<EvoFindMessagesIn>,
) -> Result<Json<EvoFindMessagesOut>, ApiError> {
    let page = i64::from(page_of(b.page)?);
    let size = i64::from(b.offset.unwrap_or(50));
    if !(1..=200).contains(&size) {
        return Err(ApiError::validation("offset (the page size) must be 1-200"));
    }
    let w = b.filter;
    let key = w.key.unwrap_or_default();
    let chat = key.remote_jid.as_deref().map(domain::message_in::normalize_jid).transpose()?;
    let kinds =
        w.message_type.as_deref().map(|t| evolution_shape::our_kinds(t).into_iter().map(String::from).collect());
    let bounds = w.message_timestamp.unwrap_or(Value::Null);
    if !(bounds.is_null() || bounds.is_object()) {
        return Err(bad_time());
    }
    let id = match w.id.as_deref() {
        Some(i) => Some(MessageId::parse(i).map_err(|_| ApiError::validation("where.id must be a msg_ id"))?),
        None => None,
    };
    let f = Find {
        chat,
        wa_message_id: key.id,
        id,
        from_me: key.from_me,
        kinds,
        since: time_bound(&bounds["gte"])?,
        until: time_bound(&bounds["lte"])?,
    };
    let (total, rows) = log::find(&state.db, &row.id, &f, (page - 1) * size, size).await?;
    let now = Utc::now();
    let records = rows
        .into_iter()
        .map(|r| {
            let content = domain::history::with_media_url(&state, r.content, now);
            let participant = (r.chat_jid.is_group() && !r.from_me).then_some(r.from_jid.as_str());
            let mut v = evolution_shape::Record {
                remote_jid: r.chat_jid.as_str(),
                from_me: r.from_me,
                id: &r.wa_message_id,
                participant,
                kind: &r.kind,
                content: &content,
                timestamp: r.ts,
                status: r.status.map(log::LogStatus::as_str),
                instance_id: row.id.as_str(),
                base64: None,
            }
            .to_json();
            v["id"] = json!(r.id);
            v["source"] = json!(r.source);
            v
        })
        .collect();
    let pages = (total + size - 1) / size;
    Ok(Json(EvoFindMessagesOut { messages: EvoMessagePage { total, pages, current_page: page, records } }))
}

/// One chat as Evolution's `findChats` lists it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoChatOut {
    pub id: String,
    pub remote_jid: String,
    pub push_name: Option<String>,
    pub unread_count: i32,
    pub archived: bool,
    pub pinned: bool,
    pub updated_at: DateTime<Utc>,
    pub last_message_at: DateTime<Utc>,
}

/// Body of `findChats`, all optional: Evolution's filter and window.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct EvoFindChatsIn {
    #[serde(rename = "where", default)]
    pub filter: Option<EvoChatWhere>,
    /// Chats to list, 1-1,000 (default 1,000; `GET /v1/instances/{id}/chats` pages them all).
    #[schema(minimum = 1, maximum = 1000)]
    pub take: Option<u32>,
    /// Chats to leave out first, newest first (default 0).
    #[schema(minimum = 0, maximum = 1_000_000)]
    pub skip: Option<u32>,
}

/// Evolution's `where` of `findChats` and `findContacts`: each field present narrows it.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoChatWhere {
    /// One chat or contact: a phone number or JID.
    #[schema(value_type = Option<super::EvoRecipient>)]
    pub remote_jid: Option<String>,
    /// `findContacts`: Evolution's contact id, which is the JID here.
    #[schema(value_type = Option<super::EvoRecipient>)]
    pub id: Option<String>,
    /// `findContacts`: the contact's push name, exactly.
    pub push_name: Option<String>,
}

/// The most chats one `findChats` answer lists (`GET /v1/instances/{id}/chats` pages them all).
const CHATS_LIMIT: u32 = 1_000;

/// The most chats `findChats` leaves out first.
const SKIP_MAX: u32 = 1_000_000;

/// A `where` field that names a chat: a phone number or JID, as our JID.
fn where_jid(field: &str, v: Option<&str>) -> Result<Option<shared::jid::Jid>, ApiError> {
    v.map(|v| {
        domain::message_in::normalize_jid(v)
            .map_err(|_| ApiError::validation(format!("where.{field} must be a phone number or a JID")))
    })
    .transpose()
}

/// The instance's chats from the local log, newest activity first: all (up to 1,000),
/// Evolution's `take`/`skip` window of them, or the one `where.remoteJid` names.
#[utoipa::path(post, path = "/chat/findChats/{instanceName}", tag = "evolution", operation_id = "evolution_chat_findChats",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content = Option<EvoFindChatsIn>, description = "optional: no body lists the newest 1,000"),
    responses((status = 200, description = "the chats", body = Vec<EvoChatOut>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_chats(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionBody(b): ActionBody<EvoFindChatsIn>,
) -> Result<Json<Vec<EvoChatOut>>, ApiError> {
    let take = b.take.unwrap_or(CHATS_LIMIT);
    if !(1..=CHATS_LIMIT).contains(&take) {
        return Err(ApiError::validation("take must be 1-1000"));
    }
    let skip = b.skip.unwrap_or(0);
    if skip > SKIP_MAX {
        return Err(ApiError::validation(format!("skip must be 0-{SKIP_MAX}")));
    }
    let w = b.filter.unwrap_or_default();
    let jid = where_jid("remoteJid", w.remote_jid.as_deref())?;
    // (`id` names a contact: checked as `findContacts` checks it.)
    where_jid("id", w.id.as_deref())?;
    let rows =
        log::chats_window(&state.db, &row.id, jid.as_ref().map(|j| j.as_str()), i64::from(skip), i64::from(take))
            .await?;
    Ok(Json(
        rows.into_iter()
            .map(|c| EvoChatOut {
                id: c.jid.to_string(),
                remote_jid: c.jid.into(),
                push_name: c.name,
                unread_count: c.unread_count,
                archived: c.archived,
                pinned: c.pinned,
                updated_at: c.updated_at,
                last_message_at: c.last_message_at,
            })
            .collect(),
    ))
}

/// One contact as Evolution's `findContacts` lists it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoContactOut {
    pub id: String,
    pub remote_jid: String,
    pub push_name: Option<String>,
    /// The name the account saved for it.
    pub name: Option<String>,
    pub profile_pic_url: Option<String>,
}

/// Body of `findContacts`, all optional: Evolution's filter and page.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct EvoFindContactsIn {
    #[serde(rename = "where", default)]
    pub filter: Option<EvoChatWhere>,
    /// Page number, from 1 (default 1; only with `offset`).
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub page: Option<u32>,
    /// Contacts a page, 1-1,000 (Evolution's name for the page size; default: all).
    #[schema(minimum = 1, maximum = 1000)]
    pub offset: Option<u32>,
}

/// The contacts the session knows (asked of it, as `GET /v1/instances/{id}/contacts`),
/// narrowed by Evolution's `where` and paged by its `offset` and `page`.
#[utoipa::path(post, path = "/chat/findContacts/{instanceName}", tag = "evolution", operation_id = "evolution_chat_findContacts",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content = Option<EvoFindContactsIn>, description = "optional: no body lists them all"),
    responses((status = 200, description = "the contacts", body = Vec<EvoContactOut>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_contacts(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionBody(b): ActionBody<EvoFindContactsIn>,
) -> Result<Json<Vec<EvoContactOut>>, ApiError> {
    let size = b.offset.map(usize::try_from).transpose().ok().flatten();
    if size.is_some_and(|s| !(1..=1_000).contains(&s)) {
        return Err(ApiError::validation("offset (the page size) must be 1-1000"));
    }
    let page = usize::try_from(page_of(b.page)?).unwrap_or(1);
    let w = b.filter.unwrap_or_default();
    let jid = where_jid("remoteJid", w.remote_jid.as_deref())?;
    let id = where_jid("id", w.id.as_deref())?;
    let contacts = domain::contacts::list(a.ctx(&state)).await?;
    let found = contacts.into_iter().filter(|c| {
        jid.as_ref().is_none_or(|j| j.as_str() == c.jid)
            && id.as_ref().is_none_or(|j| j.as_str() == c.jid)
            && w.push_name.as_ref().is_none_or(|n| c.push_name.as_ref() == Some(n))
    });
    let skip = size.map_or(0, |s| s.saturating_mul(page - 1));
    Ok(Json(
        found
            .skip(skip)
            .take(size.unwrap_or(usize::MAX))
            .map(|c| EvoContactOut {
                id: c.jid.clone(),
                remote_jid: c.jid,
                push_name: c.push_name,
                name: c.name,
                profile_pic_url: None,
            })
            .collect(),
    ))
}

/// Statuses the account received and posted (the log's status chat), in
/// `findMessages`' page shape.
#[utoipa::path(post, path = "/chat/findStatusMessage/{instanceName}", tag = "evolution", operation_id = "evolution_chat_findStatusMessage",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoFindMessagesIn,
    responses((status = 200, description = "a page of statuses", body = EvoFindMessagesOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_status_message(
    state: State<AppState>,
    a: ActionInstance,
    ActionJson(mut b): ActionJson<EvoFindMessagesIn>,
) -> Result<Json<EvoFindMessagesOut>, ApiError> {
    let key = b.filter.key.get_or_insert_with(EvoWhereKey::default);
    // A chat given is checked as `findMessages` checks it, though statuses are in their own.
    where_jid("key.remoteJid", key.remote_jid.as_deref())?;
    key.remote_jid = Some(shared::jid::STATUS_JID.to_string());
    find_messages(state, a, ActionJson(b)).await
}

/// Body of `getBase64FromMediaMessage`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoMediaIn {
    /// The message: `{key: {id}}` (its network id); its other fields are ignored.
    pub message: EvoMediaMessage,
    /// Accepted; media is given as stored.
    pub convert_to_mp4: Option<bool>,
}

/// The message of `getBase64FromMediaMessage`: Evolution's record, of which its key's id
/// is read.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoMediaMessage {
    pub key: EvoMediaKey,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoMediaKey {
    /// The message's network id.
    #[schema(min_length = 1, max_length = 128)]
    pub id: String,
}

/// The largest media this route hands back in base64 (`GET /media/...` serves any size).
const BASE64_LIMIT: u64 = 16 * 1024 * 1024;

/// A logged message's media in base64 (what the instance holds of it). The answer is
/// streamed: the media is read and encoded a chunk at a time, never held whole.
#[utoipa::path(post, path = "/chat/getBase64FromMediaMessage/{instanceName}", tag = "evolution", operation_id = "evolution_chat_getBase64FromMediaMessage",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoMediaIn,
    responses((status = 200, description = "`{mediaType, fileName, caption, size, mimetype, base64}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn get_base64_from_media_message(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(b): ActionJson<EvoMediaIn>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    use futures::TryStreamExt;
    use shared::db::media::{self, Hole, Meta};
    let wa_id = b.message.key.id.as_str();
    if wa_id.is_empty() || wa_id.chars().count() > 128 {
        return Err(ApiError::validation("message.key.id must be 1-128 characters"));
    }
    let f = Find { wa_message_id: Some(wa_id.to_string()), ..Find::default() };
    let (_, rows) = log::find(&state.db, &row.id, &f, 0, 1).await?;
    let m = rows.into_iter().next().ok_or_else(|| ApiError::not_found("message"))?;
    let gone = || ApiError::new(shared::ErrorCode::MediaUnavailable, "the message has no media the instance holds");
    let id = m.content["media"]["id"].as_str().and_then(|i| shared::ids::MediaId::parse(i).ok()).ok_or_else(gone)?;
    // The stored size decides, not the logged descriptor's.
    let (mime_type, filename, size) = match media::meta_of(&state.db, &row.id, &id).await? {
        Some(Meta::Stored { mime_type, filename, size, .. }) => (mime_type, filename, size),
        _ => return Err(gone()),
    };
    if size > BASE64_LIMIT {
        return Err(ApiError::new(
            shared::ErrorCode::MediaTooLarge,
            "the media is over 16 MB: fetch it from the chat history's signed URL",
        ));
    }
    let (media_type, _) = evolution_shape::message(&m.kind, &m.content, None);
    let hole = Hole::default();
    let skeleton = json!({
        "mediaType": media_type.trim_end_matches("Message"),
        "fileName": filename,
        "caption": m.content["caption"],
        "size": { "fileLength": size },
        "mimetype": mime_type,
        "base64": hole.marker(),
    });
    let (prefix, suffix) = hole
        .cut(serde_json::to_vec(&skeleton).map_err(ApiError::internal)?)
        .ok_or_else(|| ApiError::internal("no hole"))?;
    let body = media::base64_stream(state.media.clone(), id, prefix, suffix).map_err(std::io::Error::other);
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], axum::body::Body::from_stream(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the description calls a time bound is one: RFC 3339 times (JSON Schema's
    /// `date-time`) and whole seconds since the epoch up to the end of year 9999.
    #[test]
    fn time_bounds_as_declared() {
        for ok in [
            json!("2025-01-16T00:00:00Z"),
            json!("2025-01-16t00:00:00z"),
            json!("2025-01-16T00:00:00.123456789+05:30"),
            json!("0001-01-01T00:00:00-23:59"),
            json!("9999-12-31T23:59:59Z"),
            json!(0),
            json!(1_700_000_000.0),
            json!(TIME_MAX),
            Value::Null,
        ] {
            assert!(time_bound(&ok).is_ok(), "{ok}");
        }
        for bad in [json!("yesterday"), json!(-1), json!(TIME_MAX + 1), json!(1.5), json!(true)] {
            assert!(time_bound(&bad).is_err(), "{bad}");
        }
    }
}
