//! The wire protocol between the `sim` network driver (in the worker) and netsim: JSON
//! text frames over a WebSocket at `ws://<netsim>/session`. One connection is one device
//! session. The client opens with `hello`; everything after is events from netsim and
//! requests (with a `req` number echoed in the `reply`) from the client.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A message as the simulated network carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimMessage {
    /// The network message id (assigned by the sender, de-duplicated by netsim).
    pub id: String,
    /// Sender's number.
    pub from: String,
    /// Recipient's number (a group's JID when a device or phone sends to a group).
    pub to: String,
    /// The sender's hidden id (LID digits), on the copy for a device, when the network
    /// addresses the sender by one; `from` is then empty if it hides the number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_lid: Option<String>,
    /// The recipient's hidden id, likewise, on the copy of a message the account's phone
    /// sent (`from_me`); and on a device's send to a person named by hidden id (`to`
    /// empty: netsim finds the account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_lid: Option<String>,
    /// The group's JID, on each member's copy of a group message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `text`, `image`, ...
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Type-specific content (media, location, poll, ...).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub body: serde_json::Value,
    pub timestamp: DateTime<Utc>,
}

/// Client to netsim.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ClientOp {
    /// Resume a linked device (`session` set) or start pairing (`session` absent).
    Hello { session: Option<String> },
    /// Ask for a phone pairing code for `phone` (while pairing).
    PairCode { req: u64, phone: String },
    /// Send a message; `message.from` is ignored (netsim knows the account).
    Send { req: u64, message: SimMessage },
    /// Unlink this device.
    Logout { req: u64 },
    /// Reject an incoming call, optionally texting the caller.
    RejectCall { req: u64, call_id: String, message: Option<String> },
    /// Which of these numbers have an account (reply value: `{"results": [...]}`).
    CheckNumbers { req: u64, numbers: Vec<String> },
    /// An operation of the worker contract (answers its reply type, `crate::contract`).
    Net { req: u64, call: crate::contract::NetOp },
    /// These messages (network ids of `message` events) are stored: the network stops
    /// delivering them again. Until then every connect of the device resumes with them,
    /// as WhatsApp's offline queue does for a device that never confirmed.
    Ack { ids: Vec<String> },
    /// The history chunk `chunk` is stored: the network sends the next one.
    HistoryAck { chunk: u32 },
}

/// netsim to client.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum ServerEv {
    /// A QR payload to show; replaced by the next one at `expires_at`.
    Qr { code: String, expires_at: DateTime<Utc> },
    /// The device was linked by a scan or a pairing code; `session` resumes it later.
    /// `push_name` is the account's profile name, when it has one.
    Paired {
        session: String,
        phone: String,
        business: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        push_name: Option<String>,
    },
    /// A resumed session is online.
    Connected {
        phone: String,
        business: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        push_name: Option<String>,
    },
    /// The device was unlinked (or the session is unknown).
    LoggedOut,
    /// The account is banned.
    Banned,
    /// The account is paused until then (a temporary ban); this connection is closed.
    TempBanned { until: DateTime<Utc> },
    /// Another connection resumed this session; this one is closed.
    Replaced,
    /// The answer to a request.
    Reply {
        req: u64,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        value: serde_json::Value,
    },
    /// A message for this account (`from_me`: sent from the phone itself).
    Message { message: SimMessage, from_me: bool },
    /// A receipt for a message this account sent.
    Receipt { id: String, status: String, from: String, timestamp: DateTime<Utc> },
    /// The account's messages, once after linking, in chunks oldest first: the next
    /// chunk comes once this one is acknowledged (`history_ack`), and an unacknowledged
    /// chunk comes again on the device's next connect. `chunk` counts from 0; `total` is
    /// the sync's message count and `sent` how many went before this chunk's end.
    History {
        messages: Vec<SimMessage>,
        #[serde(default)]
        chunk: u32,
        #[serde(default)]
        total: u64,
        #[serde(default)]
        sent: u64,
    },
    /// An incoming voice call.
    Call { call_id: String, from: String },
    /// A label changed on the phone.
    Label { label_id: String, name: String, color: i32, deleted: bool },
    /// A label applied to (or removed from) a chat, or one message of it.
    LabelTarget {
        label_id: String,
        jid: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        labeled: bool,
    },
    /// A change the account is told of, as the catalog's event `event` with its data
    /// (`group.updated`, `group.participants_updated`, `group.joined`, `group.left`).
    Event { event: String, data: serde_json::Value },
}

impl ServerEv {
    pub fn ok(req: u64, value: serde_json::Value) -> ServerEv {
        ServerEv::Reply { req, ok: true, code: None, detail: None, value }
    }

    pub fn err(req: u64, code: &str, detail: &str) -> ServerEv {
        ServerEv::Reply {
            req,
            ok: false,
            code: Some(code.to_string()),
            detail: Some(detail.to_string()),
            value: serde_json::Value::Null,
        }
    }
}
