//! Account control: registering phones, logging devices out, blocks, bans, calls.

use super::*;

impl Net {
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
            s.forget_device(sess);
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

    pub fn device_logout(&self, conn: ConnId, req: u64) {
        let mut s = self.lock();
        let Some(ConnState::Online { session, .. }) = s.conns.get(&conn).map(|c| &c.state) else {
            return s.send_to(conn, ServerEv::err(req, "not_connected", "this session is not online"));
        };
        let session = session.clone();
        s.devices.remove(&session);
        s.forget_device(&session);
        s.send_to(conn, ServerEv::ok(req, serde_json::Value::Null));
        s.close(conn, ServerEv::LoggedOut);
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
                from_lid: None,
                to_lid: None,
                group: None,
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
}
