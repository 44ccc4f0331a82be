//! The simulated network's state and rules, free of I/O: connections are channels.
//! One mutex guards it all; every operation is a short, non-blocking critical section,
//! which holds thousands of linked accounts comfortably in one process.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rand::distributions::{Alphanumeric, DistString};
use rand::Rng;
use serde::{Deserialize, Serialize};
use shared::simproto::{ServerEv, SimMessage};
use tokio::sync::mpsc::UnboundedSender;

pub use lids::{lid_of, Addressing};

/// Connection id, one per WebSocket.
pub type ConnId = u64;

/// How many messages the history sync after linking carries.
const HISTORY_LIMIT: usize = 100;
/// The alphabet of phone pairing codes (no look-alike characters).
const PAIRING_CODE_CHARS: &[u8] = b"ABCDEFGHJKLMNPQRSTVWXYZ23456789";

/// Fault injection for the whole network.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Delay before each request is answered.
    #[serde(default)]
    pub latency_ms: u64,
    /// Probability (0-1) that a send fails with `network_error`.
    #[serde(default)]
    pub error_rate: f64,
    /// When set, every connection is dropped at once (the flag then resets).
    #[serde(default)]
    pub drop_connections: bool,
    /// While set, media downloads (`GET /media/{id}`) fail with 503, as media servers
    /// that are briefly unreachable.
    #[serde(default)]
    pub media_down: bool,
    /// The network's spam rule on first contacts (sends to numbers that never wrote to
    /// the account) within `first_contact_window_secs` (default 3600): from
    /// `first_contact_cap` on they are refused as `rate_limited` (capping); past
    /// `first_contact_ban` the account is temporarily banned for `ban_minutes` (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_contact_cap: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_contact_ban: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_contact_window_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ban_minutes: Option<u64>,
}

/// One account on the network.
#[derive(Debug, Default)]
struct Phone {
    business: bool,
    banned: bool,
    /// Paused until then (a temporary ban): devices are turned away until it passes.
    paused_until: Option<DateTime<Utc>>,
    /// What this phone received, each network id once.
    inbox: Vec<SimMessage>,
    inbox_ids: HashSet<String>,
    /// Repeated deliveries of an id already in the inbox (from another sender: a real
    /// duplicate the phone would show twice).
    duplicates: u64,
    /// Re-sends of an id by its own sender, absorbed by the network's de-duplication
    /// (what a new owner does with an in-flight message after a crash).
    absorbed: u64,
    /// What this account sent (for history sync).
    sent: Vec<SimMessage>,
    /// Events other than messages for linked devices that were offline, delivered on
    /// their next connect (messages wait in each device's queue, `delivery`).
    pending: Vec<ServerEv>,
    /// Synthetic old messages the next history sync carries before the recent ones.
    archive: u64,
    /// Numbers this account blocked: their messages are refused (`forbidden`).
    blocked: HashSet<String>,
    /// Profile: display name, about text, business profile, picture (mime, bytes).
    profile: ops::Profile,
    /// Privacy settings changed from their defaults (`shared::privacy`).
    privacy: std::collections::BTreeMap<String, String>,
    /// Saved contacts: number -> the name saved for it.
    contacts: std::collections::BTreeMap<String, Option<String>>,
    /// Chat settings per other party (archive, pin, mute, read state, deleted).
    chats: HashMap<String, ops::ChatState>,
    /// Ids of received messages this account read (a read receipt went out).
    read: HashSet<String>,
    /// Labels (business accounts).
    labels: labels::Labels,
    /// Accounts showing this phone that they are typing (until their next message).
    typing: HashSet<String>,
    /// The presence the account last set (`available` or `unavailable`; none until set).
    presence: Option<&'static str>,
    /// When this account's recent first contacts were made (the spam rule's window).
    first_contacts: std::collections::VecDeque<DateTime<Utc>>,
    /// How the network names this account to others' devices (by number or hidden id).
    addressing: lids::Addressing,
}

#[derive(Debug)]
enum ConnState {
    /// Said nothing yet.
    New,
    /// Showing a QR code (and maybe waiting for a pairing code).
    Pairing { qr: String },
    /// Linked and online as `session` of account `number`.
    Online { number: String, session: String },
    /// Told to go away.
    Closed,
}

struct Conn {
    tx: UnboundedSender<ServerEv>,
    state: ConnState,
}

/// A call placed through the control API.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub id: String,
    pub from: String,
    pub to: String,
    /// `ringing`, `rejected` or `missed` (nobody online).
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Default)]
struct State {
    phones: HashMap<String, Phone>,
    /// Linked device sessions: session token -> account number.
    devices: HashMap<String, String>,
    /// Scannable QR payloads -> the pairing connection.
    qr: HashMap<String, ConnId>,
    /// Pairing codes -> (connection, the number it was asked for).
    codes: HashMap<String, (ConnId, String)>,
    conns: HashMap<ConnId, Conn>,
    /// Online sessions -> their connection.
    online: HashMap<String, ConnId>,
    calls: Vec<CallRecord>,
    /// Media carried by messages, served at `/media/{id}` until expired.
    media: HashMap<String, ops::Blob>,
    /// Channels by JID.
    channels: std::collections::BTreeMap<String, channels::Channel>,
    faults: Faults,
    next_conn: ConnId,
    /// Groups by id (the user part of `<id>@g.us`).
    groups: HashMap<String, groups::Group>,
    next_group: u64,
    /// Each linked device's unacknowledged messages and history sync, by session.
    queues: HashMap<String, delivery::DeviceQueue>,
    /// Messages dropped from full device queues.
    dropped: u64,
}

/// Why a control or session operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NetError {
    #[error("no account has this number")]
    NoAccount,
    #[error("the code is unknown or expired")]
    UnknownCode,
    #[error("the account is banned")]
    Banned,
    #[error("the number is already registered")]
    Exists,
    #[error("not found")]
    NotFound,
    #[error("the recipient blocked this number")]
    Blocked,
    #[error("invalid: {0}")]
    Invalid(&'static str),
    #[error("refused: {0}")]
    Refused(&'static str),
}

/// What a phone received, as the control API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Inbox {
    pub messages: Vec<InboxItem>,
    pub duplicates: u64,
    pub resends_absorbed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct InboxItem {
    pub id: String,
    pub from: String,
    /// The group's JID, for a message sent to a group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub body: serde_json::Value,
    pub received_at: DateTime<Utc>,
}

/// The network.
#[derive(Default)]
pub struct Net {
    state: Mutex<State>,
}

fn random_code(len: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..len).map(|_| PAIRING_CODE_CHARS[rng.gen_range(0..PAIRING_CODE_CHARS.len())] as char).collect()
}

/// Numbers are digits only (7-15, E.164 without `+`).
pub fn valid_number(n: &str) -> bool {
    (7..=15).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit())
}

impl State {
    /// The connections of the account's devices that are online now.
    fn online_conns(&self, number: &str) -> Vec<ConnId> {
        self.devices
            .iter()
            .filter(|(_, n)| n.as_str() == number)
            .filter_map(|(k, _)| self.online.get(k).copied())
            .collect()
    }

    fn send_to(&mut self, conn: ConnId, ev: ServerEv) {
        if let Some(c) = self.conns.get(&conn) {
            let _ = c.tx.send(ev);
        }
    }

    /// Delivers an event to every online device of `number`, or queues it. A message
    /// waits in each device's queue until acknowledged (`delivery`).
    fn notify_account(&mut self, number: &str, ev: ServerEv) {
        let ev = self.addressed_event(number, ev);
        if let ServerEv::Message { message, .. } = &ev {
            let id = message.id.clone();
            return self.deliver_to_devices(number, &id, ev);
        }
        let conns = self.online_conns(number);
        if conns.is_empty() {
            if self.devices.values().any(|n| n == number) {
                if let Some(p) = self.phones.get_mut(number) {
                    p.pending.push(ev);
                }
            }
            return;
        }
        for c in conns {
            self.send_to(c, ev.clone());
        }
    }

    /// Closes a connection after telling it why.
    fn close(&mut self, conn: ConnId, ev: ServerEv) {
        self.send_to(conn, ev);
        if let Some(c) = self.conns.get_mut(&conn) {
            match std::mem::replace(&mut c.state, ConnState::Closed) {
                ConnState::Pairing { qr } => {
                    self.qr.remove(&qr);
                }
                ConnState::Online { session, .. } if self.online.get(&session) == Some(&conn) => {
                    self.online.remove(&session);
                }
                _ => {}
            }
        }
        self.codes.retain(|_, (c, _)| *c != conn);
    }
}

impl Net {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    // Connections (WebSocket); pairing, messaging, accounts and faults are in the
    // submodules of the same names.

    pub fn connect(&self, tx: UnboundedSender<ServerEv>) -> ConnId {
        let mut s = self.lock();
        s.next_conn += 1;
        let id = s.next_conn;
        s.conns.insert(id, Conn { tx, state: ConnState::New });
        id
    }

    pub fn disconnect(&self, conn: ConnId) {
        let mut s = self.lock();
        if let Some(c) = s.conns.remove(&conn) {
            match c.state {
                ConnState::Pairing { qr } => {
                    s.qr.remove(&qr);
                }
                ConnState::Online { session, .. } if s.online.get(&session) == Some(&conn) => {
                    s.online.remove(&session);
                }
                _ => {}
            }
        }
        s.codes.retain(|_, (c, _)| *c != conn);
    }

    /// Whether the connection was closed by the network (the session task then ends).
    pub fn is_closed(&self, conn: ConnId) -> bool {
        self.lock().conns.get(&conn).is_none_or(|c| matches!(c.state, ConnState::Closed))
    }

    /// Counts for `/control/stats`: (accounts, linked devices, online sessions, connections).
    pub fn stats(&self) -> (usize, usize, usize, usize) {
        let s = self.lock();
        (s.phones.len(), s.devices.len(), s.online.len(), s.conns.len())
    }
}

mod accounts;
mod channels;
mod delivery;
mod faults;
mod groups;
mod labels;
mod lids;
mod messaging;
mod ops;
mod pairing;
pub use delivery::QueueView;
pub use ops::{MediaIn, ProfileIn, Served};

#[cfg(test)]
mod tests;
