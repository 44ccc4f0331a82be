//! An instance's live events: the API's event stream (SSE) through the console, filtered
//! by type. The browser's EventSource reconnects by itself and sends the last event's id,
//! which the console passes on as `Last-Event-ID`: the stream resumes with no gap.

use maud::{html, Markup};

use super::{layout, tabs, Tab};
use crate::session::Who;

pub fn events(who: (&Who, &str), id: &str, name: &str, types: &str) -> Markup {
    let stream = if types.is_empty() {
        format!("/i/{id}/events/stream")
    } else {
        format!("/i/{id}/events/stream?types={types}")
    };
    layout(
        &format!("{name}: live events"),
        Some(who),
        html! {
            h1 { (name) }
            (tabs(who.0, id, Tab::Events))
            form.filters method="get" action={ "/i/" (id) "/events" } {
                div {
                    label for="types" { "Event types (comma-separated; empty: all)" }
                    input #types type="text" name="types" value=(types) maxlength="512" list="event-types" autocomplete="off";
                    datalist #event-types { @for t in shared::events::EVENT_TYPES { option value=(t) {} } }
                }
                button type="submit" { "Filter" }
            }
            p #stream-state role="status" data-stream=(stream) data-types=(shared::events::EVENT_TYPES.join(",")) { "Connecting…" }
            noscript { p { "This page needs JavaScript to follow the stream; " code { "GET /v1/instances/" (id) "/events" } " is the same stream for any SSE client." } }
            ol #events.events aria-label="events, newest first" {}
        },
    )
}
