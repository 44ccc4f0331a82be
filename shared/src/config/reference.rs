//! The configuration's reference, read from [`Config`] itself: every key with its
//! environment variable, default and meaning (the fields' doc comments, through their
//! schema). `docs/configuration.md`'s table and the chart's values schema are written from
//! it by the chart's test, which fails when either drifts from the code.

use serde_json::Value;

use super::{Config, ALIASES};

/// One configuration key.
#[derive(Debug, Clone)]
pub struct Key {
    /// `section.key`, or `key` at the top level.
    pub path: String,
    /// Its section, if any.
    pub section: Option<String>,
    /// `PACELINE_<SECTION>__<KEY>` or `PACELINE_<KEY>`.
    pub env: String,
    /// Its default, as a file or the environment gives it (durations in milliseconds).
    pub default: Value,
    /// Its meaning: the field's doc comment, on one line.
    pub description: String,
    /// The flat name it had before the sections, if it had another.
    pub former: Option<&'static str>,
}

/// One section: its name and meaning.
#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    pub description: String,
}

fn one_line(v: &Value) -> String {
    v.as_str().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An inlined section's schema: utoipa wraps it in a one-armed `oneOf` (beside the
/// section's default).
fn inlined(field: &Value) -> &Value {
    match field.get("oneOf").or_else(|| field.get("allOf")).and_then(Value::as_array) {
        Some(arms) if arms.len() == 1 => &arms[0],
        _ => field,
    }
}

/// Every section, and every key: the top level first, then each section's, by name.
pub fn reference() -> (Vec<Section>, Vec<Key>) {
    let schema = serde_json::to_value(<Config as utoipa::PartialSchema>::schema()).expect("a schema serializes");
    let defaults = serde_json::to_value(Config::default()).expect("the defaults serialize");
    let props = schema["properties"].as_object().expect("Config's properties");
    let (mut sections, mut top, mut nested) = (Vec::new(), Vec::new(), Vec::new());
    let key = |path: String, section: Option<&str>, field: &Value, default: &Value| Key {
        env: format!("PACELINE_{}", path.replace('.', "__").to_ascii_uppercase()),
        former: ALIASES.iter().find(|(_, new)| *new == path).map(|(old, _)| *old),
        section: section.map(str::to_string),
        default: default.clone(),
        description: one_line(&field["description"]),
        path,
    };
    // By name (JSON objects here are sorted maps), so the reference reads like an index.
    for name in defaults.as_object().expect("an object").keys() {
        let field = inlined(&props[name.as_str()]);
        match field.get("properties").and_then(Value::as_object) {
            Some(inner) => {
                sections.push(Section { name: name.clone(), description: one_line(&field["description"]) });
                for (k, f) in inner {
                    nested.push(key(format!("{name}.{k}"), Some(name), f, &defaults[name.as_str()][k.as_str()]));
                }
            }
            None => top.push(key(name.clone(), None, field, &defaults[name.as_str()])),
        }
    }
    top.extend(nested);
    (sections, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key is documented, and every former name is one key's.
    #[test]
    fn every_key_has_a_meaning_and_every_former_name_a_key() {
        let (sections, keys) = reference();
        assert!(sections.len() >= 10);
        for k in &keys {
            assert!(!k.description.is_empty(), "{} has no doc comment", k.path);
        }
        for s in &sections {
            assert!(!s.description.is_empty(), "[{}] has no doc comment", s.name);
        }
        for (old, new) in ALIASES {
            assert_eq!(keys.iter().filter(|k| k.path == *new).count(), 1, "{old} → {new}");
        }
        let lease = keys.iter().find(|k| k.path == "worker.lease_ttl_ms").expect("a sectioned key");
        assert_eq!(
            (lease.env.as_str(), lease.former, &lease.default),
            ("PACELINE_WORKER__LEASE_TTL_MS", Some("lease_ttl_ms"), &serde_json::json!(6000))
        );
    }
}
