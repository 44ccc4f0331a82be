//! Delivery to linked devices as WhatsApp does it: a message stays queued for each of
//! the account's devices until that device acknowledges it (`ack`), and every connect
//! of the device starts with what it has not acknowledged, so a device that crashed
//! between receiving and storing gets it again. The history sync after linking goes in
//! chunks, the next once the last is acknowledged (`history_ack`), and an
//! unacknowledged chunk comes again on the next connect: the device holds one chunk at
//! a time, however long the history.

use std::collections::{HashSet, VecDeque};

use chrono::{DateTime, Utc};
use shared::simproto::{ServerEv, SimMessage};

use super::{ConnId, ConnState, Net, NetError, State};

/// Unacknowledged messages one device may have queued; past it the oldest are dropped
/// (and counted), as the network's offline queue is finite.
const UNACKED_LIMIT: usize = 20_000;
/// Messages per history chunk.
pub(super) const HISTORY_CHUNK: usize = 500;
/// The longest archive a phone may be given (`POST /control/phones/{n}/archive`).
pub const ARCHIVE_LIMIT: u64 = 1_000_000;
/// How many contacts an archive's messages come from.
const ARCHIVE_CONTACTS: u64 = 50;

/// What the network holds for one linked device.
#[derive(Default)]
pub(super) struct DeviceQueue {
    /// Messages sent (or waiting) and not acknowledged: (network id, event), in order.
    unacked: VecDeque<(String, ServerEv)>,
    /// The history sync under way.
    history: Option<HistorySync>,
}

/// A history sync under way: `archive` synthetic old messages, then `recent`.
pub(super) struct HistorySync {
    archive: u64,
    recent: Vec<SimMessage>,
    /// When the sync started: the archive's newest message is a second before.
    at: DateTime<Utc>,
    /// The chunk out, not yet acknowledged.
    chunk: u32,
}

impl HistorySync {
    fn total(&self) -> u64 {
        self.archive + self.recent.len() as u64
    }
}

/// Message `i` of `number`'s archive of `total`: from one of a few contacts, a second
/// apart, ending a second before `at`.
fn archived(number: &str, i: u64, total: u64, at: DateTime<Utc>) -> SimMessage {
    SimMessage {
        id: format!("ARC{number}{i:07}"),
        from: format!("5521990{:06}", i % ARCHIVE_CONTACTS),
        to: number.to_string(),
        from_lid: None,
        to_lid: None,
        group: None,
        kind: "text".into(),
        text: Some(format!("archived message {i}")),
        body: serde_json::Value::Null,
        timestamp: at - chrono::Duration::seconds((total - i) as i64),
    }
}

impl State {
    /// Queues a message event for every linked device of `number` and sends it to those
    /// online.
    pub(super) fn deliver_to_devices(&mut self, number: &str, id: &str, ev: ServerEv) {
        let sessions: Vec<String> =
            self.devices.iter().filter(|(_, n)| n.as_str() == number).map(|(s, _)| s.clone()).collect();
        for session in sessions {
            let q = self.queues.entry(session.clone()).or_default();
            if q.unacked.len() >= UNACKED_LIMIT {
                q.unacked.pop_front();
                self.dropped += 1;
            }
            q.unacked.push_back((id.to_string(), ev.clone()));
            if let Some(conn) = self.online.get(&session).copied() {
                self.send_to(conn, ev.clone());
            }
        }
    }

    /// Starts (or restarts) `session`'s history sync with the account's archive and
    /// recent messages, sending its first chunk if the device is online.
    pub(super) fn start_history(&mut self, session: &str, number: &str) {
        let recent = self.history(number);
        let archive = self.phones.get(number).map_or(0, |p| p.archive);
        let sync = HistorySync { archive, recent, at: Utc::now(), chunk: 0 };
        self.queues.entry(session.to_string()).or_default().history = Some(sync);
        self.send_history_chunk(session);
    }

    /// Sends the chunk out of `session`'s history sync, if any, to its connection.
    fn send_history_chunk(&mut self, session: &str) {
        let Some(conn) = self.online.get(session).copied() else { return };
        let Some(number) = self.devices.get(session).cloned() else { return };
        let Some(sync) = self.queues.get(session).and_then(|q| q.history.as_ref()) else { return };
        let total = sync.total();
        let start = sync.chunk as u64 * HISTORY_CHUNK as u64;
        let end = (start + HISTORY_CHUNK as u64).min(total);
        let messages: Vec<SimMessage> = (start..end)
            .map(|i| match i.checked_sub(sync.archive) {
                Some(r) => sync.recent[r as usize].clone(),
                None => self.addressed(&number, archived(&number, i, sync.archive, sync.at)),
            })
            .collect();
        let ev = ServerEv::History { messages, chunk: sync.chunk, total, sent: end };
        self.send_to(conn, ev);
    }

    /// A device (re)connected: what it has not acknowledged, then its history chunk.
    pub(super) fn resume(&mut self, session: &str, conn: ConnId) {
        let unacked: Vec<ServerEv> =
            self.queues.get(session).map(|q| q.unacked.iter().map(|(_, ev)| ev.clone()).collect()).unwrap_or_default();
        for ev in unacked {
            self.send_to(conn, ev);
        }
        self.send_history_chunk(session);
    }

    /// The device is unlinked: its queue goes.
    pub(super) fn forget_device(&mut self, session: &str) {
        self.queues.remove(session);
    }

    /// The online session of a connection.
    fn session_of(&self, conn: ConnId) -> Option<String> {
        match self.conns.get(&conn).map(|c| &c.state) {
            Some(ConnState::Online { session, .. }) => Some(session.clone()),
            _ => None,
        }
    }
}

/// A device's queue as the control API shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueueView {
    /// Messages sent to the device and not acknowledged (or waiting for it).
    pub unacked: usize,
    /// The history sync under way: the chunk out, and the sync's size.
    pub history_chunk: Option<u32>,
    pub history_total: Option<u64>,
}

impl Net {
    /// Unacknowledged messages over every device, and those dropped from full queues.
    pub fn unacked(&self) -> (usize, u64) {
        let s = self.lock();
        (s.queues.values().map(|q| q.unacked.len()).sum(), s.dropped)
    }

    /// `ack`: the device stored these messages.
    pub fn ack(&self, conn: ConnId, ids: &[String]) {
        let mut s = self.lock();
        let Some(session) = s.session_of(conn) else { return };
        let ids: HashSet<&str> = ids.iter().map(String::as_str).collect();
        if let Some(q) = s.queues.get_mut(&session) {
            q.unacked.retain(|(id, _)| !ids.contains(id.as_str()));
        }
    }

    /// `history_ack`: the device stored history chunk `chunk`; the next goes out, or the
    /// sync is over.
    pub fn history_ack(&self, conn: ConnId, chunk: u32) {
        let mut s = self.lock();
        let Some(session) = s.session_of(conn) else { return };
        let Some(q) = s.queues.get_mut(&session) else { return };
        let Some(sync) = q.history.as_mut().filter(|h| h.chunk == chunk) else { return };
        if (chunk as u64 + 1) * HISTORY_CHUNK as u64 >= sync.total() {
            q.history = None;
            return;
        }
        sync.chunk += 1;
        s.send_history_chunk(&session);
    }

    /// Gives `number` an archive of `messages` old messages, carried by its next history
    /// sync (pairing, or `resync`).
    pub fn set_archive(&self, number: &str, messages: u64) -> Result<(), NetError> {
        if messages > ARCHIVE_LIMIT {
            return Err(NetError::Invalid("an archive holds at most 1000000 messages"));
        }
        let mut s = self.lock();
        s.phones.get_mut(number).ok_or(NetError::NoAccount)?.archive = messages;
        Ok(())
    }

    /// The queues of `number`'s linked devices, and messages dropped network-wide from
    /// full queues.
    pub fn queues(&self, number: &str) -> Result<(Vec<QueueView>, u64), NetError> {
        let s = self.lock();
        if !s.phones.contains_key(number) {
            return Err(NetError::NoAccount);
        }
        let views = s
            .devices
            .iter()
            .filter(|(_, n)| n.as_str() == number)
            .map(|(session, _)| {
                let q = s.queues.get(session);
                let sync = q.and_then(|q| q.history.as_ref());
                QueueView {
                    unacked: q.map_or(0, |q| q.unacked.len()),
                    history_chunk: sync.map(|h| h.chunk),
                    history_total: sync.map(HistorySync::total),
                }
            })
            .collect();
        Ok((views, s.dropped))
    }
}
