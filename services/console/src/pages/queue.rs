//! An instance's send queue: its counts and rate, the pacing it runs at, the pending
//! messages with the earliest time each can go, the failed ones with their reasons, and
//! a form that sends a message of any type.

use domain::queue::{QueueHold, QueueList, QueueOut};
use maud::{html, Markup};

use super::{layout, tabs, Tab};
use crate::session::Who;

/// What the send form shows again after the API refused it.
#[derive(Default)]
pub struct SendForm<'a> {
    pub to: &'a str,
    pub body: &'a str,
    pub error: Option<&'a str>,
}

/// What the body field holds at first: a text message.
pub const EXAMPLE: &str = r#"{"type": "text", "text": "hello from the console"}"#;

/// The queue page; `q` is absent for a `send_only` key (it may send, not read).
pub fn queue(who: (&Who, &str), id: &str, name: &str, q: Option<&QueueOut>, form: &SendForm<'_>) -> Markup {
    let (w, csrf) = who;
    layout(
        &format!("{name}: queue"),
        Some(who),
        html! {
            h1 { (name) }
            (tabs(w, id, Tab::Queue))
            @if let Some(q) = q { (listing(id, q)) }
            @if w.can_send() { (send_form(id, csrf, form)) }
        },
    )
}

fn listing(id: &str, q: &QueueOut) -> Markup {
    let c = &q.counts;
    let p = &q.effective_pacing;
    html! {
        dl.facts {
            dt { "Queued" } dd #queued { (c.queued) }
            dt { "In flight" } dd { (c.in_flight) }
            dt { "Failed, last 24 h" } dd { (c.failed_last_day) }
            dt { "Sent" } dd { (c.sent_last_minute) " in the last minute, " (c.sent_last_hour) " in the last hour" }
            dt { "Pacing in force" } dd {
                "one message every " (p.min_interval_ms) " ms, at most " (p.max_per_minute) " a minute"
                @if p.first_contacts_held { "; first contacts wait (high risk)" }
            }
        }
        @match q.held {
            Some(QueueHold::Paused) => p.notice role="status" { "The queue is paused: nothing is sent until it is resumed (see " a href={ "/i/" (id) "/risk" } { "Risk" } ")." },
            Some(QueueHold::NotConnected) => p.notice role="status" { "The instance is not connected: messages wait for it (until they expire)." },
            None => {},
        }
        nav.tabs aria-label="queue lists" {
            a href={ "/i/" (id) "/queue" } aria-current=[(q.list == QueueList::Pending).then_some("page")] { "Pending" }
            a href={ "/i/" (id) "/queue?list=failed" } aria-current=[(q.list == QueueList::Failed).then_some("page")] { "Failed" }
        }
        @if q.data.is_empty() {
            p { @if q.list == QueueList::Pending { "Nothing waiting." } @else { "No failed messages." } }
        } @else {
            div.scroll tabindex="0" {
                table #queue {
                    caption { @if q.list == QueueList::Pending { "Pending messages, in the order they go" } @else { "Failed messages, latest first" } }
                    thead { tr {
                        th scope="col" { "Message" } th scope="col" { "To" } th scope="col" { "Type" } th scope="col" { "Status" } th scope="col" { "Attempts" }
                        @if q.list == QueueList::Pending { th scope="col" { "Earliest send (UTC)" } } @else { th scope="col" { "Reason" } }
                    } }
                    tbody {
                        @for m in &q.data {
                            tr {
                                td { code { (m.message.id) } }
                                td { (m.message.to) }
                                td { (m.message.kind.as_str()) }
                                td { span class={ "state state-" (m.message.status.as_str()) } { (m.message.status.as_str().replace('_', " ")) } }
                                td { (m.attempts) }
                                @if q.list == QueueList::Pending {
                                    td { @if let Some(at) = m.due_at { (at.format("%Y-%m-%d %H:%M:%S")) } @else { "—" } }
                                } @else {
                                    td.text { (m.message.error.as_deref().unwrap_or("")) }
                                }
                            }
                        }
                    }
                }
            }
            @if q.list == QueueList::Pending { p.hint { "Times are the earliest the pacing allows; jitter and a reconnect's ramp-up can make them later." } }
        }
        @if let Some(next) = &q.next_cursor {
            @let base = if q.list == QueueList::Failed { format!("/i/{id}/queue?list=failed") } else { format!("/i/{id}/queue?list=pending") };
            p { a rel="next" href=(super::chats::with_cursor(&base, next)) { "Next page" } }
        }
    }
}

fn send_form(id: &str, csrf: &str, f: &SendForm<'_>) -> Markup {
    let body = if f.body.is_empty() { EXAMPLE } else { f.body };
    html! {
        section aria-labelledby="send-h" {
            h2 #send-h { "Send a message" }
            @if let Some(e) = f.error { p.error #send-error role="alert" { (e) } }
            form method="post" action={ "/i/" (id) "/queue/send" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="to" { "To (a phone number with its country code, or a JID)" }
                input #to type="text" name="to" value=(f.to) required maxlength="128" autocomplete="off"
                    aria-describedby=[f.error.map(|_| "send-error")];
                label for="body" { "The message, as " code { "POST {inst}/messages" } " takes it without " code { "to" } " (any type: text, image, document, location, contact, poll…)" }
                textarea #body name="body" rows="5" maxlength="8192" spellcheck="false" { (body) }
                button type="submit" { "Queue it" }
            }
        }
    }
}
