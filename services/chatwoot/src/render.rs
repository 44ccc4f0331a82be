//! What a WhatsApp message says in Chatwoot: its text, a line for what text cannot show
//! (a location, a contact card, a poll), the sender's number in groups, and the media to
//! attach. Pure, so it is tested on its own.

use serde_json::Value;

/// A received message, as Chatwoot shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub content: String,
    /// The stored media to attach (its `msg.content.media`), when downloaded.
    pub media: Option<Value>,
    /// Media the network had but we could not keep (expired, or still downloading when
    /// the bridge stopped waiting).
    pub media_missing: bool,
    /// The network id of the message it quotes.
    pub reply_to: Option<String>,
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|x| !x.is_empty())
}

/// `+<digits>` of a person's JID (none for a hidden id or a group).
pub fn phone_of(jid: &str) -> Option<String> {
    let (user, server) = jid.split_once('@')?;
    let user = user.split(':').next()?;
    (server == shared::jid::USER_SERVER && !user.is_empty() && user.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("+{user}"))
}

/// The message of `kind` with `content` (as the local log shows it), sent by `from` in a
/// group when `group`.
pub fn received(kind: &str, content: &Value, from: Option<&str>) -> Rendered {
    let mut lines: Vec<String> = Vec::new();
    let mut media = None;
    let mut media_missing = false;
    match kind {
        "location" => {
            if let Some(l) = content.get("location") {
                let lat = l.get("latitude").and_then(Value::as_f64).unwrap_or_default();
                let lng = l.get("longitude").and_then(Value::as_f64).unwrap_or_default();
                let mut line = "📍 Location".to_string();
                for k in ["name", "address"] {
                    if let Some(x) = s(l, k) {
                        line.push_str(&format!(" · {x}"));
                    }
                }
                lines.push(line);
                lines.push(format!("https://maps.google.com/?q={lat},{lng}"));
            }
        }
        "contact" => {
            if let Some(c) = content.get("contact") {
                lines.push(format!("👤 {}", s(c, "name").unwrap_or("Contact")));
                if let Some(p) = s(c, "phone") {
                    lines.push(p.to_string());
                }
            }
        }
        "poll" => {
            if let Some(p) = content.get("poll") {
                lines.push(format!("📊 {}", s(p, "name").or_else(|| s(p, "question")).unwrap_or("Poll")));
                for o in p.get("options").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(o) = o.as_str() {
                        lines.push(format!("• {o}"));
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(t) = s(content, "text").or_else(|| s(content, "caption")) {
        lines.push(t.to_string());
    }
    if let Some(m) = content.get("media") {
        let gone = m.get("expired").and_then(Value::as_bool).unwrap_or(false)
            || m.get("pending").and_then(Value::as_bool).unwrap_or(false)
            || s(m, "id").is_none();
        if gone {
            media_missing = true;
        } else {
            media = Some(m.clone());
        }
    }
    if lines.is_empty() && media.is_none() {
        lines.push(format!("[{kind}]"));
    }
    if media_missing {
        lines.push(format!("[{kind}: the file could not be downloaded]"));
    }
    let mut text = lines.join("\n");
    if let Some(f) = from {
        let who = phone_of(f).unwrap_or_else(|| f.split('@').next().unwrap_or(f).to_string());
        text = format!("**{who}:**\n{text}");
    }
    Rendered { content: text, media, media_missing, reply_to: s(content, "reply_to").map(str::to_string) }
}

/// What an agent's message says on WhatsApp: signed with their name when asked, as
/// Evolution signs it (`*Ana:*`, the delimiter, the text).
pub fn signed(content: &str, sender: Option<&str>, sign: bool, delimiter: &str) -> String {
    match sender.filter(|n| sign && !n.trim().is_empty()) {
        Some(n) if content.is_empty() => format!("*{n}:*"),
        Some(n) => format!("*{n}:*{delimiter}{content}"),
        None => content.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn texts_media_and_what_text_cannot_show() {
        let r = received("text", &json!({"text": "hi", "reply_to": "3EB0A"}), None);
        assert_eq!((r.content.as_str(), r.reply_to.as_deref()), ("hi", Some("3EB0A")));
        let img = json!({"media": {"id": "med_1", "mime_type": "image/jpeg", "size": 3}, "caption": "look"});
        let r = received("image", &img, None);
        assert_eq!(r.content, "look");
        assert_eq!(r.media.unwrap()["id"], "med_1");
        let r = received("image", &json!({"media": {"id": "med_1", "expired": true}}), None);
        assert!(r.media.is_none() && r.media_missing);
        assert!(r.content.contains("could not be downloaded"));
        let r = received("audio", &json!({"media": {"id": "med_2", "mime_type": "audio/ogg"}}), None);
        assert_eq!(r.content, "");
        let loc = json!({"location": {"latitude": 1.5, "longitude": -2.0, "name": "Cafe"}});
        assert_eq!(received("location", &loc, None).content, "📍 Location · Cafe\nhttps://maps.google.com/?q=1.5,-2");
        let c = json!({"contact": {"name": "Ana", "phone": "+15550001111"}});
        assert_eq!(received("contact", &c, None).content, "👤 Ana\n+15550001111");
        assert_eq!(received("sticker", &json!({}), None).content, "[sticker]");
    }

    #[test]
    fn group_messages_name_their_sender() {
        use shared::jid::{GROUP_SERVER, LID_SERVER, USER_SERVER};
        let r = received("text", &json!({"text": "yo"}), Some(&format!("15550001111@{USER_SERVER}")));
        assert_eq!(r.content, "**+15550001111:**\nyo");
        let r = received("text", &json!({"text": "yo"}), Some(&format!("98765@{LID_SERVER}")));
        assert_eq!(r.content, "**98765:**\nyo");
        assert_eq!(phone_of(&format!("15550001111:3@{USER_SERVER}")).as_deref(), Some("+15550001111"));
        assert_eq!(phone_of(&format!("120363@{GROUP_SERVER}")), None);
    }

    #[test]
    fn agents_sign_their_messages() {
        assert_eq!(signed("hello", Some("Ana"), true, "\n"), "*Ana:*\nhello");
        assert_eq!(signed("hello", Some("Ana"), false, "\n"), "hello");
        assert_eq!(signed("hello", None, true, "\n"), "hello");
        assert_eq!(signed("", Some("Ana"), true, ": "), "*Ana:*");
    }
}
