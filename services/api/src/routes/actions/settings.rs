//! Evolution v2's `settings/set|find` and `proxy/set|find` (README, "Coming from
//! Evolution API"): the instance's call settings and proxy, edited through the one edit
//! transaction `/v1` uses (`service::instances::edit`). Setting a proxy is the admin's,
//! as `proxy_url` on `/v1`; its password is never shown.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::db::instances::InstanceRow;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ActionAccess, ActionJson, EvolutionErrors};
use crate::state::AppState;

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
    pub reject_call: Option<bool>,
    pub msg_call: Option<String>,
    pub groups_ignore: Option<bool>,
    pub always_online: Option<bool>,
    pub read_messages: Option<bool>,
    pub read_status: Option<bool>,
    pub sync_full_history: Option<bool>,
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
    let patch = crate::service::instances::SettingsPatch { reject_call: b.reject_call, msg_call: b.msg_call };
    let row = crate::service::instances::edit(&state, &a.row.id, |f| {
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

/// Evolution's proxy.
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
    request_body = EvoProxy,
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
    let url = if b.enabled == Some(false) {
        None
    } else {
        let host = b.host.filter(|h| !h.is_empty()).ok_or_else(|| ApiError::validation("host is required"))?;
        let port = b
            .port
            .and_then(|p| p.as_u64().or_else(|| p.as_str().and_then(|s| s.parse().ok())))
            .filter(|p| (1..=65535).contains(p))
            .ok_or_else(|| ApiError::validation("port must be 1-65535"))?;
        let protocol = b.protocol.unwrap_or_else(|| "http".into());
        let mut u = url::Url::parse(&format!("{protocol}://proxy.invalid"))
            .map_err(|_| ApiError::validation("protocol must be http, https, socks5 or socks5h"))?;
        u.set_host(Some(&host)).map_err(|_| ApiError::validation("host must be a host name or an address"))?;
        let _ = u.set_port(Some(port as u16));
        if let Some(user) = b.username.filter(|s| !s.is_empty()) {
            let _ = u.set_username(&user);
            let _ = u.set_password(b.password.as_deref());
        }
        Some(u.to_string().trim_end_matches('/').to_string())
    };
    let row = crate::service::instances::edit(&state, &a.row.id, |f| {
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
