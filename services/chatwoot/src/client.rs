//! Chatwoot's application API (`/api/v1/accounts/{account}/...`), as the bridge calls
//! it: the calls of Chatwoot's published description (`swagger/swagger.json`), through
//! the guarded client (Chatwoot's address is a tenant's: public unless the admin allowed
//! a private one), each with a deadline and a bounded answer. Answers are read leniently
//! (Chatwoot's real answers differ from its description in places, e.g. a created
//! contact comes as `{payload: {contact}}`).

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::Method;
use serde_json::{json, Value};
use shared::fetch::{FetchError, GuardedClient};

pub const REQUEST_SECONDS: &str = "paceline_chatwoot_request_seconds";

/// The longest one call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read.
const ANSWER_LIMIT: u64 = 4 * 1024 * 1024;

/// How a call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CwError {
    /// No answer, or one that says to try later (5xx, 408, 429): the work waits.
    #[error("{0}")]
    Unavailable(String),
    /// Chatwoot refused: `status` and the start of its answer.
    #[error("Chatwoot answered {status}: {detail}")]
    Refused { status: u16, detail: String },
    /// Chatwoot's address is not allowed (private, and not approved by the admin).
    #[error("Chatwoot's address is private or local, and private addresses are not allowed for this instance")]
    Blocked,
}

impl CwError {
    /// A refusal that names a missing thing (a conversation deleted in Chatwoot).
    pub fn not_found(&self) -> bool {
        matches!(self, CwError::Refused { status: 404, .. })
    }
    /// A refusal that more tries will not change (a bad request), as against
    /// credentials or availability, which the tenant may fix.
    pub fn permanent(&self) -> bool {
        matches!(self, CwError::Refused { status, .. } if !matches!(status, 401 | 403 | 404))
    }
}

/// One Chatwoot account, as one access token reaches it.
pub struct Chatwoot<'a> {
    pub http: &'a GuardedClient,
    pub base: &'a str,
    pub account: i64,
    pub token: &'a str,
}

/// A message to create.
#[derive(Debug, Clone, Default)]
pub struct NewMessage {
    pub content: String,
    /// `incoming` or `outgoing`.
    pub message_type: &'static str,
    pub private: bool,
    /// What the message is in the bridge (`WAID:<network id>`): how it is found again, and
    /// how the bridge knows its own messages when Chatwoot's webhook tells of them.
    pub source_id: String,
    /// The Chatwoot message it replies to.
    pub in_reply_to: Option<i64>,
}

/// A file attached to a message, streamed from the media store.
pub struct Attachment {
    pub filename: String,
    pub mime_type: String,
    pub size: u64,
    pub body: reqwest::Body,
}

/// An inbox as listed.
#[derive(Debug, Clone)]
pub struct Inbox {
    pub id: i64,
    pub name: String,
    pub webhook_url: Option<String>,
}

/// A contact as a search finds it.
#[derive(Debug, Clone)]
pub struct Contact {
    pub id: i64,
    pub identifier: Option<String>,
    pub phone_number: Option<String>,
}

/// The start of a refusal's text, safe to keep and show: no control characters, the
/// token never, and no run of six digits or more (a number it may echo).
fn redacted(body: &[u8], token: &str) -> String {
    let text = String::from_utf8_lossy(body);
    let text = if token.is_empty() { text.to_string() } else { text.replace(token, "***") };
    let mut out = String::new();
    let mut digits = String::new();
    for ch in text.chars().filter(|c| !c.is_control()).take(200) {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        out.push_str(if digits.len() >= 6 { "***" } else { &digits });
        digits.clear();
        out.push(ch);
    }
    out.push_str(if digits.len() >= 6 { "***" } else { &digits });
    out
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// The id in an answer: at the top, or under `payload` (and `payload.contact`).
fn id_in(v: &Value) -> Option<i64> {
    v.get("id")
        .and_then(int)
        .or_else(|| v.pointer("/payload/contact/id").and_then(int))
        .or_else(|| v.pointer("/payload/id").and_then(int))
}

fn list_in(v: &Value) -> Vec<Value> {
    v.get("payload").and_then(Value::as_array).or_else(|| v.as_array()).cloned().unwrap_or_default()
}

impl Chatwoot<'_> {
    fn url(&self, path: &str) -> Result<url::Url, CwError> {
        url::Url::parse(&format!("{}/api/v1/accounts/{}/{path}", self.base, self.account))
            .map_err(|_| CwError::Refused { status: 0, detail: "Chatwoot's URL does not make a request URL".into() })
    }

    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(self.token) {
            h.insert("api_access_token", v);
        }
        h.insert(reqwest::header::ACCEPT, HeaderValue::from_static("application/json"));
        h
    }

    fn answer(
        &self,
        op: &'static str,
        start: Instant,
        r: Result<(u16, Vec<u8>), FetchError>,
    ) -> Result<Value, CwError> {
        metrics::histogram!(REQUEST_SECONDS, "op" => op).record(start.elapsed().as_secs_f64());
        let (status, body) = match r {
            Ok(a) => a,
            Err(FetchError::Refused) => return Err(CwError::Blocked),
            Err(FetchError::TooLarge) => return Err(CwError::Unavailable(format!("{op}: the answer is too large"))),
            Err(FetchError::Failed(e)) => return Err(CwError::Unavailable(format!("{op}: {e}"))),
        };
        if (200..300).contains(&status) {
            return Ok(serde_json::from_slice(&body).unwrap_or(Value::Null));
        }
        let detail = redacted(&body, self.token);
        if status >= 500 || matches!(status, 408 | 429) {
            return Err(CwError::Unavailable(format!("{op}: Chatwoot answered {status}")));
        }
        Err(CwError::Refused { status, detail })
    }

    async fn call(&self, op: &'static str, method: Method, path: &str, body: Option<&Value>) -> Result<Value, CwError> {
        let url = self.url(path)?;
        let start = Instant::now();
        let r = tokio::time::timeout(CALL_TIMEOUT, self.http.call(method, &url, self.headers(), body, ANSWER_LIMIT))
            .await
            .unwrap_or_else(|_| Err(FetchError::Failed("timed out".into())));
        self.answer(op, start, r)
    }

    /// The account's inboxes.
    pub async fn inboxes(&self) -> Result<Vec<Inbox>, CwError> {
        let v = self.call("inboxes", Method::GET, "inboxes", None).await?;
        Ok(list_in(&v)
            .iter()
            .filter_map(|i| {
                Some(Inbox {
                    id: i.get("id").and_then(int)?,
                    name: i.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    webhook_url: i.get("webhook_url").and_then(Value::as_str).map(str::to_string),
                })
            })
            .collect())
    }

    /// Creates an API-channel inbox whose webhook is `webhook_url`.
    pub async fn create_inbox(&self, name: &str, webhook_url: &str) -> Result<i64, CwError> {
        let body = json!({ "name": name, "channel": { "type": "api", "webhook_url": webhook_url } });
        let v = self.call("create_inbox", Method::POST, "inboxes/", Some(&body)).await?;
        id_in(&v).ok_or_else(|| CwError::Unavailable("create_inbox: no id in Chatwoot's answer".into()))
    }

    /// Creates a contact in the inbox; `identifier` is the chat's JID, and its hidden id
    /// (`lid`), when it has one, is kept in `additional_attributes`.
    pub async fn create_contact(
        &self,
        inbox: i64,
        name: &str,
        identifier: &str,
        phone: Option<&str>,
        lid: Option<&str>,
    ) -> Result<i64, CwError> {
        let mut body = json!({ "inbox_id": inbox, "name": name, "identifier": identifier });
        if let Some(p) = phone {
            body["phone_number"] = json!(p);
        }
        if let Some(l) = lid {
            body["additional_attributes"] = json!({ "lid": l });
        }
        let v = self.call("create_contact", Method::POST, "contacts", Some(&body)).await?;
        id_in(&v).ok_or_else(|| CwError::Unavailable("create_contact: no id in Chatwoot's answer".into()))
    }

    /// Names a contact made under a hidden id by the number learned since: its identifier
    /// becomes the number's JID, with the phone number, the LID kept beside.
    pub async fn contact_by_number(
        &self,
        contact: i64,
        identifier: &str,
        phone: &str,
        lid: &str,
    ) -> Result<(), CwError> {
        let body = json!({ "identifier": identifier, "phone_number": phone, "additional_attributes": { "lid": lid } });
        self.call("update_contact", Method::PUT, &format!("contacts/{contact}"), Some(&body)).await.map(|_| ())
    }

    /// The first contact a search for `q` finds that `which` accepts.
    pub async fn find_contact(&self, q: &str, which: impl Fn(&Contact) -> bool) -> Result<Option<i64>, CwError> {
        let mut url = self.url("contacts/search")?;
        url.query_pairs_mut().append_pair("q", q).append_pair("page", "1");
        let start = Instant::now();
        let r =
            tokio::time::timeout(CALL_TIMEOUT, self.http.call(Method::GET, &url, self.headers(), None, ANSWER_LIMIT))
                .await
                .unwrap_or_else(|_| Err(FetchError::Failed("timed out".into())));
        let v = self.answer("find_contact", start, r)?;
        let text = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(list_in(&v)
            .iter()
            .filter_map(|c| {
                Some(Contact {
                    id: c.get("id").and_then(int)?,
                    identifier: text(c, "identifier"),
                    phone_number: text(c, "phone_number"),
                })
            })
            .find(|c| which(c))
            .map(|c| c.id))
    }

    /// The contact's conversations: (id, inbox, status).
    pub async fn conversations_of(&self, contact: i64) -> Result<Vec<(i64, Option<i64>, String)>, CwError> {
        let v =
            self.call("contact_conversations", Method::GET, &format!("contacts/{contact}/conversations"), None).await?;
        Ok(list_in(&v)
            .iter()
            .filter_map(|c| {
                Some((
                    c.get("id").and_then(int)?,
                    c.get("inbox_id").and_then(int),
                    c.get("status").and_then(Value::as_str).unwrap_or("open").to_string(),
                ))
            })
            .collect())
    }

    /// A conversation's inbox and contact: (inbox, contact id, identifier, phone number).
    pub async fn conversation(
        &self,
        id: i64,
    ) -> Result<(Option<i64>, Option<i64>, Option<String>, Option<String>), CwError> {
        let v = self.call("conversation", Method::GET, &format!("conversations/{id}"), None).await?;
        let sender = v.pointer("/meta/sender").cloned().unwrap_or(Value::Null);
        let text = |k: &str| sender.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        Ok((v.get("inbox_id").and_then(int), sender.get("id").and_then(int), text("identifier"), text("phone_number")))
    }

    /// Opens a conversation with the contact in the inbox.
    pub async fn create_conversation(
        &self,
        inbox: i64,
        contact: i64,
        source_id: &str,
        pending: bool,
    ) -> Result<i64, CwError> {
        let mut body = json!({ "source_id": source_id, "inbox_id": inbox, "contact_id": contact });
        if pending {
            body["status"] = json!("pending");
        }
        let v = self.call("create_conversation", Method::POST, "conversations", Some(&body)).await?;
        id_in(&v).ok_or_else(|| CwError::Unavailable("create_conversation: no id in Chatwoot's answer".into()))
    }

    /// The conversation's messages (Chatwoot's latest page): (id, source_id).
    pub async fn messages(&self, conversation: i64) -> Result<Vec<(i64, Option<String>)>, CwError> {
        let path = format!("conversations/{conversation}/messages");
        let v = self.call("messages", Method::GET, &path, None).await?;
        Ok(list_in(&v)
            .iter()
            .filter_map(|m| {
                Some((m.get("id").and_then(int)?, m.get("source_id").and_then(Value::as_str).map(str::to_string)))
            })
            .collect())
    }

    /// Deletes a message (Chatwoot keeps it as deleted); one already gone is no error.
    pub async fn delete_message(&self, conversation: i64, id: i64) -> Result<(), CwError> {
        let path = format!("conversations/{conversation}/messages/{id}");
        match self.call("delete_message", Method::DELETE, &path, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates a message; with an attachment it goes as `multipart/form-data` (how
    /// Chatwoot takes files), else as JSON.
    pub async fn create_message(
        &self,
        conversation: i64,
        m: &NewMessage,
        file: Option<Attachment>,
    ) -> Result<i64, CwError> {
        let path = format!("conversations/{conversation}/messages");
        let attrs = m.in_reply_to.map(|r| json!({ "in_reply_to": r }));
        let v = match file {
            None => {
                let mut body = json!({
                    "content": m.content, "message_type": m.message_type, "private": m.private,
                    "source_id": m.source_id,
                });
                if let Some(a) = &attrs {
                    body["content_attributes"] = a.clone();
                }
                self.call("create_message", Method::POST, &path, Some(&body)).await?
            }
            Some(f) => {
                let part = reqwest::multipart::Part::stream_with_length(f.body, f.size)
                    .file_name(f.filename)
                    .mime_str(&f.mime_type)
                    .map_err(|_| CwError::Refused {
                        status: 0,
                        detail: "the attachment's type is not a MIME type".into(),
                    })?;
                let mut form = reqwest::multipart::Form::new()
                    .text("message_type", m.message_type)
                    .text("private", m.private.to_string())
                    .text("source_id", m.source_id.clone())
                    .part("attachments[]", part);
                if !m.content.is_empty() {
                    form = form.text("content", m.content.clone());
                }
                if let Some(a) = &attrs {
                    form = form.text("content_attributes", a.to_string());
                }
                let url = self.url(&path)?;
                let start = Instant::now();
                // A file may take longer than a call: its own, longer deadline.
                let r = tokio::time::timeout(
                    CALL_TIMEOUT * 10,
                    self.http.post_multipart(&url, self.headers(), form, ANSWER_LIMIT),
                )
                .await
                .unwrap_or_else(|_| Err(FetchError::Failed("timed out".into())));
                self.answer("create_message", start, r)?
            }
        };
        id_in(&v).ok_or_else(|| CwError::Unavailable("create_message: no id in Chatwoot's answer".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_lists_are_read_in_every_shape_chatwoot_answers() {
        assert_eq!(id_in(&json!({"id": 5})), Some(5));
        assert_eq!(id_in(&json!({"payload": {"contact": {"id": 6}, "contact_inbox": {}}})), Some(6));
        assert_eq!(id_in(&json!({"payload": {"id": 7}})), Some(7));
        assert_eq!(id_in(&json!({"id": "8"})), Some(8));
        assert_eq!(id_in(&json!({"payload": []})), None);
        assert_eq!(list_in(&json!({"payload": [1, 2]})).len(), 2);
        assert_eq!(list_in(&json!([1])).len(), 1);
        assert!(list_in(&json!({"meta": {}})).is_empty());
    }

    #[test]
    fn refusals_keep_neither_the_token_nor_numbers() {
        let body = b"bad token tok-123 for +5511999990001, code 42\n";
        assert_eq!(redacted(body, "tok-123"), "bad token *** for +***, code 42");
        assert_eq!(redacted(b"12345", ""), "12345");
        assert_eq!(redacted(b"1234567", ""), "***");
    }

    #[test]
    fn what_waits_and_what_fails() {
        let r = |status| CwError::Refused { status, detail: String::new() };
        assert!(r(422).permanent() && r(400).permanent());
        assert!(!r(401).permanent() && !r(403).permanent() && !r(404).permanent());
        assert!(r(404).not_found());
        assert!(!CwError::Unavailable("x".into()).permanent());
    }
}
