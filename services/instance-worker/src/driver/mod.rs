//! Network drivers: one trait, one implementation per network. `sim` talks to netsim;
//! `whatsapp` (the real network, on whatsapp-rust) plugs into the same seam.
//!
//! A driver opens sessions. A session resumes stored credentials, or pairs when it has
//! none; it reports what happens as [`DriverEvent`]s and takes requests through
//! [`Session`]. Credentials are an opaque JSON value the worker stores in Postgres
//! (fenced), so any worker can resume any instance.

pub mod sim;
pub mod whatsapp;

use chrono::{DateTime, Utc};
use shared::ErrorCode;
use tokio::sync::mpsc;

/// Something the network told the session.
#[derive(Debug, Clone)]
pub enum DriverEvent {
    /// A QR payload to show until `expires_at`.
    Qr { code: String, expires_at: DateTime<Utc> },
    /// Linked: store `credentials` to resume later. `push_name` is the account's profile
    /// name, when the session knows it.
    Paired { credentials: serde_json::Value, phone: String, business: bool, push_name: Option<String> },
    /// A resumed session is online.
    Connected { phone: String, business: bool, push_name: Option<String> },
    /// The account's profile name changed.
    PushName(String),
    /// The device was unlinked: pair again.
    LoggedOut,
    /// The account is banned.
    Banned,
    /// The network paused the account until then (a temporary ban): do not reconnect
    /// before.
    TemporarilyBanned { until: DateTime<Utc> },
    /// Another connection took over this session (e.g. a new owner after a takeover).
    Replaced,
    /// The connection dropped; the session may be reopened.
    Closed { reason: String },
    /// An incoming voice call.
    Call { call_id: String, from: String },
    /// A label was created, edited or deleted on the phone (business accounts).
    Label { label_id: String, name: String, color: i32, deleted: bool },
    /// A label applied to (or removed from) a chat, or one message of it.
    LabelTarget { label_id: String, jid: String, wa_message_id: Option<String>, labeled: bool },
    /// A change in the account's groups, communities or channels, as the catalog's event with its data.
    Network(shared::events::Event),
    /// A message for the account, or sent from its phone (`from_me`).
    Message { message: Incoming },
    /// A message edited or deleted for everyone by its sender.
    Changed(shared::db::log::Changed),
    /// A receipt (`delivered`, `read`) for a message the account sent.
    Receipt { wa_message_id: String, receipt: shared::db::log::Receipt, at: DateTime<Utc> },
    /// Recent messages, synced after linking (and possibly again later). `chunk`: the
    /// network sends its history in chunks, one at a time, the next once this one is
    /// logged (`Session::logged`); `progress` is (messages up to this chunk's end, of).
    History { messages: Vec<Incoming>, chunk: Option<u32>, progress: Option<(u64, u64)> },
}

/// What the actor has logged durably, for the network to stop delivering it again.
#[derive(Debug, Clone, Copy)]
pub enum Logged<'a> {
    /// Messages, by network id.
    Messages(&'a [String]),
    /// History chunk `n`.
    HistoryChunk(u32),
}

/// A message from the network, with its media still on the network.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub message: shared::db::log::Received,
    pub media: Option<RemoteMedia>,
}

/// Media a message refers to, to download from the network. Everything in it comes from
/// the sender, a stranger: the driver checks the locator before it fetches anything.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteMedia {
    /// Where the driver fetches it (opaque to the worker).
    pub locator: String,
    pub mime_type: String,
    pub filename: Option<String>,
    /// The length the sender declared, if any.
    pub declared_size: Option<u64>,
    /// The most its message type may bring (`MessageType::received_media_limit`).
    pub limit: u64,
}

impl RemoteMedia {
    /// The most a download of it may read: the declared length, or the type's limit when
    /// none is declared. Media declared larger than its type allows is unavailable.
    pub fn cap(&self) -> Result<u64, DriverError> {
        match self.declared_size {
            Some(n) if n > self.limit => {
                Err(DriverError::new(ErrorCode::MediaUnavailable, "the media declares more than its type allows"))
            }
            Some(n) => Ok(n),
            None => Ok(self.limit),
        }
    }
}

/// A failed driver request, in the terms of the error table.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct DriverError {
    pub code: ErrorCode,
    pub detail: String,
    /// The message's media could not be read from the store (a database or bucket that
    /// is away): nothing reached the network, and the send waits for the store.
    pub media_unreadable: bool,
}

impl DriverError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        DriverError { code, detail: detail.into(), media_unreadable: false }
    }

    /// The message's media could not be read from the store.
    pub fn media_unreadable() -> Self {
        DriverError {
            media_unreadable: true,
            ..DriverError::new(ErrorCode::WorkerError, "the media could not be read")
        }
    }
}

/// Which instance a session is for, and the lease epoch its writes are fenced on.
#[derive(Debug, Clone)]
pub struct OpenTarget {
    pub instance: shared::ids::InstanceId,
    pub epoch: i64,
    /// The instance's `proxy_url` (http, socks5, socks5h), if any.
    pub proxy_url: Option<String>,
}

/// Opens sessions on one network.
#[async_trait::async_trait]
pub trait Driver: Send + Sync + 'static {
    /// The network's name (`sim`, `whatsapp`).
    fn name(&self) -> &'static str;

    /// Opens a session: resumes `credentials`, or starts pairing when there are none.
    /// Events arrive on the returned receiver until it closes.
    async fn open(
        &self,
        target: &OpenTarget,
        credentials: Option<serde_json::Value>,
    ) -> Result<(Box<dyn Session>, mpsc::Receiver<DriverEvent>), DriverError>;
}

/// A message to send, as the queue hands it to a driver.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The network id, assigned before the first attempt; a re-send reuses it.
    pub network_id: String,
    pub to_jid: shared::jid::Jid,
    /// The validated content, its media loaded.
    pub message: shared::message::Outbound<Media>,
    /// The message it quotes (`reply_to`) or reacts to, when the log knows it.
    pub reference: Option<Reference>,
}

impl Outgoing {
    /// The message `id` (its `reply_to`, or what it reacts to) points at, as the network
    /// knows it: what the log found (the queue looked it up), else a network id as given.
    /// A `msg_` id the log does not know is nothing the network could find.
    pub fn referenced(&self, id: &str) -> Option<Reference> {
        self.reference.clone().or_else(|| {
            (!id.starts_with("msg_")).then(|| Reference {
                network_id: id.to_string(),
                chat_jid: self.to_jid.clone(),
                // Unknown to the log: ids we pre-assign start with 3EB0.
                from_me: id.starts_with("3EB0"),
                sender: None,
                text: None,
            })
        })
    }

    /// The message a reaction names: one of its own chat (a reaction carries no other
    /// chat), known to the log or given by network id.
    pub fn reacted_to(&self, id: &str) -> Result<Reference, DriverError> {
        self.referenced(id).filter(|r| r.chat_jid == self.to_jid).ok_or_else(|| {
            DriverError::new(ErrorCode::ValidationFailed, "the reacted-to message is not one of this chat's")
        })
    }
}

/// A message that an outgoing one quotes or reacts to, as the network knows it: our
/// `msg_` ids never leave the gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub network_id: String,
    /// Its chat (a quote may come from another chat, e.g. a group's message answered
    /// in private).
    pub chat_jid: shared::jid::Jid,
    pub from_me: bool,
    /// Its sender's JID, when known.
    pub sender: Option<String>,
    /// Its text or caption, shown with a quote.
    pub text: Option<String>,
}

impl Reference {
    /// From the log's (or queue's) row.
    pub fn from_row(r: shared::db::log::Referenced) -> Self {
        let text = ["text", "caption"].iter().find_map(|k| r.content[*k].as_str()).map(str::to_owned);
        Reference {
            network_id: r.wa_message_id,
            chat_jid: r.chat_jid,
            from_me: r.from_me,
            sender: Some(r.from_jid).filter(|s| !s.is_empty()),
            text,
        }
    }
}

/// Media of a message: its description, and where its bytes are read from when the
/// driver needs them (a piece at a time: a send never holds a whole file). It
/// serializes as its description (type, name, length, hash), never its bytes.
#[derive(Clone)]
pub struct Media {
    pub mime_type: String,
    pub filename: Option<String>,
    pub sha256: String,
    pub size: u64,
    pub bytes: MediaBytes,
}

/// Where a message's media bytes are read from.
#[derive(Debug, Clone)]
pub enum MediaBytes {
    /// The media store (Postgres or the bucket).
    Stored(shared::db::media::Readable),
    /// Tests: bytes at hand.
    #[cfg(test)]
    Held(bytes::Bytes),
}

impl MediaBytes {
    /// The bytes, in order, a piece at a time; a failure to read them is
    /// [`DriverError::media_unreadable`].
    pub async fn pieces(
        &self,
    ) -> Result<futures::stream::BoxStream<'static, Result<bytes::Bytes, DriverError>>, DriverError> {
        use futures::{StreamExt, TryStreamExt};
        fn unreadable(e: shared::db::media::MediaError) -> DriverError {
            tracing::warn!(error = %e, "reading media failed");
            DriverError::media_unreadable()
        }
        match self {
            MediaBytes::Stored(r) => Ok(r.pieces().await.map_err(unreadable)?.map_err(unreadable).boxed()),
            #[cfg(test)]
            MediaBytes::Held(b) => {
                // In pieces of 1,000 bytes, so readers meet piece boundaries.
                let pieces: Vec<_> = b.chunks(1000).map(|c| Ok(bytes::Bytes::copy_from_slice(c))).collect();
                Ok(futures::stream::iter(pieces).boxed())
            }
        }
    }
}

impl MediaBytes {
    /// Folds the bytes, in order, into `state` with `f` on a blocking thread: hashing or
    /// encrypting a 4 MiB piece takes milliseconds, which the runtime's threads (every
    /// other instance's) never spend.
    pub async fn fold<S: Send + 'static>(
        &self,
        state: S,
        mut f: impl FnMut(&mut S, &[u8]) + Send + 'static,
    ) -> Result<S, DriverError> {
        use futures::TryStreamExt;
        let mut pieces = self.pieces().await?;
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let mut state = state;
            while let Some(p) = rt.block_on(pieces.try_next())? {
                f(&mut state, &p);
            }
            Ok(state)
        })
        .await
        .map_err(|_| DriverError::new(ErrorCode::WorkerError, "reading the media was cut short"))?
    }
}

impl Media {
    /// Whether bytes read (`len` of them, hashing to `sha256`) are the ones stored: a
    /// send of other bytes fails for good.
    pub fn check(&self, len: u64, sha256: &[u8]) -> Result<(), DriverError> {
        if len != self.size || hex::encode(sha256) != self.sha256 {
            return Err(DriverError::new(ErrorCode::ValidationFailed, "the stored media does not match its hash"));
        }
        Ok(())
    }
}

impl PartialEq for Media {
    fn eq(&self, o: &Media) -> bool {
        (&self.mime_type, &self.filename, &self.sha256, self.size) == (&o.mime_type, &o.filename, &o.sha256, o.size)
    }
}

impl serde::Serialize for Media {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_json::json!({
            "mime_type": self.mime_type, "filename": self.filename, "size": self.size, "sha256": self.sha256,
        })
        .serialize(s)
    }
}

impl std::fmt::Debug for Media {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Media")
            .field("mime_type", &self.mime_type)
            .field("filename", &self.filename)
            .field("len", &self.size)
            .finish()
    }
}

impl DriverError {
    /// Failures that no retry fixes: the message fails at once.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::InvalidNumber | ErrorCode::ValidationFailed | ErrorCode::Forbidden | ErrorCode::NotFound
        )
    }
}

/// A live session's requests.
#[async_trait::async_trait]
pub trait Session: Send + Sync {
    /// Sends a message under its pre-assigned network id.
    async fn send(&self, msg: &Outgoing) -> Result<(), DriverError>;
    /// A phone pairing code for `phone` (while pairing).
    async fn pairing_code(&self, phone: &str) -> Result<String, DriverError>;
    /// Unlinks the device.
    async fn logout(&self) -> Result<(), DriverError>;
    /// Which numbers have an account, in order.
    async fn check_numbers(&self, numbers: &[String]) -> Result<Vec<shared::contract::NumberAnswer>, DriverError>;
    /// An operation of the worker contract, answered with its reply type.
    async fn net(&self, op: &shared::contract::NetOp) -> Result<shared::contract::Answer, DriverError>;
    /// Downloads received media; `media_unavailable` once the network no longer has it.
    async fn download(&self, media: &RemoteMedia) -> Result<Vec<u8>, DriverError>;
    /// Rejects a call, texting the caller `message` when given.
    async fn reject_call(&self, call_id: &str, message: Option<String>) -> Result<(), DriverError>;
    /// Closes the connection (the device stays linked).
    async fn close(&self);
    /// Tells the network what is logged, so it stops delivering it again; until then a
    /// reconnect brings it anew. The WhatsApp driver's client acknowledges from its
    /// inbound durability hook, so by default this does nothing.
    fn logged(&self, _what: Logged<'_>) {}
}
