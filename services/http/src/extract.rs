//! Extractors for cross-cutting input: the authenticated principal, validated JSON and
//! query strings. Every rejection renders the error envelope.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
pub use shared::http::{parse_json, sanitize_serde_message, ValidatedJson};
use shared::ids::InstanceId;
use shared::ApiError;

use crate::state::AppState;

pub use domain::auth::Principal;

/// 403 when a key's scope does not reach the route being called (its method and matched
/// path, looked up in `access`); other principals pass.
pub fn check_scope(principal: &Principal, parts: &Parts) -> Result<(), ApiError> {
    let Principal::Key { scope, .. } = principal else { return Ok(()) };
    let path = parts.extensions.get::<axum::extract::MatchedPath>().map(|p| p.as_str());
    match path.and_then(|p| crate::access::of(&parts.method, p)) {
        Some(access) if access.admits(*scope) => Ok(()),
        _ => Err(ApiError::forbidden(format!("a {} API key does not reach this route", scope.as_str()))),
    }
}

/// 403 when an account token calls a route it does not reach (the admin's), or, while
/// its account is suspended, anything but a read; other principals pass.
pub fn check_account(principal: &Principal, parts: &Parts) -> Result<(), ApiError> {
    let Principal::Account { suspended, .. } = principal else { return Ok(()) };
    let path = parts.extensions.get::<axum::extract::MatchedPath>().map(|p| p.as_str());
    match path.and_then(|p| crate::access::of(&parts.method, p).map(|a| (a, p))) {
        Some((access, path)) if access.admits_account() => {
            if *suspended && !access.reads(&parts.method, path) {
                return Err(ApiError::forbidden("the account is suspended: its tokens may only read"));
            }
            Ok(())
        }
        _ => Err(ApiError::forbidden("an account token does not reach this route")),
    }
}

/// The client's address, from the socket or a trusted proxy's header (every line of
/// it); `None` when it cannot be told.
pub fn client_ip(parts: &Parts, state: &AppState) -> Option<IpAddr> {
    let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>()?.0.ip();
    let lines: Vec<&[u8]> =
        parts.headers.get_all(state.config.api.client_ip_header.as_str()).iter().map(|v| v.as_bytes()).collect();
    domain::ip::client_ip(peer, &lines, &state.config.api.trusted_proxies)
}

/// Resolves a bearer token (from `Authorization` or `X-API-Key`) to a principal.
pub async fn authenticate(token: &str, parts: &Parts, state: &AppState) -> Result<Principal, ApiError> {
    authenticate_from(token, || client_ip(parts, state), state).await
}

/// [`authenticate`] for a client at the address `ip` gives (asked only when the token
/// has an allow-list).
pub async fn authenticate_from(
    token: &str,
    ip: impl FnOnce() -> Option<IpAddr>,
    state: &AppState,
) -> Result<Principal, ApiError> {
    Ok(domain::auth::authenticate(state, token, ip).await?)
}

/// The bearer token of `Authorization: Bearer <token>`, if well-formed.
fn bearer(parts: &Parts) -> Option<&str> {
    bearer_of(&parts.headers)
}

/// The bearer token in `headers`, if well-formed.
pub fn bearer_of(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        let principal = authenticate(token, parts, state).await?;
        check_scope(&principal, parts)?;
        check_account(&principal, parts)?;
        Ok(principal)
    }
}

/// The caller and the instance named by the path's `{id}`, checked before any body is
/// read: another instance's token gets 403 whatever the body, and an instance that does
/// not exist 404 `instance_not_found`.
pub struct InstanceAccess {
    pub principal: Principal,
    pub id: InstanceId,
}

impl InstanceAccess {
    /// The core's context for an operation on this instance by this caller.
    pub fn ctx<'a>(&'a self, state: &'a AppState) -> domain::Ctx<'a> {
        state.ctx(&self.id, self.principal.caller())
    }
}

impl FromRequestParts<AppState> for InstanceAccess {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        instance_access(parts, state, |e| e).await
    }
}

/// [`InstanceAccess`] on the webhook and delivery routes, where another instance's
/// token gets 404 `not_found` instead of 403 (interface.md part 5): whether another
/// tenant has a webhook of some id is not told.
pub struct WebhookAccess {
    pub principal: Principal,
    pub id: InstanceId,
}

impl FromRequestParts<AppState> for WebhookAccess {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let InstanceAccess { principal, id } =
            instance_access(parts, state, |_| ApiError::not_found("webhook")).await?;
        Ok(WebhookAccess { principal, id })
    }
}

/// The principal and the path's instance; `other` maps the refusal of another
/// instance's token.
async fn instance_access(
    parts: &mut Parts,
    state: &AppState,
    other: impl FnOnce(ApiError) -> ApiError,
) -> Result<InstanceAccess, ApiError> {
    let principal = Principal::from_request_parts(parts, state).await?;
    let params = axum::extract::RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|_| ApiError::instance_not_found())?;
    let raw = params.iter().find(|(k, _)| *k == "id").map(|(_, v)| v).ok_or_else(ApiError::instance_not_found)?;
    let id = principal.instance(state, raw).await.map_err(|e| other(e.into()))?;
    // An instance token's instance exists (its lookup found it); the admin's may not,
    // and every route answers that the same way, before its own work.
    if matches!(principal, Principal::Admin) && !shared::db::instances::exists(&state.db, &id).await? {
        return Err(ApiError::instance_not_found());
    }
    // Counted once per request, though a layer may check access before the handler does.
    if parts.extensions.get::<Counted>().is_none() {
        state.requests.record(&id, &principal);
        parts.extensions.insert(Counted);
    }
    Ok(InstanceAccess { principal, id })
}

/// Marks a request counted in the usage.
#[derive(Clone, Copy)]
struct Counted;

/// The caller and the account named by the path's `{account_id}` on
/// `/v1/accounts/{account_id}` routes: the admin reaches every account (404 `not_found` for one that does not
/// exist), an account token only its own (403 otherwise), checked before any body is
/// read.
pub struct AccountAccess {
    pub principal: Principal,
    pub id: shared::ids::AccountId,
}

impl FromRequestParts<AppState> for AccountAccess {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let principal = Principal::from_request_parts(parts, state).await?;
        let params = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found("account"))?;
        let raw = params
            .iter()
            .find(|(k, _)| *k == "account_id")
            .map(|(_, v)| v)
            .ok_or_else(|| ApiError::not_found("account"))?;
        let id = principal.account_in_path(raw)?;
        if principal.is_admin() && shared::db::accounts::get(&state.db, &id).await?.is_none() {
            return Err(ApiError::not_found("account"));
        }
        Ok(AccountAccess { principal, id })
    }
}

/// The admin principal: any other valid token gets 403 before the body is read.
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(Principal::from_request_parts(parts, state).await?.require_admin().map(|()| Admin)?)
    }
}

/// The admin or an account token, on the routes of a whole fleet (the instance list and
/// creation): `account` is the token's account (none for the admin), whose instances
/// alone it reaches. Instance tokens and keys get 403 before the body is read.
pub struct Fleet {
    pub account: Option<shared::ids::AccountId>,
}

impl FromRequestParts<AppState> for Fleet {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        match Principal::from_request_parts(parts, state).await? {
            Principal::Admin => Ok(Fleet { account: None }),
            Principal::Account { id, .. } => Ok(Fleet { account: Some(id) }),
            _ => Err(ApiError::forbidden("this operation needs the admin token or an account token")),
        }
    }
}

/// A query string parsed into `T`, with 400 `validation_failed` on failure.
pub struct ValidatedQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ValidatedQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        if form_urlencoded::parse(query.as_bytes()).any(|(k, v)| k.contains('\0') || v.contains('\0')) {
            return Err(ApiError::validation("query parameters must not contain the NUL character"));
        }
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de).map(ValidatedQuery).map_err(|e| {
            let path = e.path().to_string();
            let reason = sanitize_serde_message(&e.into_inner().to_string());
            ApiError::validation(format!("invalid query parameter `{path}`: {reason}"))
        })
    }
}

/// The client's address as allow-lists see it (`None`: it cannot be told).
pub struct ClientIp(pub Option<IpAddr>);

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(ClientIp(client_ip(parts, state)))
    }
}

/// Path parameters, typed (ids, JIDs): one that does not parse is 400
/// `validation_failed` naming the parameter, in the error envelope.
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(p) => Ok(Path(p.0)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => Err(match e.into_kind() {
                ErrorKind::ParseErrorAtKey { key, .. } | ErrorKind::InvalidUtf8InPathParam { key } => {
                    ApiError::validation(format!("the path parameter `{key}` is not of its form"))
                }
                _ => ApiError::validation("a path parameter is not of its form"),
            }),
            Err(e) => Err(ApiError::internal(e)),
        }
    }
}
