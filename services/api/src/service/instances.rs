//! Instances as more than one route edits them: the rules every settable field obeys,
//! the one edit transaction, deletion with token revocation, and the record as a caller
//! sees it. The `/v1/instances` routes, the Evolution-style action routes and the bulk
//! route all call these.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::instances::{self, InstanceFields, InstanceRow, InstanceState, WriteError};
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;

use crate::state::AppState;

/// Pacing floors that only `unsafe_pacing` (admin-set) lifts.
pub const MIN_INTERVAL_FLOOR_MS: u32 = 1_000;
pub const MAX_PER_MINUTE_CEILING: u32 = 60;
/// Bounds that hold even with `unsafe_pacing`.
const MAX_INTERVAL_MS: u32 = 86_400_000;
const MAX_PER_MINUTE_UNSAFE: u32 = 100_000;
const MAX_TAGS: usize = 32;
const MAX_ALLOWLIST: usize = 100;
const MAX_MSG_CALL: usize = 4_096;

/// Call handling settings (`PATCH /instance/settings/{instanceName}` edits the same).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SettingsOut {
    /// Reject incoming voice calls.
    pub reject_call: bool,
    /// Text sent to the caller on rejection; empty sends nothing.
    pub msg_call: String,
}

/// A daily send window in the instance's time zone (`end` before `start` spans midnight).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SendWindowIo {
    /// Local time the window opens, `HH:MM`.
    #[schema(example = "09:00", pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub start: String,
    /// Local time the window closes, `HH:MM` (not the same as `start`).
    #[schema(example = "18:00", pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub end: String,
}

/// An instance.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InstanceOut {
    pub id: InstanceId,
    /// Unique, 1-64 of `[A-Za-z0-9_-]`; the `{instanceName}` of the action routes.
    pub name: String,
    pub state: InstanceState,
    /// Why the instance is in its state, when that needs saying (e.g. a temporary ban
    /// and until when); cleared by the next state change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<String>,
    pub tags: Vec<String>,
    /// CIDRs the instance's tokens may be used from; empty allows every address.
    pub ip_allowlist: Vec<String>,
    /// The admin set the allow-list: the instance's own token may only narrow it.
    pub ip_allowlist_locked: bool,
    pub min_interval_ms: u32,
    pub max_per_minute: u32,
    pub unsafe_pacing: bool,
    /// The admin set the pacing: the instance's own token may only slow it (a larger
    /// `min_interval_ms`, a smaller `max_per_minute`).
    pub pacing_locked: bool,
    /// The proxy the session connects through: its password shown as `***` (to the
    /// admin), its whole user info as `***` (to anyone else).
    pub proxy_url: Option<String>,
    /// `sim` or `whatsapp` when set for this instance (else the deployment's network).
    pub network: Option<String>,
    /// The linked number, once paired.
    pub phone: Option<String>,
    /// `personal` or `business`, once paired.
    pub account_type: Option<String>,
    pub settings: SettingsOut,
    /// IANA time zone of the send window (default `UTC`).
    pub time_zone: String,
    /// Sends happen only inside this window; absent: any time.
    pub send_window: Option<SendWindowIo>,
    /// The instance's own ban-risk policies, each replacing the deployment's
    /// (docs/ban-risk.md); absent: the deployment's. `GET {inst}/risk` shows the policy in
    /// force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk_policy: Option<shared::risk::PolicyOverrides>,
    /// The admin set `risk_policy`: the instance's own token may only make it stricter
    /// (and not return it to the deployment's with `null`).
    pub risk_policy_locked: bool,
    /// The last ban-risk evaluation (docs/ban-risk.md); absent until the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskBrief>,
    /// Set while a policy holds the queue (critical risk, a temporary ban): nothing is
    /// sent until `POST {inst}/queue/resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_paused: Option<QueuePausedOut>,
    /// The pacing the queue runs at now: the instance's, slowed by its ban risk. Only on
    /// `GET /v1/instances/{id}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_pacing: Option<EffectivePacingOut>,
    /// Messages accepted and not yet sent (queued or in flight). Only on
    /// `GET /v1/instances/{id}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Why and since when a policy holds the queue.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueuePausedOut {
    /// `risk_critical` or `temporary_ban`.
    pub reason: String,
    pub since: DateTime<Utc>,
}

/// The pacing in force (docs/ban-risk.md: adaptive pacing).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EffectivePacingOut {
    pub min_interval_ms: u32,
    pub max_per_minute: u32,
    /// Sends to chats that never wrote to the account wait (a high risk); replies go.
    pub first_contacts_held: bool,
}

impl EffectivePacingOut {
    /// The instance's pacing at its risk level, under `deployment`'s policies with the
    /// instance's own applied.
    pub fn of(r: &InstanceOut, deployment: &shared::risk::Policy) -> EffectivePacingOut {
        let policy = deployment.with(r.risk_policy.as_ref());
        let level = r.risk.as_ref().and_then(|k| shared::risk::parse_level(&k.level));
        let (min_interval_ms, max_per_minute) =
            shared::risk::effective_pacing(r.min_interval_ms, r.max_per_minute, level, policy.slowdown);
        EffectivePacingOut { min_interval_ms, max_per_minute, first_contacts_held: policy.holds_first_contacts(level) }
    }
}

/// An instance's last ban-risk evaluation; `GET {inst}/risk` explains it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RiskBrief {
    /// 0-100.
    pub score: f64,
    /// `low`, `elevated`, `high` or `critical`.
    pub level: String,
    pub evaluated_at: DateTime<Utc>,
}

impl InstanceOut {
    /// The record as `admin` or not sees it: the proxy's password is never shown, and its
    /// user name only to the admin.
    pub fn shown_to(r: InstanceRow, admin: bool) -> InstanceOut {
        let proxy = r.proxy_url.as_deref().map(|p| masked_url(p, admin));
        InstanceOut { proxy_url: proxy, ..InstanceOut::from(r) }
    }
}

impl From<InstanceRow> for InstanceOut {
    /// As anyone may see it (the proxy's whole userinfo hidden).
    fn from(r: InstanceRow) -> Self {
        InstanceOut {
            state: r.state,
            state_reason: r.state_reason.clone(),
            proxy_url: r.proxy_url.as_deref().map(hide_credentials),
            ip_allowlist_locked: r.ip_allowlist_locked,
            network: r.network.clone(),
            id: r.id,
            name: r.name,
            tags: r.tags,
            ip_allowlist: r.ip_allowlist,
            min_interval_ms: r.min_interval_ms.max(0) as u32,
            max_per_minute: r.max_per_minute.max(0) as u32,
            unsafe_pacing: r.unsafe_pacing,
            pacing_locked: r.pacing_locked,
            phone: r.phone,
            account_type: r.account_type,
            settings: SettingsOut { reject_call: r.reject_call, msg_call: r.msg_call },
            send_window: r.send_window_start.zip(r.send_window_end).map(|(a, b)| SendWindowIo {
                start: a.format("%H:%M").to_string(),
                end: b.format("%H:%M").to_string(),
            }),
            time_zone: r.time_zone,
            risk_policy: r.risk_policy.map(|p| p.0),
            risk_policy_locked: r.risk_policy_locked,
            risk: match (r.risk_score, r.risk_level, r.risk_at) {
                (Some(score), Some(level), Some(at)) => {
                    Some(RiskBrief { score: (f64::from(score) * 10.0).round() / 10.0, level, evaluated_at: at })
                }
                _ => None,
            },
            queue_paused: r
                .queue_paused_reason
                .zip(r.queue_paused_at)
                .map(|(reason, since)| QueuePausedOut { reason, since }),
            effective_pacing: None,
            queue_depth: None,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Settings fields; absent ones stay as they are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    pub reject_call: Option<bool>,
    /// Up to 4,096 characters.
    #[schema(max_length = 4096)]
    pub msg_call: Option<String>,
}

impl SettingsPatch {
    /// Sets the fields present.
    pub fn apply(self, f: &mut InstanceFields) {
        if let Some(v) = self.reject_call {
            f.reject_call = v;
        }
        if let Some(v) = self.msg_call {
            f.msg_call = v;
        }
    }
}

/// Whether every entry of `new` (non-empty) lies inside an entry of `current`.
pub fn narrows(new: &[String], current: &[String]) -> bool {
    let current: Vec<ipnet::IpNet> = current.iter().filter_map(|n| parse_net(n)).collect();
    !new.is_empty() && new.iter().all(|n| parse_net(n).is_some_and(|n| current.iter().any(|c| c.contains(&n))))
}

/// Edits an instance's settable fields in one transaction: locks the row, lets `apply`
/// change the fields, validates the result and writes it. Shared by every edit route.
pub async fn edit(
    state: &AppState,
    id: &InstanceId,
    apply: impl FnOnce(&mut InstanceFields) -> Result<(), ApiError>,
) -> Result<InstanceRow, ApiError> {
    let mut tx = state.db.begin().await?;
    let current = instances::get_for_update(&mut *tx, id).await?.ok_or_else(ApiError::instance_not_found)?;
    let mut f = InstanceFields::from(&current);
    apply(&mut f)?;
    let f = validate(f, &state.config.risk_policy())?;
    let row =
        instances::update(&mut *tx, id, &f).await.map_err(write_error)?.ok_or_else(ApiError::instance_not_found)?;
    tx.commit().await?;
    if row.name != current.name || row.ip_allowlist != current.ip_allowlist {
        crate::auth_cache::invalidate(state, id).await;
    }
    rules_changed(state, id).await;
    Ok(row)
}

/// Tells the instance's worker to read its pacing, policies and pause again now (it does
/// within 5 s anyway).
pub async fn rules_changed(state: &AppState, id: &InstanceId) {
    let rules = bytes::Bytes::from_static(shared::bus::RULES_CHANGED);
    if let Err(e) = state.nats.publish(state.subjects.instance_queue(id), rules).await {
        tracing::debug!(error = %e, "queue wake publish failed");
    }
}

/// Creates an instance from `fields` (validated here); returns it and its token, which
/// is shown only now. Shared by `POST /v1/instances` and Evolution's `instance/create`.
pub async fn create(state: &AppState, fields: InstanceFields) -> Result<(InstanceRow, String), ApiError> {
    let fields = validate(fields, &state.config.risk_policy())?;
    let token = shared::auth::generate_token(shared::auth::INSTANCE_TOKEN_PREFIX);
    let id = InstanceId::new();
    let row =
        instances::insert(&state.db, &id, &shared::auth::hash_token(&token), &fields).await.map_err(write_error)?;
    tracing::info!(instance_id = %row.id, "instance created");
    Ok((row, token))
}

/// Deletes the instance and revokes its token on every API pod. Shared with the bulk
/// route.
pub async fn delete_one(state: &AppState, id: &InstanceId) -> Result<(), ApiError> {
    if !instances::delete(&state.db, id).await? {
        return Err(ApiError::instance_not_found());
    }
    crate::auth_cache::invalidate(state, id).await;
    tracing::info!(instance_id = %id, "instance deleted");
    Ok(())
}

pub fn write_error(e: WriteError) -> ApiError {
    match e {
        WriteError::NameTaken => {
            ApiError::new(shared::ErrorCode::Conflict, "an instance with this name already exists")
        }
        WriteError::Db(e) => e.into(),
    }
}

/// Checks and normalizes every settable field (`risk_policy` against the `deployment`'s
/// policies it overrides). Messages name the field, not its value.
pub fn validate(mut f: InstanceFields, deployment: &shared::risk::Policy) -> Result<InstanceFields, ApiError> {
    if !valid_name(&f.name) {
        return Err(ApiError::validation("name must be 1-64 characters of [A-Za-z0-9_-]"));
    }
    if f.network.as_deref().is_some_and(|n| !matches!(n, "sim" | "whatsapp")) {
        return Err(ApiError::validation("network must be sim or whatsapp"));
    }
    if f.tags.len() > MAX_TAGS {
        return Err(ApiError::validation(format!("at most {MAX_TAGS} tags")));
    }
    if !f.tags.iter().all(|t| valid_tag(t)) {
        return Err(ApiError::validation("each tag must be 1-64 printable characters"));
    }
    f.tags.sort();
    f.tags.dedup();
    f.ip_allowlist = normalize_allowlist(&f.ip_allowlist)?;
    let min = f.min_interval_ms.max(0) as u32;
    let max = f.max_per_minute.max(0) as u32;
    if f.unsafe_pacing {
        if min > MAX_INTERVAL_MS || !(1..=MAX_PER_MINUTE_UNSAFE).contains(&max) {
            return Err(ApiError::validation(format!(
                "min_interval_ms must be at most {MAX_INTERVAL_MS} and max_per_minute 1-{MAX_PER_MINUTE_UNSAFE}"
            )));
        }
    } else {
        if !(MIN_INTERVAL_FLOOR_MS..=MAX_INTERVAL_MS).contains(&min) {
            return Err(ApiError::validation(format!(
                "min_interval_ms must be at least {MIN_INTERVAL_FLOOR_MS} (lower needs unsafe_pacing, set by the admin)"
            )));
        }
        if !(1..=MAX_PER_MINUTE_CEILING).contains(&max) {
            return Err(ApiError::validation(format!(
                "max_per_minute must be 1-{MAX_PER_MINUTE_CEILING} (higher needs unsafe_pacing, set by the admin)"
            )));
        }
    }
    if let Some(p) = &f.proxy_url {
        validate_proxy(p)?;
    }
    if f.time_zone.parse::<chrono_tz::Tz>().is_err() {
        return Err(ApiError::validation("time_zone must be an IANA time zone such as America/Sao_Paulo"));
    }
    if f.msg_call.chars().count() > MAX_MSG_CALL {
        return Err(ApiError::validation(format!("settings.msg_call must be at most {MAX_MSG_CALL} characters")));
    }
    if let Some(why) = f.risk_policy.as_ref().and_then(|p| deployment.with(Some(p)).invalid()) {
        return Err(ApiError::validation(format!(
            "risk_policy: {why} (with the deployment's values for fields left out)"
        )));
    }
    Ok(f)
}

/// A tag: 1-64 characters, none of them a control character.
pub fn valid_tag(t: &str) -> bool {
    !t.is_empty() && t.chars().count() <= 64 && !t.chars().any(char::is_control)
}

pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub fn parse_net(s: &str) -> Option<ipnet::IpNet> {
    let s = s.trim();
    s.parse::<ipnet::IpNet>()
        .map(|n| n.trunc())
        .ok()
        .or_else(|| s.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from))
}

fn validate_proxy(p: &str) -> Result<(), ApiError> {
    let err = || ApiError::validation("proxy_url must be an http, https, socks5 or socks5h URL with a host and port");
    let u = url::Url::parse(p).map_err(|_| err())?;
    if !matches!(u.scheme(), "http" | "https" | "socks5" | "socks5h") || u.host_str().is_none() || p.len() > 2048 {
        return Err(err());
    }
    if u.port_or_known_default().is_none() {
        return Err(err());
    }
    Ok(())
}

/// The proxy URL with its password replaced by `***`, for answers and logs.
pub fn redact_password(p: &str) -> String {
    match url::Url::parse(p) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "***".into(),
    }
}

/// A URL that may carry credentials (a proxy's, a webhook's) as `admin` or not sees it:
/// its password never (`***`), its user name only to the admin; to anyone else the
/// whole user info is `***`.
pub fn masked_url(url: &str, admin: bool) -> String {
    if admin {
        redact_password(url)
    } else {
        hide_credentials(url)
    }
}

/// The URL with its whole user info (name and password) replaced by `***`.
pub fn hide_credentials(p: &str) -> String {
    match url::Url::parse(p) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_password(None);
            let _ = u.set_username("***");
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "***".into(),
    }
}

pub fn decode_cursor(c: &str) -> Result<InstanceId, ApiError> {
    let f = crate::pagination::decode(c, &["i1"], 2)?;
    InstanceId::parse(&f[1]).map_err(|_| ApiError::validation("invalid cursor"))
}

/// An IP allow-list as stored: each entry an address or CIDR (an address is its /32 or
/// /128), at most 100, sorted and without repeats; 400 `validation_failed` otherwise.
pub fn normalize_allowlist(entries: &[String]) -> Result<Vec<String>, ApiError> {
    if entries.len() > MAX_ALLOWLIST {
        return Err(ApiError::validation(format!("at most {MAX_ALLOWLIST} ip_allowlist entries")));
    }
    let mut nets = Vec::with_capacity(entries.len());
    for entry in entries {
        nets.push(parse_net(entry).ok_or_else(|| {
            ApiError::validation("ip_allowlist entries must be IP addresses or CIDRs (e.g. 203.0.113.0/24)")
        })?);
    }
    nets.sort();
    nets.dedup();
    Ok(nets.iter().map(ToString::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> InstanceFields {
        InstanceFields {
            name: "shop-1".into(),
            tags: vec!["eu".into(), "eu".into(), "a".into()],
            ip_allowlist: vec!["203.0.113.7/24".into(), "2001:db8::1".into()],
            ip_allowlist_locked: false,
            min_interval_ms: 2000,
            max_per_minute: 20,
            unsafe_pacing: false,
            pacing_locked: false,
            proxy_url: None,
            reject_call: false,
            msg_call: String::new(),
            time_zone: "UTC".into(),
            send_window: None,
            network: None,
            risk_policy: None,
            risk_policy_locked: false,
        }
    }

    fn check(f: InstanceFields) -> Result<InstanceFields, ApiError> {
        validate(f, &shared::risk::Policy::default())
    }

    #[test]
    fn a_risk_policy_must_hold_with_the_deployment_values() {
        use shared::risk::PolicyOverrides;
        let with = |p: PolicyOverrides| InstanceFields { risk_policy: Some(p), ..fields() };
        assert!(check(with(PolicyOverrides { critical: Some(60.0), ..Default::default() })).is_ok());
        // The deployment's critical is 75: a high of 80 crosses it.
        let e = check(with(PolicyOverrides { high: Some(80.0), ..Default::default() })).unwrap_err();
        assert!(e.message.contains("risk_policy"), "{}", e.message);
        assert!(check(with(PolicyOverrides { slowdown: Some(0.5), ..Default::default() })).is_err());
        assert!(check(with(PolicyOverrides { critical: Some(101.0), ..Default::default() })).is_err());
    }

    #[test]
    fn normalizes_tags_and_networks() {
        let f = check(fields()).unwrap();
        assert_eq!(f.tags, vec!["a", "eu"]);
        assert_eq!(f.ip_allowlist, vec!["203.0.113.0/24", "2001:db8::1/128"]);
    }

    #[test]
    fn pacing_floors_hold_without_unsafe_pacing() {
        let mut f = fields();
        f.min_interval_ms = 999;
        assert!(check(f.clone()).is_err());
        f.unsafe_pacing = true;
        assert!(check(f.clone()).is_ok());
        f.unsafe_pacing = false;
        f.min_interval_ms = 1000;
        f.max_per_minute = 61;
        assert!(check(f.clone()).is_err());
        f.unsafe_pacing = true;
        assert!(check(f.clone()).is_ok());
        f.max_per_minute = 0;
        assert!(check(f).is_err());
    }

    #[test]
    fn rejects_bad_names_networks_and_proxies() {
        for bad in ["", "has space", &"x".repeat(65), "ünï"] {
            assert!(check(InstanceFields { name: bad.into(), ..fields() }).is_err(), "{bad:?}");
        }
        assert!(check(InstanceFields { ip_allowlist: vec!["10.0.0.300/8".into()], ..fields() }).is_err());
        for bad in ["ftp://h:1", "not a url", "socks5://"] {
            assert!(check(InstanceFields { proxy_url: Some(bad.into()), ..fields() }).is_err(), "{bad}");
        }
        assert!(check(InstanceFields { proxy_url: Some("socks5://u:p@127.0.0.1:1080".into()), ..fields() }).is_ok());
    }

    #[test]
    fn narrowing_stays_inside_the_admins_list() {
        let list = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let admins = list(&["203.0.113.0/24", "2001:db8::/32"]);
        assert!(narrows(&list(&["203.0.113.7"]), &admins));
        assert!(narrows(&list(&["203.0.113.128/25", "2001:db8:1::/48"]), &admins));
        assert!(!narrows(&list(&[]), &admins), "removing it");
        assert!(!narrows(&list(&["203.0.112.0/23"]), &admins), "widening it");
        assert!(!narrows(&list(&["203.0.113.7", "198.51.100.1"]), &admins), "adding another address");
        assert!(!narrows(&list(&["garbage"]), &admins));
    }

    #[test]
    fn proxy_passwords_are_redacted() {
        assert_eq!(redact_password("http://user:hunter2@proxy:3128"), "http://user:***@proxy:3128/");
        assert_eq!(redact_password("socks5://proxy:1080"), "socks5://proxy:1080");
        assert_eq!(hide_credentials("http://customer-42:hunter2@proxy:3128"), "http://***@proxy:3128/");
        assert_eq!(hide_credentials("socks5://customer-42@proxy:1080"), "socks5://***@proxy:1080");
        assert_eq!(hide_credentials("socks5://proxy:1080"), "socks5://proxy:1080");
    }

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let id = InstanceId::new();
        assert_eq!(decode_cursor(&crate::pagination::encode(&["i1", id.as_str()])).unwrap(), id);
        assert!(decode_cursor("!!").is_err());
        assert!(decode_cursor(&crate::pagination::encode(&["i1", "msg_1"])).is_err());
    }
}
