//! An instance's chats and a chat's history, from the local log (the API reads them
//! without asking the network), a page at a time.

use domain::chats::ChatListOut;
use domain::history::{LogMessageOut, MessagePageOut};
use maud::{html, Markup};
use serde_json::Value;

use super::{layout, tabs, Tab};
use crate::session::Who;

/// The chat list.
pub fn chats(who: (&Who, &str), id: &str, name: &str, page: &ChatListOut) -> Markup {
    layout(
        &format!("{name}: chats"),
        Some(who),
        html! {
            h1 { (name) }
            (tabs(who.0, id, Tab::Chats))
            @if page.chats.is_empty() {
                p { "No chats yet: they appear as messages are sent and received." }
            } @else {
                div.scroll tabindex="0" {
                    table {
                        caption { "Chats, most recent first" }
                        thead { tr { th scope="col" { "Chat" } th scope="col" { "Last message" } th scope="col" { "Unread" } th scope="col" { "Labels" } } }
                        tbody {
                            @for c in &page.chats {
                                tr {
                                    td {
                                        a href=(chat_href(id, &c.jid)) { (c.name.as_deref().unwrap_or(&c.jid)) }
                                        @if c.pinned { " · pinned" }
                                        @if c.archived { " · archived" }
                                    }
                                    td { (c.last_message_at.format("%Y-%m-%d %H:%M UTC")) }
                                    td { (c.unread_count) }
                                    td { (c.labels.join(", ")) }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = &page.next_cursor {
                p { a rel="next" href=(with_cursor(&format!("/i/{id}/chats"), next)) { "More chats" } }
            }
        },
    )
}

/// A chat's messages, newest first.
pub fn chat(who: (&Who, &str), id: &str, jid: &str, page: &MessagePageOut) -> Markup {
    layout(
        &format!("Chat {jid}"),
        Some(who),
        html! {
            h1 { (jid) }
            (tabs(who.0, id, Tab::Chats))
            @if page.messages.is_empty() {
                p { "No messages in this chat." }
            } @else {
                ol.messages aria-label="messages, newest first" {
                    @for m in &page.messages { (message(m)) }
                }
            }
            @if let Some(next) = &page.next_cursor {
                p { a rel="next" href=(with_cursor(&chat_href(id, jid), next)) { "Older messages" } }
            }
        },
    )
}

fn message(m: &LogMessageOut) -> Markup {
    let (text, media) = summary(&m.kind, &m.content);
    html! {
        li class=[m.from_me.then_some("mine")] {
            div.meta {
                (m.timestamp.format("%Y-%m-%d %H:%M:%S UTC"))
                " · " @if m.from_me { "sent" } @else { "from " (m.from_jid) }
                " · " (m.kind)
                @if let Some(s) = m.status { " · " (s.as_str()) }
                @if !m.labels.is_empty() { " · labels: " (m.labels.join(", ")) }
            }
            @if !text.is_empty() { div.text { (text) } }
            @if let Some(url) = media { a href=(url) target="_blank" rel="noopener noreferrer" { "Open the media" } }
        }
    }
}

/// What a message says, in one line, and its media's signed URL when it has one: only
/// an http(s) URL is ever a link (a stranger's message could carry `javascript:`).
fn summary(kind: &str, c: &Value) -> (String, Option<String>) {
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    let media = c["media"]["url"]
        .as_str()
        .and_then(|u| url::Url::parse(u).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .map(String::from);
    let text = match kind {
        "text" => s("text"),
        "location" => format!("location {}, {}", c["location"]["latitude"], c["location"]["longitude"]),
        "contact" => format!("contact {}", c["contact"]["name"].as_str().unwrap_or_default()),
        "poll" => format!("poll: {}", c["poll"]["name"].as_str().unwrap_or_default()),
        "reaction" => format!("reacted {}", c["reaction"]["emoji"].as_str().unwrap_or_default()),
        _ if c["media"]["expired"] == true => format!("{} (expired)", s("caption")),
        _ => s("caption"),
    };
    (text, media)
}

/// A chat's page (its JID, escaped as a path segment).
pub(crate) fn chat_href(id: &str, jid: &str) -> String {
    let jid: String = url::form_urlencoded::byte_serialize(jid.as_bytes()).collect();
    format!("/i/{id}/chats/{jid}")
}

pub(crate) fn with_cursor(path: &str, cursor: &str) -> String {
    let c: String = url::form_urlencoded::byte_serialize(cursor.as_bytes()).collect();
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}cursor={c}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cursor_is_encoded_after_the_query_it_joins() {
        assert_eq!(with_cursor("/i/x/chats", "a+b/c"), "/i/x/chats?cursor=a%2Bb%2Fc");
        assert_eq!(with_cursor("/i/x/queue?list=failed", "a&b=c"), "/i/x/queue?list=failed&cursor=a%26b%3Dc");
    }

    #[test]
    fn only_http_media_urls_are_links() {
        let signed = json!({ "caption": "c", "media": { "url": "https://api.example/media/med_1?sig=x" } });
        assert_eq!(summary("image", &signed), ("c".into(), Some("https://api.example/media/med_1?sig=x".into())));
        for bad in ["javascript:alert(1)", "data:text/html,<script>x</script>", "//evil.example/x", "not a url"] {
            let m = json!({ "caption": "c", "media": { "url": bad } });
            assert_eq!(summary("image", &m).1, None, "{bad}");
        }
    }
}
