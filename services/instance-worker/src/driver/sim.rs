//! The `sim` driver: one WebSocket to netsim per session (protocol: `shared::simproto`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use shared::simproto::{ClientOp, ServerEv};
use shared::ErrorCode;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use super::{Driver, DriverError, DriverEvent, Session};

pub struct SimDriver {
    url: String,
    /// netsim's HTTP address (media and pictures are relative to it).
    base: url::Url,
    /// How long a request to netsim may take before `worker_timeout`.
    timeout: Duration,
}

impl SimDriver {
    /// `base` is netsim's HTTP address; sessions go to `ws://.../session`.
    pub fn new(base: &url::Url, timeout: Duration) -> Self {
        let mut u = base.clone();
        let _ = u.set_scheme(if base.scheme() == "https" { "wss" } else { "ws" });
        u.set_path("/session");
        SimDriver { url: u.to_string(), base: base.clone(), timeout }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<ServerEv>>>>;

struct SimSession {
    timeout: Duration,
    base: url::Url,
    /// Downloads media from netsim.
    http: reqwest::Client,
    out: mpsc::UnboundedSender<ClientOp>,
    pending: Pending,
    next: AtomicU64,
    closer: tokio_util::sync::CancellationToken,
}

#[async_trait::async_trait]
impl Driver for SimDriver {
    fn name(&self) -> &'static str {
        "sim"
    }

    async fn open(
        &self,
        _target: &super::OpenTarget,
        credentials: Option<serde_json::Value>,
    ) -> Result<(Box<dyn Session>, mpsc::Receiver<DriverEvent>), DriverError> {
        let session = match credentials {
            None => None,
            Some(v) => Some(
                v.get("session")
                    .and_then(|s| s.as_str())
                    .map(str::to_owned)
                    .ok_or_else(|| DriverError::new(ErrorCode::WorkerError, "stored sim credentials are malformed"))?,
            ),
        };
        // netsim's frames are small: a 4 KiB read buffer (tungstenite's default is 128 KiB,
        // per connection, which was most of a worker's memory per instance) and writes
        // sent at once.
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(4 * 1024)
            .write_buffer_size(0);
        let connect = tokio_tungstenite::connect_async_with_config(self.url.as_str(), Some(config), true);
        let (ws, _) = tokio::time::timeout(Duration::from_secs(10), connect)
            .await
            .map_err(|_| DriverError::new(ErrorCode::WorkerTimeout, "connecting to netsim timed out"))?
            .map_err(|e| DriverError::new(ErrorCode::WorkerError, format!("connecting to netsim: {e}")))?;
        let (mut sink, mut stream) = ws.split();
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<ClientOp>();
        let (ev_tx, ev_rx) = mpsc::channel::<DriverEvent>(256);
        let pending: Pending = Arc::default();
        let closer = tokio_util::sync::CancellationToken::new();

        out_tx.send(ClientOp::Hello { session }).expect("receiver alive");
        // Writer: ops to frames, until closed.
        let writer_closer = closer.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = writer_closer.cancelled() => break,
                    op = out_rx.recv() => {
                        let Some(op) = op else { break };
                        let text = serde_json::to_string(&op).expect("ops serialize");
                        if sink.send(Message::Text(text.into())).await.is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = sink.close().await;
        });
        // Reader: frames to events and replies; a closed socket is `Closed`.
        let reader_pending = pending.clone();
        let reader_closer = closer.clone();
        let reader_out = out_tx.clone();
        tokio::spawn(async move {
            let mut reason = "connection closed".to_string();
            // The account's number, to tell its own messages in a history sync.
            let mut me = String::new();
            loop {
                let frame = tokio::select! {
                    _ = reader_closer.cancelled() => { reason = "closed by us".into(); break }
                    f = stream.next() => f,
                };
                let text = match frame {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        reason = format!("connection error: {e}");
                        break;
                    }
                };
                let Ok(ev) = serde_json::from_str::<ServerEv>(&text) else { continue };
                let out = match ev {
                    ServerEv::Reply { req, .. } => {
                        if let Some(tx) = reader_pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&req) {
                            let _ = tx.send(ev);
                        }
                        continue;
                    }
                    ServerEv::Qr { code, expires_at } => DriverEvent::Qr { code, expires_at },
                    ServerEv::Paired { session, phone, business, push_name } => {
                        me = phone.clone();
                        let credentials = serde_json::json!({ "session": session });
                        DriverEvent::Paired { credentials, phone, business, push_name }
                    }
                    ServerEv::Connected { phone, business, push_name } => {
                        me = phone.clone();
                        DriverEvent::Connected { phone, business, push_name }
                    }
                    ServerEv::LoggedOut => DriverEvent::LoggedOut,
                    ServerEv::Banned => DriverEvent::Banned,
                    ServerEv::TempBanned { until } => DriverEvent::TemporarilyBanned { until },
                    ServerEv::Replaced => DriverEvent::Replaced,
                    // Edits and deletions are acknowledged as the actor takes them.
                    ServerEv::Message { message, from_me } if matches!(message.kind.as_str(), "edit" | "revoke") => {
                        let _ = reader_out.send(ClientOp::Ack { ids: vec![message.id.clone()] });
                        match changed(message, from_me) {
                            Some(c) => DriverEvent::Changed(c),
                            None => continue,
                        }
                    }
                    ServerEv::Message { message, from_me } => {
                        DriverEvent::Message { message: incoming(message, from_me) }
                    }
                    ServerEv::Receipt { id, status, timestamp, .. } => match shared::db::log::Receipt::parse(&status) {
                        Some(receipt) => DriverEvent::Receipt { wa_message_id: id, receipt, at: timestamp },
                        None => continue,
                    },
                    ServerEv::History { messages, chunk, total, sent } => DriverEvent::History {
                        chunk: Some(chunk),
                        progress: Some((sent, total)),
                        messages: messages
                            .into_iter()
                            .filter(|m| !matches!(m.kind.as_str(), "edit" | "revoke"))
                            .map(|m| {
                                let from_me = m.from == me;
                                incoming(m, from_me)
                            })
                            .collect(),
                    },
                    ServerEv::Call { call_id, from } => DriverEvent::Call { call_id, from },
                    ServerEv::Label { label_id, name, color, deleted } => {
                        DriverEvent::Label { label_id, name, color, deleted }
                    }
                    ServerEv::LabelTarget { label_id, jid, message_id, labeled } => {
                        DriverEvent::LabelTarget { label_id, jid, wa_message_id: message_id, labeled }
                    }
                    // Only the network events of the catalog; anything else netsim says is dropped.
                    ServerEv::Event { event, data } => match shared::events::network_event(&event, data) {
                        Some(event) => DriverEvent::Network(event),
                        None => continue,
                    },
                };
                if ev_tx.send(out).await.is_err() {
                    break;
                }
            }
            reader_closer.cancel();
            let _ = ev_tx.send(DriverEvent::Closed { reason }).await;
        });
        let http = shared::fetch::client_builder()
            .timeout(Duration::from_secs(60))
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client builds");
        let session = SimSession {
            timeout: self.timeout,
            base: self.base.clone(),
            http,
            out: out_tx,
            pending,
            next: AtomicU64::new(1),
            closer,
        };
        Ok((Box::new(session), ev_rx))
    }
}

/// A locator as a URL on netsim: only a path (one leading `/`) that stays on netsim's
/// origin.
fn netsim_url(base: &url::Url, locator: &str) -> Option<url::Url> {
    if !locator.starts_with('/') || locator.starts_with("//") || locator.contains('\\') {
        return None;
    }
    let url = base.join(locator).ok()?;
    (url.origin() == base.origin()).then_some(url)
}

/// A number's JID on the network.
fn jid(number: &str) -> String {
    shared::jid::Jid::user(number).into()
}

/// A hidden id's JID.
fn lid_jid(lid: &str) -> String {
    shared::jid::at(lid, shared::jid::LID_SERVER)
}

/// A simulated message's parties as the log takes them: (chat, chat's LID, sender,
/// sender's LID). netsim names a party it addresses by hidden id with `from_lid` or
/// `to_lid`, and leaves its number out (`from` empty) when it hides it.
fn parties(m: &shared::simproto::SimMessage, from_me: bool) -> (String, Option<String>, String, Option<String>) {
    let from_lid = m.from_lid.as_deref().map(lid_jid);
    let from = match (&from_lid, m.from.is_empty()) {
        (Some(l), true) => l.clone(),
        _ => jid(&m.from),
    };
    match &m.group {
        Some(g) => (g.clone(), None, from, from_lid),
        None if from_me => {
            let to_lid = m.to_lid.as_deref().map(lid_jid);
            let to = match (&to_lid, m.to.is_empty()) {
                (Some(l), true) => l.clone(),
                _ => jid(&m.to),
            };
            (to, to_lid, from, None)
        }
        None => (from.clone(), from_lid.clone(), from, from_lid),
    }
}

/// A simulated message as the log keeps it: the chat is the other party; the content is
/// the body with the text in it; media stays on netsim until downloaded.
/// netsim's edit (`type: "edit"`, the new text) or deletion for everyone
/// (`type: "revoke"`) of the message `body.target`, as the network tells them: messages
/// of their own.
pub fn changed(m: shared::simproto::SimMessage, from_me: bool) -> Option<shared::db::log::Changed> {
    let target = m.body.get("target")?.as_str()?.to_string();
    let (chat_jid, chat_lid, from_jid, from_lid) = parties(&m, from_me);
    let text = match m.kind.as_str() {
        "edit" => Some(m.text.unwrap_or_default()),
        _ => None,
    };
    Some(shared::db::log::Changed {
        chat_jid,
        chat_lid,
        wa_message_id: target,
        from_jid,
        from_lid,
        from_me,
        at: m.timestamp,
        text,
    })
}

pub fn incoming(m: shared::simproto::SimMessage, from_me: bool) -> super::Incoming {
    let (chat_jid, chat_lid, from_jid, from_lid) = parties(&m, from_me);
    let mut content = match m.body {
        serde_json::Value::Object(o) => serde_json::Value::Object(o),
        _ => serde_json::json!({}),
    };
    if let Some(t) = m.text {
        let key = if m.kind == "text" { "text" } else { "caption" };
        if content.get(key).is_none() {
            content[key] = serde_json::Value::String(t);
        }
    }
    let media = content.get("media").and_then(|md| {
        Some(super::RemoteMedia {
            locator: md.get("url")?.as_str()?.to_string(),
            mime_type: md.get("mime_type").and_then(|v| v.as_str()).unwrap_or("application/octet-stream").to_string(),
            filename: md.get("filename").and_then(|v| v.as_str()).map(str::to_string),
            declared_size: md.get("size").and_then(serde_json::Value::as_u64),
            limit: shared::message::MessageType::received_media_limit(&m.kind),
        })
    });
    // (A group message's chat is the group; the sender stays `from_jid`.)
    super::Incoming {
        message: shared::db::log::Received {
            wa_message_id: m.id,
            chat_jid,
            chat_lid,
            from_jid,
            from_lid,
            from_me,
            kind: m.kind,
            content,
            ts: m.timestamp,
        },
        media,
    }
}

impl SimSession {
    async fn request(&self, make: impl FnOnce(u64) -> ClientOp) -> Result<serde_json::Value, DriverError> {
        let req = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(req, tx);
        let gone = || DriverError::new(ErrorCode::InstanceNotConnected, "the session is closed");
        self.out.send(make(req)).map_err(|_| gone())?;
        let reply = tokio::time::timeout(self.timeout, rx)
            .await
            .map_err(|_| {
                // A late reply must not pile up in the table.
                self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&req);
                DriverError::new(ErrorCode::WorkerTimeout, "the network did not answer in time")
            })?
            .map_err(|_| gone())?;
        match reply {
            ServerEv::Reply { ok: true, value, .. } => Ok(value),
            ServerEv::Reply { code, detail, .. } => {
                let code = match code.as_deref() {
                    Some("invalid_number") => ErrorCode::InvalidNumber,
                    Some("rate_limited") => ErrorCode::RateLimited,
                    Some("not_pairing") => ErrorCode::InstanceNotPairing,
                    Some("not_connected") => ErrorCode::InstanceNotConnected,
                    Some("validation_failed") => ErrorCode::ValidationFailed,
                    Some("not_found") => ErrorCode::NotFound,
                    Some("forbidden") => ErrorCode::Forbidden,
                    Some("business_account_required") => ErrorCode::BusinessAccountRequired,
                    _ => ErrorCode::WorkerError,
                };
                Err(DriverError::new(code, detail.unwrap_or_default()))
            }
            _ => Err(DriverError::new(ErrorCode::WorkerError, "unexpected reply")),
        }
    }
}

#[async_trait::async_trait]
impl Session for SimSession {
    async fn send(&self, msg: &super::Outgoing) -> Result<(), DriverError> {
        // A person by number; a group or channel by its JID (netsim hands each member or
        // follower a copy).
        // A hidden id goes as `to_lid`, for netsim to find its account.
        let (to, to_lid) = match &msg.to_jid {
            j if j.is_group() || j.is_channel() || j.is_status() => (j.to_string(), None),
            j if j.server() == shared::jid::LID_SERVER => (String::new(), Some(j.user_part().to_string())),
            j => (j.user_part().to_string(), None),
        };
        // The simulator carries the media's description; its bytes' hash proves them:
        // they are read (a piece at a time, as an upload reads them) and must match it.
        if let Some(m) = msg.message.content.media() {
            verify(m).await?;
        }
        let mut body = serde_json::to_value(&msg.message)
            .map_err(|_| DriverError::new(ErrorCode::WorkerError, "unencodable message"))?;
        if let Some(obj) = body.as_object_mut() {
            obj.remove("type");
            // What it quotes or reacts to, by the network's id, as on WhatsApp.
            if let Some(reaction) = obj.get_mut("reaction") {
                reaction["message_id"] =
                    msg.reacted_to(reaction["message_id"].as_str().unwrap_or_default())?.network_id.into();
            } else if let Some(quoted) = obj.remove("reply_to") {
                if let Some(q) = msg.referenced(quoted.as_str().unwrap_or_default()) {
                    obj.insert("reply_to".into(), q.network_id.into());
                }
            }
        }
        let text = msg.message.content.text().map(str::to_owned);
        let message = shared::simproto::SimMessage {
            from_lid: None,
            to_lid,
            group: None,
            id: msg.network_id.clone(),
            from: String::new(),
            to,
            kind: msg.message.content.kind().as_str().to_string(),
            text,
            body,
            timestamp: chrono::Utc::now(),
        };
        self.request(|req| ClientOp::Send { req, message }).await.map(|_| ())
    }

    async fn pairing_code(&self, phone: &str) -> Result<String, DriverError> {
        let v = self.request(|req| ClientOp::PairCode { req, phone: phone.to_string() }).await?;
        v["code"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| DriverError::new(ErrorCode::WorkerError, "no code in reply"))
    }

    async fn check_numbers(&self, numbers: &[String]) -> Result<Vec<shared::contract::NumberAnswer>, DriverError> {
        let mut v = self.request(|req| ClientOp::CheckNumbers { req, numbers: numbers.to_vec() }).await?;
        serde_json::from_value(v["results"].take()).map_err(|_| bad_reply())
    }

    async fn logout(&self) -> Result<(), DriverError> {
        self.request(|req| ClientOp::Logout { req }).await.map(|_| ())
    }

    /// netsim answers with the operation's reply type (it builds it from the same
    /// contract); the answer is checked against it here all the same.
    async fn net(&self, op: &shared::contract::NetOp) -> Result<shared::contract::Answer, DriverError> {
        let call = op.clone();
        let mut v = self.request(|req| ClientOp::Net { req, call }).await?;
        // Pictures are served by netsim: make their address absolute.
        for key in ["url", "picture_url"] {
            if let Some(u) = v.get(key).and_then(|u| u.as_str()).and_then(|u| self.base.join(u).ok()) {
                v[key] = serde_json::Value::String(u.to_string());
            }
        }
        op.answer_json(v).map_err(|_| bad_reply())
    }

    /// The sender's locator must be a path on netsim itself: anything else (another host,
    /// a scheme-relative `//host`) is refused without a request, and the body is read up to
    /// the declared size only.
    async fn download(&self, media: &super::RemoteMedia) -> Result<Vec<u8>, DriverError> {
        let failed = |e: String| DriverError::new(ErrorCode::WorkerError, format!("downloading media: {e}"));
        let unavailable = |why: &str| DriverError::new(ErrorCode::MediaUnavailable, why.to_string());
        let cap = media.cap()?;
        let url = netsim_url(&self.base, &media.locator)
            .ok_or_else(|| unavailable("the media's locator is not on the network"))?;
        let res = self.http.get(url).send().await.map_err(|e| failed(e.without_url().to_string()))?;
        match res.status().as_u16() {
            200 => shared::fetch::read_capped(res, cap).await.map_err(|e| match e {
                shared::fetch::FetchError::TooLarge => unavailable("the media is larger than it declared"),
                e => failed(e.to_string()),
            }),
            404 | 410 => Err(unavailable("the network no longer has this media")),
            s => Err(failed(format!("status {s}"))),
        }
    }

    fn logged(&self, what: super::Logged<'_>) {
        let op = match what {
            super::Logged::Messages(ids) => ClientOp::Ack { ids: ids.to_vec() },
            super::Logged::HistoryChunk(chunk) => ClientOp::HistoryAck { chunk },
        };
        // A closed session is told nothing: the network delivers it again on the next.
        let _ = self.out.send(op);
    }

    async fn reject_call(&self, call_id: &str, message: Option<String>) -> Result<(), DriverError> {
        self.request(|req| ClientOp::RejectCall { req, call_id: call_id.to_string(), message }).await.map(|_| ())
    }

    async fn close(&self) {
        self.closer.cancel();
    }
}

/// netsim answered outside the contract (a bug of netsim's, named without its data).
/// Reads media's bytes as an upload would and checks they are the ones its hash names.
async fn verify(m: &super::Media) -> Result<(), DriverError> {
    use sha2::Digest;
    let (hash, len) = m
        .bytes
        .fold((sha2::Sha256::new(), 0u64), |(hash, len), p| {
            hash.update(p);
            *len += p.len() as u64;
        })
        .await?;
    m.check(len, &hash.finalize())
}

fn bad_reply() -> DriverError {
    DriverError::new(ErrorCode::WorkerError, "the network's answer does not fit the operation")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_paths_on_netsim_are_fetched() {
        let base = url::Url::parse("http://127.0.0.1:8790").unwrap();
        assert_eq!(super::netsim_url(&base, "/media/abc").unwrap().as_str(), "http://127.0.0.1:8790/media/abc");
        for hostile in [
            "http://127.0.0.1:9999/forever",
            "//evil.example/x",
            "https://evil.example/x",
            "media/abc",
            "/\\evil.example/x",
            "",
        ] {
            assert!(super::netsim_url(&base, hostile).is_none(), "{hostile:?}");
        }
    }
}
