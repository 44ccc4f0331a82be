use super::delivery::{ARCHIVE_LIMIT, HISTORY_CHUNK};
use super::*;
use serde_json::json;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

fn conn(net: &Net) -> (ConnId, UnboundedReceiver<ServerEv>) {
    let (tx, rx) = unbounded_channel();
    (net.connect(tx), rx)
}

fn ttl() -> chrono::Duration {
    chrono::Duration::seconds(20)
}

fn drain(rx: &mut UnboundedReceiver<ServerEv>) -> Vec<ServerEv> {
    let mut v = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        v.push(ev);
    }
    v
}

fn qr_of(evs: &[ServerEv]) -> String {
    evs.iter()
        .rev()
        .find_map(|e| match e {
            ServerEv::Qr { code, .. } => Some(code.clone()),
            _ => None,
        })
        .expect("a qr event")
}

fn msg(id: &str, to: &str) -> SimMessage {
    SimMessage {
        from_lid: None,
        to_lid: None,
        group: None,
        id: id.into(),
        from: String::new(),
        to: to.into(),
        kind: "text".into(),
        text: Some("hi".into()),
        body: serde_json::Value::Null,
        timestamp: Utc::now(),
    }
}

/// Pairs a new connection with `number` by QR; returns (conn, rx, session).
fn paired(net: &Net, number: &str) -> (ConnId, UnboundedReceiver<ServerEv>, String) {
    let (c, mut rx) = conn(net);
    net.hello(c, None, ttl());
    let code = qr_of(&drain(&mut rx));
    let session = net.scan(&code, number).unwrap();
    (c, rx, session)
}

#[test]
fn qr_pairing_links_and_rotation_invalidates_old_codes() {
    let net = Net::default();
    net.register("5511999990001", true).unwrap();
    let (c, mut rx) = conn(&net);
    net.hello(c, None, ttl());
    let first = qr_of(&drain(&mut rx));
    assert!(net.rotate_qr(c, ttl()));
    let second = qr_of(&drain(&mut rx));
    assert_ne!(first, second);
    assert_eq!(net.scan(&first, "5511999990001"), Err(NetError::UnknownCode));
    assert_eq!(net.scan(&second, "5511999990002"), Err(NetError::NoAccount));
    let session = net.scan(&second, "5511999990001").unwrap();
    let evs = drain(&mut rx);
    assert!(matches!(&evs[0], ServerEv::Paired { session: s, business: true, .. } if *s == session));
    assert!(matches!(&evs[1], ServerEv::History { .. }));
    assert!(!net.rotate_qr(c, ttl()), "no rotation once linked");
    assert_eq!(net.phone_info("5511999990001"), Some((true, false, 1, 1)));
}

#[test]
fn pairing_code_links_only_the_number_it_was_asked_for() {
    let net = Net::default();
    net.register("5511999990001", false).unwrap();
    net.register("5511999990002", false).unwrap();
    let (c, mut rx) = conn(&net);
    net.hello(c, None, ttl());
    net.pair_code(c, 1, "5511999990009");
    net.pair_code(c, 2, "5511999990001");
    let evs = drain(&mut rx);
    let code = evs
        .iter()
        .find_map(|e| match e {
            ServerEv::Reply { req: 1, ok, code, .. } => {
                assert!(!ok);
                assert_eq!(code.as_deref(), Some("invalid_number"));
                None
            }
            ServerEv::Reply { req: 2, value, .. } => Some(value["code"].as_str().unwrap().to_string()),
            _ => None,
        })
        .unwrap();
    assert_eq!(code.len(), 8);
    assert_eq!(net.enter_code("5511999990002", &code), Err(NetError::UnknownCode));
    net.enter_code("5511999990001", &code).unwrap();
}

#[test]
fn an_inbox_is_read_a_page_at_a_time_in_the_order_received() {
    let net = Net::default();
    for n in ["5511999990001", "5511999990002"] {
        net.register(n, false).unwrap();
    }
    let (a, _arx, _) = paired(&net, "5511999990001");
    for (req, id) in [(1, "ID1"), (2, "ID2"), (3, "ID3")] {
        net.device_send(a, req, msg(id, "5511999990002"));
    }
    let ids = |offset, limit| -> Vec<String> {
        net.inbox_page("5511999990002", offset, limit).unwrap().messages.into_iter().map(|m| m.id).collect()
    };
    assert_eq!(ids(0, usize::MAX), ["ID1", "ID2", "ID3"]);
    assert_eq!(ids(1, usize::MAX), ["ID2", "ID3"], "a page starts at its offset");
    assert_eq!(ids(1, 1), ["ID2"], "and holds at most its limit");
    assert!(ids(3, 5).is_empty());
    assert_eq!(net.inbox("5511999990002").unwrap().messages.len(), 3, "the whole inbox by default");
    assert!(net.inbox_page("5511999990404", 0, 1).is_none(), "a number with no account has no inbox");
}

#[test]
fn sends_deduplicate_by_network_id_and_reach_linked_recipients() {
    let net = Net::default();
    for n in ["5511999990001", "5511999990002"] {
        net.register(n, false).unwrap();
    }
    let (a, mut arx, _) = paired(&net, "5511999990001");
    let (_b, mut brx, _) = paired(&net, "5511999990002");
    drain(&mut arx);
    drain(&mut brx);
    net.device_send(a, 1, msg("ID1", "5511999990002"));
    net.device_send(a, 2, msg("ID1", "5511999990002"));
    net.device_send(a, 3, msg("ID2", "5511999990404"));
    let inbox = net.inbox("5511999990002").unwrap();
    assert_eq!(inbox.messages.len(), 1);
    assert_eq!(inbox.duplicates, 0, "a re-send of the same id by its sender is absorbed");
    assert_eq!(inbox.resends_absorbed, 1);
    // The same id from another account is a real duplicate.
    net.register("5511999990003", false).unwrap();
    let (c3, mut c3rx, _) = paired(&net, "5511999990003");
    drain(&mut c3rx);
    net.device_send(c3, 9, msg("ID1", "5511999990002"));
    assert_eq!(net.inbox("5511999990002").unwrap().duplicates, 1);
    assert_eq!(inbox.messages[0].from, "5511999990001");
    let got: Vec<_> = drain(&mut brx).into_iter().filter(|e| matches!(e, ServerEv::Message { .. })).collect();
    assert_eq!(got.len(), 1, "the recipient's device sees the message once");
    let replies: Vec<_> = drain(&mut arx)
        .into_iter()
        .filter_map(|e| match e {
            ServerEv::Reply { req, ok, code, .. } => Some((req, ok, code)),
            _ => None,
        })
        .collect();
    assert_eq!(replies[0], (1, true, None));
    assert_eq!(replies[1], (2, true, None), "a re-send of the same id is acknowledged, not delivered again");
    assert_eq!(replies[2], (3, false, Some("invalid_number".into())));
    // A recipient that blocked the sender refuses its messages.
    net.set_blocked("5511999990002", "5511999990001", true).unwrap();
    drain(&mut arx);
    net.device_send(a, 10, msg("ID9", "5511999990002"));
    let refused = drain(&mut arx)
        .into_iter()
        .any(|e| matches!(e, ServerEv::Reply { req: 10, ok: false, code: Some(c), .. } if c == "forbidden"));
    assert!(refused);
}

#[test]
fn resume_replace_logout_and_ban() {
    let net = Net::default();
    net.register("5511999990001", false).unwrap();
    let (_a, mut arx, session) = paired(&net, "5511999990001");
    drain(&mut arx);
    // A second connection resuming the session replaces the first.
    let (b, mut brx) = conn(&net);
    net.hello(b, Some(session.clone()), ttl());
    assert!(matches!(drain(&mut arx).last(), Some(ServerEv::Replaced)));
    assert!(matches!(drain(&mut brx)[0], ServerEv::Connected { .. }));
    // Messages for an offline device wait for its next connect.
    net.disconnect(b);
    net.register("5511999990002", false).unwrap();
    net.phone_send("5511999990002", "5511999990001", "text", Some("while away".into()), serde_json::Value::Null)
        .unwrap();
    let (c, mut crx) = conn(&net);
    net.hello(c, Some(session.clone()), ttl());
    let evs = drain(&mut crx);
    assert!(evs
        .iter()
        .any(|e| matches!(e, ServerEv::Message { message, .. } if message.text.as_deref() == Some("while away"))));
    // Logout from the phone unlinks; the session no longer resumes.
    assert_eq!(net.logout_phone("5511999990001").unwrap(), 1);
    assert!(matches!(drain(&mut crx).last(), Some(ServerEv::LoggedOut)));
    let (d, mut drx) = conn(&net);
    net.hello(d, Some(session), ttl());
    assert!(matches!(drain(&mut drx)[0], ServerEv::LoggedOut));
    // A banned account's devices are told so.
    let (_e, mut erx, session) = paired(&net, "5511999990002");
    drain(&mut erx);
    net.ban("5511999990002").unwrap();
    assert!(matches!(drain(&mut erx).last(), Some(ServerEv::Banned)));
    let (f, mut frx) = conn(&net);
    net.hello(f, Some(session), ttl());
    assert!(matches!(drain(&mut frx)[0], ServerEv::Banned));
}

#[test]
fn history_sync_carries_earlier_messages() {
    let net = Net::default();
    net.register("5511999990001", false).unwrap();
    net.register("5511999990002", false).unwrap();
    net.phone_send("5511999990002", "5511999990001", "text", Some("old".into()), serde_json::Value::Null).unwrap();
    let (c, mut rx) = conn(&net);
    net.hello(c, None, ttl());
    let code = qr_of(&drain(&mut rx));
    net.scan(&code, "5511999990001").unwrap();
    let history = drain(&mut rx)
        .into_iter()
        .find_map(|e| match e {
            ServerEv::History { messages, .. } => Some(messages),
            _ => None,
        })
        .unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].text.as_deref(), Some("old"));
}

#[test]
fn calls_are_rejected_with_a_message_to_the_caller() {
    let net = Net::default();
    net.register("5511999990001", false).unwrap();
    net.register("5511999990002", false).unwrap();
    let (a, mut arx, _) = paired(&net, "5511999990001");
    drain(&mut arx);
    let call = net.call("5511999990002", "5511999990001").unwrap();
    assert_eq!(call.state, "ringing");
    assert!(matches!(drain(&mut arx)[0], ServerEv::Call { .. }));
    net.reject_call(a, 7, &call.id, Some("busy".into()));
    assert_eq!(net.calls()[0].state, "rejected");
    let inbox = net.inbox("5511999990002").unwrap();
    assert_eq!(inbox.messages[0].text.as_deref(), Some("busy"));
}

#[test]
fn faults_validate_and_drop_connections_keeps_devices_linked() {
    let net = Net::default();
    net.register("5511999990001", false).unwrap();
    let (_a, _arx, _) = paired(&net, "5511999990001");
    assert!(net.set_faults(Faults { error_rate: 1.5, ..Faults::default() }).is_err());
    let f = net.set_faults(Faults { drop_connections: true, latency_ms: 5, ..Faults::default() }).unwrap();
    assert!(!f.drop_connections);
    assert_eq!(net.stats(), (1, 1, 0, 0));
}

#[test]
fn holds_thousands_of_linked_accounts() {
    let net = Net::default();
    let mut rxs = Vec::new();
    for i in 0..5_000u32 {
        let number = format!("55119{i:08}");
        net.register(&number, false).unwrap();
        let (_c, rx, _) = paired(&net, &number);
        rxs.push(rx);
    }
    assert_eq!(net.stats(), (5_000, 5_000, 5_000, 5_000));
}

#[test]
fn business_phones_keep_labels_and_tell_their_devices() {
    let net = Net::default();
    net.register("5511999990001", true).unwrap();
    net.register("5511999990002", false).unwrap();
    let (_a, mut arx, _) = paired(&net, "5511999990001");
    drain(&mut arx);
    let op = |number: &str, v: serde_json::Value| net.phone_op(number, serde_json::from_value(v).unwrap());
    // A personal account has no labels; bad names and colours and unknown labels are refused.
    let personal = op("5511999990002", json!({ "op": "set_label", "label_id": "1", "name": "x", "color": 0 }));
    assert_eq!(personal.unwrap_err().0, "business_account_required");
    assert!(op("5511999990001", json!({ "op": "set_label", "label_id": "1", "name": " ", "color": 0 })).is_err());
    assert!(op("5511999990001", json!({ "op": "set_label", "label_id": "1", "name": "x", "color": 20 })).is_err());
    let unknown =
        op("5511999990001", json!({ "op": "label_chat", "label_id": "1", "jid": "5511999990002", "labeled": true }));
    assert_eq!(unknown.unwrap_err().0, "not_found");
    assert!(drain(&mut arx).is_empty(), "refusals tell nobody");

    op("5511999990001", json!({ "op": "set_label", "label_id": "1", "name": "VIP", "color": 2 })).unwrap();
    op(
        "5511999990001",
        json!({ "op": "label_chat", "label_id": "1", "jid": "5511999990002@s.whatsapp.net", "labeled": true }),
    )
    .unwrap();
    // A message label needs a message of that chat.
    let missing = op(
        "5511999990001",
        json!({ "op": "label_message", "label_id": "1", "jid": "5511999990002", "wa_message_id": "NOPE", "labeled": true }),
    );
    assert_eq!(missing.unwrap_err().0, "not_found");
    let evs = drain(&mut arx);
    assert!(
        matches!(&evs[0], ServerEv::Label { label_id, name, color: 2, deleted: false } if label_id == "1" && name == "VIP")
    );
    assert!(matches!(&evs[1], ServerEv::LabelTarget { labeled: true, message_id: None, .. }));
    assert_eq!(evs.len(), 2);
    let labels = net.labels("5511999990001").unwrap();
    assert_eq!(labels["labels"][0]["chats"], json!(["5511999990002"]));

    // Deleting a label takes it off every chat.
    op("5511999990001", json!({ "op": "delete_label", "label_id": "1" })).unwrap();
    assert!(matches!(&drain(&mut arx)[0], ServerEv::Label { deleted: true, .. }));
    assert_eq!(net.labels("5511999990001").unwrap(), json!({ "labels": [] }));
}

#[test]
fn a_phone_is_addressed_by_number_by_lid_with_its_number_or_by_lid_alone() {
    let net = Net::default();
    let (a, b) = ("5511999990001", "5511999990002");
    for n in [a, b] {
        net.register(n, false).unwrap();
    }
    let (dev, mut rx, _) = paired(&net, a);
    drain(&mut rx);
    let lid = lid_of(b);
    assert_eq!(lid.len(), 15);
    assert_ne!(lid, lid_of(a), "each account its own");
    assert_eq!(lid, lid_of(b), "fixed for the number");
    let mut seen = Vec::new();
    for (mode, text) in [(Addressing::Pn, "one"), (Addressing::LidHidden, "two"), (Addressing::Lid, "three")] {
        net.set_addressing(b, mode).unwrap();
        net.phone_send(b, a, "text", Some(text.into()), serde_json::Value::Null).unwrap();
        let got = drain(&mut rx).into_iter().find_map(|e| match e {
            ServerEv::Message { message, from_me: false } => Some(message),
            _ => None,
        });
        let m = got.expect("the device sees the message");
        seen.push((m.from.clone(), m.from_lid.clone()));
    }
    assert_eq!(
        seen,
        vec![(b.to_string(), None), (String::new(), Some(lid.clone())), (b.to_string(), Some(lid.clone()))]
    );
    // What the account's phone sends to b names b the same way on its devices; the
    // network itself (b's inbox) keeps numbers.
    net.phone_send(a, b, "text", Some("four".into()), serde_json::Value::Null).unwrap();
    let own = drain(&mut rx).into_iter().find_map(|e| match e {
        ServerEv::Message { message, from_me: true } => Some(message),
        _ => None,
    });
    let own = own.expect("the device sees its phone's message");
    assert_eq!((own.to.as_str(), own.to_lid.as_deref()), (b, Some(lid.as_str())));
    net.device_send(dev, 7, msg("OWN1", b));
    assert!(net.inbox(b).unwrap().messages.iter().all(|m| m.from == a));
    assert_eq!(net.set_addressing("5511999990404", Addressing::Lid), Err(NetError::NoAccount));
}

/// The messages of the `message` events in `evs`, by text.
fn texts(evs: &[ServerEv]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| match e {
            ServerEv::Message { message, .. } => message.text.clone(),
            _ => None,
        })
        .collect()
}

#[test]
fn a_message_comes_again_on_each_connect_until_the_device_acknowledges_it() {
    let net = Net::default();
    net.register("5511999990001", false).unwrap();
    net.register("5511999990002", false).unwrap();
    let (a, mut arx, session) = paired(&net, "5511999990001");
    drain(&mut arx);
    let send = |t: &str| {
        net.phone_send("5511999990002", "5511999990001", "text", Some(t.into()), serde_json::Value::Null).unwrap()
    };
    let first = send("one");
    send("two");
    assert_eq!(texts(&drain(&mut arx)), ["one", "two"]);
    // The device stored the first only, then its connection dropped.
    net.ack(a, std::slice::from_ref(&first));
    net.disconnect(a);
    send("three");
    let (b, mut brx) = conn(&net);
    net.hello(b, Some(session.clone()), ttl());
    let evs = drain(&mut brx);
    assert!(matches!(evs[0], ServerEv::Connected { .. }));
    assert_eq!(texts(&evs), ["two", "three"], "what was not acknowledged comes again, in order");
    assert_eq!(net.queues("5511999990001").unwrap().0[0].unacked, 2);
    // An acknowledgement on a connection that is no longer the device's changes nothing.
    net.ack(a, std::slice::from_ref(&first));
    let all: Vec<String> = net.inbox("5511999990001").unwrap().messages.iter().map(|m| m.id.clone()).collect();
    net.ack(b, &all);
    net.disconnect(b);
    let (c, mut crx) = conn(&net);
    net.hello(c, Some(session), ttl());
    assert!(texts(&drain(&mut crx)).is_empty(), "acknowledged messages do not come again");
    assert_eq!(net.queues("5511999990001").unwrap().0[0].unacked, 0);
    // Unlinking drops the device's queue.
    send("four");
    net.logout_phone("5511999990001").unwrap();
    assert!(net.queues("5511999990001").unwrap().0.is_empty());
}

#[test]
fn a_long_history_goes_in_chunks_each_after_the_last_is_acknowledged() {
    let net = Net::default();
    net.register("5511999990001", false).unwrap();
    net.register("5511999990002", false).unwrap();
    net.phone_send("5511999990002", "5511999990001", "text", Some("recent".into()), serde_json::Value::Null).unwrap();
    assert!(matches!(net.set_archive("5511999990001", ARCHIVE_LIMIT + 1), Err(NetError::Invalid(_))));
    net.set_archive("5511999990001", 1_100).unwrap();
    let (a, mut arx, session) = paired(&net, "5511999990001");
    let chunk_of = |evs: Vec<ServerEv>| -> Vec<(u32, usize, u64, u64, Vec<SimMessage>)> {
        evs.into_iter()
            .filter_map(|e| match e {
                ServerEv::History { messages, chunk, total, sent } => {
                    Some((chunk, messages.len(), total, sent, messages))
                }
                _ => None,
            })
            .collect()
    };
    let c0 = chunk_of(drain(&mut arx));
    assert_eq!(c0.len(), 1, "one chunk at a time");
    assert_eq!((c0[0].0, c0[0].1, c0[0].2, c0[0].3), (0, HISTORY_CHUNK, 1_101, HISTORY_CHUNK as u64));
    // Oldest first, a second apart, from the archive's contacts.
    let m = &c0[0].4;
    assert!(m.windows(2).all(|w| w[0].timestamp < w[1].timestamp));
    assert_eq!(m[0].to, "5511999990001");
    // A wrong chunk number is ignored; the right one brings the next.
    net.history_ack(a, 1);
    assert!(chunk_of(drain(&mut arx)).is_empty());
    net.history_ack(a, 0);
    let c1 = chunk_of(drain(&mut arx));
    assert_eq!((c1[0].0, c1[0].3), (1, 1_000));
    assert_eq!(c1[0].4[0].id, format!("ARC5511999990001{:07}", HISTORY_CHUNK));
    // Crashed before storing chunk 1: the next connect brings it again.
    net.disconnect(a);
    let (b, mut brx) = conn(&net);
    net.hello(b, Some(session), ttl());
    let again = chunk_of(drain(&mut brx));
    assert_eq!((again[0].0, again[0].4[0].id.clone()), (1, c1[0].4[0].id.clone()));
    net.history_ack(b, 1);
    let last = chunk_of(drain(&mut brx));
    assert_eq!((last[0].0, last[0].1, last[0].3), (2, 101, 1_101));
    assert_eq!(last[0].4.last().unwrap().text.as_deref(), Some("recent"), "the recent messages come last");
    assert_eq!(net.queues("5511999990001").unwrap().0[0].history_chunk, Some(2));
    net.history_ack(b, 2);
    assert!(chunk_of(drain(&mut brx)).is_empty());
    assert_eq!(net.queues("5511999990001").unwrap().0[0].history_chunk, None, "the sync is over");
}
