//! Evolution v2's `settings/set|find` and `proxy/set|find` (docs/evolution.md): the instance's
//! call settings and proxy, edited through the one edit transaction `/v1` uses
//! (`domain::instances::edit`). Setting a proxy is the admin's, as `proxy_url` on `/v1`; its
//! password is never shown.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use shared::db::instances::InstanceRow;
use shared::ApiError;
use utoipa::openapi::{schema::Schema, RefOr};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ActionAccess, ActionJson, EvolutionErrors};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(set_settings))
        .routes(routes!(find_settings))
        .routes(routes!(set_proxy))
        .routes(routes!(find_proxy))
}

/// Evolution's instance settings. paceline offers the call settings; the others may only
/// be false (what paceline does anyway).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoSettings {
    /// Reject incoming voice calls.
    pub reject_call: Option<bool>,
    /// Text sent to a rejected caller (up to 4,096 characters); empty sends nothing.
    #[schema(max_length = 4096)]
    pub msg_call: Option<String>,
    #[schema(schema_with = only_false)]
    pub groups_ignore: Option<bool>,
    #[schema(schema_with = only_false)]
    pub always_online: Option<bool>,
    #[schema(schema_with = only_false)]
    pub read_messages: Option<bool>,
    #[schema(schema_with = only_false)]
    pub read_status: Option<bool>,
    #[schema(schema_with = only_false)]
    pub sync_full_history: Option<bool>,
}

/// An Evolution setting paceline does not offer: false (what paceline does) or null.
fn only_false() -> RefOr<Schema> {
    super::json_schema(json!({
        "oneOf": [{ "type": "null" }, { "type": "boolean", "const": false }],
        "description": "Not offered by paceline: only false (what paceline does)."
    }))
}

fn settings_of(r: &InstanceRow) -> EvoSettings {
    EvoSettings {
        reject_call: Some(r.reject_call),
        msg_call: Some(r.msg_call.clone()),
        groups_ignore: Some(false),
        always_online: Some(false),
        read_messages: Some(false),
        read_status: Some(false),
        sync_full_history: Some(false),
    }
}

/// Set the instance's settings.
#[utoipa::path(post, path = "/settings/set/{instanceName}", tag = "evolution", operation_id = "evolution_settings_set",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoSettings,
    responses((status = 200, description = "the settings now", body = EvoSettings), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn set_settings(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoSettings>,
) -> Result<Json<EvoSettings>, ApiError> {
    for (name, on) in [
        ("groupsIgnore", b.groups_ignore),
        ("alwaysOnline", b.always_online),
        ("readMessages", b.read_messages),
        ("readStatus", b.read_status),
        ("syncFullHistory", b.sync_full_history),
    ] {
        if on == Some(true) {
            return Err(ApiError::validation(format!("{name} is not offered by paceline (only false)")));
        }
    }
    let patch = domain::instances::SettingsPatch { reject_call: b.reject_call, msg_call: b.msg_call };
    let row = domain::instances::edit(&state, &a.row.id, |f| {
        patch.apply(f);
        Ok(())
    })
    .await?;
    Ok(Json(settings_of(&row)))
}

/// The instance's settings.
#[utoipa::path(get, path = "/settings/find/{instanceName}", tag = "evolution", operation_id = "evolution_settings_find",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "the settings", body = EvoSettings), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_settings(a: ActionAccess) -> Json<EvoSettings> {
    Json(settings_of(&a.row))
}

/// Evolution's proxy (the body of `proxy/set` is [`EvoProxySet`]).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoProxy {
    pub enabled: Option<bool>,
    pub host: Option<String>,
    /// A number or a numeric string (1-65535).
    pub port: Option<serde_json::Value>,
    /// `http`, `https`, `socks5` or `socks5h`.
    pub protocol: Option<String>,
    pub username: Option<String>,
    /// Taken when set; never shown.
    #[serde(skip_serializing)]
    pub password: Option<String>,
}

/// A proxy's host name (letters, digits, `-` and `_`; its last label not a number), IPv4
/// address, or IPv6 address in brackets.
const HOST_PATTERN: &str = concat!(
    r"^(([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?",
    r"|((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
    r"|\[(([0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}|([0-9A-Fa-f]{1,4}:){1,7}:|([0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}",
    r"|([0-9A-Fa-f]{1,4}:){1,5}(:[0-9A-Fa-f]{1,4}){1,2}|([0-9A-Fa-f]{1,4}:){1,4}(:[0-9A-Fa-f]{1,4}){1,3}",
    r"|([0-9A-Fa-f]{1,4}:){1,3}(:[0-9A-Fa-f]{1,4}){1,4}|([0-9A-Fa-f]{1,4}:){1,2}(:[0-9A-Fa-f]{1,4}){1,5}",
    r"|[0-9A-Fa-f]{1,4}:(:[0-9A-Fa-f]{1,4}){1,6}|:((:[0-9A-Fa-f]{1,4}){1,7}|:))\])$"
);

/// A port as a string of digits: 1-65535.
const PORT_PATTERN: &str = "^0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$";

/// The protocols a proxy may speak.
const PROTOCOLS: [&str; 4] = ["http", "https", "socks5", "socks5h"];

super::described!(
    /// Body of `proxy/set`: `enabled: false` removes the proxy; otherwise `host` and
    /// `port` are required.
    EvoProxySet,
    json!({ "allOf": [
        {
            "type": "object",
            "description": "Evolution's proxy. `enabled: false` removes it; otherwise `host` and `port` are required.",
            "properties": {
                "enabled": { "type": ["boolean", "null"] },
                "host": { "type": ["string", "null"], "minLength": 1, "maxLength": 253, "pattern": HOST_PATTERN,
                          "description": "A host name, an IPv4 address, or an IPv6 address in brackets." },
                "port": { "oneOf": [
                    { "type": "null" },
                    { "type": "integer", "minimum": 1, "maximum": 65535 },
                    { "type": "string", "pattern": PORT_PATTERN },
                ], "description": "1-65535: a number or a string of digits." },
                "protocol": super::string_enum(&PROTOCOLS, "`http` (the default), `https`, `socks5` or `socks5h`."),
                "username": { "type": ["string", "null"], "maxLength": 256, "pattern": "^[ -~]*$",
                              "description": "Printable ASCII, up to 256 characters; empty for none." },
                "password": { "type": ["string", "null"], "maxLength": 256, "pattern": "^[ -~]*$",
                              "description": "Printable ASCII, up to 256 characters; taken with `username`, never shown." },
            },
        },
        { "anyOf": [
            { "type": "object", "required": ["enabled"], "properties": { "enabled": { "enum": [false] } } },
            { "type": "object", "required": ["host", "port"],
              "properties": { "host": { "type": "string" }, "port": { "type": ["integer", "string"] } } },
        ] },
    ] })
);

/// Whether `h` is a host [`HOST_PATTERN`] takes.
fn host_ok(h: &str) -> bool {
    if let Some(inner) = h.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return !inner.contains('.') && inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    if h.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    let labels: Vec<&str> = h.split('.').collect();
    let label_ok = |l: &&str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let last_ok = labels.last().and_then(|l| l.bytes().next()).is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    h.len() <= 253 && labels.iter().all(label_ok) && last_ok
}

/// A port given as a number or a string of digits, if it is 1-65535.
fn port_of(p: &serde_json::Value) -> Option<u16> {
    let n = match p {
        serde_json::Value::String(s) => {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<u64>().ok()).flatten()
        }
        v => super::whole_number(v),
    }?;
    u16::try_from(n).ok().filter(|p| *p >= 1)
}

/// The proxy a row's `proxy_url` says (the user name only to the admin; never the password).
fn proxy_of(r: &InstanceRow, admin: bool) -> EvoProxy {
    let Some(u) = r.proxy_url.as_deref().and_then(|p| url::Url::parse(p).ok()) else {
        return EvoProxy { enabled: Some(false), ..EvoProxy::default() };
    };
    let user = (!u.username().is_empty()).then(|| if admin { u.username().to_string() } else { "***".into() });
    EvoProxy {
        enabled: Some(true),
        host: u.host_str().map(str::to_string),
        port: u.port_or_known_default().map(|p| serde_json::Value::String(p.to_string())),
        protocol: Some(u.scheme().to_string()),
        username: user,
        password: None,
    }
}

/// Set or remove the instance's proxy (the admin token, as `proxy_url` on `/v1`).
#[utoipa::path(post, path = "/proxy/set/{instanceName}", tag = "evolution", operation_id = "evolution_proxy_set",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoProxySet,
    responses((status = 200, description = "the proxy now (no password)", body = EvoProxy), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn set_proxy(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoProxy>,
) -> Result<Json<EvoProxy>, ApiError> {
    if !a.principal.is_admin() {
        return Err(ApiError::forbidden("the proxy can only be set with the admin token (the global key)"));
    }
    // The fields given are checked whether or not the proxy is being removed.
    if b.host.as_deref().is_some_and(|h| !host_ok(h)) {
        return Err(ApiError::validation("host must be a host name, an IPv4 address or an IPv6 address in brackets"));
    }
    let port = match b.port.as_ref().filter(|p| !p.is_null()) {
        Some(p) => Some(port_of(p).ok_or_else(|| ApiError::validation("port must be 1-65535"))?),
        None => None,
    };
    if b.protocol.as_deref().is_some_and(|p| !PROTOCOLS.contains(&p)) {
        return Err(ApiError::validation("protocol must be http, https, socks5 or socks5h"));
    }
    for (name, v) in [("username", &b.username), ("password", &b.password)] {
        if v.as_deref().is_some_and(|v| v.chars().count() > 256 || !v.bytes().all(|c| (b' '..=b'~').contains(&c))) {
            return Err(ApiError::validation(format!("{name} must be up to 256 printable ASCII characters")));
        }
    }
    let url = if b.enabled == Some(false) {
        None
    } else {
        let host = b.host.ok_or_else(|| ApiError::validation("host is required"))?;
        let port = port.ok_or_else(|| ApiError::validation("port is required (1-65535)"))?;
        let protocol = b.protocol.unwrap_or_else(|| "http".into());
        let mut u = url::Url::parse(&format!("{protocol}://proxy.invalid"))
            .map_err(|_| ApiError::validation("protocol must be http, https, socks5 or socks5h"))?;
        u.set_host(Some(&host)).map_err(|_| ApiError::validation("host must be a host name or an address"))?;
        let _ = u.set_port(Some(port));
        if let Some(user) = b.username.filter(|s| !s.is_empty()) {
            let _ = u.set_username(&user);
            let _ = u.set_password(b.password.as_deref());
        }
        Some(u.to_string().trim_end_matches('/').to_string())
    };
    let row = domain::instances::edit(&state, &a.row.id, |f| {
        f.proxy_url = url;
        Ok(())
    })
    .await?;
    Ok(Json(proxy_of(&row, true)))
}

/// The instance's proxy (no password; the user name only to the admin).
#[utoipa::path(get, path = "/proxy/find/{instanceName}", tag = "evolution", operation_id = "evolution_proxy_find",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "the proxy", body = EvoProxy), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_proxy(a: ActionAccess) -> Json<EvoProxy> {
    Json(proxy_of(&a.row, a.principal.is_admin()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_hosts_and_ports_as_declared() {
        for ok in ["10.0.0.1", "proxy.example.com", "my_proxy", "a-b.c1", "[::1]", "[2001:db8::8a2e:370:7334]"] {
            assert!(host_ok(ok), "{ok}");
            let mut u = url::Url::parse("http://proxy.invalid").unwrap();
            assert!(u.set_host(Some(ok)).is_ok(), "{ok} is a URL's host");
        }
        for bad in
            ["", "1.2.3.999", "01.2.3.4", "-a.com", "a-", "a..b", "host name", "é.com", "[::ffff:1.2.3.4]", "1.2.3"]
        {
            assert!(!host_ok(bad), "{bad}");
        }
        for (p, want) in [
            (json!(3128), Some(3128)),
            (json!("3128"), Some(3128)),
            (json!("003128"), Some(3128)),
            (json!(3128.0), Some(3128)),
        ] {
            assert_eq!(port_of(&p), want, "{p}");
        }
        for p in [json!(0), json!(65536), json!("+1"), json!(" 1"), json!(""), json!(true), json!(1.5)] {
            assert_eq!(port_of(&p), None, "{p}");
        }
    }
}
