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
    /// Events for linked devices that were offline, delivered on their next connect.
    pending: Vec<ServerEv>,
    /// Numbers this account blocked: their messages are refused (`forbidden`).
    blocked: HashSet<String>,
    /// Profile: display name, about text, business profile, picture (mime, bytes).
    profile: ops::Profile,
    /// Saved contacts: number -> the name saved for it.
    contacts: std::collections::BTreeMap<String, Option<String>>,
    /// Chat settings per other party (archive, pin, mute, read state, deleted).
    chats: HashMap<String, ops::ChatState>,
    /// Ids of received messages this account read (a read receipt went out).
    read: HashSet<String>,
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
    faults: Faults,
    next_conn: ConnId,
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

    /// Delivers an event to every online device of `number`, or queues it.
    fn notify_account(&mut self, number: &str, ev: ServerEv) {
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

    /// Records a message in the recipient's inbox; false if the id was there already
    /// (a re-send by the same sender is absorbed, by anyone else counted a duplicate).
    fn deliver(&mut self, msg: &SimMessage) -> bool {
        let Some(to) = self.phones.get_mut(&msg.to) else { return false };
        if !to.inbox_ids.insert(msg.id.clone()) {
            let same_sender = to.inbox.iter().any(|m| m.id == msg.id && m.from == msg.from);
            if same_sender {
                to.absorbed += 1;
            } else {
                to.duplicates += 1;
            }
            return false;
        }
        to.inbox.push(msg.clone());
        true
    }

    /// Links the pairing connection `conn` to account `number`.
    fn link(&mut self, conn: ConnId, number: &str) -> Result<String, NetError> {
        let phone = self.phones.get(number).ok_or(NetError::NoAccount)?;
        if phone.banned {
            return Err(NetError::Banned);
        }
        let business = phone.business;
        let session = format!("sess_{}", Alphanumeric.sample_string(&mut rand::thread_rng(), 32));
        let c = self.conns.get_mut(&conn).ok_or(NetError::UnknownCode)?;
        let ConnState::Pairing { qr } =
            std::mem::replace(&mut c.state, ConnState::Online { number: number.to_string(), session: session.clone() })
        else {
            return Err(NetError::UnknownCode);
        };
        self.qr.remove(&qr);
        self.codes.retain(|_, (c, _)| *c != conn);
        self.devices.insert(session.clone(), number.to_string());
        self.online.insert(session.clone(), conn);
        self.send_to(conn, ServerEv::Paired { session: session.clone(), phone: number.to_string(), business });
        let history = self.history(number);
        self.send_to(conn, ServerEv::History { messages: history });
        Ok(session)
    }

    /// The account's recent messages, oldest first (what a history sync carries).
    fn history(&self, number: &str) -> Vec<SimMessage> {
        let phone = &self.phones[number];
        let mut history: Vec<SimMessage> = phone.inbox.iter().chain(phone.sent.iter()).cloned().collect();
        history.sort_by_key(|m| m.timestamp);
        let skip = history.len().saturating_sub(HISTORY_LIMIT);
        history.split_off(skip)
    }
}

impl Net {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    // ---- accounts (control API) ----

    pub fn register(&self, number: &str, business: bool) -> Result<(), NetError> {
        if !valid_number(number) {
            return Err(NetError::Invalid("number must be 7-15 digits"));
        }
        let mut s = self.lock();
        if s.phones.contains_key(number) {
            return Err(NetError::Exists);
        }
        s.phones.insert(number.to_string(), Phone { business, ..Phone::default() });
        Ok(())
    }

    /// (business, banned, linked devices, online devices)
    pub fn phone_info(&self, number: &str) -> Option<(bool, bool, usize, usize)> {
        let s = self.lock();
        let p = s.phones.get(number)?;
        let sessions: Vec<&String> = s.devices.iter().filter(|(_, n)| n.as_str() == number).map(|(k, _)| k).collect();
        let online = sessions.iter().filter(|k| s.online.contains_key(k.as_str())).count();
        Some((p.business, p.banned, sessions.len(), online))
    }

    pub fn inbox(&self, number: &str) -> Option<Inbox> {
        let s = self.lock();
        let p = s.phones.get(number)?;
        Some(Inbox {
            messages: p
                .inbox
                .iter()
                .map(|m| InboxItem {
                    id: m.id.clone(),
                    from: m.from.clone(),
                    kind: m.kind.clone(),
                    text: m.text.clone(),
                    body: m.body.clone(),
                    received_at: m.timestamp,
                })
                .collect(),
            duplicates: p.duplicates,
            resends_absorbed: p.absorbed,
        })
    }

    pub fn scan(&self, code: &str, number: &str) -> Result<String, NetError> {
        let mut s = self.lock();
        let conn = *s.qr.get(code).ok_or(NetError::UnknownCode)?;
        s.link(conn, number)
    }

    pub fn enter_code(&self, number: &str, code: &str) -> Result<String, NetError> {
        let mut s = self.lock();
        let (conn, wanted) = s.codes.get(&code.to_ascii_uppercase()).cloned().ok_or(NetError::UnknownCode)?;
        if wanted != number {
            return Err(NetError::UnknownCode);
        }
        s.link(conn, number)
    }

    /// A phone sends a message to another account (e.g. one linked to an instance).
    pub fn phone_send(
        &self,
        from: &str,
        to: &str,
        kind: &str,
        text: Option<String>,
        body: serde_json::Value,
    ) -> Result<String, NetError> {
        let mut s = self.lock();
        if !s.phones.contains_key(from) || !s.phones.contains_key(to) {
            return Err(NetError::NoAccount);
        }
        if s.phones[to].blocked.contains(from) {
            return Err(NetError::Blocked);
        }
        let msg = SimMessage {
            id: format!("SIM{}", Alphanumeric.sample_string(&mut rand::thread_rng(), 20).to_ascii_uppercase()),
            from: from.to_string(),
            to: to.to_string(),
            kind: kind.to_string(),
            text,
            body,
            timestamp: Utc::now(),
        };
        s.deliver(&msg);
        if let Some(p) = s.phones.get_mut(from) {
            p.sent.push(msg.clone());
        }
        let id = msg.id.clone();
        s.notify_account(to, ServerEv::Message { message: msg.clone(), from_me: false });
        // Linked devices of the sender see it too, as sent from the phone.
        s.notify_account(from, ServerEv::Message { message: msg, from_me: true });
        Ok(id)
    }

    /// `number` read message `id` it received: its sender gets a read receipt.
    pub fn mark_read(&self, number: &str, id: &str) -> Result<(), NetError> {
        let mut s = self.lock();
        let p = s.phones.get(number).ok_or(NetError::NoAccount)?;
        let from = p.inbox.iter().find(|m| m.id == id).map(|m| m.from.clone()).ok_or(NetError::NotFound)?;
        let ev = ServerEv::Receipt {
            id: id.to_string(),
            status: "read".into(),
            from: number.to_string(),
            timestamp: Utc::now(),
        };
        s.notify_account(&from, ev);
        Ok(())
    }

    /// Unlinks every device of the account.
    pub fn logout_phone(&self, number: &str) -> Result<usize, NetError> {
        let mut s = self.lock();
        if !s.phones.contains_key(number) {
            return Err(NetError::NoAccount);
        }
        let sessions: Vec<String> =
            s.devices.iter().filter(|(_, n)| n.as_str() == number).map(|(k, _)| k.clone()).collect();
        for sess in &sessions {
            s.devices.remove(sess);
            if let Some(conn) = s.online.get(sess).copied() {
                s.close(conn, ServerEv::LoggedOut);
            }
        }
        if let Some(p) = s.phones.get_mut(number) {
            p.pending.clear();
        }
        Ok(sessions.len())
    }

    /// `number` blocks (or unblocks) `other`.
    pub fn set_blocked(&self, number: &str, other: &str, blocked: bool) -> Result<(), NetError> {
        let mut s = self.lock();
        let p = s.phones.get_mut(number).ok_or(NetError::NoAccount)?;
        if blocked {
            p.blocked.insert(other.to_string());
        } else {
            p.blocked.remove(other);
        }
        Ok(())
    }

    pub fn ban(&self, number: &str) -> Result<(), NetError> {
        let mut s = self.lock();
        let p = s.phones.get_mut(number).ok_or(NetError::NoAccount)?;
        p.banned = true;
        for c in s.online_conns(number) {
            s.close(c, ServerEv::Banned);
        }
        Ok(())
    }

    /// A temporary ban: the account's devices are closed and turned away until `until`.
    pub fn temp_ban(&self, number: &str, until: DateTime<Utc>) -> Result<(), NetError> {
        let mut s = self.lock();
        let p = s.phones.get_mut(number).ok_or(NetError::NoAccount)?;
        p.paused_until = Some(until);
        for c in s.online_conns(number) {
            s.close(c, ServerEv::TempBanned { until });
        }
        Ok(())
    }

    /// `from` calls `to`; the linked devices of `to` see the call.
    pub fn call(&self, from: &str, to: &str) -> Result<CallRecord, NetError> {
        let mut s = self.lock();
        if !s.phones.contains_key(from) || !s.phones.contains_key(to) {
            return Err(NetError::NoAccount);
        }
        if s.phones[to].blocked.contains(from) {
            return Err(NetError::Blocked);
        }
        let id = format!("CALL{}", Alphanumeric.sample_string(&mut rand::thread_rng(), 16).to_ascii_uppercase());
        let online = s.devices.iter().any(|(k, n)| n == to && s.online.contains_key(k));
        let rec = CallRecord {
            id: id.clone(),
            from: from.to_string(),
            to: to.to_string(),
            state: if online { "ringing" } else { "missed" }.into(),
            message: None,
        };
        s.calls.push(rec.clone());
        if online {
            s.notify_account(to, ServerEv::Call { call_id: id, from: from.to_string() });
        }
        Ok(rec)
    }

    pub fn calls(&self) -> Vec<CallRecord> {
        self.lock().calls.clone()
    }

    pub fn faults(&self) -> Faults {
        self.lock().faults.clone()
    }

    /// Sets fault injection; `drop_connections` closes every connection now.
    pub fn set_faults(&self, mut f: Faults) -> Result<Faults, NetError> {
        if !(0.0..=1.0).contains(&f.error_rate) {
            return Err(NetError::Invalid("error_rate must be between 0 and 1"));
        }
        let mut s = self.lock();
        if f.drop_connections {
            // A network drop, not a logout: dropping the senders ends each connection's
            // writer, which closes its socket; linked devices stay linked.
            s.conns.clear();
            s.online.clear();
            s.qr.clear();
            s.codes.clear();
            f.drop_connections = false;
        }
        s.faults = f.clone();
        Ok(f)
    }

    // ---- sessions (WebSocket) ----

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

    /// `hello`: resume a session, or start pairing with a first QR code.
    pub fn hello(&self, conn: ConnId, session: Option<String>, qr_ttl: chrono::Duration) {
        let mut s = self.lock();
        match session {
            Some(sess) => {
                let Some(number) = s.devices.get(&sess).cloned() else {
                    return s.close(conn, ServerEv::LoggedOut);
                };
                let phone = &s.phones[&number];
                if phone.banned {
                    return s.close(conn, ServerEv::Banned);
                }
                if let Some(until) = phone.paused_until.filter(|u| *u > Utc::now()) {
                    return s.close(conn, ServerEv::TempBanned { until });
                }
                let business = phone.business;
                if let Some(old) = s.online.insert(sess.clone(), conn) {
                    if old != conn {
                        s.close(old, ServerEv::Replaced);
                        s.online.insert(sess.clone(), conn);
                    }
                }
                if let Some(c) = s.conns.get_mut(&conn) {
                    c.state = ConnState::Online { number: number.clone(), session: sess };
                }
                s.send_to(conn, ServerEv::Connected { phone: number.clone(), business });
                let pending = s.phones.get_mut(&number).map(|p| std::mem::take(&mut p.pending)).unwrap_or_default();
                for ev in pending {
                    s.send_to(conn, ev);
                }
            }
            None => {
                let code = format!("2@{}", Alphanumeric.sample_string(&mut rand::thread_rng(), 40));
                if let Some(c) = s.conns.get_mut(&conn) {
                    c.state = ConnState::Pairing { qr: code.clone() };
                }
                s.qr.insert(code.clone(), conn);
                s.send_to(conn, ServerEv::Qr { code, expires_at: Utc::now() + qr_ttl });
            }
        }
    }

    /// Replaces the QR code of a pairing connection; false once it is no longer pairing.
    pub fn rotate_qr(&self, conn: ConnId, qr_ttl: chrono::Duration) -> bool {
        let mut s = self.lock();
        let code = format!("2@{}", Alphanumeric.sample_string(&mut rand::thread_rng(), 40));
        let Some(c) = s.conns.get_mut(&conn) else { return false };
        let ConnState::Pairing { qr } = &mut c.state else { return false };
        let old = std::mem::replace(qr, code.clone());
        s.qr.remove(&old);
        s.qr.insert(code.clone(), conn);
        s.send_to(conn, ServerEv::Qr { code, expires_at: Utc::now() + qr_ttl });
        true
    }

    pub fn pair_code(&self, conn: ConnId, req: u64, phone: &str) {
        let mut s = self.lock();
        let pairing = matches!(s.conns.get(&conn).map(|c| &c.state), Some(ConnState::Pairing { .. }));
        let reply = if !pairing {
            ServerEv::err(req, "not_pairing", "this session is not pairing")
        } else if !s.phones.contains_key(phone) {
            ServerEv::err(req, "invalid_number", "no account has this number")
        } else {
            let code = random_code(8);
            s.codes.retain(|_, (c, _)| *c != conn);
            s.codes.insert(code.clone(), (conn, phone.to_string()));
            ServerEv::ok(req, serde_json::json!({ "code": code }))
        };
        s.send_to(conn, reply);
    }

    /// A linked device sends a message.
    pub fn device_send(&self, conn: ConnId, req: u64, mut msg: SimMessage) {
        let mut s = self.lock();
        let Some(ConnState::Online { number, .. }) = s.conns.get(&conn).map(|c| &c.state) else {
            return s.send_to(conn, ServerEv::err(req, "not_connected", "this session is not online"));
        };
        let number = number.clone();
        if msg.id.is_empty() || msg.id.len() > 128 {
            return s.send_to(conn, ServerEv::err(req, "validation_failed", "the message id must be 1-128 characters"));
        }
        let Some(recipient) = s.phones.get(&msg.to) else {
            return s.send_to(conn, ServerEv::err(req, "invalid_number", "no account has this number"));
        };
        if recipient.blocked.contains(&number) {
            return s.send_to(conn, ServerEv::err(req, "forbidden", "the recipient blocked this account"));
        }
        let rate = s.faults.error_rate;
        if rate > 0.0 && rand::thread_rng().gen_bool(rate) {
            return s.send_to(conn, ServerEv::err(req, "network_error", "injected fault"));
        }
        msg.from = number.clone();
        msg.timestamp = Utc::now();
        let fresh = s.deliver(&msg);
        if fresh {
            if let Some(p) = s.phones.get_mut(&number) {
                p.sent.push(msg.clone());
            }
            s.notify_account(&msg.to.clone(), ServerEv::Message { message: msg.clone(), from_me: false });
        }
        s.send_to(conn, ServerEv::ok(req, serde_json::json!({ "id": msg.id, "duplicate": !fresh })));
        s.send_to(
            conn,
            ServerEv::Receipt {
                id: msg.id.clone(),
                status: "delivered".into(),
                from: msg.to.clone(),
                timestamp: Utc::now(),
            },
        );
    }

    pub fn device_logout(&self, conn: ConnId, req: u64) {
        let mut s = self.lock();
        let Some(ConnState::Online { session, .. }) = s.conns.get(&conn).map(|c| &c.state) else {
            return s.send_to(conn, ServerEv::err(req, "not_connected", "this session is not online"));
        };
        let session = session.clone();
        s.devices.remove(&session);
        s.send_to(conn, ServerEv::ok(req, serde_json::Value::Null));
        s.close(conn, ServerEv::LoggedOut);
    }

    /// Which numbers have an account (only for an online session, as on the real network).
    pub fn check_numbers(&self, conn: ConnId, req: u64, numbers: &[String]) {
        let mut s = self.lock();
        if !matches!(s.conns.get(&conn).map(|c| &c.state), Some(ConnState::Online { .. })) {
            return s.send_to(conn, ServerEv::err(req, "not_connected", "this session is not online"));
        }
        let results: Vec<serde_json::Value> = numbers
            .iter()
            .map(|n| match s.phones.get(n) {
                Some(p) => serde_json::json!({ "number": n, "exists": true, "jid": shared::jid::Jid::user(n).as_str(), "business": p.business }),
                None => serde_json::json!({ "number": n, "exists": false }),
            })
            .collect();
        s.send_to(conn, ServerEv::ok(req, serde_json::json!({ "results": results })));
    }

    pub fn reject_call(&self, conn: ConnId, req: u64, call_id: &str, message: Option<String>) {
        let mut s = self.lock();
        let Some(ConnState::Online { number, .. }) = s.conns.get(&conn).map(|c| &c.state) else {
            return s.send_to(conn, ServerEv::err(req, "not_connected", "this session is not online"));
        };
        let number = number.clone();
        let Some(idx) = s.calls.iter().position(|c| c.id == call_id && c.to == number) else {
            return s.send_to(conn, ServerEv::err(req, "not_found", "no such call"));
        };
        s.calls[idx].state = "rejected".into();
        let caller = s.calls[idx].from.clone();
        if let Some(text) = message.filter(|t| !t.is_empty()) {
            s.calls[idx].message = Some(text.clone());
            let msg = SimMessage {
                id: format!("SIM{}", Alphanumeric.sample_string(&mut rand::thread_rng(), 20).to_ascii_uppercase()),
                from: number,
                to: caller,
                kind: "text".into(),
                text: Some(text),
                body: serde_json::Value::Null,
                timestamp: Utc::now(),
            };
            s.deliver(&msg);
        }
        s.send_to(conn, ServerEv::ok(req, serde_json::Value::Null));
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

mod ops;
pub use ops::{MediaIn, ProfileIn, Served};

#[cfg(test)]
mod tests;
