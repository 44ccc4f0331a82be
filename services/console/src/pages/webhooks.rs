//! An instance's webhook endpoints and an endpoint's delivery log, with a resend for a
//! failed delivery.

use domain::webhooks::{DeliveryListOut, WebhookListOut, WebhookOut};
use maud::{html, Markup};
use shared::db::deliveries::DeliveryState;

use super::{layout, tabs, Tab};
use crate::session::Who;

/// What the endpoints page shows beside the list: an endpoint's new secret (created or
/// rotated, shown once), or the API's refusal of a form.
pub enum WebhooksNote<'a> {
    None,
    Secret(&'a WebhookOut),
    Refused(&'a str),
}

/// The endpoints, with their forms for a token that may manage them.
pub fn webhooks(who: (&Who, &str), id: &str, name: &str, list: &WebhookListOut, note: WebhooksNote<'_>) -> Markup {
    let (w, csrf) = who;
    layout(
        &format!("{name}: webhooks"),
        Some(who),
        html! {
            h1 { (name) }
            (tabs(who.0, id, Tab::Webhooks))
            @match note {
                WebhooksNote::Secret(wh) => {
                    section.created aria-labelledby="secret-h" role="status" {
                        h2 #secret-h { "The signing secret of " (wh.url) }
                        p { "Copy it now: it is not shown again. Deliveries are signed with it (Standard Webhooks)." }
                        input #new-secret type="text" readonly value=(wh.secret.as_deref().unwrap_or_default()) aria-label="the endpoint's signing secret" size="60";
                    }
                }
                WebhooksNote::Refused(msg) => { p.error #webhook-error role="alert" { (msg) } }
                WebhooksNote::None => {}
            }
            @if list.webhooks.is_empty() {
                p { "No webhook endpoints." }
            } @else {
                div.scroll tabindex="0" {
                    table {
                        caption { "Webhook endpoints" }
                        thead { tr {
                            th scope="col" { "URL" } th scope="col" { "Events" } th scope="col" { "Format" } th scope="col" { "Enabled" } th scope="col" { "Deliveries" }
                            @if w.can_operate() { th scope="col" { span.visually-hidden { "Actions" } } }
                        } }
                        tbody {
                            @for wh in &list.webhooks {
                                tr {
                                    td.text { (wh.url) }
                                    td { @if wh.events.is_empty() { "all" } @else { (wh.events.join(", ")) } }
                                    td { (wh.format.as_str()) }
                                    td {
                                        @if wh.enabled { "yes" } @else { "no" @if let Some(r) = &wh.disabled_reason { " (" (r) ")" } }
                                    }
                                    td { a href={ "/i/" (id) "/webhooks/" (wh.id) } { "Delivery log" } }
                                    @if w.can_operate() {
                                        td.row-actions {
                                            (post(&format!("/i/{id}/webhooks/{}/{}", wh.id, if wh.enabled { "disable" } else { "enable" }), if wh.enabled { "Disable" } else { "Enable" }, csrf))
                                            (post(&format!("/i/{id}/webhooks/{}/rotate", wh.id), "Rotate secret", csrf))
                                            (post(&format!("/i/{id}/webhooks/{}/delete", wh.id), "Delete", csrf))
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if w.can_operate() {
                details.settings open[matches!(note, WebhooksNote::Refused(_))] {
                    summary { "Add an endpoint" }
                    form method="post" action={ "/i/" (id) "/webhooks" } {
                        input type="hidden" name="csrf" value=(csrf);
                        label for="wh-url" { "URL (http or https, a public address)" }
                        input #wh-url type="url" name="url" required maxlength="2048" autocomplete="off";
                        label for="wh-events" { "Event types, comma-separated (empty: all)" }
                        input #wh-events type="text" name="events" maxlength="2048" list="event-types" autocomplete="off";
                        datalist #event-types { @for t in shared::events::EVENT_TYPES { option value=(t) {} } }
                        label for="wh-format" { "Payloads" }
                        select #wh-format name="format" {
                            option value="paceline" { "paceline (signed envelope)" }
                            option value="evolution" { "evolution (Evolution API v2's)" }
                        }
                        button type="submit" { "Add" }
                    }
                }
            }
        },
    )
}

/// A one-button form.
fn post(action: &str, label: &str, csrf: &str) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" { (label) }
        }
    }
}

/// An endpoint's delivery log, newest first.
/// What a delivery log page was narrowed to (as the form names them).
pub struct LogFilter<'a> {
    pub state: &'a str,
    pub event: &'a str,
    /// `hour`, `day`, `week` or empty.
    pub since: &'a str,
}

pub fn deliveries(
    who: (&Who, &str),
    id: &str,
    webhook: &str,
    page: &DeliveryListOut,
    f: &LogFilter<'_>,
    can_resend: bool,
) -> Markup {
    let (_, csrf) = who;
    let here = format!("/i/{id}/webhooks/{webhook}");
    layout(
        "Delivery log",
        Some(who),
        html! {
            h1 { "Delivery log" }
            (tabs(who.0, id, Tab::Webhooks))
            form.filters method="get" action=(here) role="search" {
                div {
                    label for="log-state" { "State" }
                    select #log-state name="state" {
                        @for (v, label) in [("", "any"), ("pending", "pending"), ("succeeded", "succeeded"), ("failed", "failed")] {
                            option value=(v) selected[f.state == v] { (label) }
                        }
                    }
                }
                div {
                    label for="log-event" { "Event type" }
                    input #log-event name="event" value=(f.event) maxlength="64" list="event-types" autocomplete="off";
                    datalist #event-types { @for t in shared::events::EVENT_TYPES { option value=(t) {} } }
                }
                div {
                    label for="log-since" { "Made in" }
                    select #log-since name="since" {
                        @for (v, label) in [("", "any time"), ("hour", "the last hour"), ("day", "the last day"), ("week", "the last 7 days")] {
                            option value=(v) selected[f.since == v] { (label) }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            @if page.deliveries.is_empty() {
                p { "No delivery matches." }
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
                p { a rel="next" href=(super::chats::with_cursor(&narrowed(&here, f), next)) { "Older deliveries" } }
            }
        },
    )
}

/// The log's address with its filters (the next page keeps them).
fn narrowed(here: &str, f: &LogFilter<'_>) -> String {
    let mut u = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [("state", f.state), ("event", f.event), ("since", f.since)] {
        if !v.is_empty() {
            u.append_pair(k, v);
        }
    }
    let q = u.finish();
    if q.is_empty() {
        here.to_string()
    } else {
        format!("{here}?{q}")
    }
}
