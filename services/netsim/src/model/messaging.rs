//! Messaging: a device's sends and the phone's (control API), inboxes de-duplicated by
//! network id, reads, and number lookups.

use super::*;

impl State {
    /// Records a message in the recipient's inbox; false if the id was there already
    /// (a re-send by the same sender is absorbed, by anyone else counted a duplicate).
    pub(super) fn deliver(&mut self, msg: &SimMessage) -> bool {
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
        if msg.group.is_none() {
            // A message ends its sender's typing indicator.
            to.typing.remove(&msg.from);
        }
        to.inbox.push(msg.clone());
        true
    }
}

impl State {
    /// The network's spam rule (`Faults::first_contact_*`): counts a send from `from` to
    /// `to` when `to` never wrote to `from`; capped past the cap, and past the ban limit
    /// the account is paused (its devices told why and closed).
    fn first_contact_rule(&mut self, from: &str, to: &str) -> Result<(), (&'static str, &'static str)> {
        let (cap, ban) = (self.faults.first_contact_cap, self.faults.first_contact_ban);
        if cap.is_none() && ban.is_none() {
            return Ok(());
        }
        let Some(p) = self.phones.get_mut(from) else { return Ok(()) };
        if p.inbox.iter().any(|m| m.from == to) {
            return Ok(());
        }
        let now = Utc::now();
        let window = chrono::Duration::seconds(self.faults.first_contact_window_secs.unwrap_or(3600) as i64);
        while p.first_contacts.front().is_some_and(|t| *t < now - window) {
            p.first_contacts.pop_front();
        }
        p.first_contacts.push_back(now);
        let n = p.first_contacts.len() as u32;
        if ban.is_some_and(|b| n > b) {
            let until = now + chrono::Duration::minutes(self.faults.ban_minutes.unwrap_or(60) as i64);
            p.paused_until = Some(until);
            for c in self.online_conns(from) {
                self.close(c, ServerEv::TempBanned { until });
            }
            return Err(("temporarily_banned", "the account is temporarily banned"));
        }
        if cap.is_some_and(|c| n > c) {
            return Err(("rate_limited", "too many new contacts; try later"));
        }
        Ok(())
    }
}

impl Net {
    /// The accounts typing to `number` now, in order.
    pub fn typing(&self, number: &str) -> Vec<String> {
        let s = self.lock();
        let mut v: Vec<String> = s.phones.get(number).map(|p| p.typing.iter().cloned().collect()).unwrap_or_default();
        v.sort();
        v
    }

    /// The presence `number`'s account last set, if it did.
    pub fn presence(&self, number: &str) -> Option<&'static str> {
        self.lock().phones.get(number).and_then(|p| p.presence)
    }

    pub fn inbox(&self, number: &str) -> Option<Inbox> {
        self.inbox_page(number, 0, usize::MAX)
    }

    /// At most `limit` of the phone's inbox from position `offset` (in the order received),
    /// so a long run's observer reads only what is new while sends go on.
    pub fn inbox_page(&self, number: &str, offset: usize, limit: usize) -> Option<Inbox> {
        let s = self.lock();
        let p = s.phones.get(number)?;
        Some(Inbox {
            messages: p
                .inbox
                .iter()
                .skip(offset)
                .take(limit)
                .map(|m| InboxItem {
                    id: m.id.clone(),
                    from: m.from.clone(),
                    group: m.group.clone(),
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
        if to == shared::jid::STATUS_JID
            || channels::is_channel(to)
            || shared::jid::Jid::parse(to).is_ok_and(|j| j.is_group())
        {
            return s.group_send(from, to, kind, text, body);
        }
        if !s.phones.contains_key(from) || !s.phones.contains_key(to) {
            return Err(NetError::NoAccount);
        }
        if s.phones[to].blocked.contains(from) {
            return Err(NetError::Blocked);
        }
        let msg = SimMessage {
            from_lid: None,
            to_lid: None,
            group: None,
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

    /// A linked device sends a message.
    pub fn device_send(&self, conn: ConnId, req: u64, mut msg: SimMessage) {
        let mut s = self.lock();
        let Some(ConnState::Online { number, .. }) = s.conns.get(&conn).map(|c| &c.state) else {
            return s.send_to(conn, ServerEv::err(req, "not_connected", "this session is not online"));
        };
        let number = number.clone();
        // A person named by hidden id: the network finds the account (its copies name
        // numbers).
        if let Some(lid) = msg.to_lid.take() {
            msg.to = s.phone_by_lid(&lid).unwrap_or_default();
        }
        if msg.id.is_empty() || msg.id.len() > 128 {
            return s.send_to(conn, ServerEv::err(req, "validation_failed", "the message id must be 1-128 characters"));
        }
        if msg.to == shared::jid::STATUS_JID
            || channels::is_channel(&msg.to)
            || shared::jid::Jid::parse(&msg.to).is_ok_and(|j| j.is_group())
        {
            return s.device_group_send(conn, req, &number, msg);
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
        if let Err((code, detail)) = s.first_contact_rule(&number, &msg.to) {
            return s.send_to(conn, ServerEv::err(req, code, detail));
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
}

impl State {
    /// Who a message to `to` (a group, or `status@broadcast`) goes to: the group's other
    /// members, or for a status the account's contacts (saved, or that it wrote or heard
    /// from).
    fn broadcast_recipients(&self, from: &str, to: &str) -> Result<Vec<String>, (&'static str, &'static str)> {
        if channels::is_channel(to) {
            return self.channel_recipients(from, to);
        }
        if to != shared::jid::STATUS_JID {
            return self.group_recipients(from, to);
        }
        let p = self.phones.get(from).ok_or(("not_found", "no account has this number"))?;
        let mut numbers: std::collections::BTreeSet<String> = p.contacts.keys().cloned().collect();
        numbers.extend(p.inbox.iter().filter(|m| m.group.is_none()).map(|m| m.from.clone()));
        numbers.extend(p.sent.iter().filter(|m| m.group.is_none()).map(|m| m.to.clone()));
        numbers.remove(from);
        Ok(numbers.into_iter().filter(|n| self.phones.get(n).is_some_and(|c| !c.blocked.contains(from))).collect())
    }

    /// A message to a group: one copy in each other member's inbox (de-duplicated by
    /// id per member, so a re-send reaches nobody twice), seen by their devices with the
    /// group as the chat. Returns whether any member got it for the first time.
    fn deliver_to_group(&mut self, msg: &SimMessage, recipients: Vec<String>) -> bool {
        self.record_post(msg);
        let mut fresh = false;
        for member in recipients {
            let copy = SimMessage { to: member.clone(), group: Some(msg.to.clone()), ..msg.clone() };
            if self.deliver(&copy) {
                fresh = true;
                self.notify_account(&member, ServerEv::Message { message: copy, from_me: false });
            }
        }
        fresh
    }

    /// A phone (control API) sends to a group it belongs to.
    fn group_send(
        &mut self,
        from: &str,
        to: &str,
        kind: &str,
        text: Option<String>,
        body: serde_json::Value,
    ) -> Result<String, NetError> {
        let recipients = self.broadcast_recipients(from, to).map_err(|(code, _)| match code {
            "forbidden" => NetError::Refused("only admins may send here"),
            _ => NetError::NotFound,
        })?;
        let msg = SimMessage {
            from_lid: None,
            to_lid: None,
            group: Some(to.to_string()),
            id: format!("SIM{}", Alphanumeric.sample_string(&mut rand::thread_rng(), 20).to_ascii_uppercase()),
            from: from.to_string(),
            to: to.to_string(),
            kind: kind.to_string(),
            text,
            body,
            timestamp: Utc::now(),
        };
        self.deliver_to_group(&msg, recipients);
        if let Some(p) = self.phones.get_mut(from) {
            p.sent.push(msg.clone());
        }
        let id = msg.id.clone();
        // Linked devices of the sender see it too, as sent from the phone.
        self.notify_account(from, ServerEv::Message { message: msg, from_me: true });
        Ok(id)
    }

    /// A linked device sends to a group: members only; admins only in announcement mode.
    fn device_group_send(&mut self, conn: ConnId, req: u64, number: &str, mut msg: SimMessage) {
        let recipients = match self.broadcast_recipients(number, &msg.to) {
            Ok(r) => r,
            Err((code, detail)) => return self.send_to(conn, ServerEv::err(req, code, detail)),
        };
        let rate = self.faults.error_rate;
        if rate > 0.0 && rand::thread_rng().gen_bool(rate) {
            return self.send_to(conn, ServerEv::err(req, "network_error", "injected fault"));
        }
        msg.from = number.to_string();
        msg.timestamp = Utc::now();
        msg.group = Some(msg.to.clone());
        let fresh = self.deliver_to_group(&msg, recipients);
        if fresh {
            if let Some(p) = self.phones.get_mut(number) {
                p.sent.push(msg.clone());
            }
        }
        self.send_to(conn, ServerEv::ok(req, serde_json::json!({ "id": msg.id, "duplicate": !fresh })));
        let receipt =
            ServerEv::Receipt { id: msg.id.clone(), status: "delivered".into(), from: msg.to, timestamp: Utc::now() };
        self.send_to(conn, receipt);
    }
}
