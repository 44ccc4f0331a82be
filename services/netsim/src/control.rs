//! The control API of contract.md ("netsim control API"), for tests, demos and load tests.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use shared::http::ValidatedJson;
use shared::{ApiError, ErrorCode};

use crate::model::{Faults, NetError};
use crate::App;

pub fn router() -> Router<App> {
    Router::new()
        .route("/control/phones", post(register))
        .route("/control/phones/{number}", get(phone))
        // A phone sends media as large as WhatsApp's (documents up to 100 MB, in base64).
        .route(
            "/control/phones/{number}/messages",
            post(phone_send).layer(axum::extract::DefaultBodyLimit::max(140 * 1024 * 1024)),
        )
        .route("/control/phones/{number}/inbox", get(inbox))
        .route("/control/phones/{number}/read", post(read))
        .route("/control/phones/{number}/logout", post(logout))
        .route("/control/phones/{number}/ban", post(ban))
        .route("/control/phones/{number}/tempban", post(temp_ban))
        .route("/control/phones/{number}/call", post(call))
        .route(
            "/control/phones/{number}/block",
            post(|State(app): State<App>, Path(n): Path<String>, ValidatedJson(b): ValidatedJson<BlockIn>| {
                set_blocked(app, n, b, true)
            }),
        )
        .route(
            "/control/phones/{number}/unblock",
            post(|State(app): State<App>, Path(n): Path<String>, ValidatedJson(b): ValidatedJson<BlockIn>| {
                set_blocked(app, n, b, false)
            }),
        )
        .route("/control/phones/{number}/profile", axum::routing::patch(set_profile))
        .route("/control/phones/{number}/contacts", post(add_contact))
        .route("/control/phones/{number}/state", get(phone_state))
        .route("/control/phones/{number}/addressing", post(set_addressing))
        .route("/control/phones/{number}/resync", post(resync))
        .route("/control/phones/{number}/archive", post(archive))
        .route("/control/phones/{number}/queues", get(queues))
        .route("/control/phones/{number}/labels", get(labels).post(label))
        .route("/control/phones/{number}/ops", post(phone_op))
        .route("/control/media/{id}/expire", post(expire_media))
        .route("/media/{id}", get(media))
        .route("/pictures/{number}", get(picture))
        .route("/control/calls", get(calls))
        .route(
            "/control/groups/{jid}",
            get(|State(app): State<App>, Path(jid): Path<String>| async move {
                app.net.group(&jid).map(Json).ok_or_else(|| err(NetError::NotFound))
            }),
        )
        .route("/control/channels", get(|State(app): State<App>| async move { Json(app.net.channels()) }))
        .route("/control/channels/{jid}", axum::routing::patch(update_channel))
        .route("/control/channels/{jid}/admins", post(channel_admin))
        .route("/control/scan", post(scan))
        .route("/control/enter-code", post(enter_code))
        .route("/control/faults", get(get_faults).post(set_faults))
        .route("/control/stats", get(stats))
        .route("/control/messages", post(bulk_send))
}

fn err(e: NetError) -> ApiError {
    match e {
        NetError::NoAccount | NetError::NotFound | NetError::UnknownCode => {
            ApiError::new(ErrorCode::NotFound, e.to_string())
        }
        NetError::Banned => ApiError::new(ErrorCode::InstanceBanned, e.to_string()),
        NetError::Exists => ApiError::new(ErrorCode::Conflict, e.to_string()),
        NetError::Blocked => ApiError::new(ErrorCode::Forbidden, e.to_string()),
        NetError::Invalid(m) => ApiError::validation(m),
        NetError::Refused(m) => ApiError::new(ErrorCode::Forbidden, m),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterIn {
    number: String,
    #[serde(default)]
    business: bool,
}

async fn register(
    State(app): State<App>,
    ValidatedJson(b): ValidatedJson<RegisterIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    app.net.register(&b.number, b.business).map_err(err)?;
    Ok((StatusCode::CREATED, Json(json!({ "number": b.number, "business": b.business }))))
}

async fn phone(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    let (business, banned, linked, online) = app.net.phone_info(&number).ok_or_else(|| err(NetError::NoAccount))?;
    Ok(Json(json!({ "number": number, "business": business, "banned": banned,
                    "linked_devices": linked, "online_devices": online, "typing_from": app.net.typing(&number),
                    "presence": app.net.presence(&number), "lid": crate::model::lid_of(&number),
                    "addressing": app.net.addressing(&number) })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddressingIn {
    mode: crate::model::Addressing,
}

/// How the network names this phone to others' linked devices: `pn` (by number, the
/// default), `lid` (by hidden id, the number told beside it) or `lid_hidden` (by hidden
/// id alone).
async fn set_addressing(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<AddressingIn>,
) -> Result<Json<Value>, ApiError> {
    let lid = app.net.set_addressing(&number, b.mode).map_err(err)?;
    Ok(Json(json!({ "number": number, "lid": lid, "mode": b.mode })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PhoneSendIn {
    to: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(rename = "type", default = "text_kind")]
    kind: String,
    #[serde(default)]
    body: Value,
    /// Media the message carries (base64); netsim keeps it at `/media/{id}`.
    #[serde(default)]
    media: Option<crate::model::MediaIn>,
}

fn text_kind() -> String {
    "text".into()
}

async fn phone_send(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<PhoneSendIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut body = b.body;
    let mut media_id = None;
    if let Some(m) = &b.media {
        if !body.is_object() {
            body = json!({});
        }
        let desc = app.net.store_media(m).map_err(err)?;
        media_id = desc["url"].as_str().and_then(|u| u.strip_prefix("/media/")).map(str::to_string);
        body["media"] = desc;
    }
    let id = app.net.phone_send(&number, &b.to, &b.kind, b.text, body).map_err(err)?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id, "media_id": media_id }))))
}

/// `?offset=&limit=`: a page of the inbox in the order received (all of it by default).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InboxQuery {
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

async fn inbox(
    State(app): State<App>,
    Path(number): Path<String>,
    q: Result<Query<InboxQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = q.map_err(|_| ApiError::validation("offset and limit must be whole numbers"))?;
    let inbox =
        app.net.inbox_page(&number, q.offset, q.limit.unwrap_or(usize::MAX)).ok_or_else(|| err(NetError::NoAccount))?;
    Ok(Json(serde_json::to_value(inbox).expect("inbox serializes")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadIn {
    id: String,
}

async fn read(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<ReadIn>,
) -> Result<Json<Value>, ApiError> {
    app.net.mark_read(&number, &b.id).map_err(err)?;
    Ok(Json(json!({ "read": true })))
}

async fn logout(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    let n = app.net.logout_phone(&number).map_err(err)?;
    Ok(Json(json!({ "unlinked_devices": n })))
}

async fn ban(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    app.net.ban(&number).map_err(err)?;
    Ok(Json(json!({ "banned": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TempBanIn {
    /// How long the account is paused.
    seconds: u64,
}

async fn temp_ban(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<TempBanIn>,
) -> Result<Json<Value>, ApiError> {
    let until = chrono::Utc::now() + chrono::Duration::seconds(b.seconds.min(7 * 24 * 3600) as i64);
    app.net.temp_ban(&number, until).map_err(err)?;
    Ok(Json(json!({ "paused_until": until })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockIn {
    number: String,
}

/// `number` blocks (`blocked`) or unblocks another account.
async fn set_blocked(app: App, number: String, b: BlockIn, blocked: bool) -> Result<Json<Value>, ApiError> {
    app.net.set_blocked(&number, &b.number, blocked).map_err(err)?;
    Ok(Json(json!({ "blocked": blocked })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallIn {
    to: String,
}

async fn call(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<CallIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let rec = app.net.call(&number, &b.to).map_err(err)?;
    Ok((StatusCode::CREATED, Json(serde_json::to_value(rec).expect("call serializes"))))
}

async fn calls(State(app): State<App>) -> Json<Value> {
    Json(json!({ "calls": app.net.calls() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScanIn {
    code: String,
    number: String,
}

async fn scan(State(app): State<App>, ValidatedJson(b): ValidatedJson<ScanIn>) -> Result<Json<Value>, ApiError> {
    app.net.scan(&b.code, &b.number).map_err(err)?;
    Ok(Json(json!({ "linked": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnterCodeIn {
    number: String,
    pairing_code: String,
}

async fn enter_code(
    State(app): State<App>,
    ValidatedJson(b): ValidatedJson<EnterCodeIn>,
) -> Result<Json<Value>, ApiError> {
    app.net.enter_code(&b.number, &b.pairing_code).map_err(err)?;
    Ok(Json(json!({ "linked": true })))
}

async fn get_faults(State(app): State<App>) -> Json<Faults> {
    Json(app.net.faults())
}

async fn set_faults(State(app): State<App>, ValidatedJson(f): ValidatedJson<Faults>) -> Result<Json<Faults>, ApiError> {
    Ok(Json(app.net.set_faults(f).map_err(err)?))
}

async fn stats(State(app): State<App>) -> Json<Value> {
    let (accounts, linked, online, conns) = app.net.stats();
    let (unacked, dropped) = app.net.unacked();
    Json(json!({
        "accounts": accounts, "linked_devices": linked, "online_sessions": online, "connections": conns,
        "unacked": unacked, "dropped": dropped,
    }))
}

/// Texts sent by many phones in one call (load tests): at most `BULK_LIMIT`.
const BULK_LIMIT: usize = 1_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkIn {
    messages: Vec<BulkText>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkText {
    from: String,
    to: String,
    text: String,
}

/// Each text as `POST /control/phones/{from}/messages` would send it: `ids` in order,
/// `null` where the network refused one (no such account, blocked).
async fn bulk_send(
    State(app): State<App>,
    ValidatedJson(b): ValidatedJson<BulkIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if b.messages.len() > BULK_LIMIT {
        return Err(ApiError::validation("at most 1000 messages a call"));
    }
    let ids: Vec<Option<String>> = b
        .messages
        .into_iter()
        .map(|m| app.net.phone_send(&m.from, &m.to, "text", Some(m.text), Value::Null).ok())
        .collect();
    let refused = ids.iter().filter(|i| i.is_none()).count();
    Ok((StatusCode::CREATED, Json(json!({ "ids": ids, "refused": refused }))))
}

async fn set_profile(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<crate::model::ProfileIn>,
) -> Result<Json<Value>, ApiError> {
    app.net.set_profile(&number, b).map_err(err)?;
    Ok(Json(json!({ "updated": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContactIn {
    number: String,
    #[serde(default)]
    name: Option<String>,
}

async fn add_contact(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<ContactIn>,
) -> Result<Json<Value>, ApiError> {
    app.net.add_contact(&number, &b.number, b.name).map_err(err)?;
    Ok(Json(json!({ "saved": true })))
}

/// What the account's linked devices set: chat settings, block list, read messages.
async fn phone_state(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    app.net.phone_state(&number).map(Json).ok_or_else(|| err(NetError::NoAccount))
}

/// Sends the account's history sync to its online devices again.
async fn resync(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    let n = app.net.resync(&number).map_err(err)?;
    Ok(Json(json!({ "devices": n })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArchiveIn {
    /// Old messages the next history sync carries (at most `model::ARCHIVE_LIMIT`).
    messages: u64,
}

/// Gives the account an archive of old messages for its next history sync.
async fn archive(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<ArchiveIn>,
) -> Result<Json<Value>, ApiError> {
    app.net.set_archive(&number, b.messages).map_err(err)?;
    Ok(Json(json!({ "messages": b.messages })))
}

/// The account's linked devices' queues: unacknowledged messages, history under way.
async fn queues(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    let (devices, dropped) = app.net.queues(&number).map_err(err)?;
    Ok(Json(json!({ "devices": devices, "dropped": dropped })))
}

/// The network forgets a media's bytes: downloading it gives 410 from now on.
async fn expire_media(State(app): State<App>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    app.net.expire_media(&id).map_err(err)?;
    Ok(Json(json!({ "expired": true })))
}

/// Media for linked devices: 410 once expired.
async fn media(State(app): State<App>, Path(id): Path<String>) -> axum::response::Response {
    use axum::response::IntoResponse;
    if app.net.faults().media_down {
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, "media servers unavailable").into_response();
    }
    match app.net.media(&id) {
        None => ApiError::new(ErrorCode::NotFound, "no such media").into_response(),
        Some(None) => ApiError::new(ErrorCode::MediaUnavailable, "the media expired").into_response(),
        Some(Some(m)) if m.endless => {
            let zeros = bytes::Bytes::from(vec![0u8; 64 * 1024]);
            let tail = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(zeros.clone()));
            let body = futures::stream::once(async move { Ok(bytes::Bytes::from(m.data)) }).chain(tail);
            ([(axum::http::header::CONTENT_TYPE, m.mime_type)], axum::body::Body::from_stream(body)).into_response()
        }
        Some(Some(m)) => ([(axum::http::header::CONTENT_TYPE, m.mime_type)], m.data).into_response(),
    }
}

async fn picture(State(app): State<App>, Path(number): Path<String>) -> axum::response::Response {
    use axum::response::IntoResponse;
    match app.net.picture(&number) {
        None => ApiError::new(ErrorCode::NotFound, "no picture").into_response(),
        Some((mime, data)) => ([(axum::http::header::CONTENT_TYPE, mime)], data).into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelIn {
    label_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    color: i32,
    #[serde(default)]
    deleted: bool,
}

/// The phone creates, edits or deletes a label (business accounts); its linked devices
/// hear of it. Applying one to a chat or message: `ops` with `label_chat` or
/// `label_message`.
async fn label(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<LabelIn>,
) -> Result<Json<Value>, ApiError> {
    use shared::contract::{DeleteLabel, NetOp, SetLabel};
    let op: NetOp = if b.deleted {
        DeleteLabel { label_id: b.label_id }.into()
    } else {
        SetLabel { label_id: b.label_id, name: b.name, color: b.color }.into()
    };
    let _ = phone_op(State(app), Path(number), ValidatedJson(op)).await?;
    Ok(Json(json!({ "sent": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdminIn {
    number: String,
    #[serde(default = "yes")]
    admin: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelPatch {
    name: Option<String>,
    description: Option<String>,
}

/// The owner changes the channel's name or description; its followers hear of it.
async fn update_channel(
    State(app): State<App>,
    Path(jid): Path<String>,
    ValidatedJson(b): ValidatedJson<ChannelPatch>,
) -> Result<Json<Value>, ApiError> {
    app.net.update_channel(&jid, b.name, b.description).map_err(err)?;
    Ok(Json(json!({ "updated": true })))
}

/// The channel's owner makes an account an admin of it (or no longer one).
async fn channel_admin(
    State(app): State<App>,
    Path(jid): Path<String>,
    ValidatedJson(b): ValidatedJson<AdminIn>,
) -> Result<Json<Value>, ApiError> {
    app.net.channel_admin(&jid, &b.number, b.admin).map_err(err)?;
    Ok(Json(json!({ "admin": b.admin })))
}

/// The phone's labels, and the chats and messages each is applied to.
async fn labels(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    app.net.labels(&number).map(Json).map_err(err)
}

/// The phone's own network operations, as a linked device asks them (the body is a
/// `contract::NetOp`: `{"op": "create_group", "subject", "participants"}`, `group_participants`,
/// `update_group`, `group_invite_link`, `join_group`, `leave_group`, ...).
async fn phone_op(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(op): ValidatedJson<shared::contract::NetOp>,
) -> Result<Json<Value>, ApiError> {
    app.net.phone_op(&number, op).map(Json).map_err(|(code, detail)| {
        let code = ErrorCode::ALL.into_iter().find(|c| c.as_str() == code).unwrap_or(ErrorCode::ValidationFailed);
        ApiError::new(code, detail)
    })
}
