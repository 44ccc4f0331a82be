use super::*;
use shared::jid::{at, Jid, GROUP_SERVER, LID_SERVER};

#[test]
fn messages_take_evolutions_types() {
    let (t, m) = message("text", &json!({ "text": "hi" }), None);
    assert_eq!((t, m), ("conversation", json!({ "conversation": "hi" })));
    let img = json!({ "media": { "mime_type": "image/png", "size": 3, "url": "https://x/m" }, "caption": "c" });
    let (t, m) = message("image", &img, Some("AAEC"));
    assert_eq!(t, "imageMessage");
    assert_eq!(m["imageMessage"]["mimetype"], "image/png");
    assert_eq!(m["imageMessage"]["caption"], "c");
    assert_eq!(m["imageMessage"]["fileLength"], "3");
    assert_eq!(m["base64"], "AAEC", "webhook_base64 adds message.base64");
    let (t, m) =
        message("location", &json!({ "location": { "latitude": 1.5, "longitude": -2.0, "name": "Shop" } }), None);
    assert_eq!(t, "locationMessage");
    assert_eq!(m["locationMessage"], json!({ "degreesLatitude": 1.5, "degreesLongitude": -2.0, "name": "Shop" }));
    let (_, m) = message("contact", &json!({ "contact": { "name": "Ana", "phone": "+55 11 97777-0001" } }), None);
    assert_eq!(m["contactMessage"]["displayName"], "Ana");
    assert!(m["contactMessage"]["vcard"].as_str().unwrap().contains("waid=5511977770001:+5511977770001"));
    let (t, m) =
        message("poll", &json!({ "poll": { "name": "Q?", "values": ["a", "b"], "selectable_count": 1 } }), None);
    assert_eq!(t, "pollCreationMessage");
    assert_eq!(m["pollCreationMessage"]["options"], json!([{ "optionName": "a" }, { "optionName": "b" }]));
    let (t, m) = message("voice", &json!({ "media": {} }), None);
    assert_eq!((t, m["audioMessage"]["ptt"].as_bool()), ("audioMessage", Some(true)));
}

#[test]
fn event_names_and_their_uppercase_forms() {
    assert_eq!(event_name("message.received", &Value::Null), Some("messages.upsert"));
    assert_eq!(event_name("label.updated", &json!({ "change": "applied" })), Some("labels.association"));
    assert_eq!(event_name("label.updated", &json!({ "change": "edited" })), Some("labels.edit"));
    assert_eq!(event_name("instance.risk", &Value::Null), None);
    assert_eq!(upper("messages.upsert"), "MESSAGES_UPSERT");
    assert_eq!(upper("group-participants.update"), "GROUP_PARTICIPANTS_UPDATE");
    assert_eq!(by_events_path("messages.upsert"), "messages-upsert");
    assert_eq!(our_events(&["SEND_MESSAGE".into()]), vec!["message.sent"]);
    assert!(our_events(&[]).contains(&"message.received".to_string()));
    assert!(known_event("PRESENCE_UPDATE") && known_event("MESSAGES_UPSERT") && !known_event("NOPE"));
    // Every event we map has its uppercase form in EVENTS.
    for (ours, data) in [("group.updated", Value::Null), ("call.rejected", Value::Null)] {
        let dotted = event_name(ours, &data).unwrap();
        assert!(EVENTS.iter().any(|(e, o)| *e == upper(dotted) || o.contains(&ours)), "{ours}");
    }
}

#[test]
fn a_received_message_becomes_messages_upsert() {
    let (group, member, own) = (at("120363", GROUP_SERVER), Jid::user("5511977770001"), Jid::user("5511900000000"));
    let envelope = json!({
        "id": "evt_1", "type": "message.received", "instance_id": "inst_1",
        "created_at": "2026-11-25T10:00:00Z",
        "data": {
            "message_id": "msg_1", "wa_message_id": "3EB0AA", "chat_jid": group,
            "from_jid": member.as_str(), "from_me": false, "type": "text",
            "content": { "text": "hello" }, "timestamp": "2026-11-25T09:59:59Z"
        }
    });
    let origin = Origin {
        instance_name: "shop",
        sender: Some(own.as_str()),
        server_url: "https://gw.example",
        destination: "https://hook.example/x",
    };
    let (event, p) = webhook_payload(&envelope, &origin, None, None).unwrap();
    assert_eq!(event, "messages.upsert");
    assert_eq!(p["event"], "messages.upsert");
    assert_eq!(p["instance"], "shop");
    assert_eq!(p["destination"], "https://hook.example/x");
    assert_eq!(p["server_url"], "https://gw.example");
    assert_eq!(p["sender"], own.as_str());
    assert_eq!(p["date_time"], "2026-11-25T10:00:00.000Z");
    assert!(p["apikey"].is_null(), "no token in a payload");
    let d = &p["data"];
    assert_eq!(
        d["key"],
        json!({ "remoteJid": group, "fromMe": false, "id": "3EB0AA", "participant": member.as_str() })
    );
    assert_eq!(d["message"], json!({ "conversation": "hello" }));
    assert_eq!(d["messageType"], "conversation");
    assert_eq!(d["messageTimestamp"], 1_795_600_799_i64);
    assert_eq!(d["instanceId"], "inst_1");
}

#[test]
fn hidden_ids_ride_beside_numbers_as_baileys_keys_carry_them() {
    let (pn, lid, group) = (Jid::user("5511977770001"), at("201234567890123", LID_SERVER), at("120363", GROUP_SERVER));
    let key_of = |chat: &str, from: &str, chat_lid: Option<&str>, from_lid: Option<&str>| {
        let mut k = key(chat, false, "3EB0", shared::jid::is_group_jid(chat).then_some(from));
        addressing(&mut k, &json!({ "chat_lid": chat_lid, "from_lid": from_lid }));
        k
    };
    // Known number: the LID beside it.
    let k = key_of(pn.as_str(), pn.as_str(), Some(&lid), Some(&lid));
    assert_eq!((k["remoteJidAlt"].as_str(), k["addressingMode"].as_str()), (Some(lid.as_str()), Some("pn")));
    // Number unknown: the LID is the JID, no alt.
    let k = key_of(&lid, &lid, Some(&lid), Some(&lid));
    assert_eq!((k.get("remoteJidAlt"), k["addressingMode"].as_str()), (None, Some("lid")));
    // A group member by LID.
    let k = key_of(&group, pn.as_str(), None, Some(&lid));
    assert_eq!((k["participantAlt"].as_str(), k["addressingMode"].as_str()), (Some(lid.as_str()), Some("pn")));
    assert_eq!(k.get("remoteJidAlt"), None);
    // No LID: the key as before.
    let k = key_of(pn.as_str(), pn.as_str(), None, None);
    assert_eq!(k, json!({ "remoteJid": pn.as_str(), "fromMe": false, "id": "3EB0" }));
}

#[test]
fn states_receipts_and_sends() {
    let one = Jid::user("1");
    let origin = Origin { instance_name: "shop", sender: None, server_url: "u", destination: "d" };
    let st = json!({ "type": "instance.state", "instance_id": "i", "created_at": "2026-11-25T10:00:00Z",
        "data": { "state": "connected", "previous_state": "connecting" } });
    let (e, p) = webhook_payload(&st, &origin, None, None).unwrap();
    assert_eq!(e, "connection.update");
    assert_eq!(p["data"], json!({ "instance": "shop", "state": "open", "statusReason": 200 }));
    let rd = json!({ "type": "message.read", "instance_id": "i", "created_at": "2026-11-25T10:00:00Z",
        "data": { "message_id": "msg_1", "wa_message_id": "3EB0", "chat_jid": one.as_str(), "status": "read" } });
    let (e, p) = webhook_payload(&rd, &origin, None, None).unwrap();
    assert_eq!(e, "messages.update");
    assert_eq!(p["data"]["status"], "READ");
    assert_eq!(p["data"]["keyId"], "3EB0");
    let sent = json!({ "type": "message.sent", "instance_id": "i", "created_at": "2026-11-25T10:00:00Z",
        "data": { "id": "msg_1", "to": one.as_str(), "type": "text", "wa_message_id": "3EB1", "status": "sent" } });
    let content = json!({ "text": "yo" });
    let (e, p) = webhook_payload(&sent, &origin, Some(("text", &content)), None).unwrap();
    assert_eq!(e, "send.message");
    assert_eq!(p["data"]["key"], json!({ "remoteJid": one.as_str(), "fromMe": true, "id": "3EB1" }));
    assert_eq!(p["data"]["status"], "SERVER_ACK");
    assert_eq!(p["data"]["message"], json!({ "conversation": "yo" }));
    let risk = json!({ "type": "instance.risk", "instance_id": "i", "data": {} });
    assert!(webhook_payload(&risk, &origin, None, None).is_none());
}
