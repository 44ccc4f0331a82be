//! The client's events as ours: connection and pairing states, messages (live and from
//! history sync), receipts, calls, labels and group notifications, mapped by `map.rs`'s pure functions.

use super::*;

/// A profile name, unless the session does not know it yet (empty).
fn known_name(name: String) -> Option<String> {
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// Our events for one of the client's.
pub(super) fn to_driver_events(event: &Event, client: &Client, business: bool, calls: &Calls) -> Vec<DriverEvent> {
    let now = chrono::Utc::now();
    match event {
        Event::PairingQrCode(q) => {
            let expires_at =
                now + chrono::Duration::from_std(q.timeout).unwrap_or_else(|_| chrono::Duration::seconds(20));
            vec![DriverEvent::Qr { code: q.code.clone(), expires_at }]
        }
        Event::PairSuccess(p) => {
            let business = !p.business_name.is_empty();
            let credentials = json!({ "store": "wa_store", "business": business });
            let push_name = known_name(client.push_name());
            vec![DriverEvent::Paired { credentials, phone: p.id.user.to_string(), business, push_name }]
        }
        Event::Connected(_) => match client.pn() {
            Some(pn) => {
                let push_name = known_name(client.push_name());
                vec![DriverEvent::Connected { phone: pn.user.to_string(), business, push_name }]
            }
            None => Vec::new(),
        },
        Event::SelfPushNameUpdated(u) => {
            known_name(u.new_name.clone()).map(DriverEvent::PushName).into_iter().collect()
        }
        Event::LoggedOut(l) => vec![match map::connect_failure(&l.reason) {
            Failure::Banned => DriverEvent::Banned,
            _ => DriverEvent::LoggedOut,
        }],
        Event::ConnectFailure(f) => vec![match map::connect_failure(&f.reason) {
            Failure::LoggedOut => DriverEvent::LoggedOut,
            Failure::Banned => DriverEvent::Banned,
            Failure::Retry(reason) => DriverEvent::Closed { reason },
        }],
        Event::TemporaryBan(b) => vec![DriverEvent::TemporarilyBanned { until: now + b.expire }],
        Event::StreamReplaced(_) => vec![DriverEvent::Replaced],
        Event::Disconnected(d) => vec![DriverEvent::Closed { reason: format!("disconnected: {:?}", d.reason) }],
        Event::PairingQrCodesExhausted(_) => {
            vec![DriverEvent::Closed { reason: "every QR code expired unscanned".into() }]
        }
        // Already logged (and its edits and deletions applied) by the durability hook.
        Event::Messages(batch) if batch.hook_committed => Vec::new(),
        // In the batch's order: an edit after the message it names. Edits and deletions
        // for everyone are protocol messages: never logged as messages, passed on as
        // changes of the message they name.
        Event::Messages(batch) => batch
            .messages
            .iter()
            .filter_map(|m| match change_of(m) {
                Some(c) => Some(DriverEvent::Changed(c)),
                None if map::is_protocol(m.message.get_base_message()) => None,
                None => Some(DriverEvent::Message { message: incoming(&m.message, &m.info) }),
            })
            .collect(),
        Event::Receipt(r) => match map::receipt_status(&r.r#type) {
            Some(receipt) => r
                .message_ids
                .iter()
                .map(|id| DriverEvent::Receipt { wa_message_id: id.to_string(), receipt, at: r.timestamp })
                .collect(),
            None => Vec::new(),
        },
        Event::IncomingCall(c) => match &c.action {
            whatsapp_rust::types::call::CallAction::Offer { call_id, call_creator, .. } => {
                calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(call_id.to_string(), (c.from.clone(), call_creator.clone()));
                vec![DriverEvent::Call { call_id: call_id.to_string(), from: c.from.to_string() }]
            }
            _ => Vec::new(),
        },
        Event::LabelEditUpdate(l) => vec![map::label_edit(l)],
        Event::LabelAssociationUpdate(l) => vec![map::label_target(l)],
        Event::GroupUpdate(u) => map::group_update(u, client.pn().as_ref())
            .into_iter()
            .filter_map(|(event, data)| shared::events::network_event(event, data).map(DriverEvent::Network))
            .collect(),
        Event::HistorySync(h) => match h.get() {
            Some(sync) => vec![DriverEvent::History { messages: history(sync), chunk: None, progress: None }],
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// A message's edit or deletion for everyone, if it is one.
fn change_of(m: &whatsapp_rust::types::events::InboundMessage) -> Option<shared::db::log::Changed> {
    let (target, text) = map::change(m.message.get_base_message())?;
    let i = incoming(&m.message, &m.info).message;
    Some(shared::db::log::Changed {
        chat_jid: i.chat_jid,
        chat_lid: i.chat_lid,
        wa_message_id: target,
        from_jid: i.from_jid,
        from_lid: i.from_lid,
        from_me: i.from_me,
        at: i.ts,
        text,
    })
}

/// The edits and deletions of a batch, in its order.
pub(super) fn changes(batch: &[whatsapp_rust::types::events::InboundMessage]) -> Vec<shared::db::log::Changed> {
    batch.iter().filter_map(change_of).collect()
}

pub(super) fn incoming(message: &wa::Message, info: &whatsapp_rust::types::message::MessageInfo) -> Incoming {
    let (kind, content, media) = map::incoming_content(message);
    let src = &info.source;
    // 1:1 chats may come addressed by LID: key them by phone number, as our sends are,
    // so one conversation stays one chat.
    let (chat, chat_lid) = if src.is_group {
        (src.chat.to_non_ad_string(), None)
    } else {
        let alt = if src.is_from_me { src.recipient_alt.as_ref() } else { src.sender_alt.as_ref() };
        (map::phone_form(&src.chat, alt), map::lid_form(&src.chat, alt))
    };
    Incoming {
        message: shared::db::log::Received {
            wa_message_id: info.id.to_string(),
            chat_jid: chat,
            chat_lid,
            from_jid: map::phone_form(&src.sender, src.sender_alt.as_ref()),
            from_lid: map::lid_form(&src.sender, src.sender_alt.as_ref()),
            from_me: info.source.is_from_me,
            kind,
            content,
            ts: info.timestamp,
        },
        media,
    }
}

/// The messages of a history sync chunk.
fn history(sync: &wa::HistorySync) -> Vec<Incoming> {
    let mut out = Vec::new();
    for conv in &sync.conversations {
        let (chat, chat_lid) = map::history_chat(&conv.id, conv.pn_jid.as_deref(), conv.lid_jid.as_deref());
        for m in &conv.messages {
            let Some(info) = m.message.as_option() else { continue };
            let Some(key) = info.key.as_option() else { continue };
            let Some(content) = info.message.as_option() else { continue };
            if map::is_protocol(content.get_base_message()) {
                continue;
            }
            let (kind, content, media) = map::incoming_content(content);
            let from_me = key.from_me.unwrap_or(false);
            let ts =
                chrono::DateTime::from_timestamp(info.message_timestamp.unwrap_or(0) as i64, 0).unwrap_or_default();
            out.push(Incoming {
                message: shared::db::log::Received {
                    wa_message_id: key.id.clone().unwrap_or_default(),
                    chat_jid: chat.clone(),
                    chat_lid: chat_lid.clone(),
                    from_jid: key.participant.clone().unwrap_or_else(|| {
                        if from_me {
                            String::new()
                        } else {
                            chat.clone()
                        }
                    }),
                    // A 1:1 chat's sender is its party.
                    from_lid: if from_me || key.participant.is_some() { None } else { chat_lid.clone() },
                    from_me,
                    kind,
                    content,
                    ts,
                },
                media,
            });
        }
    }
    out
}
