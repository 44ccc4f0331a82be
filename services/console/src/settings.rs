//! An instance's settings as the form holds them (text, as typed), and the patch that
//! changes only what was changed. The API validates every value; the console only reads
//! the form's text into JSON (a number that is no number is refused here, at its field).

use domain::instances::InstanceOut;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// The settings form's fields, by the names the API gives them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SettingsForm {
    pub name: String,
    /// Comma-separated.
    pub tags: String,
    /// Comma- or space-separated CIDRs.
    pub ip_allowlist: String,
    pub min_interval_ms: String,
    pub max_per_minute: String,
    pub time_zone: String,
    /// `HH:MM`, both empty for no window.
    pub window_start: String,
    pub window_end: String,
    /// The admin's only; shown masked.
    pub proxy_url: String,
}

/// A refusal at one field: its name as the API gives it, and the message.
pub type FieldError = (String, String);

impl SettingsForm {
    /// The form as the instance is now.
    pub fn of(i: &InstanceOut) -> SettingsForm {
        SettingsForm {
            name: i.name.clone(),
            tags: i.tags.join(", "),
            ip_allowlist: i.ip_allowlist.join(", "),
            min_interval_ms: i.min_interval_ms.to_string(),
            max_per_minute: i.max_per_minute.to_string(),
            time_zone: i.time_zone.clone(),
            window_start: i.send_window.as_ref().map(|w| w.start.clone()).unwrap_or_default(),
            window_end: i.send_window.as_ref().map(|w| w.end.clone()).unwrap_or_default(),
            proxy_url: i.proxy_url.clone().unwrap_or_default(),
        }
    }

    /// The `PATCH /v1/instances/{id}` body that changes what differs from `now` (the
    /// proxy only for the admin); `None` when nothing does.
    pub fn patch(&self, now: &SettingsForm, admin: bool) -> Result<Option<Value>, FieldError> {
        let mut p = Map::new();
        if self.name.trim() != now.name {
            p.insert("name".into(), json!(self.name.trim()));
        }
        if list(&self.tags, &[',']) != list(&now.tags, &[',']) {
            p.insert("tags".into(), json!(list(&self.tags, &[','])));
        }
        let cidrs = |s: &str| list(s, &[',', ' ', '\n', '\r', '\t']);
        if cidrs(&self.ip_allowlist) != cidrs(&now.ip_allowlist) {
            p.insert("ip_allowlist".into(), json!(cidrs(&self.ip_allowlist)));
        }
        for (field, new, old) in [
            ("min_interval_ms", &self.min_interval_ms, &now.min_interval_ms),
            ("max_per_minute", &self.max_per_minute, &now.max_per_minute),
        ] {
            if new.trim() != old {
                let n: u32 =
                    new.trim().parse().map_err(|_| (field.to_string(), format!("{field} must be a whole number")))?;
                p.insert(field.into(), json!(n));
            }
        }
        if self.time_zone.trim() != now.time_zone {
            p.insert("time_zone".into(), json!(self.time_zone.trim()));
        }
        let window = (self.window_start.trim(), self.window_end.trim());
        if window != (now.window_start.as_str(), now.window_end.as_str()) {
            let w = match window {
                ("", "") => Value::Null,
                (start, end) => json!({ "start": start, "end": end }),
            };
            p.insert("send_window".into(), w);
        }
        if admin && self.proxy_url.trim() != now.proxy_url {
            let proxy = self.proxy_url.trim();
            p.insert("proxy_url".into(), if proxy.is_empty() { Value::Null } else { json!(proxy) });
        }
        Ok((!p.is_empty()).then_some(Value::Object(p)))
    }
}

/// The non-empty items of `s` split at any of `seps`, trimmed.
fn list(s: &str, seps: &[char]) -> Vec<String> {
    s.split(seps).map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SettingsForm {
        SettingsForm {
            name: "shop".into(),
            tags: "a, b".into(),
            min_interval_ms: "2000".into(),
            max_per_minute: "20".into(),
            time_zone: "UTC".into(),
            proxy_url: "http://***@proxy:3128".into(),
            ..SettingsForm::default()
        }
    }

    #[test]
    fn only_what_changed_is_sent() {
        assert_eq!(now().patch(&now(), true).unwrap(), None, "nothing changed");
        let f = SettingsForm { tags: "a,b ,".into(), ..now() };
        assert_eq!(f.patch(&now(), true).unwrap(), None, "the same tags, written otherwise");
        let f = SettingsForm {
            min_interval_ms: " 5000".into(),
            window_start: "09:00".into(),
            window_end: "18:00".into(),
            ..now()
        };
        assert_eq!(
            f.patch(&now(), false).unwrap(),
            Some(json!({ "min_interval_ms": 5000, "send_window": { "start": "09:00", "end": "18:00" } }))
        );
        let f = SettingsForm { proxy_url: String::new(), ..now() };
        assert_eq!(f.patch(&now(), false).unwrap(), None, "the proxy is the admin's");
        assert_eq!(f.patch(&now(), true).unwrap(), Some(json!({ "proxy_url": null })));
    }

    #[test]
    fn a_number_that_is_none_is_refused_at_its_field() {
        let f = SettingsForm { max_per_minute: "lots".into(), ..now() };
        assert_eq!(f.patch(&now(), true).unwrap_err().0, "max_per_minute");
    }
}
