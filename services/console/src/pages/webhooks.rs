//! An instance's webhook endpoints; an endpoint's page (its edit form and its delivery
//! log); a delivery's request and attempts, with a resend for a failed delivery.

use domain::webhooks::{DeliveryDetailOut, DeliveryListOut, WebhookListOut, WebhookOut};
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
                        (endpoint_fields(None))
                        button type="submit" { "Add" }
                    }
                }
            }
        },
    )
}

/// An endpoint's fields: empty (a new one) or as `hook` has them.
fn endpoint_fields(hook: Option<&WebhookOut>) -> Markup {
    let format = hook.map_or("paceline", |h| h.format.as_str());
    html! {
        label for="wh-url" { "URL (http or https, a public address)" }
        input #wh-url type="url" name="url" required maxlength="2048" autocomplete="off" value=(hook.map_or("", |h| h.url.as_str()));
        // The URL as shown (its credentials masked): sent back unchanged, it is left out of
        // the edit, so saving other fields keeps the credentials.
        @if let Some(h) = hook { input type="hidden" name="url_shown" value=(h.url); }
        label for="wh-events" { "Event types, comma-separated (empty: all)" }
        input #wh-events type="text" name="events" maxlength="2048" list="event-types" autocomplete="off" value=(hook.map(|h| h.events.join(", ")).unwrap_or_default());
        datalist #event-types { @for t in shared::events::EVENT_TYPES { option value=(t) {} } }
        label for="wh-format" { "Payloads" }
        select #wh-format name="format" {
            option value="paceline" selected[format == "paceline"] { "paceline (signed envelope)" }
            option value="evolution" selected[format == "evolution"] { "evolution (Evolution API v2's)" }
        }
    }
}

/// A delivery: what it is, the request its latest attempt made, and each attempt with the
/// endpoint's answer; a Resend when it failed and the token may.
pub fn delivery(who: (&Who, &str), (id, webhook): (&str, &str), d: &DeliveryDetailOut) -> Markup {
    let (w, csrf) = who;
    let o = &d.delivery;
    layout(
        "Delivery",
        Some(who),
        html! {
            h1 { "Delivery of " (o.event_type) }
            (tabs(w, id, Tab::Webhooks))
            p { a href={ "/i/" (id) "/webhooks/" (webhook) } { "Back to the endpoint's log" } }
            dl.facts #delivery {
                dt { "State" } dd { span class={ "state state-" (o.state) } { (o.state) } }
                dt { "Event" } dd { code { (o.event_id) } }
                dt { "Created" } dd { (o.created_at.format("%Y-%m-%d %H:%M:%S UTC")) }
                dt { "Attempts" } dd { (o.attempts) }
                @if let Some(at) = o.next_attempt_at { dt { "Next attempt" } dd { (at.format("%Y-%m-%d %H:%M:%S UTC")) } }
                @if let Some(at) = o.delivered_at { dt { "Delivered" } dd { (at.format("%Y-%m-%d %H:%M:%S UTC")) } }
            }
            @if w.can_operate() && o.state == DeliveryState::Failed {
                form.inline method="post" action={ "/i/" (id) "/webhooks/" (webhook) "/deliveries/" (o.id) "/resend" } {
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" { "Resend" }
                }
            }
            h2 { "Request" }
            @if let Some(r) = &d.request {
                p { code { (r.method) " " (r.url) } }
                ul.headers aria-label="request headers" {
                    @for (k, v) in &r.headers { li { code { (k) ": " (v) } } }
                    li { code { "webhook-signature: " } "(not kept)" }
                }
                pre #request-body tabindex="0" { (pretty(&r.body, r.truncated)) }
                @if r.truncated { p { "The first 4 KiB of " (r.bytes) " bytes." } }
            } @else {
                p { "No attempt kept yet." }
            }
            h2 { "Attempts" }
            @if d.attempt_log.is_empty() {
                p { "None kept." }
            } @else {
                ol #attempts reversed {
                    @for a in d.attempt_log.iter().rev() {
                        li {
                            p {
                                (a.at.format("%Y-%m-%d %H:%M:%S UTC")) ": "
                                @if let Some(s) = a.status { "answered " strong { (s) } } @else { "no answer" }
                                @if let Some(ms) = a.latency_ms { " in " (ms) " ms" }
                                @if let Some(e) = &a.error { " (" (e) ")" }
                            }
                            @if let Some(body) = &a.response {
                                details { summary { "The answer's start" } pre tabindex="0" { (body) } }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// A body as sent, indented when it is whole JSON.
fn pretty(body: &str, truncated: bool) -> String {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) if !truncated => serde_json::to_string_pretty(&v).unwrap_or_else(|_| body.to_string()),
        _ => body.to_string(),
    }
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

/// What a delivery log page was narrowed to (as the form names them).
pub struct LogFilter<'a> {
    pub state: &'a str,
    pub event: &'a str,
    /// `hour`, `day`, `week` or empty.
    pub since: &'a str,
}

/// An endpoint's page: the endpoint, a page of its log, and the API's refusal of its edit
/// form (if any).
pub struct EndpointPage<'a> {
    pub id: &'a str,
    pub hook: &'a WebhookOut,
    pub log: &'a DeliveryListOut,
    pub filter: &'a LogFilter<'a>,
    pub refusal: Option<&'a str>,
}

/// An endpoint: what it is (and its edit form, for a token that may manage it), then its
/// delivery log, newest first.
pub fn endpoint(who: (&Who, &str), p: &EndpointPage<'_>) -> Markup {
    let (w, csrf) = who;
    let (id, f, page, hook) = (p.id, p.filter, p.log, p.hook);
    let webhook = hook.id.as_str();
    let can_resend = w.can_operate();
    let here = format!("/i/{id}/webhooks/{webhook}");
    layout(
        "Webhook endpoint",
        Some(who),
        html! {
            h1 { "Webhook endpoint" }
            (tabs(who.0, id, Tab::Webhooks))
            dl.facts #endpoint {
                dt { "URL" } dd.text { (hook.url) }
                dt { "Events" } dd { @if hook.events.is_empty() { "all" } @else { (hook.events.join(", ")) } }
                dt { "Format" } dd { (hook.format.as_str()) }
                dt { "Enabled" } dd { @if hook.enabled { "yes" } @else { "no" @if let Some(r) = &hook.disabled_reason { " (" (r) ")" } } }
            }
            @if w.can_operate() {
                details.settings open[p.refusal.is_some()] {
                    summary { "Edit this endpoint" }
                    @if let Some(msg) = p.refusal { p.error #webhook-error role="alert" { (msg) } }
                    form method="post" action={ (here) "/edit" } {
                        input type="hidden" name="csrf" value=(csrf);
                        (endpoint_fields(Some(hook)))
                        button type="submit" { "Save" }
                    }
                }
            }
            h2 { "Delivery log" }
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
                                    td { a href={ (here) "/deliveries/" (d.id) } { (d.created_at.format("%Y-%m-%d %H:%M:%S UTC")) } }
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
