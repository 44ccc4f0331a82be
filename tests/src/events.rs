//! Every event a test emitted, checked against the catalog: each outbox row's payload is
//! its type's `shared::events::Event` exactly (read and written back, the same JSON),
//! and its `data` validates against the type's schema in the OpenAPI description, with
//! the `jsonschema` package of the test venv (Draft 2020-12, what OpenAPI 3.1 uses).

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// Checks every event in the outbox of `db` (a test's own schema); panics naming the
/// first that is not of its type's shape. Returns the types seen.
pub async fn check_emitted(db: &sqlx::PgPool) -> BTreeSet<String> {
    let rows: Vec<(String, Value)> =
        sqlx::query_as("SELECT type, payload FROM outbox ORDER BY created_at").fetch_all(db).await.expect("the outbox");
    assert!(!rows.is_empty(), "the test emitted no event");
    let mut events = Vec::new();
    let mut seen = BTreeSet::new();
    for (kind, payload) in &rows {
        assert_eq!(payload["type"].as_str(), Some(kind.as_str()), "the row's type is its payload's");
        let data = payload["data"].clone();
        let typed = shared::events::Event::parse(kind, data.clone())
            .unwrap_or_else(|e| panic!("a {kind} is not of its type's shape ({e}): {data}"));
        assert_eq!(typed.data(), data, "a {kind} carries fields its type does not have, or lacks some");
        let schema = shared::events::Event::schema_of(kind).expect("a type of the catalog");
        events.push(json!([kind, schema, data]));
        seen.insert(kind.clone());
    }
    let doc: Value = serde_json::from_str(api::openapi::json()).expect("the description is JSON");
    let input = json!({ "components": doc["components"], "events": events });
    let script = r##"
import json, sys
from jsonschema import Draft202012Validator
given = json.load(sys.stdin)
bad = []
for kind, schema, data in given["events"]:
    root = {"$ref": "#/components/schemas/" + schema, "components": given["components"]}
    errors = sorted(Draft202012Validator(root).iter_errors(data), key=str)
    if errors:
        bad.append(f"{kind} ({schema}): {errors[0].message} at {list(errors[0].absolute_path)}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
"##;
    let out = crate::run_python(script, &input);
    assert!(
        out.status.success(),
        "emitted events that their schema refuses:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    seen
}
