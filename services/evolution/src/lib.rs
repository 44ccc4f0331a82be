//! Action-style routes (interface.md 4.13): named after the action, `X-API-Key` header (or
//! Evolution's `apikey`), `{instanceName}` in the path, statuses 200, 400 and 404 (plus 401 for
//! a missing or invalid key). An instance token naming another instance gets 404, as if it did
//! not exist. `send.rs` holds the `/message/send*` routes, queued like `POST {inst}/messages`;
//! `instance.rs` Evolution v2's instance routes (docs/evolution.md), each calling the service
//! code `/v1` uses.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::bus::RpcRequest;
use shared::db::instances::{self, InstanceRow, InstanceState};
use shared::error::ErrorBody;
use shared::ApiError;
use utoipa::openapi::{schema::Schema, RefOr};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::instances::{SettingsOut, SettingsPatch};
use domain::pairing;
use door::extract::{authenticate, Principal, ValidatedJson, ValidatedQuery};
use door::AppState;

pub mod chat;
pub mod chatwoot;
pub mod group;
pub mod instance;
pub mod label;
pub mod manager;
pub mod profile;
pub mod rabbitmq;
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
        .merge(chatwoot::router())
        .merge(rabbitmq::router())
        .merge(settings::router())
        .merge(manager::router())
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
        door::extract::check_scope(&principal, parts)?;
        door::extract::check_account(&principal, parts)?;
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

/// [`ActionInstance`] with the key that named it, for routes that call the core as that
/// caller (`ctx()`).
pub struct ActionAccess {
    pub row: InstanceRow,
    pub principal: Principal,
}

impl ActionAccess {
    /// The core's context for an operation on this instance by this caller.
    pub fn ctx<'a>(&'a self, state: &'a AppState) -> domain::Ctx<'a> {
        state.ctx(&self.row.id, self.principal.caller())
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
    // No instance has a name of another form (nor could Postgres compare one with NUL).
    if !domain::instances::valid_name(name) {
        return Err(ApiError::instance_not_found());
    }
    let row = instances::get_by_name(&state.db, name).await?.ok_or_else(ApiError::instance_not_found)?;
    match key.0.reaches(&row.id, row.account_id.as_ref()) {
        true => Ok(row),
        false => Err(ApiError::instance_not_found()),
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
    #[param(value_type = Option<domain::schemas::PhoneNumber>)]
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
    let phone = q.number.as_deref().map(domain::numbers::normalize_phone).transpose()?;
    pairing::start(&state, &row.id).await.map_err(|e| as_400(e.into()))?;
    let qr = pairing::wait_qr(&state, &row.id).await?;
    let pairing_code = match (&qr, phone) {
        (Some(_), Some(phone)) => {
            let v = domain::net::call(&state, &row.id, RpcRequest::PairingCode { phone })
                .await
                .map_err(|e| as_400(e.into()))?;
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
    /// Text sent to the caller on rejection (only when reject_call), up to 4,096
    /// characters; empty sends nothing.
    #[serde(alias = "msgCall")]
    #[schema(max_length = 4096)]
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
    let updated = domain::instances::edit(&state, &row.id, |f| {
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
    #[response(
        status = 408,
        description = "`request_timeout`: a body over 1 MB was not received within `large_body.read_timeout_ms`"
    )]
    RequestTimeout(ErrorBody),
    #[response(status = 409, description = "`instance_not_connected`, `business_account_required`")]
    Conflict(ErrorBody),
    #[response(status = 413, description = "`media_too_large`: media over its size limit; `quota_exceeded`")]
    TooLarge(ErrorBody),
    #[response(status = 422, description = "`media_fetch_failed`: a media URL could not be downloaded")]
    FetchFailed(ErrorBody),
    #[response(status = 429, description = "`rate_limited`: a cap of the operation (Retry-After says when)")]
    RateLimited(ErrorBody),
    #[response(status = 503, description = "`rate_limited`: waited too long for a large-send slot")]
    Busy(ErrorBody),
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

/// An optional JSON body on an action route: none (or only whitespace, or JSON `null`)
/// reads as `T::default()`, since Evolution's clients send these routes' filters only
/// when they have some. Refusals are [`ActionJson`]'s.
pub struct ActionBody<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Default> axum::extract::FromRequest<S> for ActionBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = bytes::Bytes::from_request(req, state)
            .await
            .map_err(|_| ApiError::validation("request body could not be read"))?;
        shared::http::parse_json_or_default(&bytes).map(ActionBody).map_err(as_400)
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

/// A schema written as JSON Schema, for what the derive cannot say (alternative field
/// sets, a string the handler matches by hand, a boolean that may only be false).
/// `$ref`, `oneOf`, `anyOf` and `allOf` (with a `description` at most beside them),
/// `properties` and `items` are built recursively; the rest is read as utoipa's `Object`
/// or `Array` (`type`, `enum`, `const`, `pattern`, `format`, lengths, bounds, `required`,
/// `dependentRequired`, ...). `not` is not taken: schemathesis cannot check it on a form
/// with a file part.
pub fn json_schema(v: serde_json::Value) -> RefOr<Schema> {
    use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, Array, ArrayItems, Object, OneOfBuilder};
    let serde_json::Value::Object(mut map) = v else { panic!("a schema is a JSON object") };
    if let Some(r) = map.get("$ref").and_then(serde_json::Value::as_str) {
        return RefOr::Ref(utoipa::openapi::Ref::new(r));
    }
    let description = map.get("description").and_then(serde_json::Value::as_str).map(str::to_owned);
    let parts = |items: serde_json::Value| -> Vec<RefOr<Schema>> {
        items.as_array().expect("an array of schemas").iter().cloned().map(json_schema).collect()
    };
    if let Some(items) = map.remove("oneOf") {
        let b = parts(items).into_iter().fold(OneOfBuilder::new(), |b, i| b.item(i));
        return b.description(description).into();
    }
    if let Some(items) = map.remove("anyOf") {
        let b = parts(items).into_iter().fold(AnyOfBuilder::new(), |b, i| b.item(i));
        return b.description(description).into();
    }
    if let Some(items) = map.remove("allOf") {
        let b = parts(items).into_iter().fold(AllOfBuilder::new(), |b, i| b.item(i));
        return b.description(description).into();
    }
    if let Some(items) = map.remove("items") {
        map.insert("items".into(), serde_json::json!(false));
        let mut array: Array = serde_json::from_value(serde_json::Value::Object(map)).expect("an array schema");
        array.items = ArrayItems::RefOrSchema(Box::new(json_schema(items)));
        return RefOr::T(Schema::Array(array));
    }
    let properties = map.remove("properties");
    // utoipa's `Object` has no `const` or `dependentRequired`: they go in as extensions,
    // which are written as they are.
    let verbatim: Vec<(String, serde_json::Value)> =
        ["const", "dependentRequired"].iter().filter_map(|k| map.remove(*k).map(|v| (k.to_string(), v))).collect();
    // utoipa reads no schema without `type`: one without it takes any type.
    let typeless = !map.contains_key("type");
    if typeless {
        map.insert("type".into(), serde_json::json!("object"));
    }
    let mut object: Object = serde_json::from_value(serde_json::Value::Object(map)).expect("an object schema");
    if typeless {
        object.schema_type = utoipa::openapi::schema::SchemaType::AnyValue;
    }
    if !verbatim.is_empty() {
        let mut extensions = object.extensions.take().unwrap_or_default();
        extensions.merge(utoipa::openapi::extensions::Extensions::from_iter(verbatim));
        object.extensions = Some(extensions);
    }
    for (name, p) in properties.and_then(|p| p.as_object().cloned()).unwrap_or_default() {
        object.properties.insert(name, json_schema(p));
    }
    RefOr::T(Schema::Object(object))
}

/// A schema-only type whose schema is [`json_schema`] of `$json`, for `value_type = ...`,
/// `schema_with` or a request body. `refs = [T, ...]` names the components `$json`
/// refers to (`{"$ref": "#/components/schemas/T"}`), so the description holds them.
macro_rules! described {
    ($(#[$doc:meta])* $name:ident $(refs = [$($r:ty),* $(,)?])?, $json:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::json_schema($json)
            }
        }

        impl utoipa::ToSchema for $name {
            #[allow(unused_variables)]
            fn schemas(
                out: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
            ) {
                $($(
                    out.push((<$r as utoipa::ToSchema>::name().into(), <$r as utoipa::PartialSchema>::schema()));
                    <$r as utoipa::ToSchema>::schemas(out);
                )*)?
            }
        }
    };
}
pub(crate) use described;

/// `{"$ref": ...}` to the component `T`.
pub fn schema_ref<T: utoipa::ToSchema>() -> serde_json::Value {
    serde_json::json!({ "$ref": format!("#/components/schemas/{}", T::name()) })
}

/// An http(s) URL, as the routes that fetch one take it (its host must also be public):
/// a host name (its last label not a number), or an IPv4 address; a port; then any
/// printable ASCII. Every string of this form parses as a URL.
pub const HTTP_URL_PATTERN: &str = concat!(
    r"^https?://(([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?",
    r"|((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9]))",
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?([/?#][!-~]*)?$"
);

described!(
    /// An http(s) URL the route fetches: never a private, loopback or link-local address.
    EvoHttpUrl,
    serde_json::json!({
        "type": "string", "pattern": HTTP_URL_PATTERN,
        "description": "An http(s) URL, fetched: never a private, loopback or link-local address",
    })
);

/// Base64 as the routes decode it (unanchored): canonical padding, no bits past the last
/// byte, and at least one byte.
pub const BASE64_BODY: &str = "(([A-Za-z0-9+/]{4})+([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?|[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)";

/// A string of one of `values`, or null.
pub fn string_enum(values: &[&str], description: &str) -> serde_json::Value {
    let mut all: Vec<serde_json::Value> = values.iter().map(|v| serde_json::json!(v)).collect();
    all.push(serde_json::Value::Null);
    serde_json::json!({ "type": ["string", "null"], "enum": all, "description": description })
}

described!(
    /// A chat or recipient as the routes take it: a phone number with country code, a
    /// JID, or the status chat.
    EvoRecipient,
    serde_json::json!({
        "type": "string", "pattern": shared::jid::RECIPIENT_PATTERN,
        "description": format!("A phone number with country code, a JID, or `{}` (a status)", shared::jid::STATUS_JID),
        "examples": ["5511999990001"],
    })
);

described!(
    /// A person: a phone number with country code, or a person's JID (by number or LID).
    EvoPerson,
    serde_json::json!({
        "type": "string", "pattern": shared::jid::USER_JID_OR_PHONE_PATTERN,
        "description": format!(
            "A person: a phone number with country code, or a JID `<number>@{}` or `<id>@{}`",
            shared::jid::USER_SERVER, shared::jid::LID_SERVER
        ),
        "examples": ["5511999990001"],
    })
);

/// The longest `delay` Evolution's clients may ask for (5 minutes).
pub const DELAY_MAX_MS: u64 = 300_000;

described!(
    /// Evolution's `delay`: milliseconds (0-300000), a number or a string of digits.
    /// Accepted and checked; paceline's pacing decides when a message goes.
    Delay,
    serde_json::json!({
        "description": "Milliseconds Evolution waits before sending (0-300000): a number or a string of digits. Accepted; paceline's pacing decides when the message goes.",
        "oneOf": [
            { "type": "null" },
            { "type": "integer", "minimum": 0, "maximum": DELAY_MAX_MS },
            { "type": "string", "pattern": "^([0-2]?[0-9]{1,5}|300000)$" },
        ]
    })
);

/// A whole number at least 0 in a JSON value: an integer, or a float with no fraction
/// (`16.0`), as [`shared::http::integral`] reads them.
pub fn whole_number(v: &serde_json::Value) -> Option<u64> {
    v.as_number().and_then(shared::http::integral).and_then(|i| u64::try_from(i).ok())
}

/// A string of 1 to `max_digits` ASCII digits as a number.
pub fn digits(s: &str, max_digits: usize) -> Option<u64> {
    ((1..=max_digits).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// Checks Evolution's `delay` as [`Delay`] declares it.
pub fn check_delay(d: Option<&serde_json::Value>) -> Result<(), ApiError> {
    let ms = match d {
        None | Some(serde_json::Value::Null) => return Ok(()),
        Some(serde_json::Value::String(s)) => digits(s, 6),
        Some(v) => whole_number(v),
    };
    match ms {
        Some(ms) if ms <= DELAY_MAX_MS => Ok(()),
        _ => Err(ApiError::validation(format!(
            "delay must be 0-{DELAY_MAX_MS} milliseconds (a number or a string of digits)"
        ))),
    }
}

/// A string with a character that neither JSON Schema's `\s` nor Rust's `trim` takes
/// for white space: what "not blank" means where a handler trims.
pub const NOT_BLANK: &str = r"[^\s\u0085]";

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// What `json_schema` builds serializes back to the JSON it was given.
    #[test]
    fn json_schemas_round_trip() {
        for v in [
            json!({ "type": ["string", "null"], "enum": ["a", "b", null], "description": "d" }),
            json!({ "oneOf": [{ "type": "null" }, { "type": "integer", "minimum": 0, "maximum": 300000 }] }),
            json!({ "allOf": [{ "$ref": "#/components/schemas/X" }, { "anyOf": [
                { "type": "object", "required": ["a"], "properties": { "a": { "type": "string", "minLength": 1 } } },
                { "type": "object", "properties": { "b": { "type": "array", "items": { "type": "string" }, "minItems": 1 } } },
            ] }] }),
            json!({ "type": "string", "format": "date-time" }),
            json!({ "type": "object", "maxProperties": 0 }),
            json!({ "enum": [false, null] }),
            json!({ "oneOf": [{ "type": "null" }, { "type": "boolean", "const": false }] }),
            json!({ "dependentRequired": { "file": ["mimetype"] } }),
            json!({ "type": "object", "properties": { "x": { "pattern": "^a" } } }),
        ] {
            assert_eq!(serde_json::to_value(super::json_schema(v.clone())).unwrap(), v);
        }
    }

    /// Strings of `HTTP_URL_PATTERN`'s form parse as http(s) URLs with a host.
    #[test]
    fn http_urls_as_declared() {
        for u in [
            "http://a",
            "https://a.b-c.d_e:65535/x?y=1#z",
            "http://1.2.3.4",
            "http://255.0.10.9:0",
            "https://_:8080?q",
            "http://x9.example/a\\b%zz<>{}|^`\"'",
            "http://0.ab",
        ] {
            let parsed = url::Url::parse(u).unwrap_or_else(|e| panic!("{u}: {e}"));
            assert!(parsed.host_str().is_some(), "{u}");
        }
    }

    #[test]
    fn delay_as_declared() {
        for ok in [json!(0), json!(300000), json!(1200.0), json!("1200"), json!("000001"), json!(null)] {
            assert!(super::check_delay(Some(&ok)).is_ok(), "{ok}");
        }
        for bad in
            [json!(-1), json!(300001), json!(1.5), json!("300001"), json!(" 12"), json!("+1"), json!(""), json!(true)]
        {
            assert!(super::check_delay(Some(&bad)).is_err(), "{bad}");
        }
    }
}
