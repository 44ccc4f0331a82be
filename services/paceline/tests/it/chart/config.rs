//! The configuration the chart reaches: every key through the values schema, and the
//! example's placeholder secrets refused at start.

use std::process::Command;

use serde_json::{json, Map, Value};
use shared::config::Role;
use shared::Config;

use super::root;

/// Configuration keys with their own chart values (connection, listeners, secrets), not
/// under `config`.
const DEDICATED: &[&str] = &[
    "listen_addr",
    "metrics_addr",
    "database_url",
    "database_max_connections",
    "redis_url",
    "nats_url",
    "admin_token",
    "secrets_key",
    "public_url",
    "network",
    "migrate_on_start",
    "netsim_url",
    "netsim_listen_addr",
];

/// The JSON Schema of a configuration key, from its default value (and its type where the
/// default is absent).
fn key_schema(key: &str, default: &Value) -> Value {
    match (key, default) {
        ("log_format", _) => json!({ "enum": ["json", "pretty"] }),
        (_, Value::Bool(_)) => json!({ "type": "boolean" }),
        (_, Value::Number(n)) if n.is_f64() => json!({ "type": "number", "minimum": 0 }),
        (_, Value::Number(_)) => json!({ "type": "integer", "minimum": 0 }),
        (_, Value::String(_)) | (_, Value::Null) => json!({ "type": "string" }),
        (_, Value::Array(_)) => json!({ "type": "array", "items": { "type": "string" } }),
        (_, Value::Object(_)) => panic!("{key}: a nested configuration value"),
    }
}

/// `config` in values.schema.json lists every configuration key the chart does not set
/// itself, with its type; together with the dedicated values, every key is reachable.
/// `PACELINE_UPDATE_CHART=1` regenerates it.
#[test]
fn the_values_schema_reaches_every_configuration_key() {
    let defaults = serde_json::to_value(Config::default()).unwrap();
    let mut props = Map::new();
    for (key, default) in defaults.as_object().unwrap() {
        if !DEDICATED.contains(&key.as_str()) {
            props.insert(key.clone(), key_schema(key, default));
        }
    }
    for key in DEDICATED {
        assert!(defaults.get(*key).is_some(), "{key} is not a configuration key");
    }
    let path = root().join("helm/paceline/values.schema.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let expected = json!({ "type": "object", "additionalProperties": false, "properties": props });
    if std::env::var("PACELINE_UPDATE_CHART").as_deref() == Ok("1") {
        schema["properties"]["config"] = expected;
        std::fs::write(&path, serde_json::to_string_pretty(&schema).unwrap() + "\n").unwrap();
        return;
    }
    assert_eq!(
        schema["properties"]["config"], expected,
        "values.schema.json's config drifted from Config: PACELINE_UPDATE_CHART=1 cargo nextest run -p paceline chart"
    );
}

/// k8s/secrets.env.example's placeholders never run a cluster: the roles refuse them at
/// start, naming the key but not the value.
#[test]
fn the_examples_placeholder_secrets_are_refused_at_start() {
    let example = std::fs::read_to_string(root().join("k8s/secrets.env.example")).unwrap();
    let get = |k: &str| example.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).unwrap().to_string();
    let out = Command::new(crate::bin())
        .arg("api")
        .env_clear()
        .env("PACELINE_DATABASE_URL", "postgres://u@127.0.0.1:9/db")
        .env("PACELINE_REDIS_URL", "redis://127.0.0.1:9")
        .env("PACELINE_NATS_URL", "nats://127.0.0.1:9")
        .env("PACELINE_ADMIN_TOKEN", get("admin-token"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("admin_token is the example's placeholder"), "{stderr}");
    assert!(!stderr.contains(&get("admin-token")), "the value is not repeated");
    let config = Config {
        database_url: "postgres://u@127.0.0.1/db".into(),
        redis_url: "redis://127.0.0.1:6379".into(),
        nats_url: "nats://127.0.0.1:4222".into(),
        secrets_key: Some(get("secrets-key")),
        ..Config::default()
    };
    let e = config.validate(Role::Attendant).unwrap_err().to_string();
    assert!(e.contains("secrets_key"), "{e}");
}
