use super::*;
use serde_json::json;
use shared::message::IMAGE_LIMIT;

fn parse(v: serde_json::Value) -> Result<Validated, shared::ApiError> {
    Ok(validate(serde_json::from_value(v).map_err(|e| shared::ApiError::validation(e.to_string()))?)?)
}

#[test]
fn every_type_validates() {
    let b64 = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG...");
    let cases = [
        json!({ "to": "+55 11 99999-0001", "type": "text", "text": "hi", "link_preview": true }),
        json!({ "to": "5511999990001", "type": "image", "media": { "data": b64, "mime_type": "image/png" }, "caption": "c" }),
        json!({ "to": "5511999990001", "type": "video", "media": { "url": "https://example.com/v.mp4" } }),
        json!({ "to": "5511999990001", "type": "audio", "media": { "url": "https://example.com/a.mp3" } }),
        json!({ "to": "5511999990001", "type": "voice", "media": { "url": "https://example.com/a.ogg" } }),
        json!({ "to": "5511999990001", "type": "document", "media": { "url": "https://example.com/d.pdf", "filename": "d.pdf" } }),
        json!({ "to": "5511999990001", "type": "sticker", "media": { "data": b64, "mime_type": "image/webp" } }),
        json!({ "to": "5511999990001", "type": "location", "location": { "latitude": -23.5, "longitude": -46.6, "name": "SP" } }),
        json!({ "to": "5511999990001", "type": "contact", "contact": { "name": "Ana", "phone": "5511999990002" } }),
        json!({ "to": "120363000000000001@g.us", "type": "poll", "poll": { "name": "lunch?", "values": ["a", "b"] } }),
        json!({ "to": "5511999990001", "type": "reaction", "reaction": { "message_id": "3EB0AA", "emoji": "👍" } }),
        json!({ "to": "5511999990001", "type": "text", "text": "re", "reply_to": "msg_x", "expires_after": "1h30m", "client_message_id": "k" }),
    ];
    for c in cases {
        let v = parse(c.clone()).unwrap_or_else(|e| panic!("{c}: {e}"));
        assert!(!v.to_jid.server().is_empty());
    }
    let v = parse(json!({ "to": "+55 11 99999-0001", "type": "text", "text": "hi" })).unwrap();
    assert_eq!(v.to_jid, shared::jid::Jid::user("5511999990001"));
    assert_eq!(v.expires_after, EXPIRES_DEFAULT);
}

#[test]
fn bad_input_is_refused_with_the_right_code() {
    let cases = [
        (json!({ "to": "12", "type": "text", "text": "x" }), "validation_failed"),
        (json!({ "to": "5511999990001", "type": "text" }), "validation_failed"),
        (json!({ "to": "5511999990001", "type": "text", "text": "x", "caption": "no" }), "validation_failed"),
        (json!({ "to": "5511999990001", "type": "text", "text": "x".repeat(TEXT_LIMIT + 1) }), "media_too_large"),
        (json!({ "to": "5511999990001", "type": "image", "media": { "url": "ftp://x/y" } }), "validation_failed"),
        (
            json!({ "to": "5511999990001", "type": "image", "media": { "url": "https://x/y", "data": "AA==" } }),
            "validation_failed",
        ),
        (
            json!({ "to": "5511999990001", "type": "image", "media": { "data": "AA==", "mime_type": "video/mp4" } }),
            "validation_failed",
        ),
        (
            json!({ "to": "5511999990001", "type": "image", "media": { "data": "not base64!", "mime_type": "image/png" } }),
            "validation_failed",
        ),
        (
            json!({ "to": "5511999990001", "type": "location", "location": { "latitude": 91.0, "longitude": 0.0 } }),
            "validation_failed",
        ),
        (
            json!({ "to": "5511999990001", "type": "poll", "poll": { "name": "p", "values": ["a"] } }),
            "validation_failed",
        ),
        (
            json!({ "to": "5511999990001", "type": "poll", "poll": { "name": "p", "values": ["a", "b"], "selectable_count": 3 } }),
            "validation_failed",
        ),
        (json!({ "to": "5511999990001", "type": "text", "text": "x", "expires_after": "30s" }), "validation_failed"),
        (json!({ "to": "5511999990001", "type": "text", "text": "x", "expires_after": "169h" }), "validation_failed"),
        (
            json!({ "to": "5511999990001", "type": "text", "text": "x", "client_message_id": "k".repeat(129) }),
            "validation_failed",
        ),
    ];
    for (c, code) in cases {
        let e = parse(c.clone()).err().unwrap_or_else(|| panic!("accepted {c}"));
        assert_eq!(e.code.as_str(), code, "{c}: {}", e.message);
        assert!(!e.message.contains("5511999990001"));
    }
}

#[test]
fn media_over_the_type_limit_is_413() {
    let big = base64::engine::general_purpose::STANDARD.encode(vec![0u8; IMAGE_LIMIT + 1]);
    let e =
        parse(json!({ "to": "5511999990001", "type": "image", "media": { "data": big, "mime_type": "image/png" } }))
            .err()
            .unwrap();
    assert_eq!(e.code, ErrorCode::MediaTooLarge);
    // The same size is fine as a video.
    let ok = base64::engine::general_purpose::STANDARD.encode(vec![0u8; IMAGE_LIMIT + 1]);
    parse(json!({ "to": "5511999990001", "type": "video", "media": { "data": ok, "mime_type": "video/mp4" } }))
        .unwrap();
}

#[test]
fn durations_and_hashes() {
    assert_eq!(parse_duration("90"), Some(Duration::from_secs(90)));
    assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
    assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("5x"), None);
    assert_eq!(parse_duration("5m3"), None);
    let a = parse(json!({ "to": "5511999990001", "type": "text", "text": "x", "client_message_id": "k" })).unwrap();
    let b = parse(json!({ "to": "+5511999990001", "type": "text", "text": "x", "client_message_id": "k" })).unwrap();
    let c = parse(json!({ "to": "5511999990001", "type": "text", "text": "y", "client_message_id": "k" })).unwrap();
    assert_eq!(content_hash(&a, None), content_hash(&b, None), "the same message in another spelling");
    assert_ne!(content_hash(&a, None), content_hash(&c, None));
    let id = new_network_id();
    assert!(id.starts_with("3EB0") && id.len() == 22);
}
