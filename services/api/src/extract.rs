//! Extractors for cross-cutting input: the authenticated principal, validated JSON and
//! query strings. Every rejection renders the error envelope.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use shared::auth::{self, TokenKind};
use shared::db::instances;
use shared::ids::InstanceId;
use shared::ApiError;

use crate::state::AppState;

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The operator's admin token: reaches everything.
    Admin,
    /// An instance token: reaches only its own instance.
    Instance { id: InstanceId, name: String },
}

impl Principal {
    pub fn is_admin(&self) -> bool {
        matches!(self, Principal::Admin)
    }

    /// 403 unless the caller is the admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::forbidden("this operation needs the admin token"))
        }
    }

    /// Checks access to the instance named in the path and parses its id. An instance
    /// token naming any other instance gets 403 (whether or not that instance exists);
    /// the admin gets 404 for an id that cannot exist.
    pub fn instance(&self, raw_id: &str) -> Result<InstanceId, ApiError> {
        match self {
            Principal::Admin => InstanceId::parse(raw_id).map_err(|_| ApiError::instance_not_found()),
            Principal::Instance { id, .. } if id.as_str() == raw_id => Ok(id.clone()),
            Principal::Instance { .. } => Err(ApiError::forbidden("this token belongs to another instance")),
        }
    }
}

/// The client's address, from the socket or a trusted proxy's header.
pub fn client_ip(parts: &Parts, state: &AppState) -> Option<IpAddr> {
    let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>()?.0.ip();
    let header = parts.headers.get(state.config.client_ip_header.as_str()).and_then(|v| v.to_str().ok());
    Some(shared::net::client_ip(peer, header, &state.config.trusted_proxies))
}

/// Resolves a bearer token (from `Authorization` or `X-API-Key`) to a principal.
pub async fn authenticate(token: &str, parts: &Parts, state: &AppState) -> Result<Principal, ApiError> {
    match TokenKind::of(token) {
        Some(TokenKind::Admin) if auth::admin_token_matches(token, &state.admin_token) => Ok(Principal::Admin),
        Some(TokenKind::Instance) => {
            let found = instances::auth_by_token_hash(&state.db, &auth::hash_token(token)).await?;
            let inst = found.ok_or_else(ApiError::unauthorized)?;
            if !inst.ip_allowlist.is_empty() {
                let nets: Vec<ipnet::IpNet> = inst.ip_allowlist.iter().filter_map(|n| n.parse().ok()).collect();
                let ip = client_ip(parts, state);
                if !ip.is_some_and(|ip| shared::net::allowed(ip, &nets)) {
                    return Err(ApiError::forbidden("this token may not be used from this address"));
                }
            }
            Ok(Principal::Instance { id: inst.id, name: inst.name })
        }
        _ => Err(ApiError::unauthorized()),
    }
}

/// The bearer token of `Authorization: Bearer <token>`, if well-formed.
fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        authenticate(token, parts, state).await
    }
}

/// The admin principal: any other valid token gets 403 before the body is read.
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Principal::from_request_parts(parts, state).await?.require_admin().map(|()| Admin)
    }
}

/// A JSON body parsed whatever the Content-Type, with 400 `validation_failed` for
/// malformed JSON or wrong fields and 413 `media_too_large` over the route's body limit.
pub struct ValidatedJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ValidatedJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(shared::ErrorCode::MediaTooLarge, "request body is larger than this route accepts")
            } else {
                ApiError::validation("request body could not be read")
            }
        })?;
        parse_json(&bytes).map(ValidatedJson)
    }
}

/// Parses JSON with an error message that names the field but never echoes input values.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::validation("request body must be a JSON document"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let reason = sanitize_serde_message(&inner.to_string());
        let msg = match inner.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                format!("malformed JSON at line {} column {}", inner.line(), inner.column())
            }
            // The last path segment of an unknown field is the input's own key: drop it.
            _ if reason.starts_with("unknown field") => match path.rsplit_once('.') {
                Some((parent, _)) => format!("invalid object `{parent}`: {reason}"),
                None => format!("invalid request body: {reason}"),
            },
            _ if path == "." || path.is_empty() => format!("invalid request body: {reason}"),
            _ => format!("invalid field `{path}`: {reason}"),
        };
        ApiError::validation(msg)
    })
}

/// Strips user-supplied values from serde's messages and its position suffix: values
/// may be phone numbers or secrets. serde quotes input before `, expected` (`invalid
/// type: integer `5511…``, `unknown variant `…``) and schema words after it; only
/// `missing field` and `duplicate field` quote a schema word before it.
pub fn sanitize_serde_message(msg: &str) -> String {
    let msg = msg.split(" at line ").next().unwrap_or(msg);
    let (head, tail) = match msg.find(", expected") {
        Some(i) => msg.split_at(i),
        None => (msg, ""),
    };
    if head.starts_with("missing field") || head.starts_with("duplicate field") {
        return msg.to_string();
    }
    let mut out = String::with_capacity(msg.len());
    let mut rest = head;
    while let Some(start) = rest.find(['"', '`']) {
        let quote = rest.as_bytes()[start] as char;
        out.push_str(&rest[..start]);
        out.push_str("(value)");
        let after = &rest[start + 1..];
        rest = after.find(quote).map_or("", |end| &after[end + 1..]);
    }
    out.push_str(rest);
    out.push_str(tail);
    out
}

/// A query string parsed into `T`, with 400 `validation_failed` on failure.
pub struct ValidatedQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ValidatedQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de).map(ValidatedQuery).map_err(|e| {
            let path = e.path().to_string();
            let reason = sanitize_serde_message(&e.into_inner().to_string());
            ApiError::validation(format!("invalid query parameter `{path}`: {reason}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        count: u32,
        kind: Option<Kind>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Kind {
        Text,
    }

    #[test]
    fn json_errors_name_fields_not_values() {
        let e = parse_json::<Body>(br#"{"count": "5511999990001"}"#).unwrap_err();
        assert!(e.message.contains("`count`"), "{}", e.message);
        assert!(!e.message.contains("5511999990001"), "{}", e.message);
        let e = parse_json::<Body>(br#"{"count": 1, "kind": "5511999990001"}"#).unwrap_err();
        assert!(!e.message.contains("5511999990001"), "{}", e.message);
        assert!(e.message.contains("`text`"), "expected variants stay: {}", e.message);
        let e = parse_json::<Body>(br#"{"count": 1, "pl_inst_secret": 1}"#).unwrap_err();
        assert!(!e.message.contains("pl_inst_secret"), "{}", e.message);
        let e = parse_json::<Body>(br#"{"count": 5511999990001}"#).unwrap_err();
        assert!(!e.message.contains("5511999990001"), "{}", e.message);
        let e = parse_json::<Body>(br#"{}"#).unwrap_err();
        assert!(e.message.contains("missing field `count`"), "{}", e.message);
        let e = parse_json::<Body>(b"{not json").unwrap_err();
        assert!(e.message.starts_with("malformed JSON"), "{}", e.message);
        let e = parse_json::<Body>(b"").unwrap_err();
        assert_eq!(e.code, shared::ErrorCode::ValidationFailed);
        assert!(parse_json::<Body>(br#"{"count": 3}"#).is_ok());
    }
}
