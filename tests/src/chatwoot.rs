//! A Chatwoot double: the calls of Chatwoot's application API the bridge makes, kept in
//! memory, every exchange recorded so a test can check each request and response against
//! Chatwoot's own published description (`tests/chatwoot/swagger.json`, through
//! openapi-core: [`ChatwootDouble::validate`]). It also plays Chatwoot's side of the
//! inbox webhook: an agent's reply is made here and posted to the inbox's `webhook_url`
//! in the shape Chatwoot posts it. Faults a test can script: answer 500 without acting,
//! or act and then answer 500 (so the caller cannot know it acted), or answer slowly.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde_json::{json, Value};

/// The token the double takes.
pub const TOKEN: &str = "cw-test-token";

/// One request and its answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: BTreeMap<String, String>,
    pub content_type: String,
    /// The JSON body, or a multipart form's fields (files as their names).
    pub body: Value,
    pub multipart: bool,
    pub status: u16,
    pub response: Value,
}

/// A message as stored.
#[derive(Debug, Clone)]
pub struct CwMessage {
    pub id: i64,
    pub conversation_id: i64,
    pub content: Option<String>,
    pub message_type: String,
    pub private: bool,
    pub source_id: Option<String>,
    pub in_reply_to: Option<i64>,
    /// Files: (name, content type, bytes).
    pub files: Vec<(String, String, Vec<u8>)>,
    /// Deleted (Chatwoot keeps it, its content replaced and its files dropped).
    pub deleted: bool,
}

/// What a test scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 500 without acting.
    Fail,
    /// Act, then 500.
    FailAfter,
}

#[derive(Default)]
pub struct Store {
    next: i64,
    pub inboxes: Vec<(i64, String, String)>,
    /// (id, name, identifier, phone)
    pub contacts: Vec<(i64, String, String, Option<String>)>,
    /// Contacts' `additional_attributes`, by id.
    pub contact_attributes: BTreeMap<i64, Value>,
    /// (id, inbox, contact, status)
    pub conversations: Vec<(i64, i64, i64, String)>,
    pub messages: Vec<CwMessage>,
    pub exchanges: Vec<Exchange>,
    faults: Vec<Fault>,
    /// Every call fails (Chatwoot down) while set.
    pub down: bool,
    pub delay: Duration,
}

impl Store {
    fn id(&mut self) -> i64 {
        self.next += 1;
        self.next
    }
}

#[derive(Clone)]
pub struct ChatwootDouble {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<Store>>,
}

type S = Arc<Mutex<Store>>;

fn message_json(m: &CwMessage) -> Value {
    let mut v = json!({
        "id": m.id, "content": m.content.clone().unwrap_or_default(), "account_id": 1, "inbox_id": 1,
        "conversation_id": m.conversation_id, "message_type": if m.message_type == "incoming" { 0 } else { 1 },
        "created_at": 1_700_000_000, "private": m.private, "status": "sent", "content_type": "text",
        "content_attributes": m.in_reply_to.map(|r| json!({"in_reply_to": r})).unwrap_or(json!({})),
        "sender_type": if m.message_type == "incoming" { "contact" } else { "agent" },
    });
    if let Some(s) = &m.source_id {
        v["source_id"] = json!(s);
    }
    v
}

/// Runs a handler under the double's rules: the token, Chatwoot down, the faults, and
/// the record of the exchange.
/// A request as recorded.
struct Call<'a> {
    method: &'static str,
    path: String,
    query: String,
    headers: &'a HeaderMap,
    body: Value,
    multipart: bool,
}

async fn answer(st: &S, call: Call<'_>, act: impl FnOnce(&mut Store) -> (StatusCode, Value)) -> Response {
    let Call { method, path, query, headers, body, multipart } = call;
    let delay = st.lock().unwrap().delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut s = st.lock().unwrap();
    let token = headers.get("api_access_token").and_then(|v| v.to_str().ok());
    let (status, response) = if s.down {
        (StatusCode::SERVICE_UNAVAILABLE, json!({"error": "down"}))
    } else if token != Some(TOKEN) {
        (StatusCode::UNAUTHORIZED, json!({"description": "Invalid Access Token"}))
    } else {
        match s.faults.first().copied() {
            Some(Fault::Fail) => {
                s.faults.remove(0);
                (StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "boom"}))
            }
            Some(Fault::FailAfter) => {
                s.faults.remove(0);
                let _ = act(&mut s);
                (StatusCode::INTERNAL_SERVER_ERROR, json!({"error": "boom"}))
            }
            None => act(&mut s),
        }
    };
    let hs = headers.iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .to_string();
    s.exchanges.push(Exchange {
        method: method.into(),
        path,
        query,
        headers: hs,
        content_type,
        body,
        multipart,
        status: status.as_u16(),
        response: response.clone(),
    });
    if response.is_null() {
        return status.into_response();
    }
    (status, Json(response)).into_response()
}

fn raw_query(q: &BTreeMap<String, String>) -> String {
    q.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

async fn list_inboxes(State(st): State<S>, Path(a): Path<i64>, h: HeaderMap) -> Response {
    let path = format!("/api/v1/accounts/{a}/inboxes");
    let st2 = st.clone();
    answer(
        &st2,
        Call { method: "get", path, query: String::new(), headers: &h, body: Value::Null, multipart: false },
        |s| {
            let list: Vec<Value> = s
            .inboxes
            .iter()
            .map(
                |(id, name, hook)| json!({"id": id, "name": name, "channel_type": "Channel::Api", "webhook_url": hook}),
            )
            .collect();
            (StatusCode::OK, json!({ "payload": list }))
        },
    )
    .await
}

async fn create_inbox(State(st): State<S>, Path(a): Path<i64>, h: HeaderMap, Json(b): Json<Value>) -> Response {
    let path = format!("/api/v1/accounts/{a}/inboxes/");
    answer(
        &st,
        Call { method: "post", path, query: String::new(), headers: &h, body: b.clone(), multipart: false },
        |s| {
            let id = s.id();
            let name = b["name"].as_str().unwrap_or_default().to_string();
            let hook = b.pointer("/channel/webhook_url").and_then(Value::as_str).unwrap_or_default().to_string();
            s.inboxes.push((id, name.clone(), hook));
            (StatusCode::OK, json!({"id": id, "name": name, "channel_type": "Channel::Api"}))
        },
    )
    .await
}

async fn create_conversation(State(st): State<S>, Path(a): Path<i64>, h: HeaderMap, Json(b): Json<Value>) -> Response {
    let path = format!("/api/v1/accounts/{a}/conversations");
    answer(
        &st,
        Call { method: "post", path, query: String::new(), headers: &h, body: b.clone(), multipart: false },
        |s| {
            let id = s.id();
            let inbox = b["inbox_id"].as_i64().unwrap_or_default();
            let contact = b["contact_id"].as_i64().unwrap_or_default();
            let status = b["status"].as_str().unwrap_or("open").to_string();
            s.conversations.push((id, inbox, contact, status));
            (StatusCode::OK, json!({"id": id, "account_id": a, "inbox_id": inbox}))
        },
    )
    .await
}

async fn show_conversation(State(st): State<S>, Path((a, c)): Path<(i64, i64)>, h: HeaderMap) -> Response {
    let path = format!("/api/v1/accounts/{a}/conversations/{c}");
    let call = Call { method: "get", path, query: String::new(), headers: &h, body: Value::Null, multipart: false };
    answer(&st, call, |s| {
        let Some((id, inbox, contact, status)) = s.conversations.iter().find(|v| v.0 == c).cloned() else {
            return (StatusCode::NOT_FOUND, json!({"description": "not found"}));
        };
        let (_, name, identifier, phone) = s.contacts.iter().find(|x| x.0 == contact).cloned().expect("its contact");
        let mut sender = json!({"id": contact, "name": name, "identifier": identifier});
        if let Some(p) = phone {
            sender["phone_number"] = json!(p);
        }
        (
            StatusCode::OK,
            json!({"id": id, "inbox_id": inbox, "status": status, "account_id": a, "meta": {"sender": sender}}),
        )
    })
    .await
}

async fn list_messages(State(st): State<S>, Path((a, c)): Path<(i64, i64)>, h: HeaderMap) -> Response {
    let path = format!("/api/v1/accounts/{a}/conversations/{c}/messages");
    answer(
        &st,
        Call { method: "get", path, query: String::new(), headers: &h, body: Value::Null, multipart: false },
        |s| {
            if !s.conversations.iter().any(|v| v.0 == c) {
                return (StatusCode::NOT_FOUND, json!({"description": "not found"}));
            }
            let list: Vec<Value> = s.messages.iter().filter(|m| m.conversation_id == c).map(message_json).collect();
            (StatusCode::OK, json!({"meta": {"labels": []}, "payload": list}))
        },
    )
    .await
}

async fn create_message(State(st): State<S>, Path((a, c)): Path<(i64, i64)>, req: Request) -> Response {
    let path = format!("/api/v1/accounts/{a}/conversations/{c}/messages");
    let h = req.headers().clone();
    let is_form = h.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("multipart/"));
    let (body, files) = if is_form {
        let mut form = <Multipart as axum::extract::FromRequest<()>>::from_request(req, &()).await;
        let mut fields = serde_json::Map::new();
        let mut files = Vec::new();
        if let Ok(m) = form.as_mut() {
            while let Ok(Some(f)) = m.next_field().await {
                let name = f.name().unwrap_or_default().to_string();
                match f.file_name().map(str::to_string) {
                    Some(file) => {
                        let ct = f.content_type().unwrap_or("").to_string();
                        let bytes = f.bytes().await.unwrap_or_default().to_vec();
                        fields.insert(name, json!([file.clone()]));
                        files.push((file, ct, bytes));
                    }
                    None => {
                        fields.insert(name, json!(f.text().await.unwrap_or_default()));
                    }
                }
            }
        }
        (Value::Object(fields), files)
    } else {
        let bytes = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap_or_default();
        (serde_json::from_slice(&bytes).unwrap_or(Value::Null), Vec::new())
    };
    let b = body.clone();
    answer(&st, Call { method: "post", path, query: String::new(), headers: &h, body, multipart: is_form }, move |s| {
        if !s.conversations.iter().any(|v| v.0 == c) {
            return (StatusCode::NOT_FOUND, json!({"description": "not found"}));
        }
        let text = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_string);
        let attrs = match b.get("content_attributes") {
            Some(Value::String(raw)) => serde_json::from_str(raw).unwrap_or(Value::Null),
            Some(v) => v.clone(),
            None => Value::Null,
        };
        let private = matches!(b.get("private"), Some(Value::Bool(true))) || text("private").as_deref() == Some("true");
        let id = s.id();
        let m = CwMessage {
            id,
            conversation_id: c,
            content: text("content"),
            message_type: text("message_type").unwrap_or_else(|| "outgoing".into()),
            private,
            source_id: text("source_id"),
            in_reply_to: attrs.get("in_reply_to").and_then(Value::as_i64),
            files,
            deleted: false,
        };
        let out = message_json(&m);
        s.messages.push(m);
        (StatusCode::OK, out)
    })
    .await
}

async fn delete_message(State(st): State<S>, Path((a, c, m)): Path<(i64, i64, i64)>, h: HeaderMap) -> Response {
    let path = format!("/api/v1/accounts/{a}/conversations/{c}/messages/{m}");
    let call = Call { method: "delete", path, query: String::new(), headers: &h, body: Value::Null, multipart: false };
    answer(&st, call, |s| match s.messages.iter_mut().find(|x| x.id == m && x.conversation_id == c) {
        Some(x) => {
            x.deleted = true;
            x.content = Some("This message was deleted".into());
            x.files.clear();
            (StatusCode::OK, Value::Null)
        }
        None => (StatusCode::NOT_FOUND, json!({"description": "not found"})),
    })
    .await
}

/// Serves an agent's attachment.
async fn file(State(st): State<S>, Path((m, i)): Path<(i64, usize)>) -> Response {
    let s = st.lock().unwrap();
    match s.messages.iter().find(|x| x.id == m).and_then(|x| x.files.get(i)) {
        Some((_, ct, bytes)) => ([("content-type", ct.clone())], bytes.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

impl ChatwootDouble {
    pub async fn start() -> ChatwootDouble {
        let state: S = Arc::new(Mutex::new(Store::default()));
        let app = axum::Router::new()
            .route("/api/v1/accounts/{a}/inboxes", get(list_inboxes))
            .route("/api/v1/accounts/{a}/inboxes/", post(create_inbox))
            .route("/api/v1/accounts/{a}/contacts", post(create_contact))
            .route("/api/v1/accounts/{a}/contacts/search", get(search_contacts))
            .route("/api/v1/accounts/{a}/contacts/{c}", axum::routing::put(update_contact))
            .route("/api/v1/accounts/{a}/contacts/{c}/conversations", get(contact_conversations))
            .route("/api/v1/accounts/{a}/conversations", post(create_conversation))
            .route("/api/v1/accounts/{a}/conversations/{c}", get(show_conversation))
            .route("/api/v1/accounts/{a}/conversations/{c}/messages", get(list_messages).post(create_message))
            .route("/api/v1/accounts/{a}/conversations/{c}/messages/{m}", axum::routing::delete(delete_message))
            .route("/files/{m}/{i}", get(file))
            .layer(axum::extract::DefaultBodyLimit::max(64 << 20))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        ChatwootDouble { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Scripts the next calls' faults, in order.
    pub fn faults(&self, f: &[Fault]) {
        self.state.lock().unwrap().faults.extend_from_slice(f);
    }

    pub fn set_down(&self, down: bool) {
        self.state.lock().unwrap().down = down;
    }

    pub fn set_delay(&self, d: Duration) {
        self.state.lock().unwrap().delay = d;
    }

    pub fn messages(&self) -> Vec<CwMessage> {
        self.state.lock().unwrap().messages.clone()
    }

    pub fn inboxes(&self) -> Vec<(i64, String, String)> {
        self.state.lock().unwrap().inboxes.clone()
    }

    pub fn contacts(&self) -> Vec<(i64, String, String, Option<String>)> {
        self.state.lock().unwrap().contacts.clone()
    }

    /// Contacts' `additional_attributes`, by contact id.
    pub fn contact_attributes(&self) -> BTreeMap<i64, Value> {
        self.state.lock().unwrap().contact_attributes.clone()
    }

    pub fn conversations(&self) -> Vec<(i64, i64, i64, String)> {
        self.state.lock().unwrap().conversations.clone()
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.state.lock().unwrap().exchanges.clone()
    }

    /// An agent writes in conversation `conv` (with files: (name, type, bytes)), and
    /// Chatwoot posts `message_created` to the inbox's webhook, as it does: the message's
    /// type as a string at the top and as a number inside `conversation.messages`.
    /// Returns the message id and the webhook's status.
    pub async fn agent_reply(&self, conv: i64, content: &str, files: Vec<(String, String, Vec<u8>)>) -> (i64, u16) {
        let (id, payload, hook) = {
            let mut s = self.state.lock().unwrap();
            let (_, inbox, contact, status) =
                s.conversations.iter().find(|v| v.0 == conv).cloned().expect("a conversation");
            let id = s.id();
            let m = CwMessage {
                id,
                conversation_id: conv,
                content: Some(content.into()),
                message_type: "outgoing".into(),
                private: false,
                source_id: None,
                in_reply_to: None,
                files,
                deleted: false,
            };
            let attachments: Vec<Value> = m
                .files
                .iter()
                .enumerate()
                .map(|(i, (_, ct, b))| {
                    let kind = if ct.starts_with("image/") { "image" } else { "file" };
                    json!({"id": i, "message_id": id, "file_type": kind, "account_id": 1,
                        "data_url": format!("http://{}/files/{id}/{i}", self.addr), "file_size": b.len()})
                })
                .collect();
            let hook = s.inboxes.iter().find(|i| i.0 == inbox).map(|i| i.2.clone()).expect("an inbox");
            let cn = s.contacts.iter().find(|c| c.0 == contact).cloned().expect("a contact");
            let mut payload = json!({
                "event": "message_created", "id": id, "content": content, "message_type": "outgoing",
                "content_type": "text", "content_attributes": {}, "private": false, "source_id": null,
                "created_at": "2026-11-27T10:00:00.000Z", "additional_attributes": {},
                "sender": {"id": 1, "name": "Ana Agent", "available_name": "Ana Agent", "type": "user"},
                "inbox": {"id": inbox, "name": "wa"}, "account": {"id": 1, "name": "Acme"},
                "conversation": {"id": conv, "inbox_id": inbox, "status": status, "channel": "Channel::Api",
                    "messages": [message_json(&m)],
                    "meta": {"sender": {"id": contact, "name": cn.1, "identifier": cn.2, "type": "contact"}}},
            });
            if !attachments.is_empty() {
                payload["attachments"] = json!(attachments);
            }
            s.messages.push(m);
            (id, payload, hook)
        };
        let status = reqwest::Client::new().post(&hook).json(&payload).send().await.expect("the webhook").status();
        (id, status.as_u16())
    }

    /// A contact made in Chatwoot by hand or another integration (not by the bridge).
    pub fn seed_contact(&self, name: &str, identifier: &str, phone: &str) -> i64 {
        let mut s = self.state.lock().unwrap();
        let id = s.id();
        s.contacts.push((id, name.into(), identifier.into(), Some(phone.into())));
        id
    }

    /// A contact (known by its phone number) and a conversation made in Chatwoot by an
    /// agent, not by the bridge.
    pub fn seed_conversation(&self, inbox: i64, phone: &str) -> i64 {
        let mut s = self.state.lock().unwrap();
        let contact = s.id();
        s.contacts.push((contact, "Walk-in".into(), format!("walkin-{contact}"), Some(phone.into())));
        let conv = s.id();
        s.conversations.push((conv, inbox, contact, "open".into()));
        conv
    }

    /// Posts a webhook body of Chatwoot's to the inbox's URL as is.
    pub async fn post_hook(&self, payload: &Value) -> u16 {
        let hook = self.inboxes().first().map(|i| i.2.clone()).expect("an inbox");
        reqwest::Client::new().post(&hook).json(payload).send().await.expect("the webhook").status().as_u16()
    }

    /// Every exchange checked against Chatwoot's published description: requests (a
    /// multipart form read as the JSON it stands for, since the description declares
    /// only JSON; a file-only message's `content` is a gap of the description too) and
    /// responses. Returns the problems found, one line each.
    pub fn validate(&self) -> Vec<String> {
        let exchanges = self.exchanges();
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/chatwoot/swagger.json");
        let out = crate::run_python(VALIDATE, &json!({ "spec": spec, "exchanges": exchanges }));
        assert!(out.status.success(), "the validator ran: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).expect("the validator answers JSON");
        assert_eq!(v["checked"].as_u64(), Some(exchanges.len() as u64), "every exchange was checked");
        v["problems"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
    }
}

/// openapi-core over the recorded exchanges (`tests/chatwoot/validate.py`).
mod contacts;
use contacts::{contact_conversations, create_contact, search_contacts, update_contact};

const VALIDATE: &str = include_str!("../chatwoot/validate.py");
