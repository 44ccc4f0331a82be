//! The pages, rendered on the server (maud: the templates are Rust, checked by the
//! compiler, and every value is escaped). Each takes what it shows; the routes fetch it.

use domain::instances::{InstanceListOut, InstanceOut};
use domain::pairing::QrOut;
use maud::{html, Markup, DOCTYPE};
use shared::db::instances::InstanceState;

use crate::session::Who;

/// The states the fleet filters by.
const STATES: [&str; 6] = ["disconnected", "connecting", "qr_pending", "connected", "logged_out", "banned"];

/// Every page: the header (who is signed in, sign-out) and `body`.
pub fn layout(title: &str, who: Option<(&Who, &str)>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · paceline console" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                header {
                    a.brand href="/" { "paceline" }
                    @if let Some((who, csrf)) = who {
                        nav aria-label="main" {
                            @if who.is_admin() { a href="/fleet" { "Fleet" } }
                            @else if let Some(id) = &who.instance_id {
                                a href={ "/i/" (id) } { (who.instance_name.as_deref().unwrap_or("Instance")) }
                            }
                        }
                        span.who { (signed_in_as(who)) }
                        form.inline method="post" action="/sign-out" {
                            input type="hidden" name="csrf" value=(csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

fn signed_in_as(who: &Who) -> String {
    match (who.kind.as_str(), who.scope.as_deref()) {
        ("admin", _) => "admin".into(),
        ("api_key", Some(scope)) => format!("API key ({})", scope.replace('_', " ")),
        _ => "instance token".into(),
    }
}

/// The sign-in form: one token field.
pub fn sign_in(csrf: &str, error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            h1 { "Sign in" }
            p { "Sign in with the admin token, an instance's token or an API key. It stays in a sealed cookie and is never shown again." }
            @if let Some(e) = error { p.error role="alert" { (e) } }
            form method="post" action="/" autocomplete="off" {
                input type="hidden" name="csrf" value=(csrf);
                label for="token" { "Token" }
                input #token type="password" name="token" required maxlength="512" autocomplete="off";
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// A refusal or an error, with the API's own message.
pub fn problem(who: Option<(&Who, &str)>, title: &str, message: &str) -> Markup {
    layout(
        title,
        who,
        html! {
            h1 { (title) }
            p.error role="alert" { (message) }
            p { a href="/" { "Back" } }
        },
    )
}

/// The filters a fleet page was asked for.
pub struct FleetFilter<'a> {
    pub state: &'a str,
    pub tag: &'a str,
}

/// The fleet: every instance, filtered, a page at a time.
pub fn fleet(who: (&Who, &str), f: &FleetFilter<'_>, page: &InstanceListOut) -> Markup {
    layout(
        "Fleet",
        Some(who),
        html! {
            h1 { "Fleet" }
            form.filters method="get" action="/fleet" role="search" {
                label for="state" { "State" }
                select #state name="state" {
                    option value="" selected[f.state.is_empty()] { "any" }
                    @for s in STATES { option value=(s) selected[f.state == s] { (s.replace('_', " ")) } }
                }
                label for="tag" { "Tag" }
                input #tag name="tag" value=(f.tag) maxlength="64";
                button type="submit" { "Filter" }
            }
            @if page.instances.is_empty() {
                p { "No instance matches." }
            } @else {
                div.scroll {
                    table {
                        caption { "Instances" }
                        thead { tr { th scope="col" { "Name" } th scope="col" { "State" } th scope="col" { "Network" } th scope="col" { "Tags" } th scope="col" { "Risk" } th scope="col" { "Updated" } } }
                        tbody {
                            @for i in &page.instances {
                                tr {
                                    td { a href={ "/i/" (i.id) } { (i.name) } }
                                    td { (state_badge(i.state)) }
                                    td { (i.network.as_deref().unwrap_or("default")) }
                                    td { (i.tags.join(", ")) }
                                    td { (i.risk.as_ref().map_or("—", |r| r.level.as_str())) }
                                    td { (i.updated_at.format("%Y-%m-%d %H:%M UTC")) }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = &page.next_cursor {
                p { a rel="next" href=(next_page(f, next)) { "Next page" } }
            }
        },
    )
}

fn next_page(f: &FleetFilter<'_>, cursor: &str) -> String {
    let mut u = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [("state", f.state), ("tag", f.tag), ("cursor", cursor)] {
        if !v.is_empty() {
            u.append_pair(k, v);
        }
    }
    format!("/fleet?{}", u.finish())
}

fn state_name(s: InstanceState) -> String {
    serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn state_badge(s: InstanceState) -> Markup {
    let name = state_name(s);
    html! { span class={ "state state-" (name) } { (name.replace('_', " ")) } }
}

/// One instance: its state, pairing while it shows a QR code, and what the token may do.
pub fn instance(who: (&Who, &str), i: &InstanceOut, qr: Option<&QrOut>, error: Option<&str>) -> Markup {
    let (w, csrf) = who;
    let id = i.id.to_string();
    layout(
        &i.name,
        Some(who),
        html! {
            h1 { (i.name) }
            @if let Some(e) = error { p.error role="alert" { (e) } }
            dl.facts {
                dt { "State" } dd #state data-state=(state_name(i.state)) data-poll={ "/i/" (id) "/qr.json" } aria-live="polite" { (state_badge(i.state)) }
                @if let Some(r) = &i.state_reason { dt { "Why" } dd { (r) } }
                dt { "Phone" } dd { (i.phone.as_deref().unwrap_or("not paired")) }
                dt { "Network" } dd { (i.network.as_deref().unwrap_or("default")) }
                dt { "Tags" } dd { (if i.tags.is_empty() { "none".to_string() } else { i.tags.join(", ") }) }
                dt { "Queue" } dd { (i.queue_depth.unwrap_or(0)) " waiting" }
                dt { "Pacing" } dd { "one message every " (i.min_interval_ms) " ms, at most " (i.max_per_minute) " a minute" }
                @if let Some(r) = &i.risk { dt { "Ban risk" } dd { (r.level) " (" (format!("{:.0}", r.score)) ")" } }
            }
            @if matches!(i.state, InstanceState::QrPending | InstanceState::Connecting) || qr.is_some() {
                section.pairing aria-labelledby="pair-h" {
                    h2 #pair-h { "Pair" }
                    p { "On the phone: WhatsApp → Linked devices → Link a device, then scan this code. It refreshes by itself." }
                    @match qr {
                        Some(q) => img #qr src=(q.base64) data-code=(q.code) alt="QR code to link the phone" width="264" height="264";
                        None => p #qr data-code="" { "Waiting for the network's code…" },
                    }
                }
            }
            @if w.can_operate() {
                section.actions aria-label="actions" {
                    @if matches!(i.state, InstanceState::Disconnected | InstanceState::LoggedOut) {
                        (action(&id, "connect", "Connect", csrf))
                    }
                    @if matches!(i.state, InstanceState::Connected | InstanceState::Connecting | InstanceState::QrPending) {
                        (action(&id, "logout", "Log out", csrf))
                    }
                }
            }
        },
    )
}

fn action(id: &str, what: &str, label: &str, csrf: &str) -> Markup {
    html! {
        form.inline method="post" action={ "/i/" (id) "/" (what) } {
            input type="hidden" name="csrf" value=(csrf);
            button type="submit" { (label) }
        }
    }
}

/// A page that is not there.
pub fn not_found() -> Markup {
    layout("Not found", None, html! { h1 { "Not found" } p { a href="/" { "Back" } } })
}

/// The stylesheet.
pub const CSS: &str = include_str!("assets/console.css");
/// The script: refreshes the QR code while pairing.
pub const JS: &str = include_str!("assets/console.js");
