use super::*;
use crate::driver::Media;

fn media() -> Media {
    Media {
        mime_type: "application/x-test".into(),
        filename: Some("f.bin".into()),
        sha256: String::new(),
        size: 1,
        bytes: crate::driver::MediaBytes::Held(bytes::Bytes::from_static(&[1])),
    }
}

/// An outgoing message of type `kind` with `content` (media types carry `media()`).
fn out(kind: &str, content: Value) -> Outgoing {
    let mut content = content;
    content["type"] = json!(kind);
    let is_media = MessageType::from_name(kind).and_then(MessageType::media_limit).is_some();
    if is_media {
        content["media"] = Value::Null;
    }
    let c: Content<()> = serde_json::from_value(content).unwrap();
    Outgoing {
        network_id: "3EB0AA".into(),
        to_jid: shared::jid::Jid::user("5511999990002"),
        message: shared::message::Outbound { content: c.map_media(|()| media()), reply_to: None, mentions: vec![] },
        reference: None,
    }
}

fn upload() -> Uploaded {
    Uploaded {
        url: "https://mmg.whatsapp.net/x".into(),
        direct_path: "/v/x".into(),
        media_key: [1; 32],
        file_enc_sha256: [2; 32],
        file_sha256: [3; 32],
        file_length: 10,
        media_key_timestamp: 5,
    }
}

/// Our type -> WhatsApp -> our type keeps the type and content.
#[test]
fn every_type_round_trips_through_the_network_message() {
    let cases = [
        ("text", json!({ "text": "hello" }), json!({ "text": "hello" })),
        (
            "location",
            json!({ "location": { "latitude": -23.5, "longitude": -46.6, "name": "SP", "address": "Av" } }),
            json!({ "location": { "latitude": -23.5, "longitude": -46.6, "name": "SP", "address": "Av" } }),
        ),
        (
            "reaction",
            json!({ "reaction": { "message_id": "ABC", "emoji": "👍" } }),
            json!({ "reaction": { "message_id": "ABC", "emoji": "👍" } }),
        ),
        (
            "poll",
            json!({ "poll": { "name": "lunch?", "values": ["pizza", "sushi"], "selectable_count": 1 } }),
            json!({ "poll": { "name": "lunch?", "values": ["pizza", "sushi"], "selectable_count": 1 } }),
        ),
    ];
    for (kind, content, back) in cases {
        let m = outgoing_message(&out(kind, content), None).unwrap();
        let (k, c, media) = incoming_content(&m);
        assert_eq!((k.as_str(), &c), (kind, &back), "{kind}");
        assert!(media.is_none());
    }
    let m =
        outgoing_message(&out("contact", json!({ "contact": { "name": "Ana", "phone": "+55 11 99999-0009" } })), None)
            .unwrap();
    let (k, c, _) = incoming_content(&m);
    assert_eq!(k, "contact");
    assert_eq!(c["contact"]["name"], "Ana");
    assert!(c["contact"]["vcard"].as_str().unwrap().contains("waid=5511999990009"));
    let poll = outgoing_message(&out("poll", json!({ "poll": { "name": "p", "values": ["a"] } })), None).unwrap();
    assert_eq!(poll.message_context_info.as_option().unwrap().message_secret.as_ref().unwrap().len(), 32);
    let r = outgoing_message(&out("reaction", json!({ "reaction": { "message_id": "3EB0FF", "emoji": "" } })), None)
        .unwrap();
    assert_eq!(r.reaction_message.as_option().unwrap().key.as_option().unwrap().from_me, Some(true));
}

#[test]
fn media_types_carry_their_upload_and_come_back_with_a_locator() {
    for (kind, back) in [
        ("image", "image"),
        ("video", "video"),
        ("audio", "audio"),
        ("voice", "voice"),
        ("document", "document"),
        ("sticker", "sticker"),
    ] {
        let caption =
            if ["image", "video", "document"].contains(&kind) { json!({ "caption": "c" }) } else { json!({}) };
        let o = out(kind, caption);
        assert!(outgoing_message(&o, None).is_err(), "{kind} needs its upload");
        assert!(media_type(MessageType::from_name(kind).unwrap()).is_some());
        let m = outgoing_message(&o, Some(upload())).unwrap();
        let (k, c, media) = incoming_content(&m);
        assert_eq!(k, back);
        let media = media.unwrap();
        assert_eq!(media.mime_type, "application/x-test");
        let (lk, bytes) = parse_locator(&media.locator).unwrap();
        assert!(!bytes.is_empty() && ["image", "video", "audio", "document", "sticker"].contains(&lk));
        if ["image", "video", "document"].contains(&kind) {
            assert_eq!(c["caption"], "c", "{kind}");
        }
        if kind == "document" {
            assert_eq!(media.filename.as_deref(), Some("f.bin"));
        }
    }
    assert!(media_type(MessageType::Text).is_none());
}

#[test]
fn statuses_are_text_on_a_background_or_an_image_or_video() {
    let text = status_message(&out("text", json!({ "text": "hello" })), None).unwrap();
    let ext = text.extended_text_message.as_option().unwrap();
    assert_eq!(ext.text.as_deref(), Some("hello"));
    assert_eq!(ext.background_argb, Some(STATUS_BACKGROUND));
    assert_eq!(incoming_content(&text).1["text"], "hello");
    for kind in ["image", "video"] {
        let o = out(kind, json!({ "caption": "c" }));
        assert!(status_message(&o, None).is_err(), "{kind} needs its upload");
        let m = status_message(&o, Some(upload())).unwrap();
        assert_eq!(incoming_content(&m).0, kind);
    }
    let poll = out("location", json!({ "location": { "latitude": 1.0, "longitude": 2.0 } }));
    assert_eq!(status_message(&poll, None).unwrap_err().code, shared::ErrorCode::ValidationFailed);
}

/// A stranger's image message with the given download references, as received.
fn crafted_image(direct_path: Option<&str>, static_url: Option<&str>, file_length: Option<u64>) -> RemoteMedia {
    let m = wa::Message {
        image_message: MessageField::some(wa::message::ImageMessage {
            url: Some("https://mmg.whatsapp.net/o1/v/x".into()),
            direct_path: direct_path.map(str::to_string),
            static_url: static_url.map(str::to_string),
            media_key: Some(vec![7; 32]),
            file_enc_sha256: Some(vec![1; 32]),
            file_sha256: Some(vec![2; 32]),
            file_length,
            mimetype: Some("image/jpeg".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    incoming_content(&m).2.expect("an image carries media")
}

#[test]
fn crafted_locators_are_refused_and_static_urls_dropped() {
    let good = "/v/t62.7118-24/12345_67890_n.enc?ccb=11-4&oh=01_Q5Aa&oe=65A1B2C3&_nc_sid=5e03e0";
    // A plain path passes, with the sender's static_url gone.
    let media = crafted_image(Some(good), Some("http://169.254.169.254/latest/meta-data"), Some(1000));
    let SafeMedia::Image(m) = safe_media(&media.locator).unwrap() else { panic!("an image") };
    assert_eq!(m.static_url, None, "static_url is never fetched");
    assert_eq!(m.direct_path.as_deref(), Some(good));
    assert_eq!((media.declared_size, media.limit), (Some(1000), 16 * 1024 * 1024));
    for hostile in [
        "@evil.example/x",
        "//evil.example/x",
        "evil.example/x",
        "/x@evil.example",
        "/\\evil.example/x",
        "/x#frag",
        "/x y",
        "/x\r\nHost: evil",
        "",
    ] {
        let media = crafted_image(Some(hostile), None, Some(1000));
        let e = safe_media(&media.locator).unwrap_err();
        assert_eq!(e.code, ErrorCode::MediaUnavailable, "{hostile:?}");
    }
    // No direct_path at all: only the static_url was left, and it is not used.
    let media = crafted_image(None, Some("https://mmg.whatsapp.net/x"), Some(1000));
    assert_eq!(safe_media(&media.locator).unwrap_err().code, ErrorCode::MediaUnavailable);
    // Garbage instead of a locator.
    assert!(safe_media("image:!!!").is_err());
    assert!(safe_media("carousel:AAAA").is_err());
}

#[test]
fn the_declared_length_caps_a_download_and_the_type_bounds_it() {
    let p = Some("/v/t62/x.enc");
    assert_eq!(crafted_image(p, None, Some(5000)).cap().unwrap(), 5000);
    assert_eq!(crafted_image(p, None, None).cap().unwrap(), 16 * 1024 * 1024, "the type's limit");
    let huge = crafted_image(p, None, Some(10 * 1024 * 1024 * 1024));
    assert_eq!(huge.cap().unwrap_err().code, ErrorCode::MediaUnavailable, "declared over the type's limit");
}

#[test]
fn wrapped_and_extended_messages_are_unwrapped() {
    let inner = wa::Message {
        extended_text_message: MessageField::some(wa::message::ExtendedTextMessage {
            text: Some("hi".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let wrapped = wa::Message {
        ephemeral_message: MessageField::some(wa::message::FutureProofMessage { message: MessageField::some(inner) }),
        ..Default::default()
    };
    assert_eq!(incoming_content(&wrapped).1, json!({ "text": "hi" }));
    assert_eq!(incoming_content(&wa::Message::default()).0, "unsupported");
    let revoke = wa::Message { protocol_message: MessageField::some(Default::default()), ..Default::default() };
    assert!(is_protocol(&revoke));
    assert_eq!(incoming_content(&revoke).0, "protocol");
    assert_eq!(change(&revoke), None, "a protocol message naming no message is no change");
}

#[test]
fn receipts_and_failures_map_to_our_states() {
    use shared::db::log::Receipt;
    use whatsapp_rust::types::events::ConnectFailureReason as F;
    use whatsapp_rust::types::presence::ReceiptType as R;
    assert_eq!(receipt_status(&R::Delivered), Some(Receipt::Delivered));
    assert_eq!(receipt_status(&R::Read), Some(Receipt::Read));
    assert_eq!(receipt_status(&R::Played), Some(Receipt::Read));
    assert_eq!(receipt_status(&R::Retry), None);
    assert_eq!(connect_failure(&F::LoggedOut), Failure::LoggedOut);
    assert_eq!(connect_failure(&F::UnknownLogout), Failure::LoggedOut);
    assert_eq!(connect_failure(&F::AccountLocked), Failure::Banned);
    assert!(matches!(connect_failure(&F::ServiceUnavailable), Failure::Retry(_)));
    assert!(matches!(connect_failure(&F::TempBanned), Failure::Retry(_)));
}

#[test]
fn lid_chats_are_keyed_by_their_phone_number() {
    let lid: whatsapp_rust::Jid = "100000012345678@lid".parse().unwrap();
    let pn: whatsapp_rust::Jid = shared::jid::Jid::user("5511999990001:3").as_str().parse().unwrap();
    assert_eq!(phone_form(&lid, Some(&pn)), shared::jid::Jid::user("5511999990001").as_str());
    assert_eq!(phone_form(&lid, None), "100000012345678@lid", "no number known: the LID stays");
    assert_eq!(phone_form(&pn, None), shared::jid::Jid::user("5511999990001").as_str(), "devices dropped");
    let group: whatsapp_rust::Jid = "1203630@g.us".parse().unwrap();
    assert_eq!(phone_form(&group, Some(&pn)), "1203630@g.us");
    // The LID rides beside, whichever of the two the network put first.
    assert_eq!(lid_form(&lid, Some(&pn)).as_deref(), Some("100000012345678@lid"));
    assert_eq!(lid_form(&pn, Some(&lid)).as_deref(), Some("100000012345678@lid"));
    assert_eq!(lid_form(&pn, None), None);
    // A synced conversation: by its number when the sync told it.
    let number = shared::jid::Jid::user("5511999990001");
    assert_eq!(
        history_chat("100000012345678@lid", Some(number.as_str()), None),
        (number.to_string(), Some("100000012345678@lid".into()))
    );
    assert_eq!(
        history_chat(number.as_str(), None, Some("100000012345678@lid")),
        (number.to_string(), Some("100000012345678@lid".into()))
    );
    assert_eq!(history_chat("100000012345678@lid", None, None).0, "100000012345678@lid");
    assert_eq!(history_chat("1203630@g.us", None, Some("100000012345678@lid")), ("1203630@g.us".into(), None));
}

#[test]
fn vcards_name_the_number() {
    assert_eq!(
        vcard("Ana", "+55 (11) 9999", Some("a@x")),
        "BEGIN:VCARD\nVERSION:3.0\nFN:Ana\nTEL;type=CELL;waid=55119999:+55119999\nEMAIL:a@x\nEND:VCARD"
    );
}

fn participant(jid: &str, pn: Option<&str>) -> GroupParticipantInfo {
    GroupParticipantInfo {
        jid: jid.parse().unwrap(),
        phone_number: pn.map(|p| p.parse().unwrap()),
        display_name: None,
        r#type: None,
        lid: None,
        username: None,
        join_time: None,
        group_history_sent_state: None,
    }
}

fn update(by: &str, action: GroupNotificationAction) -> GroupUpdate {
    GroupUpdate::builder()
        .group_jid("120363000000000001@g.us".parse().unwrap())
        .participant(by.parse().unwrap())
        .timestamp(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH)
        .is_lid_addressing_mode(false)
        .action(action)
        .build()
}

#[test]
fn group_notifications_map_to_our_events() {
    let own: whatsapp_rust::Jid = "5511999990001@s.whatsapp.net".parse().unwrap();
    let admin = "5511999990009@s.whatsapp.net";
    // The account added by an admin: a member change and its own joining.
    let added = GroupNotificationAction::Add {
        participants: vec![
            participant("5511999990001@s.whatsapp.net", None),
            participant("77@lid", Some("5511999990002@s.whatsapp.net")),
        ],
        reason: None,
    };
    let ev = group_update(&update(admin, added), Some(&own));
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].0, "group.participants_updated");
    assert_eq!(ev[0].1["action"], "added");
    assert_eq!(ev[0].1["participants"], json!(["5511999990001@s.whatsapp.net", "5511999990002@s.whatsapp.net"]));
    assert_eq!(ev[0].1["by"], admin);
    assert_eq!(ev[1].0, "group.joined");
    assert_eq!(ev[1].1["jid"], "120363000000000001@g.us");
    // Someone leaving by themself is `left`; not the account, so no `group.left`.
    let other = "5511999990003@s.whatsapp.net";
    let left = GroupNotificationAction::Remove { participants: vec![participant(other, None)], reason: None };
    let ev = group_update(&update(other, left), Some(&own));
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].1["action"], "left");
    // The account removed: `group.left`.
    let removed = GroupNotificationAction::Remove {
        participants: vec![participant("5511999990001@s.whatsapp.net", None)],
        reason: None,
    };
    assert_eq!(group_update(&update(admin, removed), Some(&own))[1].0, "group.left");
    // Settings and info.
    let ev = group_update(&update(admin, GroupNotificationAction::Announce), Some(&own));
    assert_eq!(ev, vec![("group.updated", json!({ "jid": "120363000000000001@g.us", "by": admin, "announce": true }))]);
    let subject = GroupNotificationAction::Subject { subject: "New".into(), subject_owner: None, subject_time: None };
    assert_eq!(group_update(&update(admin, subject), Some(&own))[0].1["subject"], "New");
    let cleared = GroupNotificationAction::Description { id: "1".into(), description: None };
    assert_eq!(group_update(&update(admin, cleared), Some(&own))[0].1["description"], "");
    assert_eq!(group_update(&update(admin, GroupNotificationAction::Unlocked), Some(&own))[0].1["locked"], false);
    // What we do not carry maps to nothing.
    let eph = GroupNotificationAction::Ephemeral { expiration: 86_400, trigger: None };
    assert!(group_update(&update(admin, eph), Some(&own)).is_empty());
}

#[test]
fn community_links_map_to_their_event_from_either_side() {
    use whatsapp_rust::NodeBuilder;
    let admin = "5511999990009@s.whatsapp.net";
    let node = |tag: &'static str, kind: &'static str, kind_attr: &'static str, jid: &str| {
        NodeBuilder::new(tag)
            .attr(kind_attr, kind)
            .children([NodeBuilder::new("group").attr("jid", jid.to_string()).build()])
            .build()
    };
    // To the community: the group inside was linked.
    let link = GroupNotificationAction::Link {
        link_type: "sub_group".into(),
        raw: node("link", "sub_group", "link_type", "120363000000000002@g.us"),
    };
    let ev = group_update(&update(admin, link), None);
    assert_eq!(
        ev,
        vec![(
            "community.groups_updated",
            json!({ "jid": "120363000000000001@g.us", "action": "linked", "groups": ["120363000000000002@g.us"], "by": admin })
        )]
    );
    // To the group: the community inside unlinked it.
    let unlink = GroupNotificationAction::Unlink {
        unlink_type: "parent_group".into(),
        unlink_reason: None,
        raw: node("unlink", "parent_group", "unlink_type", "120363000000000009@g.us"),
    };
    let ev = group_update(&update(admin, unlink), None);
    assert_eq!(ev[0].1["jid"], "120363000000000009@g.us");
    assert_eq!(ev[0].1["action"], "unlinked");
    assert_eq!(ev[0].1["groups"], json!(["120363000000000001@g.us"]));
    // Siblings, or no group inside: nothing.
    let sibling = GroupNotificationAction::Link {
        link_type: "sibling_group".into(),
        raw: node("link", "sibling_group", "link_type", "120363000000000003@g.us"),
    };
    assert!(group_update(&update(admin, sibling), None).is_empty());
    let empty = GroupNotificationAction::Link { link_type: "sub_group".into(), raw: NodeBuilder::new("link").build() };
    assert!(group_update(&update(admin, empty), None).is_empty());
}

#[test]
fn business_profiles_show_their_first_website() {
    let mut b = whatsapp_rust::wacore::iq::business::BusinessProfile::default();
    b.description = "Bakery".into();
    b.website = vec!["https://bakery.example".into(), "https://other.example".into()];
    b.email = Some("hi@bakery.example".into());
    let v = business_profile(&b);
    assert_eq!(v.description.as_deref(), Some("Bakery"));
    assert_eq!(v.website.as_deref(), Some("https://bakery.example"));
    assert_eq!(v.email.as_deref(), Some("hi@bakery.example"));
    assert_eq!(v.category, None);
    assert_eq!(business_profile(&Default::default()).description, None);
}

#[test]
fn label_changes_from_other_devices_map_to_ours() {
    use whatsapp_rust::wacore::types::events::{LabelAssociationUpdate, LabelEditUpdate};
    let edit = |action: wa::sync_action_value::LabelEditAction| {
        LabelEditUpdate::builder()
            .label_id("3".into())
            .timestamp(chrono::Utc::now())
            .action(Box::new(action))
            .from_full_sync(false)
            .build()
    };
    let made =
        edit(wa::sync_action_value::LabelEditAction { name: Some("VIP".into()), color: Some(4), ..Default::default() });
    match label_edit(&made) {
        DriverEvent::Label { label_id, name, color, deleted } => {
            assert_eq!((label_id.as_str(), name.as_str(), color, deleted), ("3", "VIP", 4, false));
        }
        other => panic!("{other:?}"),
    }
    let gone = edit(wa::sync_action_value::LabelEditAction { deleted: Some(true), ..Default::default() });
    assert!(matches!(label_edit(&gone), DriverEvent::Label { deleted: true, .. }));

    let chat: whatsapp_rust::Jid = "5511999990001@s.whatsapp.net".parse().unwrap();
    let target = |labeled: Option<bool>| {
        LabelAssociationUpdate::builder()
            .label_id("3".into())
            .chat_jid(chat.clone())
            .timestamp(chrono::Utc::now())
            .action(Box::new(wa::sync_action_value::LabelAssociationAction { labeled, ..Default::default() }))
            .from_full_sync(false)
            .build()
    };
    match label_target(&target(Some(true))) {
        DriverEvent::LabelTarget { label_id, jid, wa_message_id, labeled } => {
            assert_eq!(
                (label_id.as_str(), jid.as_str(), wa_message_id, labeled),
                ("3", "5511999990001@s.whatsapp.net", None, true)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(label_target(&target(None)), DriverEvent::LabelTarget { labeled: false, .. }),
        "absent is removed"
    );
}

#[test]
fn a_received_reply_carries_what_it_quotes_and_whom_it_mentions() {
    let reply = wa::Message {
        extended_text_message: MessageField::some(wa::message::ExtendedTextMessage {
            text: Some("@5511977770001 yes".into()),
            context_info: MessageField::some(wa::ContextInfo {
                stanza_id: Some("3EB0QUOTED".into()),
                participant: Some("5511977770001@s.whatsapp.net".into()),
                mentioned_jid: vec!["5511977770001@s.whatsapp.net".into()],
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (kind, content, _) = incoming_content(&reply);
    assert_eq!(kind, "text");
    assert_eq!(
        content,
        json!({ "text": "@5511977770001 yes", "reply_to": "3EB0QUOTED", "mentions": ["5511977770001@s.whatsapp.net"] })
    );
    let plain = wa::Message { conversation: Some("hi".into()), ..Default::default() };
    assert_eq!(incoming_content(&plain).1, json!({ "text": "hi" }), "no context, no fields");
}

/// Mentions and a quoted network id go out as the message's context, on a text (as an
/// extended text) and on a caption; read back, they are what was sent.
#[test]
fn outgoing_mentions_and_quotes_travel_in_the_context() {
    let mut o = out("text", json!({ "text": "@5511977770001 hi" }));
    o.message.mentions = vec!["5511977770001@s.whatsapp.net".into()];
    o.message.reply_to = Some("3EB0QUOTED".into());
    let m = outgoing_message(&o, None).unwrap();
    assert!(m.conversation.is_none(), "a text with context is an extended text");
    let (kind, content, _) = incoming_content(&m);
    assert_eq!(kind, "text");
    assert_eq!(
        content,
        json!({ "text": "@5511977770001 hi", "reply_to": "3EB0QUOTED", "mentions": ["5511977770001@s.whatsapp.net"] })
    );
    // Our own msg_ ids are not the network's: no quote, mentions still go.
    let mut o = out("image", json!({ "caption": "see @5511977770001" }));
    o.message.mentions = vec!["5511977770001@s.whatsapp.net".into()];
    o.message.reply_to = Some("msg_0123".into());
    let m = outgoing_message(&o, Some(upload())).unwrap();
    let ctx = m.image_message.as_option().unwrap().context_info.as_option().unwrap();
    assert_eq!(ctx.mentioned_jid, vec!["5511977770001@s.whatsapp.net".to_string()]);
    assert!(ctx.stanza_id.is_none());
    // The same msg_ id found in the log (the queue looks it up): quoted by its network
    // id, with its sender and text, and its chat when that is another (a group's
    // message answered in private).
    let mut o = out("text", json!({ "text": "yes" }));
    o.message.reply_to = Some("msg_0123".into());
    o.reference = Some(Reference {
        network_id: "3EB0QUOTED".into(),
        chat_jid: shared::jid::Jid::parse("120363000000000001@g.us").unwrap(),
        from_me: false,
        sender: Some("5511977770001@s.whatsapp.net".into()),
        text: Some("who is in?".into()),
    });
    let m = outgoing_message(&o, None).unwrap();
    let ctx = m.extended_text_message.as_option().unwrap().context_info.as_option().unwrap();
    assert_eq!(ctx.stanza_id.as_deref(), Some("3EB0QUOTED"));
    assert_eq!(ctx.participant.as_deref(), Some("5511977770001@s.whatsapp.net"));
    assert_eq!(ctx.remote_jid.as_deref(), Some("120363000000000001@g.us"));
    assert_eq!(ctx.quoted_message.as_option().and_then(|q| q.conversation.as_deref()), Some("who is in?"));
    // Quoting a message of the same chat names no other chat.
    o.reference.as_mut().unwrap().chat_jid = o.to_jid.clone();
    let m = outgoing_message(&o, None).unwrap();
    assert!(m.extended_text_message.as_option().unwrap().context_info.as_option().unwrap().remote_jid.is_none());
    // Without either, a text stays a plain conversation.
    let plain = outgoing_message(&out("text", json!({ "text": "x" })), None).unwrap();
    assert_eq!(plain.conversation.as_deref(), Some("x"));
}

/// The index whatsapp-rust's `send_app_state_action` builds from a schema: each
/// literal in place, the arguments in the other slots, in order.
fn index_of(schema: &schemas::Schema, args: &[&str]) -> Vec<String> {
    let mut args = args.iter();
    let index: Vec<String> = schema
        .index_parts
        .iter()
        .map(|part| match part {
            schemas::IndexPart::Literal { value } => value.to_string(),
            _ => args.next().expect("one argument per slot").to_string(),
        })
        .collect();
    assert!(args.next().is_none(), "an argument left over");
    index
}

#[test]
fn a_message_label_is_the_app_state_mutation_baileys_and_whatsmeow_send() {
    // Baileys' chatModificationToAppPatch (addMessageLabel) and whatsmeow's
    // appstate.BuildLabelMessage: regular collection, version 3, this index.
    assert_eq!(
        index_of(&LABEL_MESSAGE, &["7", "15550001111@s.whatsapp.net", "3EB0ABCD"]),
        ["label_message", "7", "15550001111@s.whatsapp.net", "3EB0ABCD", "0", "0"]
    );
    assert_eq!(LABEL_MESSAGE.collection.as_str(), "regular");
    assert_eq!(LABEL_MESSAGE.version, 3);
    // Built the same way, the crate's own chat label gives its known index.
    assert_eq!(
        index_of(&schemas::LABEL_JID, &["7", "15550001111@s.whatsapp.net"]),
        ["label_jid", "7", "15550001111@s.whatsapp.net"]
    );
    for labeled in [true, false] {
        let v = label_association(labeled, 1_700_000_000_000);
        assert_eq!(v.label_association_action.as_option().and_then(|a| a.labeled), Some(labeled));
        assert_eq!(v.timestamp, Some(1_700_000_000_000));
        assert!(v.label_edit_action.as_option().is_none());
    }
}

/// A reaction names its target by the network's id: a msg_ id the log found, with who
/// wrote it (in a group); one the log does not know cannot go.
#[test]
fn reactions_name_their_target_as_the_network_knows_it() {
    let mut o = out("reaction", json!({ "reaction": { "message_id": "msg_0123", "emoji": "👍" } }));
    assert_eq!(outgoing_message(&o, None).unwrap_err().code, ErrorCode::ValidationFailed, "unknown msg_ id");
    o.to_jid = shared::jid::Jid::parse("120363000000000001@g.us").unwrap();
    o.reference = Some(Reference {
        network_id: "ABCDEF".into(),
        chat_jid: o.to_jid.clone(),
        from_me: false,
        sender: Some("5511977770001@s.whatsapp.net".into()),
        text: None,
    });
    let m = outgoing_message(&o, None).unwrap();
    let key = m.reaction_message.as_option().unwrap().key.as_option().unwrap().clone();
    assert_eq!((key.id.as_deref(), key.from_me), (Some("ABCDEF"), Some(false)));
    assert_eq!(key.participant.as_deref(), Some("5511977770001@s.whatsapp.net"));
    assert_eq!(key.remote_jid.as_deref(), Some("120363000000000001@g.us"));
    // Our own message: no participant.
    o.reference.as_mut().unwrap().from_me = true;
    let key =
        outgoing_message(&o, None).unwrap().reaction_message.as_option().unwrap().key.as_option().unwrap().clone();
    assert_eq!((key.from_me, key.participant), (Some(true), None));
    // A message of another chat: a reaction cannot name it.
    o.reference.as_mut().unwrap().chat_jid = shared::jid::Jid::user("5511977770001");
    assert_eq!(outgoing_message(&o, None).unwrap_err().code, ErrorCode::ValidationFailed);
}

#[test]
fn a_send_to_a_number_without_an_account_is_an_invalid_number() {
    let r = |number: &str, registered: bool| Registration {
        number: number.into(),
        jid: format!("{number}@s.whatsapp.net"),
        registered,
        business: false,
    };
    let found = [r("5511999990001", true), r("5511999990002", false)];
    assert!(must_be_registered("5511999990001", &found).is_ok());
    for number in ["5511999990002", "5511999990003"] {
        let e = must_be_registered(number, &found).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidNumber, "{number}");
        assert!(!e.to_string().contains(number), "the number is not in the error");
    }
    assert_eq!(registered("5511999990001", &found).map(|r| r.jid.as_str()), Some("5511999990001@s.whatsapp.net"));
}
