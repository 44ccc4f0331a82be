//! Pairing: QR codes (shown, rotated, scanned) and phone codes (asked for by a device,
//! entered on the phone), both ending in `link`, which makes the device a session of the
//! account and sends it the history.

use super::*;

impl State {
    /// Links the pairing connection `conn` to account `number`.
    pub(super) fn link(&mut self, conn: ConnId, number: &str) -> Result<String, NetError> {
        let phone = self.phones.get(number).ok_or(NetError::NoAccount)?;
        if phone.banned {
            return Err(NetError::Banned);
        }
        let (business, push_name) = (phone.business, phone.profile.name.clone());
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
        self.send_to(
            conn,
            ServerEv::Paired { session: session.clone(), phone: number.to_string(), business, push_name },
        );
        self.start_history(&session, number);
        Ok(session)
    }

    /// The account's recent messages, oldest first (what a history sync carries).
    pub(super) fn history(&self, number: &str) -> Vec<SimMessage> {
        let phone = &self.phones[number];
        let mut history: Vec<SimMessage> = phone.inbox.iter().chain(phone.sent.iter()).cloned().collect();
        history.sort_by_key(|m| m.timestamp);
        let skip = history.len().saturating_sub(HISTORY_LIMIT);
        history.split_off(skip).into_iter().map(|m| self.addressed(number, m)).collect()
    }
}

impl Net {
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
                let (business, push_name) = (phone.business, phone.profile.name.clone());
                if let Some(old) = s.online.insert(sess.clone(), conn) {
                    if old != conn {
                        s.close(old, ServerEv::Replaced);
                        s.online.insert(sess.clone(), conn);
                    }
                }
                if let Some(c) = s.conns.get_mut(&conn) {
                    c.state = ConnState::Online { number: number.clone(), session: sess.clone() };
                }
                s.send_to(conn, ServerEv::Connected { phone: number.clone(), business, push_name });
                s.resume(&sess, conn);
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
}
