//! What the attendant does with a received message, and the conversation it sends the
//! provider: pure functions of the configuration, the message and the chat's log, so
//! every rule is unit-tested without a network.

use serde::{Deserialize, Serialize};
use shared::db::log::LogRow;
use shared::jid::Jid;

use domain::attendant::AttendantIn;

/// A `message.received` event's data, as far as the attendant reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct Inbound {
    pub message_id: String,
    pub chat_jid: String,
    pub from_jid: String,
    pub from_me: bool,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub content: serde_json::Value,
    pub timestamp: chrono::DateTime<chrono::Utc>,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing; the reason is a metric label.
    Ignore(&'static str),
    /// Someone answered from the account's phone: pause the chat.
    HumanReply,
    /// The contact asked for a human: pause the chat and tell the tenant.
    Handoff,
    /// Build the conversation and answer.
    Answer,
}

/// The text a person reads in a message's content: a text, a caption.
fn text_of(content: &serde_json::Value) -> Option<&str> {
    content.get("text").or_else(|| content.get("caption")).and_then(|t| t.as_str())
}

fn contains_any(text: &str, words: &[String]) -> bool {
    let t = text.to_lowercase();
    words.iter().any(|w| t.contains(w.as_str()))
}

/// The network id of the message this one quotes, if it is a reply.
pub fn reply_to(m: &Inbound) -> Option<&str> {
    m.content.get("reply_to").and_then(|r| r.as_str()).filter(|r| !r.is_empty())
}

/// Whether a message mentions the account: `@<number>` in its text, or its JID among
/// the message's `mentions`.
fn mentions(m: &Inbound, own_number: &str) -> bool {
    let jid = shared::jid::Jid::user(own_number);
    text_of(&m.content).is_some_and(|t| t.contains(&format!("@{own_number}")))
        || m.content.get("mentions").and_then(|v| v.as_array()).is_some_and(|a| a.iter().any(|j| j == jid.as_str()))
}

/// The rules before any I/O. `own_number`: the account's number, to see mentions in
/// groups; `replied_to_own`: the message quotes one the account sent.
pub fn decide(c: &AttendantIn, own_number: Option<&str>, replied_to_own: bool, m: &Inbound) -> Decision {
    if !c.enabled {
        return Decision::Ignore("disabled");
    }
    let Ok(chat) = Jid::parse(&m.chat_jid) else { return Decision::Ignore("not_a_chat") };
    if !chat.is_person() && !chat.is_group() {
        // Statuses, channels and broadcast lists are not conversations.
        return Decision::Ignore("not_a_chat");
    }
    if m.from_me {
        return if c.handoff.on_human_reply { Decision::HumanReply } else { Decision::Ignore("from_me") };
    }
    if c.triggers.ignore.iter().any(|j| *j == m.chat_jid || *j == m.from_jid) {
        return Decision::Ignore("ignored");
    }
    if chat.is_group() {
        if !c.triggers.groups {
            return Decision::Ignore("group");
        }
        if !replied_to_own && !own_number.is_some_and(|n| mentions(m, n)) {
            return Decision::Ignore("not_mentioned");
        }
    } else if !c.triggers.direct {
        return Decision::Ignore("direct");
    }
    if matches!(m.kind.as_str(), "reaction" | "poll") {
        return Decision::Ignore("kind");
    }
    if text_of(&m.content).is_some_and(|t| contains_any(t, &c.handoff.keywords)) {
        return Decision::Handoff;
    }
    Decision::Answer
}

/// One turn of the conversation, as Chat Completions takes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    pub content: String,
}

/// A logged message in words: its text, or what it is (`[image] caption`), with an
/// audio's transcription when there is one.
fn describe(kind: &str, content: &serde_json::Value) -> Option<String> {
    let text = text_of(content).map(str::to_string);
    match kind {
        "text" => text,
        "image" | "video" | "document" | "sticker" | "audio" | "voice" => {
            let name = content.pointer("/media/filename").and_then(|f| f.as_str());
            let mut s = format!("[{kind}");
            if let Some(n) = name {
                s.push_str(&format!(" {n}"));
            }
            s.push(']');
            if let Some(t) = content.get("transcription").and_then(|t| t.as_str()).or(text.as_deref()) {
                s.push(' ');
                s.push_str(t);
            }
            Some(s)
        }
        "location" => Some("[location]".into()),
        "contact" => Some("[contact card]".into()),
        _ => None,
    }
}

/// The most a conversation sent to the provider holds, in bytes of text: the system
/// prompt (at most 16 KiB) and as many of the chat's newest messages as fit.
pub const PROMPT_LIMIT: usize = 64 * 1024;

/// The conversation for the provider: the system prompt, then the chat's messages oldest
/// first (`log` is newest first, as the log reads it), the contact's as `user` and the
/// account's as `assistant`. Messages with nothing to say (reactions) are left out. At
/// most [`PROMPT_LIMIT`] bytes of text: the newest messages are kept, the newest one cut
/// (at a character boundary) when it alone is too long, the older ones that do not fit
/// left out.
pub fn conversation(system_prompt: &str, log: &[LogRow]) -> Vec<Turn> {
    let mut room = PROMPT_LIMIT.saturating_sub(system_prompt.len());
    let mut newest_first = Vec::with_capacity(log.len());
    for r in log {
        let Some(mut content) = describe(&r.kind, &r.content) else { continue };
        if content.len() > room {
            if !newest_first.is_empty() {
                break;
            }
            let mut cut = room;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            content.truncate(cut);
        }
        room -= content.len();
        newest_first.push(Turn { role: if r.from_me { "assistant" } else { "user" }, content });
    }
    let mut turns = Vec::with_capacity(newest_first.len() + 1);
    if !system_prompt.is_empty() {
        turns.push(Turn { role: "system", content: system_prompt.to_string() });
    }
    turns.extend(newest_first.into_iter().rev());
    turns
}

/// Whether the chat's newest `n` messages (`log` newest first, as the log reads it) are
/// automatic on both sides, a loop with another bot: they alternate between the contact
/// and the account, every one of the account's is the attendant's (`ours`: their ids),
/// and every one of the contact's came sooner after the account's before it than a
/// person types it (8 characters a second, at least 3 s for any message). `n` below 2 is
/// 2; 0 never.
pub fn bot_loop(log: &[LogRow], n: usize, ours: &[String]) -> bool {
    if n == 0 || log.len() < n.max(2) {
        return false;
    }
    let window = &log[..n.max(2)];
    window.iter().enumerate().all(|(i, r)| {
        if r.from_me {
            return ours.iter().any(|o| o == r.id.as_str());
        }
        let Some(before) = log.get(i + 1).filter(|b| b.from_me) else { return false };
        let chars = describe(&r.kind, &r.content).map_or(0, |t| t.chars().count());
        let human = (chars as f64 / 8.0).max(3.0);
        let took = (r.ts - before.ts).num_milliseconds() as f64 / 1000.0;
        took < human
    })
}

/// With trigger keywords, whether one of the contact's messages in the conversation holds one.
pub fn keywords_met(c: &AttendantIn, turns: &[Turn]) -> bool {
    c.triggers.keywords.is_empty()
        || turns.iter().any(|t| t.role == "user" && contains_any(&t.content, &c.triggers.keywords))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;

    fn config(v: serde_json::Value) -> AttendantIn {
        let mut base = json!({ "provider": { "kind": "webhook", "url": "https://bot.example" } });
        base.as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
        serde_json::from_value::<AttendantIn>(base).unwrap().validate().unwrap()
    }

    fn msg(chat: &str, from_me: bool, text: &str) -> Inbound {
        Inbound {
            message_id: "msg_1".into(),
            chat_jid: chat.into(),
            from_jid: chat.into(),
            from_me,
            kind: "text".into(),
            content: json!({ "text": text }),
            timestamp: Utc::now(),
        }
    }

    use shared::jid::{at as jid_at, GROUP_SERVER, NEWSLETTER_SERVER, STATUS_JID, USER_SERVER};

    fn dm() -> String {
        jid_at("491511111111", USER_SERVER)
    }

    fn decide(c: &AttendantIn, own: Option<&str>, m: &Inbound) -> Decision {
        super::decide(c, own, false, m)
    }
    fn group() -> String {
        jid_at("120363000000000001", GROUP_SERVER)
    }

    #[test]
    fn direct_chats_are_answered_and_groups_only_when_mentioned() {
        let c = config(json!({}));
        assert_eq!(decide(&c, Some("4915122"), &msg(&dm(), false, "hi")), Decision::Answer);
        assert_eq!(decide(&c, Some("4915122"), &msg(&group(), false, "hi @4915122")), Decision::Ignore("group"));
        let g = config(json!({ "triggers": { "groups": true, "direct": false } }));
        assert_eq!(decide(&g, Some("4915122"), &msg(&group(), false, "hi all")), Decision::Ignore("not_mentioned"));
        assert_eq!(decide(&g, Some("4915122"), &msg(&group(), false, "hi @4915122")), Decision::Answer);
        assert_eq!(decide(&g, Some("4915122"), &msg(&dm(), false, "hi")), Decision::Ignore("direct"));
        // A mention by JID (the text may name a hidden id instead), or a reply to the account.
        let mut by_jid = msg(&group(), false, "hi @123456789012345");
        by_jid.content["mentions"] = json!([jid_at("4915122", USER_SERVER)]);
        assert_eq!(decide(&g, Some("4915122"), &by_jid), Decision::Answer);
        let mut reply = msg(&group(), false, "yes please");
        reply.content["reply_to"] = json!("3EB0QUOTED");
        assert_eq!(reply_to(&reply), Some("3EB0QUOTED"));
        assert_eq!(super::decide(&g, Some("4915122"), true, &reply), Decision::Answer);
        assert_eq!(super::decide(&g, Some("4915122"), false, &reply), Decision::Ignore("not_mentioned"));
        assert_eq!(decide(&c, None, &msg(STATUS_JID, false, "x")), Decision::Ignore("not_a_chat"));
        assert_eq!(
            decide(&c, None, &msg(&jid_at("120363000000000002", NEWSLETTER_SERVER), false, "x")),
            Decision::Ignore("not_a_chat")
        );
    }

    #[test]
    fn handoffs_ignores_and_the_switch() {
        let c = config(json!({ "handoff": { "keywords": ["Human"] }, "triggers": { "ignore": ["+49 151 2222222"] } }));
        assert_eq!(decide(&c, None, &msg(&dm(), true, "I'll take it")), Decision::HumanReply);
        assert_eq!(decide(&c, None, &msg(&dm(), false, "a HUMAN please")), Decision::Handoff);
        assert_eq!(
            decide(&c, None, &msg(&jid_at("491512222222", USER_SERVER), false, "hi")),
            Decision::Ignore("ignored")
        );
        let off = config(json!({ "enabled": false }));
        assert_eq!(decide(&off, None, &msg(&dm(), false, "hi")), Decision::Ignore("disabled"));
        let no_pause = config(json!({ "handoff": { "on_human_reply": false } }));
        assert_eq!(decide(&no_pause, None, &msg(&dm(), true, "hi")), Decision::Ignore("from_me"));
        let mut r = msg(&dm(), false, "");
        r.kind = "reaction".into();
        assert_eq!(decide(&c, None, &r), Decision::Ignore("kind"));
    }

    fn row(from_me: bool, kind: &str, content: serde_json::Value) -> LogRow {
        LogRow {
            id: shared::ids::MessageId::new(),
            chat_jid: Jid::parse(&dm()).unwrap(),
            wa_message_id: "W".into(),
            ts: Utc::now(),
            from_jid: Jid::parse(&dm()).unwrap(),
            from_me,
            kind: kind.into(),
            content,
            status: None,
            source: shared::db::log::Source::Live,
        }
    }

    fn at(from_me: bool, text: &str, secs: i64) -> LogRow {
        let mut r = row(from_me, "text", json!({ "text": text }));
        r.ts = Utc::now() - chrono::Duration::seconds(1000) + chrono::Duration::seconds(secs);
        r
    }

    #[test]
    fn a_loop_is_automatic_messages_on_both_sides() {
        let long = "Thanks for your message! Our opening hours are 9 to 6, Monday to Saturday.";
        // Oldest first here, reversed below: the contact's bot answers 2 s after each reply.
        let mut chat = Vec::new();
        for k in 0..6 {
            chat.push(at(false, long, k * 10));
            chat.push(at(true, long, k * 10 + 5));
        }
        chat.push(at(false, long, 62));
        chat.reverse();
        let ours: Vec<String> = chat.iter().filter(|r| r.from_me).map(|r| r.id.to_string()).collect();
        assert!(bot_loop(&chat, 10, &ours));
        assert!(!bot_loop(&chat, 0, &ours), "0: never");
        assert!(!bot_loop(&chat, 20, &ours), "fewer messages than n");
        // One reply typed on the phone (not the attendant's) breaks it.
        assert!(!bot_loop(&chat, 10, &ours[1..]));
        // A person typing the long text takes longer than 75 / 8 s.
        let mut human = chat.clone();
        human[0].ts = human[1].ts + chrono::Duration::seconds(20);
        assert!(!bot_loop(&human, 10, &ours));
        // Short messages are automatic only under 3 s.
        let quick = vec![at(false, "ok", 12), at(true, "ok", 10), at(false, "ok", 2), at(true, "ok", 0)];
        let ours: Vec<String> = quick.iter().filter(|r| r.from_me).map(|r| r.id.to_string()).collect();
        assert!(bot_loop(&quick, 4, &ours));
        let slow = vec![at(false, "ok", 15), at(true, "ok", 10), at(false, "ok", 2), at(true, "ok", 0)];
        assert!(!bot_loop(&slow, 4, &ours));
        // Two of the contact's in a row: not a ping-pong.
        let twice = vec![at(false, "ok", 12), at(false, "ok", 11), at(true, "ok", 10), at(false, "ok", 3)];
        assert!(!bot_loop(&twice, 4, &ours));
    }

    #[test]
    fn the_prompt_is_bounded() {
        let big = "é".repeat(40 * 1024);
        // Newest first: one huge message, then older ones.
        let log = vec![row(false, "text", json!({ "text": big })), row(true, "text", json!({ "text": "older" }))];
        let turns = conversation(&"p".repeat(16 * 1024), &log);
        let total: usize = turns.iter().map(|t| t.content.len()).sum();
        assert!(total <= PROMPT_LIMIT, "{total}");
        assert_eq!(turns.len(), 2, "the system prompt and the newest message, cut; the older left out");
        assert!(turns[1].content.starts_with('é'));
        let many: Vec<LogRow> =
            (0..100).map(|_| row(false, "text", json!({ "text": "x".repeat(64 * 1024) }))).collect();
        let turns = conversation("", &many);
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].content.len(), PROMPT_LIMIT);
    }

    #[test]
    fn the_conversation_is_the_prompt_then_the_chat_oldest_first() {
        // Newest first, as the log reads.
        let log = vec![
            row(false, "image", json!({ "caption": "this one?", "media": { "filename": "shoe.jpg" } })),
            row(false, "reaction", json!({ "reaction": { "emoji": "👍" } })),
            row(true, "text", json!({ "text": "Hello! How can I help?" })),
            row(false, "voice", json!({ "media": {}, "transcription": "do you have shoes" })),
            row(false, "text", json!({ "text": "hi" })),
        ];
        let turns = conversation("You sell shoes.", &log);
        let got: Vec<(&str, &str)> = turns.iter().map(|t| (t.role, t.content.as_str())).collect();
        assert_eq!(
            got,
            [
                ("system", "You sell shoes."),
                ("user", "hi"),
                ("user", "[voice] do you have shoes"),
                ("assistant", "Hello! How can I help?"),
                ("user", "[image shoe.jpg] this one?"),
            ]
        );
        let kw = config(json!({ "triggers": { "keywords": ["SHOES"] } }));
        assert!(keywords_met(&kw, &turns));
        assert!(!keywords_met(&kw, &conversation("", &log[..3])));
        assert!(keywords_met(&config(json!({})), &[]));
    }
}
