//! The rules every settable field of an instance obeys, and how URLs with credentials
//! (a proxy's, a webhook's) are shown.

use shared::db::instances::InstanceFields;
use shared::ids::InstanceId;

use super::{MAX_PER_MINUTE_CEILING, MIN_INTERVAL_FLOOR_MS};
use crate::{Error, Result};

/// Bounds that hold even with `unsafe_pacing`.
const MAX_INTERVAL_MS: u32 = 86_400_000;
const MAX_PER_MINUTE_UNSAFE: u32 = 100_000;
const MAX_TAGS: usize = 32;
const MAX_ALLOWLIST: usize = 100;
const MAX_MSG_CALL: usize = 4_096;

/// Whether every entry of `new` (non-empty) lies inside an entry of `current`.
pub fn narrows(new: &[String], current: &[String]) -> bool {
    let current: Vec<ipnet::IpNet> = current.iter().filter_map(|n| parse_net(n)).collect();
    !new.is_empty() && new.iter().all(|n| parse_net(n).is_some_and(|n| current.iter().any(|c| c.contains(&n))))
}

/// Checks and normalizes every settable field (`risk_policy` against the `deployment`'s
/// policies it overrides). Messages name the field, not its value.
pub fn validate(mut f: InstanceFields, deployment: &shared::risk::Policy) -> Result<InstanceFields> {
    if !valid_name(&f.name) {
        return Err(Error::field("name", "name must be 1-64 characters of [A-Za-z0-9_-]"));
    }
    if f.network.as_deref().is_some_and(|n| !matches!(n, "sim" | "whatsapp")) {
        return Err(Error::field("network", "network must be sim or whatsapp"));
    }
    if f.tags.len() > MAX_TAGS {
        return Err(Error::field("tags", format!("at most {MAX_TAGS} tags")));
    }
    if !f.tags.iter().all(|t| valid_tag(t)) {
        return Err(Error::field("tags", "each tag must be 1-64 printable characters"));
    }
    f.tags.sort();
    f.tags.dedup();
    f.ip_allowlist = normalize_allowlist(&f.ip_allowlist)?;
    let min = f.min_interval_ms.max(0) as u32;
    let max = f.max_per_minute.max(0) as u32;
    if f.unsafe_pacing {
        if min > MAX_INTERVAL_MS || !(1..=MAX_PER_MINUTE_UNSAFE).contains(&max) {
            let field = if min > MAX_INTERVAL_MS { "min_interval_ms" } else { "max_per_minute" };
            return Err(Error::field(
                field,
                format!(
                    "min_interval_ms must be at most {MAX_INTERVAL_MS} and max_per_minute 1-{MAX_PER_MINUTE_UNSAFE}"
                ),
            ));
        }
    } else {
        if !(MIN_INTERVAL_FLOOR_MS..=MAX_INTERVAL_MS).contains(&min) {
            return Err(Error::field(
                "min_interval_ms",
                format!(
                    "min_interval_ms must be {MIN_INTERVAL_FLOOR_MS}-{MAX_INTERVAL_MS} (lower needs unsafe_pacing, set by the admin)"
                ),
            ));
        }
        if !(1..=MAX_PER_MINUTE_CEILING).contains(&max) {
            return Err(Error::field(
                "max_per_minute",
                format!(
                    "max_per_minute must be 1-{MAX_PER_MINUTE_CEILING} (higher needs unsafe_pacing, set by the admin)"
                ),
            ));
        }
    }
    if let Some(p) = &f.proxy_url {
        validate_proxy(p)?;
    }
    if f.time_zone.parse::<chrono_tz::Tz>().is_err() {
        return Err(Error::field("time_zone", "time_zone must be an IANA time zone such as America/Sao_Paulo"));
    }
    if f.msg_call.chars().count() > MAX_MSG_CALL {
        return Err(Error::field(
            "settings.msg_call",
            format!("settings.msg_call must be at most {MAX_MSG_CALL} characters"),
        ));
    }
    if let Some(why) = f.risk_policy.as_ref().and_then(|p| deployment.with(Some(p)).invalid()) {
        return Err(Error::field(
            "risk_policy",
            format!("risk_policy: {why} (with the deployment's values for fields left out)"),
        ));
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

fn validate_proxy(p: &str) -> Result<()> {
    let err =
        || Error::field("proxy_url", "proxy_url must be an http, https, socks5 or socks5h URL with a host and port");
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

pub fn decode_cursor(c: &str) -> Result<InstanceId> {
    let f = crate::page::decode(c, &["i1"], 2)?;
    InstanceId::parse(&f[1]).map_err(|_| Error::invalid("invalid cursor"))
}

/// An IP allow-list as stored: each entry an address or CIDR (an address is its /32 or
/// /128), at most 100, sorted and without repeats; 400 `validation_failed` otherwise.
pub fn normalize_allowlist(entries: &[String]) -> Result<Vec<String>> {
    if entries.len() > MAX_ALLOWLIST {
        return Err(Error::field("ip_allowlist", format!("at most {MAX_ALLOWLIST} ip_allowlist entries")));
    }
    let mut nets = Vec::with_capacity(entries.len());
    for entry in entries {
        nets.push(parse_net(entry).ok_or_else(|| {
            Error::field("ip_allowlist", "ip_allowlist entries must be IP addresses or CIDRs (e.g. 203.0.113.0/24)")
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

    fn check(f: InstanceFields) -> Result<InstanceFields> {
        validate(f, &shared::risk::Policy::default())
    }

    #[test]
    fn a_risk_policy_must_hold_with_the_deployment_values() {
        use shared::risk::PolicyOverrides;
        let with = |p: PolicyOverrides| InstanceFields { risk_policy: Some(p), ..fields() };
        assert!(check(with(PolicyOverrides { critical: Some(60.0), ..Default::default() })).is_ok());
        // The deployment's critical is 75: a high of 80 crosses it.
        let e = check(with(PolicyOverrides { high: Some(80.0), ..Default::default() })).unwrap_err();
        assert!(e.to_string().contains("risk_policy"), "{e}");
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
        assert_eq!(decode_cursor(&crate::page::encode(&["i1", id.as_str()])).unwrap(), id);
        assert!(decode_cursor("!!").is_err());
        assert!(decode_cursor(&crate::page::encode(&["i1", "msg_1"])).is_err());
    }
}
