//! The OpenAPI 3.1 description: the base document (info, security schemes, shared
//! schemas); paths come from the `#[utoipa::path]` of each handler via `routes::all()`.

use std::sync::OnceLock;

use shared::error::{ErrorBody, ErrorCode, ErrorDetail};

use domain::catalog;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::OpenApi as Doc;
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "paceline",
        description = "A horizontally scalable gateway for messaging-network accounts (instances). \
            Errors use the envelope `{\"error\": {\"code\", \"message\", \"retryable\"}}`; clients handle `code`. \
            Unknown routes answer 404 `not_found`, wrong methods 405 `method_not_allowed`; bodies are limited to 1 MB (140 MB on POST messages) with 413 \
            `media_too_large` beyond; while a pod drains after SIGTERM it answers 503 `shutting_down`.",
        license(name = "MIT")
    ),
    modifiers(&Security),
    components(schemas(
        ErrorBody, ErrorDetail, ErrorCode, shared::jid::Jid, shared::jid::UserJid, domain::schemas::GroupJid, domain::schemas::LabelId, domain::schemas::ChannelJid, catalog::EventType,
        shared::ids::InstanceId, shared::ids::MessageId, shared::ids::MediaId, shared::ids::WebhookId,
        shared::ids::DeliveryId, shared::ids::EventId, shared::ids::KeyId,
        catalog::Event, catalog::InstanceStateEventData, catalog::QrUpdatedEventData, catalog::ConnectedEventData,
        catalog::InstanceLifecycleEventData, domain::accounts::usage::ExportFormat,
        catalog::EmptyEventData, catalog::ReceiptEventData, catalog::ReceivedMessageEventData, catalog::MediaUpdatedEventData,
        catalog::ReactionEventData, catalog::MessageEditedEventData, catalog::MessageDeletedEventData,
        catalog::ChatUpdatedEventData, catalog::ContactUpdatedEventData,
        catalog::LabelUpdatedEventData, catalog::LabelEventLabel, catalog::ChannelUpdatedEventData, catalog::InstanceRiskEventData, catalog::InstancePausedEventData, catalog::InstanceResumedEventData, catalog::AttendantRepliedEventData, catalog::AttendantTokens, catalog::AttendantHandoffEventData, catalog::AttendantFailedEventData, catalog::GroupUpdatedEventData, catalog::GroupParticipantsEventData,
        catalog::GroupMembershipEventData, catalog::CommunityGroupsEventData, catalog::CallRejectedEventData,
        catalog::WebhookDisabledEventData,
        domain::send::MessageOut,
    )),
    tags(
        (name = "instances", description = "Create, list, edit and delete instances"),
        (name = "pairing", description = "Connect, QR codes, pairing codes, logout and restart"),
        (name = "messages", description = "The paced send queue"),
        (name = "numbers", description = "Which numbers have an account"),
        (name = "webhooks", description = "Webhook endpoints of an instance and their delivery log. \
            Every event type, with its payload, is under `webhooks` of this description."),
        (name = "events", description = "The real-time event stream (Server-Sent Events)"),
        (name = "chats", description = "Chats and their history from the local log; media by signed URL"),
        (name = "contacts", description = "Contacts and the block list, from the running session"),
        (name = "actions", description = "Action-style routes (X-API-Key or apikey, instance name in the path)"),
        (name = "evolution", description = "Evolution API v2's routes, mapped onto paceline's own (docs/evolution.md)"),
        (name = "attendant", description = "The AI attendant: answers chats through a language model or a bot, hands over to a human"),
        (name = "chatwoot", description = "A Chatwoot inbox per instance: received messages into conversations, agents' replies out through the paced queue"),
        (name = "rabbitmq", description = "An instance's events streamed into RabbitMQ: in order, at least once, with publisher confirms"),
        (name = "labels", description = "Labels and the business profile (business accounts only)"),
        (name = "channels", description = "Channels: follow, read, react, and publish through the send queue"),
        (name = "platform", description = "Restricted API keys, hosted pairing links, usage"),
        (name = "accounts", description = "A provider's customers as tenants: their tokens, quotas, usage and billing export"),
        (name = "pairing page", description = "The hosted pairing page behind a pairing link: HTML for the customer, no bearer token"),
        (name = "communities", description = "Communities"),
        (name = "operation", description = "Health, identity and this description"),
    )
)]
struct Base;

struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut Doc) {
        let components = doc.components.get_or_insert_with(Default::default);
        let bearer = |desc: &str| {
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some(desc)).build())
        };
        components
            .add_security_scheme("admin", bearer("The operator's admin token, `pl_admin_...`: reaches everything."));
        components.add_security_scheme(
            "instance",
            bearer("An instance token, `pl_inst_...`: reaches only `/v1/instances/{id}/...` of its own instance, from its IP allow-list."),
        );
        components.add_security_scheme(
            "restricted_key",
            bearer("A restricted API key of an instance, `pl_key_...`: an operation that admits one lists `restricted_key` with the scopes it admits (`read_only`, `send_only`); any other operation answers 403 to a key. On the action-style routes it goes in `X-API-Key`."),
        );
        components.add_security_scheme(
            "account",
            bearer("An account token, `pl_acct_...`: the account itself (`/v1/accounts/{id}`, read, and its tokens and usage), creating and listing the account's instances, and every instance route of its instances as their owner (another instance: 403). A suspended account's token may only read. On the action-style routes it goes in `X-API-Key` (or `apikey`) and is the global key of its own instances. An operation that admits one lists `account`."),
        );
        components.add_security_scheme(
            "signed_url",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "sig",
                "A signed media URL as the chat history hands it out: `exp` and `sig` in the query are the credential.",
            ))),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "An instance token on the action-style routes (or a `send_only` key on the send routes); the admin token works as Evolution's global key.",
            ))),
        );
        components.add_security_scheme(
            "evolution_apikey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "apikey",
                "Evolution API's name for the same key as `X-API-Key`: an instance token, or the admin token as the global key.",
            ))),
        );
    }
}

pub fn base() -> Doc {
    Base::openapi()
}

/// The whole description, built once.
pub fn spec() -> &'static Doc {
    static SPEC: OnceLock<Doc> = OnceLock::new();
    SPEC.get_or_init(|| {
        let mut doc = crate::all().split_for_parts().1;
        with_key_scopes(&mut doc);
        doc
    })
}

/// Adds `restricted_key` (with the scopes it admits) to the security of every operation
/// `routes::access` opens to keys, and `account` to every one it opens to account
/// tokens, so the description says what the API checks.
fn with_key_scopes(doc: &mut Doc) {
    use utoipa::openapi::security::SecurityRequirement;
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in [
            (axum::http::Method::GET, &mut item.get),
            (axum::http::Method::POST, &mut item.post),
            (axum::http::Method::PUT, &mut item.put),
            (axum::http::Method::PATCH, &mut item.patch),
            (axum::http::Method::DELETE, &mut item.delete),
        ] {
            let (Some(op), Some(access)) = (op.as_mut(), door::access::of(&method, path)) else { continue };
            let scopes: Vec<&str> = access.scopes().into_iter().map(|s| s.as_str()).collect();
            if !scopes.is_empty() {
                op.security.get_or_insert_with(Vec::new).push(SecurityRequirement::new("restricted_key", scopes));
            }
            if access.admits_account() {
                op.security.get_or_insert_with(Vec::new).push(SecurityRequirement::new("account", Vec::<&str>::new()));
            }
        }
    }
}

/// The description as pretty JSON (what is committed as `services/api/openapi.json`).
pub fn json() -> &'static String {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        // utoipa has no OpenAPI 3.1 `webhooks` yet: the event catalog goes in here.
        let mut doc = serde_json::to_value(spec()).expect("the description serializes");
        complete(&mut doc);
        no_nul_in_requests(&mut doc);
        doc.as_object_mut().expect("an object").insert("webhooks".into(), catalog::webhooks_object());
        let mut s = serde_json::to_string_pretty(&doc).expect("the description serializes");
        s.push('\n');
        s
    })
}

/// The pattern of a string the API takes: no NUL (`shared::http` refuses one with 400
/// `validation_failed`, as Postgres stores none).
pub const NO_NUL: &str = "^[^\\u0000]*$";

/// `pattern` and no NUL, as one pattern a generator can draw from (no lookaround): the
/// negated classes leave NUL out, and what an anchor leaves open takes no NUL. (The
/// description's patterns have no top-level alternative, which this keeps as it is.)
fn without_nul(pattern: &str) -> String {
    if pattern.contains("\\u0000") {
        return pattern.to_string();
    }
    let mut p = pattern.replace("[^", "[^\\u0000").replace("\\S", "[^\\s\\u0000]");
    if !p.starts_with('^') {
        p = format!("^[^\\u0000]*(?:{p})");
    }
    if !p.ends_with('$') {
        p.push_str("[^\\u0000]*$");
    }
    p
}

/// Every plain string of a request (a body, a parameter, and the components they use)
/// declares [`NO_NUL`]. Strings with a pattern, an enum, a constant or a format say more
/// already (a binary part may hold any byte).
fn no_nul_in_requests(doc: &mut serde_json::Value) {
    use serde_json::Value;
    fn walk(schema: &mut Value, refs: &mut Vec<String>) {
        let Some(map) = schema.as_object_mut() else { return };
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            if let Some(name) = r.strip_prefix("#/components/schemas/") {
                refs.push(name.to_string());
            }
        }
        let is_string = match map.get("type") {
            Some(Value::String(t)) => t == "string",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
            _ => false,
        };
        let said = ["enum", "const", "format", "contentEncoding", "contentMediaType"];
        if is_string {
            match map.get("pattern").and_then(Value::as_str) {
                Some(p) => {
                    let p = without_nul(p);
                    map.insert("pattern".into(), Value::String(p));
                }
                None if !said.iter().any(|k| map.contains_key(*k)) => {
                    map.insert("pattern".into(), Value::String(NO_NUL.into()));
                }
                None => {}
            }
        }
        for key in ["items", "additionalProperties", "not", "if", "then", "else", "contains"] {
            if let Some(s) = map.get_mut(key) {
                walk(s, refs);
            }
        }
        for key in ["properties", "patternProperties", "dependentSchemas"] {
            for (_, s) in map.get_mut(key).and_then(Value::as_object_mut).into_iter().flatten() {
                walk(s, refs);
            }
        }
        for key in ["oneOf", "anyOf", "allOf", "prefixItems"] {
            for s in map.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten() {
                walk(s, refs);
            }
        }
    }
    let mut refs = Vec::new();
    for (_, item) in doc.get_mut("paths").and_then(Value::as_object_mut).into_iter().flatten() {
        for (_, op) in item.as_object_mut().into_iter().flatten() {
            for (_, media) in
                op.pointer_mut("/requestBody/content").and_then(Value::as_object_mut).into_iter().flatten()
            {
                if let Some(s) = media.get_mut("schema") {
                    walk(s, &mut refs);
                }
            }
            for p in op.get_mut("parameters").and_then(Value::as_array_mut).into_iter().flatten() {
                if p["in"] != "header" {
                    if let Some(s) = p.get_mut("schema") {
                        walk(s, &mut refs);
                    }
                }
            }
        }
    }
    let mut done = std::collections::BTreeSet::new();
    while let Some(name) = refs.pop() {
        if !done.insert(name.clone()) {
            continue;
        }
        if let Some(s) = doc.pointer_mut(&format!("/components/schemas/{name}")) {
            walk(s, &mut refs);
        }
    }
}

/// What every operation has in common, written once here rather than on each handler: unique
/// operation ids, every path template's parameters declared (with the schema of their kind),
/// the `X-Request-Id` header every route takes, and on every instance route the 404
/// `instance_not_found` that `InstanceAccess` answers for an instance that does not exist.
fn complete(doc: &mut serde_json::Value) {
    use serde_json::{json, Value};
    let schema_of = |path: &str, name: &str| -> Value {
        let component = match name {
            "id" => "InstanceId",
            "jid" if path.contains("/contacts/") => "UserJid",
            "jid" if path.contains("/groups/") || path.contains("/communities/") => "GroupJid",
            "jid" if path.contains("/channels/") => "ChannelJid",
            "group" => "GroupJid",
            "jid" => "Jid",
            "msg_id" => "MessageId",
            "webhook_id" => "WebhookId",
            "delivery_id" => "DeliveryId",
            "media_id" => "MediaId",
            "key_id" => "KeyId",
            "account_id" => "AccountId",
            "token_id" => "AccountTokenId",
            "label_id" => "LabelId",
            _ => return json!({ "type": "string", "minLength": 1, "maxLength": 128 }),
        };
        json!({ "$ref": format!("#/components/schemas/{component}") })
    };
    // Creating or editing an instance: pacing past the floors only with `unsafe_pacing`
    // (given in the patch too: an instance the admin made unsafe before takes it restated).
    for name in ["InstanceIn", "InstancePatch"] {
        if let Some(schema) = doc.pointer_mut(&format!("/components/schemas/{name}")).and_then(Value::as_object_mut) {
            schema.insert(
                "if".into(),
                json!({ "properties": { "unsafe_pacing": { "const": true } }, "required": ["unsafe_pacing"] }),
            );
            schema.insert(
                "else".into(),
                json!({ "properties": {
                    "min_interval_ms": { "minimum": domain::instances::MIN_INTERVAL_FLOOR_MS },
                    "max_per_minute": { "maximum": domain::instances::MAX_PER_MINUTE_CEILING } } }),
            );
        }
    }
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for (path, item) in paths.iter_mut() {
        let names: Vec<String> =
            path.split('{').skip(1).filter_map(|rest| rest.split_once('}').map(|(n, _)| n.to_string())).collect();
        let Some(item) = item.as_object_mut() else { continue };
        for (method, op) in item.iter_mut() {
            if !matches!(method.as_str(), "get" | "post" | "put" | "patch" | "delete") {
                continue;
            }
            // Operation ids are the handler's name, which resources share (`create`,
            // `delete`): prefixed with the resource's tag they are unique, as client
            // generators need.
            if let (Some(tag), Some(id)) = (op["tags"][0].as_str(), op["operationId"].as_str()) {
                if !id.starts_with(&format!("{tag}_")) {
                    op["operationId"] = json!(format!("{tag}_{id}"));
                }
            }
            // An event stream's schema is one Server-Sent Event's (as OpenAPI 3.1 reads
            // `text/event-stream`): its `id`, `event` (the type) and `data`, a string of
            // the event's JSON.
            for (_, response) in op["responses"].as_object_mut().into_iter().flatten() {
                if let Some(sse) = response.pointer_mut("/content/text~1event-stream") {
                    let event = sse["schema"].clone();
                    sse["schema"] = json!({
                        "type": "object",
                        "description": "One Server-Sent Event: `id` is the event's id, `event` its type, `data` its JSON.",
                        "required": ["id", "event", "data"],
                        "properties": {
                            "id": { "$ref": "#/components/schemas/EventId" },
                            "event": { "$ref": "#/components/schemas/EventType" },
                            "data": { "type": "string", "contentMediaType": "application/json", "contentSchema": event },
                        },
                    });
                }
            }
            let params = op.as_object_mut().expect("an operation").entry("parameters").or_insert_with(|| json!([]));
            let params = params.as_array_mut().expect("an array");
            for name in &names {
                let declared = params.iter_mut().find(|p| p["in"] == "path" && p["name"] == name.as_str());
                match declared {
                    // A generic name keeps what its handler declares (an action's values).
                    Some(p) if schema_of(path, name).get("$ref").is_none() && p["schema"].get("pattern").is_some() => {}
                    // The kind's schema wins over a handler's plain `String`.
                    Some(p) => p["schema"] = schema_of(path, name),
                    None => params.push(json!({
                        "name": name, "in": "path", "required": true, "schema": schema_of(path, name),
                        "description": name.replace('_', " "),
                    })),
                }
            }
            // Every route takes a request id and answers with it (one is made when absent).
            if !params.iter().any(|p| p["in"] == "header" && p["name"] == "X-Request-Id") {
                params.push(json!({
                    "name": "X-Request-Id", "in": "header", "required": false,
                    "schema": { "type": "string", "pattern": format!("^[ -~]{{0,{max}}}$", max = crate::middleware::REQUEST_ID_MAX) },
                    "description": format!("Names the request in the server's logs; answered back (one is made when absent). \
                        At most {} printable ASCII characters (400 `validation_failed` otherwise).", crate::middleware::REQUEST_ID_MAX),
                }));
            }
            // A parameter is a string in the request, never JSON `null`.
            for p in params.iter_mut() {
                if let Some(types) = p["schema"]["type"].as_array() {
                    let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                    p["schema"]["type"] = if kept.len() == 1 { kept[0].clone() } else { Value::Array(kept) };
                }
                if let Some(alts) = p["schema"]["oneOf"].as_array() {
                    let kept: Vec<Value> = alts.iter().filter(|a| a["type"] != "null").cloned().collect();
                    if kept.len() == 1 {
                        p["schema"] = kept[0].clone();
                    }
                }
            }
            // A typed path parameter (an id, a JID) of the wrong form is 400.
            let typed = names.iter().any(|n| n != "id" && n != "instanceName" && !path.starts_with("/media/"));
            // So is a malformed `X-Request-Id`, on every route.
            let description = if typed && !names.is_empty() {
                "`validation_failed`: a path parameter is not of its form, or a malformed `X-Request-Id`"
            } else {
                "`validation_failed`: a malformed `X-Request-Id`"
            };
            let responses = op["responses"].as_object_mut().expect("responses");
            let bad = responses.entry("400").or_insert_with(|| {
                json!({ "description": description,
                        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } } })
            });
            // (A page's 400 is HTML; the header's refusal comes before the page, as JSON.)
            if bad.pointer("/content/application~1json").is_none() {
                let d = bad["description"].as_str().unwrap_or_default().to_string();
                bad["description"] = json!(format!("{d}; a malformed `X-Request-Id` is JSON `validation_failed`"));
                bad["content"]["application/json"] = json!({ "schema": { "$ref": "#/components/schemas/ErrorBody" } });
            }
            if path.starts_with("/v1/instances/{id}") {
                let responses = op["responses"].as_object_mut().expect("responses");
                match responses.get_mut("404") {
                    Some(r) if !r["description"].as_str().unwrap_or_default().contains("instance_not_found") => {
                        let d = r["description"].as_str().unwrap_or_default().to_string();
                        r["description"] = json!(format!("`instance_not_found`; {d}"));
                    }
                    Some(_) => {}
                    None => {
                        responses.insert(
                            "404".into(),
                            json!({ "description": "`instance_not_found`", "content": { "application/json": {
                                "schema": { "$ref": "#/components/schemas/ErrorBody" } } } }),
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod nul_tests {
    /// Each rewritten pattern takes what the original took, less the strings with NUL.
    #[test]
    fn patterns_leave_nul_out() {
        let cases = [
            (r"\S", &["a", " a "][..], &[" ", "a\0"][..]),
            (r"[^\s\u0085]", &["x"], &["\u{85}", "x\0y"]),
            ("^audio/", &["audio/ogg"], &["audio/\0", "video/x"]),
            ("/", &["a/b"], &["ab", "\0/"]),
            ("^[^/]+$", &["ab"], &["a\0b", "a/b"]),
            (super::NO_NUL, &["", "x"], &["\0"]),
        ];
        for (pattern, good, bad) in cases {
            let p = super::without_nul(pattern);
            let re = regex::Regex::new(&p).unwrap();
            for g in good {
                assert!(re.is_match(g), "{p} takes {g:?}");
            }
            for b in bad {
                assert!(!re.is_match(b), "{p} refuses {b:?}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Client generators name a function per operation id: two alike lose one.
    #[test]
    fn operation_ids_are_unique() {
        let doc: serde_json::Value = serde_json::from_str(super::json()).unwrap();
        let mut ids: Vec<&str> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values().filter_map(|op| op["operationId"].as_str()))
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "operation ids repeat");
    }

    /// Two types of one schema name would share one component (utoipa keeps the last):
    /// every `ToSchema` type of the crates the description is built from (the server, the
    /// doors, the core and `shared`) has its own name (`as = ...` renames one).
    #[test]
    fn schema_names_are_unique() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in ["src", "../http/src", "../v1/src", "../evolution/src", "../core/src", "../../shared/src"] {
            walk(&root.join(dir), &mut files);
        }
        let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
        let mut names: Vec<(String, String)> = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                if !(l.contains("derive(") && l.contains("ToSchema")) {
                    continue;
                }
                let mut name = None;
                for next in lines.iter().skip(i + 1).take(8) {
                    if let Some((_, rest)) = next.split_once("schema(as = ") {
                        name = Some(ident(rest.rsplit("::").next().unwrap_or(rest)));
                    }
                    let t = next.trim_start();
                    if let Some(rest) = t.strip_prefix("pub struct ").or_else(|| t.strip_prefix("pub enum ")) {
                        // A macro's template (`pub struct $name`) names no type here.
                        let name = name.unwrap_or_else(|| ident(rest));
                        if !name.is_empty() {
                            names.push((name, f.display().to_string()));
                        }
                        break;
                    }
                }
            }
        }
        names.sort();
        let repeated: Vec<_> = names.windows(2).filter(|w| w[0].0 == w[1].0).collect();
        assert!(repeated.is_empty(), "schema names used twice: {repeated:?}");
        assert!(names.len() > 100, "found the types ({})", names.len());
    }

    /// The committed copy must match the code; `PACELINE_UPDATE_OPENAPI=1` rewrites it.
    #[test]
    fn committed_description_matches_the_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
        let generated = super::json();
        if std::env::var_os("PACELINE_UPDATE_OPENAPI").is_some() {
            std::fs::write(path, generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == *generated,
            "services/api/openapi.json is out of date: run `PACELINE_UPDATE_OPENAPI=1 cargo test -p paceline-api openapi` and commit it"
        );
    }

    #[test]
    fn is_openapi_3_1_and_every_operation_documents_errors() {
        let doc: serde_json::Value = serde_json::from_str(super::json()).unwrap();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let responses = op["responses"].as_object().unwrap();
                assert!(
                    responses.keys().any(|s| s.starts_with('4') || s.starts_with('5')),
                    "{method} {path} documents no error"
                );
                assert!(op.get("security").is_some(), "{method} {path} declares no security");
            }
        }
    }

    /// Every route is built: the description promises no 501 and no `not_implemented`.
    #[test]
    fn no_route_answers_not_implemented() {
        let text = super::json();
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                assert!(op["responses"].get("501").is_none(), "{method} {path} documents 501");
            }
        }
        assert!(!text.contains("not_implemented") && !text.contains("501 "), "the description names 501");
    }

    /// The table and the description name the same operations, once each.
    #[test]
    fn every_operation_has_one_row_and_every_row_an_operation() {
        let doc = super::spec();
        let mut ops = Vec::new();
        for (path, item) in &doc.paths.paths {
            for (method, op) in [
                ("GET", &item.get),
                ("POST", &item.post),
                ("PUT", &item.put),
                ("PATCH", &item.patch),
                ("DELETE", &item.delete),
            ] {
                if op.is_some() {
                    ops.push((method.to_string(), path.clone()));
                }
            }
        }
        let rows: Vec<(String, String)> =
            door::access::ROUTES.iter().map(|(m, p, _)| (m.to_string(), p.to_string())).collect();
        let missing: Vec<_> = ops.iter().filter(|o| !rows.contains(o)).collect();
        let stale: Vec<_> = rows.iter().filter(|r| !ops.contains(r)).collect();
        assert!(missing.is_empty(), "operations without a row in door::access: {missing:?}");
        assert!(stale.is_empty(), "rows naming no operation: {stale:?}");
        let mut sorted = rows.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), rows.len(), "a row appears twice");
    }

    #[test]
    fn the_catalog_documents_every_event_type_and_only_those() {
        let documented: Vec<&str> = domain::catalog::CATALOG.iter().map(|c| c.0).collect();
        assert_eq!(documented, shared::events::EVENT_TYPES);
        let doc: serde_json::Value = serde_json::from_str(super::json()).unwrap();
        for (kind, _, schema) in domain::catalog::CATALOG {
            assert_eq!(shared::events::Event::schema_of(kind), Some(*schema), "{kind} is emitted with {schema}");
            assert!(
                doc["components"]["schemas"].get(*schema).is_some(),
                "schema {schema} of {kind} is not in the description"
            );
            assert!(doc["webhooks"].get(*kind).is_some(), "{kind} is not under webhooks");
        }
    }
}
