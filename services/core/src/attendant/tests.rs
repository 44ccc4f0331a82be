use super::*;
use serde_json::json;

fn stored(v: serde_json::Value, secret: Option<&str>) -> Stored {
    let mut config: AttendantIn = serde_json::from_value(v).unwrap();
    config.take_secret();
    Stored { config, secret: secret.map(str::to_string), private_origin: None, updated_at: Utc::now() }
}

#[test]
fn defaults_and_normalization() {
    let c: AttendantIn =
        serde_json::from_value(json!({ "provider": { "kind": "webhook", "url": "https://bot.example/hook" } }))
            .unwrap();
    let c = AttendantIn { handoff: Handoff { keywords: vec![" Human ".into()], ..c.handoff }, ..c };
    let c = AttendantIn { triggers: Triggers { ignore: vec!["+49 151 1234567".into()], ..c.triggers }, ..c };
    let c = c.validate().unwrap();
    assert!(c.enabled && c.triggers.direct && !c.triggers.groups);
    assert_eq!((c.memory_messages, c.handoff.pause_minutes, c.reply_timeout_seconds), (20, 60, 60));
    assert_eq!(c.handoff.keywords, ["human"]);
    assert_eq!(c.triggers.ignore, [shared::jid::Jid::user("491511234567").as_str()]);
}

#[test]
fn bad_values_are_refused() {
    let base = json!({ "provider": { "kind": "openai", "base_url": "https://api.example/v1", "model": "m" } });
    let bad = [
        json!({ "provider": { "kind": "openai", "base_url": "ftp://x/v1", "model": "m" } }),
        json!({ "provider": { "kind": "openai", "base_url": "https://u:p@x/v1", "model": "m" } }),
        json!({ "provider": { "kind": "openai", "base_url": "https://x/v1", "model": " " } }),
        json!({ "provider": { "kind": "webhook", "url": "https://x", "secret": "a\nb" } }),
        json!({ "system_prompt": "x".repeat(SYSTEM_PROMPT_LIMIT + 1) }),
        json!({ "triggers": { "ignore": ["nope"] } }),
        json!({ "triggers": { "keywords": [""] } }),
        json!({ "handoff": { "pause_minutes": 0 } }),
    ];
    for b in bad {
        let mut v = base.clone();
        v.as_object_mut().unwrap().extend(b.as_object().unwrap().clone());
        let c: AttendantIn = serde_json::from_value(v).unwrap();
        assert!(c.validate().is_err(), "{b}");
    }
    assert!(serde_json::from_value::<AttendantIn>(
        json!({ "provider": { "kind": "openai", "base_url": "https://x", "model": "m", "extra": 1 } })
    )
    .is_err());
}

#[test]
fn a_patch_merges_and_keeps_the_secret_of_the_same_kind() {
    let now = stored(
        json!({ "provider": { "kind": "openai", "base_url": "https://x/v1", "model": "a", "api_key": "sk-1" },
                "triggers": { "groups": true, "keywords": ["hi"] } }),
        Some("sk-1"),
    );
    let (c, s) = patched(&now, &json!({ "triggers": { "direct": false }, "system_prompt": "be brief" })).unwrap();
    assert!(!c.triggers.direct && c.triggers.groups && c.triggers.keywords == ["hi"]);
    assert_eq!((c.system_prompt.as_str(), s.as_deref()), ("be brief", Some("sk-1")));
    let (c, s) =
        patched(&now, &json!({ "provider": { "kind": "openai", "base_url": "https://x/v2", "model": "b" } })).unwrap();
    assert!(matches!(&c.provider, ProviderIn::Openai(o) if o.model == "b" && o.api_key.is_none()));
    assert_eq!(s.as_deref(), Some("sk-1"), "the same kind at the same origin keeps its key");
    for elsewhere in ["https://y/v1", "http://x/v1", "https://x:8443/v1", "https://x.evil/v1"] {
        let (_, s) =
            patched(&now, &json!({ "provider": { "kind": "openai", "base_url": elsewhere, "model": "b" } })).unwrap();
        assert_eq!(s, None, "the key does not follow the provider to {elsewhere}");
    }
    let (_, s) =
        patched(&now, &json!({ "provider": { "kind": "openai", "base_url": "HTTPS://X:443/v9", "model": "b" } }))
            .unwrap();
    assert_eq!(s.as_deref(), Some("sk-1"), "the same origin spelled otherwise");
    let (_, s) = patched(&now, &json!({ "provider": { "kind": "webhook", "url": "https://bot" } })).unwrap();
    assert_eq!(s, None, "another kind does not inherit the key");
    let (_, s) =
        patched(&now, &json!({ "provider": { "kind": "webhook", "url": "https://bot", "secret": "w" } })).unwrap();
    assert_eq!(s.as_deref(), Some("w"));
    assert!(patched(&now, &json!({ "provider": { "kind": "openai", "base_url": "https://y", "url": "z" } })).is_err());
}
