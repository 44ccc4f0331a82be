//! One instance: its state, pairing while it shows a QR code (or with a phone pairing
//! code), what the token may do, its settings with the API's refusals at their fields, and
//! its deletion behind a typed confirmation.

use domain::instances::InstanceOut;
use domain::pairing::QrOut;
use domain::states::StateHistoryOut;
use maud::{html, Markup};
use shared::db::instances::InstanceState;

use super::{layout, state_badge, tabs, Tab};
use crate::session::Who;
use crate::settings::{FieldError, SettingsForm};

/// What an instance's page shows besides the instance: the answer to its last form.
#[derive(Default)]
pub struct InstanceNote<'a> {
    /// A refusal of an action, shown at the top.
    pub error: Option<&'a str>,
    /// The settings form as typed, with the field the API refused (else as stored).
    pub settings: Option<(&'a SettingsForm, &'a FieldError)>,
    /// A phone pairing code to enter on the phone, or why there is none.
    pub pairing_code: Option<Result<&'a str, &'a str>>,
    /// Why the deletion was refused.
    pub delete_error: Option<&'a str>,
}

pub fn instance(
    who: (&Who, &str),
    i: &InstanceOut,
    qr: Option<&QrOut>,
    states: Option<&StateHistoryOut>,
    note: &InstanceNote<'_>,
) -> Markup {
    let (w, csrf) = who;
    let id = i.id.to_string();
    let pairing = matches!(i.state, InstanceState::QrPending | InstanceState::Connecting) || qr.is_some();
    layout(
        &i.name,
        Some(who),
        html! {
            h1 { (i.name) }
            (tabs(w, &id, Tab::Overview))
            @if let Some(e) = note.error { p.error role="alert" { (e) } }
            dl.facts {
                dt { "State" } dd #state data-state=(i.state.as_str()) data-poll={ "/i/" (id) "/qr.json" } aria-live="polite" { (state_badge(i.state)) }
                @if let Some(r) = &i.state_reason { dt { "Why" } dd { (r) } }
                dt { "Phone" } dd { (i.phone.as_deref().unwrap_or("not paired")) }
                dt { "Network" } dd { (i.network.as_deref().unwrap_or("default")) }
                dt { "Tags" } dd { (if i.tags.is_empty() { "none".to_string() } else { i.tags.join(", ") }) }
                dt { "Queue" } dd { (i.queue_depth.unwrap_or(0)) " waiting" @if i.queue_paused.is_some() { " (paused)" } }
                dt { "Pacing" } dd { "one message every " (i.min_interval_ms) " ms, at most " (i.max_per_minute) " a minute" }
                @if let Some(r) = &i.risk { dt { "Ban risk" } dd { (r.level) " (" (format!("{:.0}", r.score)) ")" } }
                dt { "Last change" } dd { (i.updated_at.format("%Y-%m-%d %H:%M:%S UTC")) }
            }
            @if pairing {
                section.pairing aria-labelledby="pair-h" {
                    h2 #pair-h { "Pair" }
                    p { "On the phone: WhatsApp → Linked devices → Link a device, then scan this code. It refreshes by itself." }
                    @match qr {
                        Some(q) => img #qr src=(q.base64) data-code=(q.code) alt="QR code to link the phone" width="264" height="264";
                        None => p #qr data-code="" { "Waiting for the network's code…" },
                    }
                    @if w.can_operate() { (pairing_code_form(&id, csrf, note.pairing_code)) }
                }
            }
            @if let Some(h) = states.filter(|h| !h.changes.is_empty()) {
                details.history {
                    summary { "State history (latest " (h.changes.len()) ")" }
                    ol #state-history {
                        @for ch in &h.changes {
                            li {
                                (ch.at.format("%Y-%m-%d %H:%M:%S UTC")) ": " (ch.previous_state.replace('_', " ")) " → " strong { (ch.state.replace('_', " ")) }
                                @if let Some(r) = &ch.reason { " (" (r) ")" }
                            }
                        }
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
                (settings_form(i, w.is_admin(), csrf, note.settings))
                (delete_form(i, csrf, note.delete_error))
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

fn pairing_code_form(id: &str, csrf: &str, answer: Option<Result<&str, &str>>) -> Markup {
    html! {
        details open[answer.is_some()] {
            summary { "Link with a phone number instead" }
            @match answer {
                Some(Ok(code)) => p { "On the phone: Linked devices → Link with phone number, then enter " strong #pairing-code { (code) } "." },
                Some(Err(e)) => p.error #pairing-code-error role="alert" { (e) },
                None => {},
            }
            form method="post" action={ "/i/" (id) "/pairing-code" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="pair-phone" { "The phone's number, with its country code" }
                input #pair-phone type="tel" name="phone" required maxlength="16" autocomplete="off"
                    aria-describedby=[matches!(answer, Some(Err(_))).then_some("pairing-code-error")];
                button type="submit" { "Get a pairing code" }
            }
        }
    }
}

/// One input of the settings form, with the API's refusal below it when it is this one.
fn field(name: &str, label: &str, value: &str, kind: &str, error: Option<&FieldError>) -> Markup {
    let id = format!("set-{name}");
    let refused = error.filter(|(f, _)| f == name).map(|(_, m)| m.as_str());
    let hint = format!("{id}-error");
    html! {
        label for=(id) { (label) }
        input id=(id) type=(kind) name=(name) value=(value) maxlength="2048" autocomplete="off"
            aria-invalid=[refused.map(|_| "true")] aria-describedby=[refused.map(|_| hint.as_str())];
        @if let Some(m) = refused { p.error id=(hint) role="alert" { (m) } }
    }
}

fn settings_form(i: &InstanceOut, admin: bool, csrf: &str, typed: Option<(&SettingsForm, &FieldError)>) -> Markup {
    let stored = SettingsForm::of(i);
    let (f, error) = match typed {
        Some((f, e)) => (f, Some(e)),
        None => (&stored, None),
    };
    let window_refused = error.filter(|(name, _)| name == "send_window").map(|(_, m)| m.as_str());
    // A refusal of a field the form does not show (a lock, a policy) shows above it.
    let shown =
        ["name", "tags", "ip_allowlist", "min_interval_ms", "max_per_minute", "time_zone", "send_window", "proxy_url"];
    let other = error.filter(|(name, _)| !shown.contains(&name.as_str())).map(|(_, m)| m.as_str());
    html! {
        details.settings open[error.is_some()] {
            summary { "Settings" }
            @if let Some(m) = other { p.error role="alert" { (m) } }
            form method="post" action={ "/i/" (i.id) "/settings" } {
                input type="hidden" name="csrf" value=(csrf);
                (field("name", "Name (1-64 of A-Z, a-z, 0-9, _ and -)", &f.name, "text", error))
                (field("tags", "Tags, comma-separated", &f.tags, "text", error))
                (field("ip_allowlist", "IP allow-list (addresses or CIDRs; empty allows every address)", &f.ip_allowlist, "text", error))
                (field("min_interval_ms", "At least this many ms between messages", &f.min_interval_ms, "text", error))
                (field("max_per_minute", "At most this many messages a minute", &f.max_per_minute, "text", error))
                (field("time_zone", "Time zone of the send window (IANA, e.g. America/Sao_Paulo)", &f.time_zone, "text", error))
                fieldset aria-describedby=[window_refused.map(|_| "set-send_window-error")] {
                    legend { "Send window (empty: any time)" }
                    label for="set-window_start" { "Opens (HH:MM)" }
                    input #set-window_start type="text" name="window_start" value=(f.window_start) maxlength="5" placeholder="09:00";
                    label for="set-window_end" { "Closes (HH:MM)" }
                    input #set-window_end type="text" name="window_end" value=(f.window_end) maxlength="5" placeholder="18:00";
                    @if let Some(m) = window_refused { p.error #set-send_window-error role="alert" { (m) } }
                }
                @if admin {
                    (field("proxy_url", "Proxy URL (http, https, socks5; empty for none)", &f.proxy_url, "text", error))
                }
                button type="submit" { "Save settings" }
            }
        }
    }
}

fn delete_form(i: &InstanceOut, csrf: &str, error: Option<&str>) -> Markup {
    html! {
        details.danger open[error.is_some()] {
            summary { "Delete this instance" }
            p { "Deleting logs the instance out, drops its queue, chats, media and webhooks, and revokes its token and keys. It cannot be undone." }
            form method="post" action={ "/i/" (i.id) "/delete" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="confirm-name" { "Type the instance's name, " strong { (i.name) } ", to confirm" }
                input #confirm-name type="text" name="confirm" required maxlength="64" autocomplete="off"
                    aria-invalid=[error.map(|_| "true")] aria-describedby=[error.map(|_| "confirm-error")];
                @if let Some(e) = error { p.error #confirm-error role="alert" { (e) } }
                button.danger type="submit" { "Delete" }
            }
        }
    }
}
