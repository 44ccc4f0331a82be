//! The control API of contract.md ("netsim control API"), for tests, demos and load tests.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
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
        .route("/control/phones/{number}/messages", post(phone_send))
        .route("/control/phones/{number}/inbox", get(inbox))
        .route("/control/phones/{number}/read", post(read))
        .route("/control/phones/{number}/logout", post(logout))
        .route("/control/phones/{number}/ban", post(ban))
        .route("/control/phones/{number}/call", post(call))
        .route(
            "/control/phones/{number}/block",
            post(|State(app): State<App>, Path(n): Path<String>, ValidatedJson(b): ValidatedJson<BlockIn>| set_blocked(app, n, b, true)),
        )
        .route(
            "/control/phones/{number}/unblock",
            post(|State(app): State<App>, Path(n): Path<String>, ValidatedJson(b): ValidatedJson<BlockIn>| set_blocked(app, n, b, false)),
        )
        .route("/control/calls", get(calls))
        .route("/control/scan", post(scan))
        .route("/control/enter-code", post(enter_code))
        .route("/control/faults", get(get_faults).post(set_faults))
        .route("/control/stats", get(stats))
}

fn err(e: NetError) -> ApiError {
    match e {
        NetError::NoAccount | NetError::NotFound | NetError::UnknownCode => ApiError::new(ErrorCode::NotFound, e.to_string()),
        NetError::Banned => ApiError::new(ErrorCode::InstanceBanned, e.to_string()),
        NetError::Exists => ApiError::new(ErrorCode::Conflict, e.to_string()),
        NetError::Invalid(m) => ApiError::validation(m),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterIn {
    number: String,
    #[serde(default)]
    business: bool,
}

async fn register(State(app): State<App>, ValidatedJson(b): ValidatedJson<RegisterIn>) -> Result<(StatusCode, Json<Value>), ApiError> {
    app.net.register(&b.number, b.business).map_err(err)?;
    Ok((StatusCode::CREATED, Json(json!({ "number": b.number, "business": b.business }))))
}

async fn phone(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    let (business, banned, linked, online) = app.net.phone_info(&number).ok_or_else(|| err(NetError::NoAccount))?;
    Ok(Json(json!({ "number": number, "business": business, "banned": banned,
                    "linked_devices": linked, "online_devices": online })))
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
}

fn text_kind() -> String {
    "text".into()
}

async fn phone_send(
    State(app): State<App>,
    Path(number): Path<String>,
    ValidatedJson(b): ValidatedJson<PhoneSendIn>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let id = app.net.phone_send(&number, &b.to, &b.kind, b.text, b.body).map_err(err)?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))))
}

async fn inbox(State(app): State<App>, Path(number): Path<String>) -> Result<Json<Value>, ApiError> {
    let inbox = app.net.inbox(&number).ok_or_else(|| err(NetError::NoAccount))?;
    Ok(Json(serde_json::to_value(inbox).expect("inbox serializes")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadIn {
    id: String,
}

async fn read(State(app): State<App>, Path(number): Path<String>, ValidatedJson(b): ValidatedJson<ReadIn>) -> Result<Json<Value>, ApiError> {
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

async fn call(State(app): State<App>, Path(number): Path<String>, ValidatedJson(b): ValidatedJson<CallIn>) -> Result<(StatusCode, Json<Value>), ApiError> {
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

async fn enter_code(State(app): State<App>, ValidatedJson(b): ValidatedJson<EnterCodeIn>) -> Result<Json<Value>, ApiError> {
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
    Json(json!({ "accounts": accounts, "linked_devices": linked, "online_sessions": online, "connections": conns }))
}
