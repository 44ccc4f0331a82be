//! The configuration the chart reaches: every key through the values schema, and the
//! example's placeholder secrets refused at start.

use std::process::Command;

use serde_json::{json, Map, Value};
use shared::config::reference::{reference, Key, Section};
use shared::config::Role;
use shared::Config;

use super::root;

/// Configuration keys with their own chart values (connection, listeners, secrets), not
/// under `config`.
const DEDICATED: &[&str] = &[
    "listen_addr",
    "metrics_addr",
    "database_url",
    "database.max_connections",
    "redis_url",
    "nats_url",
    "admin_token",
    "secrets_key",
    "public_url",
    "network",
    "migrate_on_start",
    "netsim.url",
    "netsim.listen_addr",
];

/// The JSON Schema of a configuration key, from its default value (and its type where the
/// default is absent), with its meaning.
fn key_schema(key: &Key) -> Value {
    let mut schema = match (key.path.as_str(), &key.default) {
        ("log.format", _) => json!({ "enum": ["json", "pretty"] }),
        // Optional day counts (unset: another key's value).
        (path, Value::Null) if path.ends_with("_days") => json!({ "type": "integer", "minimum": 1 }),
        (_, Value::Bool(_)) => json!({ "type": "boolean" }),
        (_, Value::Number(n)) if n.is_f64() => json!({ "type": "number", "minimum": 0 }),
        (_, Value::Number(_)) => json!({ "type": "integer", "minimum": 0 }),
        (_, Value::String(_)) | (_, Value::Null) => json!({ "type": "string" }),
        (_, Value::Array(_)) => json!({ "type": "array", "items": { "type": "string" } }),
        (path, Value::Object(_)) => panic!("{path}: a nested configuration value"),
    };
    schema["description"] = json!(key.description);
    schema
}

/// A default as the table shows it; durations also in a unit a reader counts in.
fn shown(key: &Key) -> String {
    let human = |ms: u64| {
        [(86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1_000, "s")]
            .into_iter()
            .find(|(unit, _)| ms >= *unit && ms.is_multiple_of(*unit))
            .map(|(unit, name)| format!(" ({} {name})", ms / unit))
            .unwrap_or_default()
    };
    match &key.default {
        Value::Null => "none".into(),
        Value::String(s) if s.is_empty() => "none".into(),
        Value::Array(a) if a.is_empty() => "none".into(),
        Value::String(s) => format!("`{s}`"),
        Value::Number(n) if key.path.ends_with("_ms") => format!("{n}{}", human(n.as_u64().unwrap_or(0))),
        v => v.to_string(),
    }
}

/// docs/configuration.md's generated part: a table per section, then the former names.
fn docs_table(sections: &[Section], keys: &[Key]) -> String {
    let row = |k: &Key| {
        let name = k.path.rsplit('.').next().unwrap_or(&k.path);
        format!("| `{name}` | `{}` | {} | {} |\n", k.env, shown(k), k.description.replace('|', "\\|"))
    };
    let head = "| key | environment | default | meaning |\n|---|---|---|---|\n";
    let mut out = format!("{GENERATED_BEGIN}\n\n## Top level\n\n{head}");
    keys.iter().filter(|k| k.section.is_none()).for_each(|k| out.push_str(&row(k)));
    for s in sections {
        out.push_str(&format!("\n## `[{}]`\n\n{}\n\n{head}", s.name, s.description));
        keys.iter().filter(|k| k.section.as_deref() == Some(&s.name)).for_each(|k| out.push_str(&row(k)));
    }
    out.push_str(
        "\n## Former names\n\nThe flat names of earlier releases are still read, in a file and in the \
                  environment (`PACELINE_` and the name in upper case); the sectioned key wins when both are given.\n\n\
                  | former name | now |\n|---|---|\n",
    );
    for k in keys {
        if let Some(old) = k.former {
            out.push_str(&format!("| `{old}` | `{}` |\n", k.path));
        }
    }
    out.push_str(&format!("\n{GENERATED_END}\n"));
    out
}

const GENERATED_BEGIN: &str = "<!-- Generated from shared::Config by services/paceline/tests/it/chart/config.rs; \
                               PACELINE_UPDATE_CHART=1 cargo nextest run -p paceline chart rewrites it. -->";
const GENERATED_END: &str = "<!-- End of the generated reference. -->";

/// `config` in values.schema.json lists every configuration key the chart does not set
/// itself, by section, with its type and meaning (the former flat names too, deprecated);
/// together with the dedicated values, every key is reachable. docs/configuration.md's
/// reference is generated beside it from the same keys. `PACELINE_UPDATE_CHART=1`
/// regenerates both.
#[test]
fn the_values_schema_and_the_docs_reach_every_configuration_key() {
    let (sections, keys) = reference();
    for d in DEDICATED {
        assert!(keys.iter().any(|k| k.path == *d), "{d} is not a configuration key");
    }
    let mut props = Map::new();
    for k in keys.iter().filter(|k| !DEDICATED.contains(&k.path.as_str())) {
        match &k.section {
            None => {
                props.insert(k.path.clone(), key_schema(k));
            }
            Some(s) => {
                let section = props.entry(s.clone()).or_insert_with(|| {
                    let about = &sections.iter().find(|x| &x.name == s).expect("a section").description;
                    json!({ "type": "object", "description": about, "additionalProperties": false, "properties": {} })
                });
                let name = k.path.rsplit('.').next().expect("a key");
                section["properties"][name] = key_schema(k);
            }
        }
        if let Some(old) = k.former {
            let mut schema = key_schema(k);
            schema["description"] = json!(format!("Former name of `{}` (still read).", k.path));
            schema["deprecated"] = json!(true);
            props.insert(old.to_string(), schema);
        }
    }
    let path = root().join("helm/paceline/values.schema.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let expected = json!({ "type": "object", "additionalProperties": false, "properties": props });
    let docs_path = root().join("docs/configuration.md");
    let docs = std::fs::read_to_string(&docs_path).unwrap();
    let (before, rest) = docs.split_once(GENERATED_BEGIN).expect("docs/configuration.md has the generated part");
    let after = rest.split_once(GENERATED_END).expect("the generated part ends").1.trim_start_matches('\n');
    let table = docs_table(&sections, &keys);
    let regenerated = format!("{before}{table}{after}");
    if std::env::var("PACELINE_UPDATE_CHART").as_deref() == Ok("1") {
        schema["properties"]["config"] = expected;
        std::fs::write(&path, serde_json::to_string_pretty(&schema).unwrap() + "\n").unwrap();
        std::fs::write(&docs_path, regenerated).unwrap();
        return;
    }
    let update = "PACELINE_UPDATE_CHART=1 cargo nextest run -p paceline chart";
    assert_eq!(schema["properties"]["config"], expected, "values.schema.json's config drifted from Config: {update}");
    assert!(docs == regenerated, "docs/configuration.md's reference drifted from Config: {update}");
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
