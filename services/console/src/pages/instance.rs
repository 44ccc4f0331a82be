//! One instance: its state, pairing while it shows a QR code, and what the token may do.

use domain::instances::InstanceOut;
use domain::pairing::QrOut;
use maud::{html, Markup};
use shared::db::instances::InstanceState;

use super::{layout, state_badge, tabs, Tab};
use crate::session::Who;

/// One instance: its state, pairing while it shows a QR code, and what the token may do.
pub fn instance(who: (&Who, &str), i: &InstanceOut, qr: Option<&QrOut>, error: Option<&str>) -> Markup {
    let (w, csrf) = who;
    let id = i.id.to_string();
    layout(
        &i.name,
        Some(who),
        html! {
            h1 { (i.name) }
            (tabs(who.0, &id, Tab::Overview))
            @if let Some(e) = error { p.error role="alert" { (e) } }
            dl.facts {
                dt { "State" } dd #state data-state=(i.state.as_str()) data-poll={ "/i/" (id) "/qr.json" } aria-live="polite" { (state_badge(i.state)) }
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
