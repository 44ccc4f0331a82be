//! Evolution v2's instance routes (docs/evolution.md), addressed by the
//! instance's name, each a thin mapping onto the service code `/v1` uses: creation
//! (`domain::instances::create`), pairing (`domain::pairing`), deletion. The admin
//! token is Evolution's global key: it creates and lists instances and acts on any; an
//! instance token acts on its own. Shapes follow Evolution v2's
//! `src/api/controllers/instance.controller.ts`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use evolution_shape::connection_state;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use shared::db::instances::{self, InstanceFields, InstanceRow, ListFilter};
use shared::ApiError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::EvolutionErrors;
use super::{ActionInstance, ActionJson, ActionKey};
use domain::pairing;
use door::extract::{Principal, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(fetch_instances))
        .routes(routes!(connection_state_route))
        .routes(routes!(restart))
        .routes(routes!(logout))
        .routes(routes!(delete))
        .routes(routes!(set_presence))
}

/// Body of `POST /instance/create` (Evolution's `InstanceDto`; fields paceline has no
/// use for are accepted and ignored).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoCreateIn {
    /// 1-64 of `[A-Za-z0-9_-]`.
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}$")]
    pub instance_name: String,
    /// Evolution lets the client choose the token; paceline always makes its own (`hash`).
    pub token: Option<String>,
    /// Start pairing now and answer with the first QR code.
    #[serde(default)]
    pub qrcode: bool,
    /// With `qrcode`: also ask for a phone pairing code for this number (a phone number
    /// with country code).
    #[schema(value_type = Option<domain::schemas::PhoneNumber>)]
    pub number: Option<String>,
    /// `WHATSAPP-BAILEYS` (the default); the other integrations are not offered.
    #[schema(schema_with = integration_schema)]
    pub integration: Option<String>,
    pub reject_call: Option<bool>,
    /// Text sent to a rejected caller, up to 4,096 characters.
    #[schema(max_length = 4096)]
    pub msg_call: Option<String>,
    /// Evolution's webhook, registered with the instance (as `webhook/set`; `url` is
    /// required here).
    #[schema(value_type = Option<super::webhook::EvoNewWebhook>)]
    pub webhook: Option<super::webhook::EvoWebhookIn>,
}

fn integration_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(super::string_enum(
        &[INTEGRATION],
        "`WHATSAPP-BAILEYS` (the default); the other integrations are not offered.",
    ))
}

/// Evolution's `instance` object in answers.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoInstanceBrief {
    pub instance_name: String,
    /// Our `inst_...` id.
    pub instance_id: String,
    pub integration: String,
    /// `created`, `connecting`, `open` or `close`.
    pub status: String,
}

/// Evolution's `qrcode` object.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoQrcodeOut {
    pub pairing_code: Option<String>,
    pub code: String,
    /// A PNG `data:` URL.
    pub base64: String,
    pub count: u32,
}

/// Answer of `POST /instance/create`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvoCreateOut {
    pub instance: EvoInstanceBrief,
    /// The instance's token (`pl_inst_...`), shown only here: send it as `apikey`.
    pub hash: String,
    /// Evolution's settings object (`rejectCall`, `msgCall`, ...).
    #[schema(value_type = Object)]
    pub settings: Value,
    /// The webhook given with `webhook`, with its signing secret (shown only here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<super::webhook::EvoWebhookOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qrcode: Option<EvoQrcodeOut>,
}

const INTEGRATION: &str = "WHATSAPP-BAILEYS";

/// Evolution's global key in `apikey` or `X-API-Key`, checked before any body is read:
/// our admin token, or an account token, the global key of its own instances (its
/// account the one they are created in).
pub struct GlobalKey(pub Option<shared::ids::AccountId>);

impl axum::extract::FromRequestParts<AppState> for GlobalKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> Result<Self, ApiError> {
        let ActionKey(key) = ActionKey::from_request_parts(parts, state).await?;
        match key {
            Principal::Admin => Ok(GlobalKey(None)),
            Principal::Account { id, .. } => Ok(GlobalKey(Some(id))),
            _ => Err(ApiError::forbidden(
                "creating instances needs the global key (the admin token or an account token)",
            )),
        }
    }
}

fn settings_of(r: &InstanceRow) -> Value {
    json!({
        "rejectCall": r.reject_call, "msgCall": r.msg_call, "groupsIgnore": false, "alwaysOnline": false,
        "readMessages": false, "readStatus": false, "syncFullHistory": false,
    })
}

/// The first QR code after pairing started (waiting up to `api.connect_qr_wait_ms`), with a
/// phone pairing code when `number` is given.
async fn first_qr(state: &AppState, row: &InstanceRow, number: Option<&str>) -> Result<Option<EvoQrcodeOut>, ApiError> {
    let phone = number.map(domain::numbers::normalize_phone).transpose()?;
    pairing::start(state, &row.id).await?;
    let Some(qr) = pairing::wait_qr(state, &row.id).await? else { return Ok(None) };
    let pairing_code = match phone {
        Some(phone) => {
            let req = shared::bus::RpcRequest::PairingCode { phone };
            let v = domain::net::call(state, &row.id, req).await?;
            v["pairing_code"].as_str().map(str::to_owned)
        }
        None => None,
    };
    Ok(Some(EvoQrcodeOut { pairing_code, code: qr.code, base64: qr.base64, count: 1 }))
}

/// Create an instance (the admin token, Evolution's global key). Answers 201 with its
/// token in `hash`, and with `qrcode: true` the first QR code.
#[utoipa::path(post, path = "/instance/create", tag = "evolution", operation_id = "evolution_instance_create",
    request_body = EvoCreateIn,
    responses(
        (status = 201, description = "created", body = EvoCreateOut),
        (status = 400, description = "`validation_failed`", body = shared::error::ErrorBody),
        (status = 401, description = "`unauthorized`: a missing or invalid key", body = shared::error::ErrorBody),
        (status = 403, description = "`forbidden`: not the global key (Evolution answers 401)", body = shared::error::ErrorBody),
        (status = 409, description = "`conflict`: the name is taken", body = shared::error::ErrorBody),
        (status = 504, description = "`worker_timeout`: with `qrcode`, the pairing code was not given in time", body = shared::error::ErrorBody),
    ),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn create(
    State(state): State<AppState>,
    GlobalKey(account): GlobalKey,
    ActionJson(b): ActionJson<EvoCreateIn>,
) -> Result<(StatusCode, Json<EvoCreateOut>), ApiError> {
    if b.integration.as_deref().is_some_and(|i| i != INTEGRATION) {
        return Err(ApiError::validation("integration must be WHATSAPP-BAILEYS (the only one paceline offers)"));
    }
    // The number is checked whether or not pairing starts now.
    if let Some(n) = b.number.as_deref() {
        domain::numbers::normalize_phone(n)?;
    }
    let fields = InstanceFields {
        name: b.instance_name,
        tags: vec![],
        ip_allowlist: vec![],
        ip_allowlist_locked: false,
        min_interval_ms: state.config.pacing.default_min_interval_ms as i32,
        max_per_minute: state.config.pacing.default_max_per_minute as i32,
        unsafe_pacing: false,
        pacing_locked: false,
        proxy_url: None,
        reject_call: b.reject_call.unwrap_or(false),
        msg_call: b.msg_call.unwrap_or_default(),
        time_zone: "UTC".into(),
        send_window: None,
        network: None,
        risk_policy: None,
        risk_policy_locked: false,
    };
    // The webhook is checked before anything is created.
    let hook = match b.webhook {
        Some(w) => Some(super::webhook::prepare(&state, w, None).await?),
        None => None,
    };
    let (row, token) = domain::instances::create(&state, fields, account.as_ref()).await?;
    let webhook = match hook {
        Some(p) => Some(super::webhook::store(&state, &row, p, None, true).await?),
        None => None,
    };
    let qrcode = if b.qrcode { first_qr(&state, &row, b.number.as_deref()).await? } else { None };
    let status = if qrcode.is_some() { "connecting" } else { "created" };
    let instance = EvoInstanceBrief {
        instance_name: row.name.clone(),
        instance_id: row.id.to_string(),
        integration: INTEGRATION.into(),
        status: status.into(),
    };
    Ok((
        StatusCode::CREATED,
        Json(EvoCreateOut { instance, hash: token, settings: settings_of(&row), webhook, qrcode }),
    ))
}

/// Query of `GET /instance/fetchInstances`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct EvoFetchQuery {
    /// Only the instance of this name.
    pub instance_name: Option<String>,
    /// Only the instance of this id.
    pub instance_id: Option<String>,
}

/// One instance as Evolution v2's `fetchInstances` lists it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoFetchedInstance {
    /// Our `inst_...` id.
    pub id: String,
    pub name: String,
    /// `open`, `connecting` or `close`.
    pub connection_status: String,
    /// The account's JID, once paired.
    pub owner_jid: Option<String>,
    /// The account's profile name as its session last reported it.
    pub profile_name: Option<String>,
    /// Always null: the network's picture addresses expire; `fetchProfilePictureUrl`
    /// asks for a fresh one.
    pub profile_pic_url: Option<String>,
    pub integration: String,
    /// The account's number, once paired.
    pub number: Option<String>,
    /// The instance's token, to the admin, the instance's account and the instance itself
    /// (sealed at rest, docs/evolution.md); null to a restricted key, and for a token made
    /// before tokens were sealed until it is rotated (`POST /v1/instances/{id}/token`).
    pub token: Option<String>,
    pub disconnection_reason_code: Option<i32>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    #[serde(rename = "Setting")]
    #[schema(value_type = Object)]
    pub setting: Value,
    #[serde(rename = "_count")]
    pub count: EvoCounts,
}

/// What an instance holds, as Evolution counts it.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct EvoCounts {
    /// Messages sent and received (as usage counts them).
    #[serde(rename = "Message")]
    pub message: i64,
    /// The people among its chats.
    #[serde(rename = "Contact")]
    pub contact: i64,
    /// Its chats.
    #[serde(rename = "Chat")]
    pub chat: i64,
}

impl From<InstanceRow> for EvoFetchedInstance {
    fn from(r: InstanceRow) -> Self {
        EvoFetchedInstance {
            id: r.id.to_string(),
            connection_status: connection_state(r.state.as_str()).into(),
            owner_jid: r.phone.as_deref().map(|p| shared::jid::Jid::user(p).into()),
            profile_name: r.profile_name.clone(),
            profile_pic_url: None,
            integration: INTEGRATION.into(),
            number: r.phone.clone(),
            token: None,
            disconnection_reason_code: None,
            created_at: r.created_at,
            updated_at: r.updated_at,
            setting: settings_of(&r),
            count: EvoCounts::default(),
            name: r.name,
        }
    }
}

/// The most instances one `fetchInstances` answer lists (`GET /v1/instances` pages them all).
const FETCH_LIMIT: i64 = 1_000;

/// List instances: every one with the global key (up to 1,000, oldest first; any one
/// by `instanceName` or `instanceId`), an account's with its token (up to 1,000), only
/// its own with an instance token.
#[utoipa::path(get, path = "/instance/fetchInstances", tag = "evolution", operation_id = "evolution_instance_fetchInstances",
    params(EvoFetchQuery),
    responses(
        (status = 200, description = "the instances", body = Vec<EvoFetchedInstance>),
        (status = 400, description = "`validation_failed`", body = shared::error::ErrorBody),
        (status = 401, description = "`unauthorized`", body = shared::error::ErrorBody),
    ),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn fetch_instances(
    State(state): State<AppState>,
    ActionKey(key): ActionKey,
    ValidatedQuery(q): ValidatedQuery<EvoFetchQuery>,
) -> Result<Json<Vec<EvoFetchedInstance>>, ApiError> {
    let rows: Vec<InstanceRow> = match &key {
        // One instance by name or id: read directly, wherever it is among the first 1,000.
        Principal::Admin if q.instance_name.is_some() => {
            instances::get_by_name(&state.db, q.instance_name.as_deref().unwrap_or_default())
                .await?
                .into_iter()
                .collect()
        }
        Principal::Admin if q.instance_id.is_some() => {
            match q.instance_id.as_deref().map(shared::ids::InstanceId::parse) {
                Some(Ok(id)) => instances::get(&state.db, &id).await?.into_iter().collect(),
                _ => vec![],
            }
        }
        Principal::Admin => instances::list(&state.db, &ListFilter { limit: FETCH_LIMIT, ..ListFilter::default() })
            .await?
            .into_iter()
            .collect(),
        Principal::Account { id, .. } => {
            let filter = ListFilter { account: Some(id.clone()), limit: FETCH_LIMIT, ..ListFilter::default() };
            instances::list(&state.db, &filter).await?
        }
        p => match p.own_instance() {
            Some(id) => instances::get(&state.db, id).await?.into_iter().collect(),
            None => vec![],
        },
    };
    let wanted = |r: &InstanceRow| {
        q.instance_name.as_deref().is_none_or(|n| n == r.name)
            && q.instance_id.as_deref().is_none_or(|i| i == r.id.as_str())
    };
    let rows: Vec<InstanceRow> = rows.into_iter().filter(wanted).collect();
    let ids: Vec<shared::ids::InstanceId> = rows.iter().map(|r| r.id.clone()).collect();
    // Tokens to whoever holds the instance already (never to a restricted key).
    let mut tokens = match &key {
        Principal::Admin | Principal::Account { .. } | Principal::Instance { .. } => {
            domain::instances::token::shown(&state, &ids).await?
        }
        _ => Default::default(),
    };
    let mut counts: std::collections::HashMap<_, _> = instances::counts(&state.db, &ids)
        .await?
        .into_iter()
        .map(|(id, chat, contact, message)| (id, EvoCounts { message, contact, chat }))
        .collect();
    Ok(Json(
        rows.into_iter()
            .map(|r| {
                let (token, count) = (tokens.remove(&r.id), counts.remove(&r.id).unwrap_or_default());
                EvoFetchedInstance { token, count, ..EvoFetchedInstance::from(r) }
            })
            .collect(),
    ))
}

/// Evolution's `{instance: {instanceName, state}}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvoConnectionStateOut {
    pub instance: EvoStateBrief,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoStateBrief {
    pub instance_name: String,
    /// `open`, `connecting` or `close`.
    pub state: String,
}

fn state_of(r: &InstanceRow) -> EvoConnectionStateOut {
    EvoConnectionStateOut {
        instance: EvoStateBrief { instance_name: r.name.clone(), state: connection_state(r.state.as_str()).into() },
    }
}

/// The instance's connection state, in Evolution's words.
#[utoipa::path(get, path = "/instance/connectionState/{instanceName}", tag = "evolution", operation_id = "evolution_instance_connectionState",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "the state", body = EvoConnectionStateOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn connection_state_route(ActionInstance(row): ActionInstance) -> Json<EvoConnectionStateOut> {
    Json(state_of(&row))
}

/// Restart the session (as `POST /v1/instances/{id}/restart`).
#[utoipa::path(post, path = "/instance/restart/{instanceName}", tag = "evolution", operation_id = "evolution_instance_restart",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "restarting; the state now", body = EvoConnectionStateOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn restart(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
) -> Result<Json<EvoConnectionStateOut>, ApiError> {
    pairing::restart_one(&state, &row.id).await?;
    let row = instances::get(&state.db, &row.id).await?.ok_or_else(ApiError::instance_not_found)?;
    Ok(Json(state_of(&row)))
}

/// Evolution's `{status, error, response: {message}}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvoStatusOut {
    /// `SUCCESS`.
    pub status: String,
    pub error: bool,
    #[schema(value_type = Object)]
    pub response: Value,
}

fn success(message: &str) -> Json<EvoStatusOut> {
    Json(EvoStatusOut { status: "SUCCESS".into(), error: false, response: json!({ "message": message }) })
}

/// Unlink the device (as `POST /v1/instances/{id}/logout`).
#[utoipa::path(delete, path = "/instance/logout/{instanceName}", tag = "evolution", operation_id = "evolution_instance_logout",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "logged out", body = EvoStatusOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn logout(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
) -> Result<Json<EvoStatusOut>, ApiError> {
    pairing::logout_one(&state, &row.id).await?;
    Ok(success("Instance logged out"))
}

/// Delete the instance (as `DELETE /v1/instances/{id}`): its token stops working.
#[utoipa::path(delete, path = "/instance/delete/{instanceName}", tag = "evolution", operation_id = "evolution_instance_delete",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "deleted", body = EvoStatusOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn delete(
    State(state): State<AppState>,
    ActionInstance(row): ActionInstance,
) -> Result<Json<EvoStatusOut>, ApiError> {
    domain::instances::delete_one(&state, &row.id).await?;
    Ok(success("Instance deleted"))
}

/// Body of `POST /instance/setPresence/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoPresenceIn {
    /// `available` or `unavailable`.
    #[schema(schema_with = presence_schema)]
    pub presence: String,
}

fn presence_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(json!({
        "type": "string", "enum": ["available", "unavailable"], "description": "`available` or `unavailable`."
    }))
}

/// The account's presence (online or not), for all its chats.
#[utoipa::path(post, path = "/instance/setPresence/{instanceName}", tag = "evolution", operation_id = "evolution_instance_setPresence",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoPresenceIn,
    responses((status = 200, description = "set", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn set_presence(
    State(state): State<AppState>,
    a: super::ActionAccess,
    ActionJson(b): ActionJson<EvoPresenceIn>,
) -> Result<Json<Value>, ApiError> {
    let available = match b.presence.as_str() {
        "available" => true,
        "unavailable" => false,
        _ => return Err(ApiError::validation("presence must be available or unavailable")),
    };
    domain::profile::set_presence(a.ctx(&state), available).await?;
    Ok(Json(json!({ "presence": b.presence })))
}
