//! The MCP tools: each is one REST operation, and its JSON Schemas are generated from that
//! operation's OpenAPI description (parameters, body and 2xx answer), so the tools never
//! drift from the routes they call.
//!
//! Input: `instance_id` (optional with an instance token or key: their own instance),
//! the operation's other path and query parameters, and the fields of its JSON body, all
//! at the top level. Output: the operation's answer. Referenced component schemas go
//! into `$defs`.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use door::access::{self, Access};
use door::extract::Principal;

/// One tool: what a model reads to pick it, and the operation it calls.
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    /// Changes nothing (the MCP `readOnlyHint`).
    pub read_only: bool,
}

/// `list_instances` for a token of one instance: its own record, as a one-item list.
pub const OWN_INSTANCE_PATH: &str = "/v1/instances/{id}";

/// Every tool.
pub const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "list_instances",
        title: "List instances",
        description: "List the messaging accounts (instances) this token reaches, with each one's id, name, \
            connection state (`connected`, `qr_pending`, `disconnected`, ...) and linked phone number. With an \
            instance token or API key, only that token's own instance. Use the `id` with every other tool.",
        method: "GET",
        path: "/v1/instances",
        read_only: true,
    },
    ToolDef {
        name: "get_instance",
        title: "Get an instance",
        description: "Get one instance: its connection state, linked phone, account type, pacing settings and \
            `queue_depth` (messages accepted and still waiting to be sent).",
        method: "GET",
        path: "/v1/instances/{id}",
        read_only: true,
    },
    ToolDef {
        name: "connect_instance",
        title: "Connect an instance",
        description: "Start the instance's session. An instance that is not paired yet then waits for a QR code \
            to be scanned (`qr_pending`): fetch it with `get_qr` and show it to the phone's owner.",
        method: "POST",
        path: "/v1/instances/{id}/connect",
        read_only: false,
    },
    ToolDef {
        name: "get_qr",
        title: "Get the pairing QR code",
        description: "The QR code to pair the instance, while it is `qr_pending` (after `connect_instance`): as \
            text (the code's payload) and as a PNG image to show. The network replaces it every 20 seconds.",
        method: "GET",
        path: "/v1/instances/{id}/qr",
        read_only: true,
    },
    ToolDef {
        name: "send_message",
        title: "Send a message",
        description: "Send a message through the instance's paced queue: `type` is text, image, video, audio, \
            document, sticker, location, contact, poll or reaction, with the matching field (`text`, `media` with \
            `url` or base64 `data`, `location`, `contact`, `poll`, `reaction`). `to` is a phone number with \
            country code or a JID. The answer is the message record (`status` queued); with `wait: true` the call \
            waits (up to `timeout`, default 30s) until it is sent or failed. Use `get_message` to follow it.",
        method: "POST",
        path: "/v1/instances/{id}/messages",
        read_only: false,
    },
    ToolDef {
        name: "get_message",
        title: "Get a message",
        description: "Get a message this instance sent or received, by its `msg_...` id: its status (queued, \
            in_flight, sent, failed), delivery receipts and, when failed, the error.",
        method: "GET",
        path: "/v1/instances/{id}/messages/{msg_id}",
        read_only: true,
    },
    ToolDef {
        name: "list_chats",
        title: "List chats",
        description: "List the instance's chats, most recent first, with each chat's JID, name, unread count \
            and last message. Pages with `cursor` (the answer's `next_cursor`).",
        method: "GET",
        path: "/v1/instances/{id}/chats",
        read_only: true,
    },
    ToolDef {
        name: "get_chat_messages",
        title: "Read a chat",
        description: "The messages of one chat (by its JID or phone number), newest first, sent and received. \
            Pages with `cursor`.",
        method: "GET",
        path: "/v1/instances/{id}/chats/{jid}/messages",
        read_only: true,
    },
    ToolDef {
        name: "mark_chat_read",
        title: "Mark a chat read",
        description: "Mark every message of a chat as read (blue ticks to the sender, when the account shows \
            read receipts) and reset its unread count.",
        method: "POST",
        path: "/v1/instances/{id}/chats/{jid}/read",
        read_only: false,
    },
    ToolDef {
        name: "check_numbers",
        title: "Check phone numbers",
        description: "Check which of 1 to 10 phone numbers (with country code) have an account on the network, \
            and their JIDs. Do it before writing to a number for the first time.",
        method: "POST",
        path: "/v1/instances/{id}/check-numbers",
        read_only: true,
    },
    ToolDef {
        name: "list_contacts",
        title: "List contacts",
        description: "The instance's contacts: JID, phone number and the names known for each.",
        method: "GET",
        path: "/v1/instances/{id}/contacts",
        read_only: true,
    },
    ToolDef {
        name: "list_webhooks",
        title: "List webhooks",
        description: "The instance's webhooks: URL, the event types each receives, and whether it is enabled.",
        method: "GET",
        path: "/v1/instances/{id}/webhooks",
        read_only: true,
    },
    ToolDef {
        name: "list_deliveries",
        title: "List webhook deliveries",
        description: "The delivery log of one webhook, newest first: each event's attempts, the endpoint's HTTP \
            status and the delivery's state (pending, delivered, failed). Pages with `cursor`.",
        method: "GET",
        path: "/v1/instances/{id}/webhooks/{webhook_id}/deliveries",
        read_only: true,
    },
];

/// The operation a tool calls for `principal` (`list_instances` differs for a token of
/// one instance; an account token lists its account's, as the admin lists all).
pub fn route_for(def: &ToolDef, principal: &Principal) -> (&'static str, &'static str) {
    if def.name == "list_instances" && principal.own_instance().is_some() {
        ("GET", OWN_INSTANCE_PATH)
    } else {
        (def.method, def.path)
    }
}

/// Whether `principal` may call the operation (its row in `routes::access`).
pub fn reaches(principal: &Principal, method: &str, path: &str) -> bool {
    let Ok(method) = method.parse::<axum::http::Method>() else { return false };
    let Some(access) = access::of(&method, path) else { return false };
    match principal {
        Principal::Admin => access != Access::Open,
        Principal::Instance { .. } => !matches!(access, Access::Admin | Access::Open),
        Principal::Key { scope, .. } => access.admits(*scope),
        Principal::Account { .. } => access.admits_account(),
    }
}

/// Whether `principal` sees and may call the tool.
pub fn visible(def: &ToolDef, principal: &Principal) -> bool {
    let (method, path) = route_for(def, principal);
    reaches(principal, method, path)
}

/// A parameter of the operation, as the call fills it.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub in_path: bool,
}

/// A tool's schemas and how its arguments map onto its operation.
pub struct Built {
    pub input_schema: Map<String, Value>,
    pub output_schema: Map<String, Value>,
    /// Path (other than `id`) and query parameters.
    pub params: Vec<Param>,
    /// The body's fields; none for an operation without a body.
    pub body_fields: Option<Vec<String>>,
}

/// Every tool's schemas, generated once from the OpenAPI description.
pub struct Catalog {
    pub tools: BTreeMap<&'static str, Built>,
}

impl Catalog {
    pub fn build() -> Catalog {
        let doc: Value = serde_json::from_str(crate::openapi::json()).expect("the description is JSON");
        let tools = TOOLS.iter().map(|def| (def.name, build(&doc, def))).collect();
        Catalog { tools }
    }

    pub fn get(&self, name: &str) -> Option<(&'static ToolDef, &Built)> {
        let def = TOOLS.iter().find(|d| d.name == name)?;
        Some((def, self.tools.get(def.name)?))
    }
}

/// The description of `instance_id`.
const INSTANCE_ID: &str = "The instance's id (`inst_...`, from `list_instances`). Optional with an instance token or \
    API key, whose own instance it defaults to; required with the admin token.";

fn build(doc: &Value, def: &ToolDef) -> Built {
    let op = &doc["paths"][def.path][def.method.to_ascii_lowercase()];
    assert!(op.is_object(), "tool {}: no operation {} {}", def.name, def.method, def.path);
    let mut defs = Map::new();
    let mut props = Map::new();
    let mut required: Vec<Value> = Vec::new();
    let mut params = Vec::new();
    if def.path.contains("{id}") {
        props.insert("instance_id".into(), json!({ "type": "string", "description": INSTANCE_ID }));
    }
    // Path and query parameters become arguments; headers (the request id) do not.
    for p in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] != "header") {
        let name = p["name"].as_str().expect("a parameter name").to_string();
        let in_path = p["in"] == "path";
        if name == "id" && in_path {
            continue;
        }
        let mut schema = localize(doc, &p["schema"], &mut defs);
        if let (Some(obj), Some(d)) = (schema.as_object_mut(), p["description"].as_str()) {
            obj.entry("description").or_insert_with(|| d.into());
        }
        if in_path {
            required.push(name.clone().into());
        }
        props.insert(name.clone(), schema);
        params.push(Param { name, in_path });
    }
    let mut body_fields = None;
    if let Some(schema) = op["requestBody"]["content"]["application/json"]["schema"].as_object() {
        let body = resolve(doc, &Value::Object(schema.clone()));
        let mut fields = Vec::new();
        for (k, v) in body["properties"].as_object().expect("a body of named fields") {
            assert!(!props.contains_key(k), "tool {}: body field {k} shadows a parameter", def.name);
            props.insert(k.clone(), localize(doc, v, &mut defs));
            fields.push(k.clone());
        }
        required.extend(body["required"].as_array().cloned().unwrap_or_default());
        body_fields = Some(fields);
    }
    let mut input = Map::new();
    input.insert("type".into(), "object".into());
    input.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        input.insert("required".into(), Value::Array(required));
    }
    input.insert("additionalProperties".into(), false.into());
    if !defs.is_empty() {
        input.insert("$defs".into(), Value::Object(defs));
    }
    let (_, answer) = op["responses"]
        .as_object()
        .and_then(|r| r.iter().find(|(status, v)| status.starts_with('2') && v.get("content").is_some()))
        .unwrap_or_else(|| panic!("tool {}: no 2xx answer with a body", def.name));
    let mut out_defs = Map::new();
    let answer = resolve(doc, &answer["content"]["application/json"]["schema"]);
    let Value::Object(output) = localize(doc, &answer, &mut out_defs) else {
        panic!("tool {}: the answer's schema is not an object", def.name)
    };
    assert_eq!(output.get("type"), Some(&Value::from("object")), "tool {}: the answer is an object", def.name);
    // A result is the operation's answer, or (with isError) the error it failed with.
    out_defs.insert("ToolAnswer".into(), Value::Object(output));
    out_defs.insert("ToolError".into(), tool_error_schema());
    let mut output = Map::new();
    output.insert("type".into(), "object".into());
    output.insert("anyOf".into(), json!([{ "$ref": "#/$defs/ToolAnswer" }, { "$ref": "#/$defs/ToolError" }]));
    output.insert("$defs".into(), Value::Object(out_defs));
    Built { input_schema: input, output_schema: output, params, body_fields }
}

/// The structured content of a tool result whose operation failed (`isError`).
fn tool_error_schema() -> Value {
    json!({
        "type": "object",
        "description": "The operation failed (the result has isError): the API's error.",
        "required": ["error"],
        "additionalProperties": false,
        "properties": { "error": {
            "type": "object",
            "required": ["code", "message", "retryable"],
            "properties": {
                "code": { "type": "string", "description": "The API's error code, e.g. `invalid_number`." },
                "message": { "type": "string" },
                "retryable": { "type": "boolean" },
            },
        } },
    })
}

const COMPONENT: &str = "#/components/schemas/";

/// The component a `$ref` names, or the schema itself.
fn resolve(doc: &Value, schema: &Value) -> Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(COMPONENT)) {
        Some(name) => doc["components"]["schemas"][name].clone(),
        None => schema.clone(),
    }
}

/// `schema` with its component references pointing into `$defs`, and every component it
/// reaches (transitively) added there.
fn localize(doc: &Value, schema: &Value, defs: &mut Map<String, Value>) -> Value {
    match schema {
        Value::Object(obj) => {
            let mut out = Map::new();
            for (k, v) in obj {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix(COMPONENT)) {
                        if !defs.contains_key(name) {
                            defs.insert(name.to_string(), Value::Null);
                            let component = localize(doc, &doc["components"]["schemas"][name], defs);
                            defs.insert(name.to_string(), component);
                        }
                        out.insert(k.clone(), format!("#/$defs/{name}").into());
                        continue;
                    }
                }
                out.insert(k.clone(), localize(doc, v, defs));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| localize(doc, v, defs)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::db::api_keys::KeyScope;
    use shared::ids::{InstanceId, KeyId};

    fn key(scope: KeyScope) -> Principal {
        Principal::Key { id: InstanceId::new(), name: "n".into(), key_id: KeyId::new(), scope }
    }

    fn names(p: &Principal) -> Vec<&'static str> {
        TOOLS.iter().filter(|d| visible(d, p)).map(|d| d.name).collect()
    }

    #[test]
    fn every_tool_has_an_object_schema_in_and_out_with_its_parameters() {
        let c = Catalog::build();
        assert_eq!(c.tools.len(), TOOLS.len());
        for def in TOOLS {
            let b = &c.tools[def.name];
            assert_eq!(b.input_schema["type"], "object", "{}", def.name);
            assert_eq!(b.output_schema["type"], "object", "{}", def.name);
            // Every reference resolves inside the schema.
            for schema in [&b.input_schema, &b.output_schema] {
                let text = serde_json::to_string(schema).unwrap();
                assert!(!text.contains(COMPONENT), "{}: a reference left outside $defs", def.name);
                for name in text.split("\"#/$defs/").skip(1).map(|s| s.split('"').next().unwrap()) {
                    assert!(schema["$defs"].get(name).is_some_and(|d| !d.is_null()), "{}: $defs/{name}", def.name);
                }
            }
        }
        let send = &c.tools["send_message"];
        let props = send.input_schema["properties"].as_object().unwrap();
        for field in ["instance_id", "to", "type", "text", "media", "wait", "timeout", "client_message_id"] {
            assert!(props.contains_key(field), "send_message takes {field}");
        }
        assert_eq!(send.input_schema["required"], json!(["to", "type"]));
        let history = &c.tools["get_chat_messages"];
        assert_eq!(history.input_schema["required"], json!(["jid"]));
        assert!(history.params.iter().any(|p| p.name == "cursor" && !p.in_path));
    }

    #[test]
    fn each_token_sees_the_tools_its_access_rows_allow() {
        let all: Vec<_> = TOOLS.iter().map(|d| d.name).collect();
        assert_eq!(names(&Principal::Admin), all);
        let inst = Principal::Instance { id: InstanceId::new(), name: "n".into() };
        assert_eq!(names(&inst), all, "an instance token reaches all of its own instance");
        assert_eq!(names(&key(KeyScope::SendOnly)), ["send_message", "get_message", "check_numbers"]);
        let read = names(&key(KeyScope::ReadOnly));
        assert!(read.contains(&"list_instances") && read.contains(&"list_deliveries"));
        // Pairing is the owner's: whoever scans the QR first binds the instance.
        for write in ["send_message", "connect_instance", "mark_chat_read", "check_numbers", "get_qr"] {
            assert!(!read.contains(&write), "a read_only key does not see {write}");
        }
    }
}
