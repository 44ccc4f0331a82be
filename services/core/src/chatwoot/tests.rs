use super::hook::job_of;
use super::*;
use serde_json::json;
use shared::db::chatwoot::Kind;

fn body(v: serde_json::Value) -> ChatwootIn {
    serde_json::from_value(v).unwrap()
}

fn stored(reopen: bool) -> Stored {
    let config = body(json!({"url": "https://cw.example", "account_id": 7, "reopen_conversation": reopen}));
    Stored {
        instance_id: InstanceId::parse("inst_01a21c814fd7741bba4f97daf15a6a28").unwrap(),
        config,
        token: "t".into(),
        hook: "cwh_x".into(),
        inbox_id: Some(3),
        private_origin: None,
        generation: 2,
        last_error: None,
        from_account: None,
        updated_at: Utc::now(),
    }
}

fn agent_message() -> serde_json::Value {
    json!({
        "event": "message_created", "id": 41, "content": "hello", "message_type": "outgoing",
        "private": false, "source_id": null, "inbox": {"id": 3}, "account": {"id": 7},
        "sender": {"id": 1, "name": "Ana", "type": "user"},
        "conversation": {"id": 9, "inbox_id": 3, "messages": [{"id": 41, "message_type": 1}]},
        "attachments": [{"id": 5, "file_type": "image", "data_url": "https://cw.example/a.jpg", "file_size": 10}]
    })
}

#[test]
fn settings_are_checked_and_normalized() {
    let c = body(json!({"url": "https://cw.example/", "account_id": 1, "ignore_jids": ["+5511999990000"]}))
        .validate()
        .unwrap();
    assert_eq!(c.url, "https://cw.example");
    assert_eq!(c.ignore_jids, vec!["5511999990000@s.whatsapp.net"]);
    assert!(c.sign_messages && c.reopen_conversation && c.groups && !c.conversation_pending);
    for bad in [
        json!({"url": "ftp://cw.example", "account_id": 1}),
        json!({"url": "https://u:p@cw.example", "account_id": 1}),
        json!({"url": "https://cw.example", "account_id": 0}),
        json!({"url": "https://cw.example", "account_id": 1, "inbox_name": " "}),
        json!({"url": "https://cw.example", "account_id": 1, "ignore_jids": ["not a jid"]}),
        json!({"url": "https://cw.example", "account_id": 1, "token": ""}),
        json!({"url": "https://cw.example", "account_id": 1, "import_days": 0}),
        json!({"url": "https://cw.example", "account_id": 1, "import_days": 91}),
    ] {
        assert!(body(bad.clone()).validate().is_err(), "{bad}");
    }
    assert!(serde_json::from_value::<ChatwootIn>(json!({"url": "https://x", "account_id": 1, "nope": 1})).is_err());
}

#[test]
fn an_agents_message_becomes_one_outbound_job() {
    let s = stored(true);
    let (kind, key, p) = job_of(&s, &agent_message()).unwrap();
    assert_eq!((kind, key.as_str()), (Kind::Outbound, "2-41"));
    assert_eq!(p["conversation_id"], 9);
    assert_eq!(p["sender"], "Ana");
    assert_eq!(p["generation"], 2);
    assert_eq!(p["attachments"][0]["data_url"], "https://cw.example/a.jpg");
}

#[test]
fn what_the_bridge_must_not_send_is_ignored() {
    let s = stored(true);
    let with = |k: &str, v: serde_json::Value| {
        let mut m = agent_message();
        m[k] = v;
        m
    };
    for m in [
        with("private", json!(true)),
        with("message_type", json!("incoming")),
        with("source_id", json!("WAID:3EB0")),
        with("event", json!("message_updated")),
        with("inbox", json!({"id": 4})),
        with("account", json!({"id": 8})),
        with("content", json!(" "))
            .as_object()
            .map(|o| {
                let mut o = o.clone();
                o.remove("attachments");
                serde_json::Value::Object(o)
            })
            .unwrap(),
    ] {
        assert!(job_of(&s, &m).is_none(), "{m}");
    }
    let mut off = stored(true);
    off.config.enabled = false;
    assert!(job_of(&off, &agent_message()).is_none());
}

#[test]
fn a_resolved_conversation_is_forgotten_only_without_reopening() {
    let ev = json!({"event": "conversation_status_changed", "status": "resolved", "id": 9, "inbox_id": 3,
        "conversation": {"id": 9, "inbox_id": 3}});
    assert!(job_of(&stored(true), &ev).is_none());
    let (kind, _, p) = job_of(&stored(false), &ev).unwrap();
    assert_eq!(kind, Kind::Resolved);
    assert_eq!(p["conversation_id"], 9);
}

#[test]
fn chats_carried() {
    let mut s = stored(true);
    s.config.groups = false;
    s.config.ignore_jids = vec!["15550001111@s.whatsapp.net".into()];
    assert!(s.carries("15550002222@s.whatsapp.net"));
    assert!(!s.carries("15550001111@s.whatsapp.net"));
    assert!(!s.carries("120363000000000000@g.us"));
    assert!(!s.carries("status@broadcast"));
    assert!(!s.carries("120363000000000001@newsletter"));
    assert!(s.carries("98765@lid"));
}
