//! An instance's webhook endpoints and an endpoint's delivery log, with a resend for a
//! failed delivery.

use domain::webhooks::{DeliveryListOut, WebhookListOut};
use maud::{html, Markup};
use shared::db::deliveries::DeliveryState;

use super::{layout, tabs, Tab};
use crate::session::Who;

/// The endpoints.
pub fn webhooks(who: (&Who, &str), id: &str, name: &str, list: &WebhookListOut) -> Markup {
    layout(
        &format!("{name}: webhooks"),
        Some(who),
        html! {
            h1 { (name) }
            (tabs(who.0, id, Tab::Webhooks))
            @if list.webhooks.is_empty() {
                p { "No webhook endpoints: register one with " code { "POST /v1/instances/" (id) "/webhooks" } "." }
            } @else {
                div.scroll tabindex="0" {
                    table {
                        caption { "Webhook endpoints" }
                        thead { tr { th scope="col" { "URL" } th scope="col" { "Events" } th scope="col" { "Format" } th scope="col" { "Enabled" } th scope="col" { "Deliveries" } } }
                        tbody {
                            @for w in &list.webhooks {
                                tr {
                                    td.text { (w.url) }
                                    td { @if w.events.is_empty() { "all" } @else { (w.events.join(", ")) } }
                                    td { (serde_json::to_value(w.format).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()) }
                                    td {
                                        @if w.enabled { "yes" } @else { "no" @if let Some(r) = &w.disabled_reason { " (" (r) ")" } }
                                    }
                                    td { a href={ "/i/" (id) "/webhooks/" (w.id) } { "Delivery log" } }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// An endpoint's delivery log, newest first.
pub fn deliveries(who: (&Who, &str), id: &str, webhook: &str, page: &DeliveryListOut, can_resend: bool) -> Markup {
    let (_, csrf) = who;
    layout(
        "Delivery log",
        Some(who),
        html! {
            h1 { "Delivery log" }
            (tabs(who.0, id, Tab::Webhooks))
            @if page.deliveries.is_empty() {
                p { "Nothing delivered yet." }
            } @else {
                div.scroll tabindex="0" {
                    table {
                        caption { "Deliveries, newest first" }
                        thead { tr { th scope="col" { "Created" } th scope="col" { "Event" } th scope="col" { "State" } th scope="col" { "Attempts" } th scope="col" { "Answer" } th scope="col" { "Last error" } th scope="col" { span.visually-hidden { "Actions" } } } }
                        tbody {
                            @for d in &page.deliveries {
                                tr {
                                    td { (d.created_at.format("%Y-%m-%d %H:%M:%S UTC")) }
                                    td { (d.event_type) }
                                    td { span class={ "state state-" (d.state) } { (d.state) } }
                                    td { (d.attempts) }
                                    td {
                                        @if let Some(s) = d.response_status { (s) } @else { "—" }
                                        @if let Some(ms) = d.latency_ms { " in " (ms) " ms" }
                                    }
                                    td.text { (d.last_error.as_deref().unwrap_or("")) }
                                    td {
                                        @if can_resend && d.state == DeliveryState::Failed {
                                            form.inline method="post" action={ "/i/" (id) "/webhooks/" (webhook) "/deliveries/" (d.id) "/resend" } {
                                                input type="hidden" name="csrf" value=(csrf);
                                                button type="submit" { "Resend" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = &page.next_cursor {
                p { a rel="next" href=(super::chats::with_cursor(&format!("/i/{id}/webhooks/{webhook}"), next)) { "Older deliveries" } }
            }
        },
    )
}
