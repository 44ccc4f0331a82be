//! Action-style routes (interface.md 4.13): named after the action, `X-API-Key` header
//! (or Evolution's `apikey`), `{instanceName}` in the path, statuses 200, 400 and 404
//! (plus 401 for a missing or invalid key). An instance token naming another instance
//! gets 404, as if it did not exist. `send.rs` holds the `/message/send*` routes, queued
//! like `POST {inst}/messages`; `instance.rs` Evolution v2's instance routes (README,
//! "Coming from Evolution API"), each calling the service code `/v1` uses.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::bus::RpcRequest;
use shared::db::instances::{self, InstanceRow, InstanceState};
use shared::error::ErrorBody;
use shared::ApiError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{authenticate, Principal, ValidatedJson, ValidatedQuery};
use crate::service::instances::{SettingsOut, SettingsPatch};
use crate::service::pairing;
use crate::state::AppState;

pub mod chat;
pub mod group;
pub mod instance;
pub mod label;
pub mod profile;
pub mod send;
pub mod settings;
pub mod webhook;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(connect))
        .routes(routes!(settings))
        .merge(send::router())
        .merge(instance::router())
        .merge(chat::router())
        .merge(group::router())
        .merge(label::router())
        .merge(profile::router())
        .merge(webhook::router())
        .merge(settings::router())
}

/// The caller of an action route: `X-API-Key` checked against `{instanceName}`.
pub struct ActionKey(pub Principal);

impl FromRequestParts<AppState> for ActionKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        // `apikey` is Evolution's name for the same header.
        let key = ["x-api-key", "apikey"]
            .iter()
            .find_map(|h| parts.headers.get(*h))
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                ApiError::new(shared::ErrorCode::Unauthorized, "the X-API-Key (or apikey) header is required")
            })?;
        let principal = authenticate(key, parts, state).await?;
        principal.check_scope(parts)?;
        Ok(ActionKey(principal))
    }
}

/// The instance named by the path's `{instanceName}`, resolved (and the key checked)
/// before any body is read.
pub struct ActionInstance(pub InstanceRow);

impl FromRequestParts<AppState> for ActionInstance {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        ActionAccess::from_request_parts(parts, state).await.map(|a| ActionInstance(a.row))
    }
}

/// [`ActionInstance`] with the key that named it, for routes that call a `/v1` handler
/// (`access()` is what that handler takes).
pub struct ActionAccess {
    pub row: InstanceRow,
    pub principal: Principal,
}

impl ActionAccess {
    pub fn access(&self) -> crate::extract::InstanceAccess {
        crate::extract::InstanceAccess { principal: self.principal.clone(), id: self.row.id.clone() }
    }
}

impl FromRequestParts<AppState> for ActionAccess {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let key = ActionKey::from_request_parts(parts, state).await?;
        let params = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::instance_not_found())?;
        let name = params
            .iter()
            .find(|(k, _)| *k == "instanceName")
            .map(|(_, v)| v)
            .ok_or_else(ApiError::instance_not_found)?;
        let row = named(state, &key, name).await?;
        state.requests.record(&row.id, &key.0);
        Ok(ActionAccess { row, principal: key.0 })
    }
}

/// The instance named in the path, if the key may see it (404 otherwise).
pub(crate) async fn named(state: &AppState, key: &ActionKey, name: &str) -> Result<InstanceRow, ApiError> {
    let row = instances::get_by_name(&state.db, name).await?.ok_or_else(ApiError::instance_not_found)?;
    match &key.0 {
        Principal::Admin => Ok(row),
        p if p.own_instance() == Some(&row.id) => Ok(row),
        _ => Err(ApiError::instance_not_found()),
    }
}

/// Answer of `GET /instance/connect/{instanceName}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectActionOut {
    /// A phone pairing code when `number` was given; null otherwise.
    pub pairing_code: Option<String>,
    /// The QR payload (empty once connected).
    pub code: String,
    /// The QR code as a PNG `data:` URL (empty once connected).
    pub base64: String,
    /// The instance's state.
    pub state: InstanceState,
}

/// Query of the connect action.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ConnectQuery {
    /// Also ask for a phone pairing code for this number (digits with country code).
    pub number: Option<String>,
}

/// Connect the instance and get its QR code (changes every 20 s: call again every 10 to
/// 20 s; after 3 calls without a scan, stop and ask the user).
#[utoipa::path(get, path = "/instance/connect/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name"), ConnectQuery),
    responses(
        (status = 200, description = "the QR code (and pairing code) to link the number", body = ConnectActionOut),
        (status = 400, description = "`validation_failed`, `invalid_number` or `instance_banned`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: missing or invalid X-API-Key", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("api_key" = [])))]
async fn connect(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
    ValidatedQuery(q): ValidatedQuery<ConnectQuery>,
) -> Result<Json<ConnectActionOut>, ApiError> {
    let phone = q.number.as_deref().map(pairing::normalize_phone).transpose()?;
    pairing::start(&state, &row.id).await.map_err(as_400)?;
    let qr = pairing::wait_qr(&state, &row.id).await?;
    let pairing_code = match (&qr, phone) {
        (Some(_), Some(phone)) => {
            let v = crate::rpc::call(&state, &row.id, RpcRequest::PairingCode { phone }).await.map_err(as_400)?;
            v["pairing_code"].as_str().map(str::to_owned)
        }
        _ => None,
    };
    let current = instances::get(&state.db, &row.id).await?.ok_or_else(ApiError::instance_not_found)?;
    let (code, base64) = qr.map(|q| (q.code, q.base64)).unwrap_or_default();
    Ok(Json(ConnectActionOut { pairing_code, code, base64, state: current.state }))
}

/// Body of `PATCH /instance/settings/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsIn {
    /// Reject incoming voice calls.
    #[serde(alias = "rejectCall")]
    pub reject_call: Option<bool>,
    /// Text sent to the caller on rejection (only when reject_call); empty sends nothing.
    #[serde(alias = "msgCall")]
    pub msg_call: Option<String>,
}

/// Call handling: reject incoming calls and optionally text the caller.
#[utoipa::path(patch, path = "/instance/settings/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SettingsIn,
    responses(
        (status = 200, description = "the settings now in force", body = SettingsOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: missing or invalid X-API-Key", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("api_key" = [])))]
async fn settings(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
    ActionJson(body): ActionJson<SettingsIn>,
) -> Result<Json<SettingsOut>, ApiError> {
    let patch = SettingsPatch { reject_call: body.reject_call, msg_call: body.msg_call };
    let updated = crate::service::instances::edit(&state, &row.id, |f| {
        patch.apply(f);
        Ok(())
    })
    .await?;
    Ok(Json(SettingsOut { reject_call: updated.reject_call, msg_call: updated.msg_call }))
}

/// The refusals of Evolution's own routes: ours as they are (Evolution's clients look at
/// the status class), with the code in the envelope.
#[derive(utoipa::IntoResponses)]
pub enum EvolutionErrors {
    /// Invalid data: `validation_failed`, `business_account_required`, ...
    #[response(status = 400, description = "invalid data; the envelope's `code` tells which")]
    Invalid(ErrorBody),
    #[response(status = 401, description = "`unauthorized`: missing or invalid key")]
    Unauthorized(ErrorBody),
    #[response(
        status = 403,
        description = "`forbidden`: a key of a scope that does not reach the route, or the network refused (not an admin of the group)"
    )]
    Forbidden(ErrorBody),
    #[response(status = 404, description = "`instance_not_found`, or `not_found`")]
    NotFound(ErrorBody),
    #[response(status = 409, description = "`instance_not_connected`, `business_account_required`")]
    Conflict(ErrorBody),
    #[response(status = 429, description = "`rate_limited`: a cap of the operation (Retry-After says when)")]
    RateLimited(ErrorBody),
    #[response(status = 504, description = "`worker_timeout`")]
    Timeout(ErrorBody),
}

/// A JSON body on an action route: every refusal of it (malformed, wrong fields, over
/// the body limit) is 400, the only client error these routes use besides 401 and 404.
pub struct ActionJson<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<S> for ActionJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        ValidatedJson::<T>::from_request(req, state).await.map(|ValidatedJson(t)| ActionJson(t)).map_err(as_400)
    }
}

/// An optional JSON body on an action route: none (or only whitespace) reads as
/// `T::default()`, since Evolution's clients send these routes' filters only when they
/// have some. Refusals are [`ActionJson`]'s.
pub struct ActionBody<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Default> axum::extract::FromRequest<S> for ActionBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = bytes::Bytes::from_request(req, state)
            .await
            .map_err(|_| ApiError::validation("request body could not be read"))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(ActionBody(T::default()));
        }
        shared::http::parse_json(&bytes).map(ActionBody).map_err(as_400)
    }
}

/// The action routes document only 200, 400 and 404: other refusals become 400.
pub fn as_400(e: ApiError) -> ApiError {
    if matches!(e.status.as_u16(), 400 | 401 | 404) {
        e
    } else {
        let retryable = e.retryable;
        ApiError { status: axum::http::StatusCode::BAD_REQUEST, ..e }.with_retryable(retryable)
    }
}
