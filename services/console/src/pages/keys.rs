//! An instance's API keys: listed (never their tokens), created (the token shown once,
//! on the answer to the form), revoked.

use domain::keys::{KeyCreatedOut, KeyListOut};
use domain::pairing::LinkOut;
use maud::{html, Markup};

use super::{layout, tabs, Tab};
use crate::session::Who;

/// What the keys page shows beside the list: a key just created, or the API's refusal
/// of the form.
pub enum KeysNote<'a> {
    None,
    Created(&'a KeyCreatedOut),
    Refused(&'a str),
    /// A hosted pairing link just made (the admin's).
    Link(&'a LinkOut),
    /// The instance's pairing links were revoked.
    LinksRevoked,
}

pub fn keys(who: (&Who, &str), id: &str, name: &str, list: &KeyListOut, note: KeysNote<'_>) -> Markup {
    let (w, csrf) = who;
    layout(
        &format!("{name}: API keys"),
        Some(who),
        html! {
            h1 { (name) }
            (tabs(who.0, id, Tab::Keys))
            @match note {
                KeysNote::Created(k) => {
                    section.created aria-labelledby="created-h" role="status" {
                        h2 #created-h { "Key “" (k.key.name) "” created" }
                        p { "Copy its token now: it is not shown again." }
                        input #new-token type="text" readonly value=(k.token) aria-label="the new key's token" size="60";
                    }
                }
                KeysNote::Refused(msg) => { p.error role="alert" { (msg) } }
                KeysNote::Link(l) => {
                    section.created aria-labelledby="link-h" role="status" {
                        h2 #link-h { "Pairing link made" }
                        p { "Send it to whoever pairs the phone: the page behind it shows the QR code, and no token. It works once, until " (l.expires_at.format("%Y-%m-%d %H:%M UTC")) "." }
                        input #new-link type="text" readonly value=(l.url) aria-label="the pairing link" size="60";
                    }
                }
                KeysNote::LinksRevoked => { p #links-revoked role="status" { "Every pairing link of this instance is revoked." } }
                KeysNote::None => {}
            }
            @if list.keys.is_empty() {
                p { "No API keys." }
            } @else {
                div.scroll tabindex="0" {
                    table {
                        caption { "API keys" }
                        thead { tr { th scope="col" { "Name" } th scope="col" { "Scope" } th scope="col" { "Created" } th scope="col" { "Last used" } th scope="col" { "Expires" } th scope="col" { span.visually-hidden { "Actions" } } } }
                        tbody {
                            @for k in &list.keys {
                                tr {
                                    td { (k.name) }
                                    td { (k.scope.as_str().replace('_', " ")) }
                                    td { (k.created_at.format("%Y-%m-%d %H:%M UTC")) }
                                    td { (k.last_used_at.map_or("never".to_string(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())) }
                                    td { (k.expires_at.map_or("never".to_string(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())) }
                                    td {
                                        @if w.can_operate() {
                                            form.inline method="post" action={ "/i/" (id) "/keys/" (k.id) "/revoke" } {
                                                input type="hidden" name="csrf" value=(csrf);
                                                button type="submit" aria-label={ "Revoke " (k.name) } { "Revoke" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if w.can_operate() {
                section aria-labelledby="new-h" {
                    h2 #new-h { "New key" }
                    form method="post" action={ "/i/" (id) "/keys" } {
                        input type="hidden" name="csrf" value=(csrf);
                        label for="key-name" { "Name" }
                        input #key-name name="name" required maxlength="64";
                        label for="key-scope" { "Scope" }
                        select #key-scope name="scope" {
                            option value="read_only" { "read only" }
                            option value="send_only" { "send only" }
                        }
                        button type="submit" { "Create" }
                    }
                }
            }
            @if w.is_admin() {
                section aria-labelledby="links-h" {
                    h2 #links-h { "Hosted pairing links" }
                    p { "A link to a page of this server where a customer pairs the phone without any token." }
                    form.inline method="post" action={ "/i/" (id) "/links" } {
                        input type="hidden" name="csrf" value=(csrf);
                        label for="link-ttl" { "Works for" }
                        select #link-ttl name="expires_in" {
                            option value="1h" { "1 hour" }
                            option value="24h" { "1 day" }
                            option value="7d" { "7 days" }
                        }
                        button type="submit" { "Make a link" }
                    }
                    form.inline method="post" action={ "/i/" (id) "/links/revoke" } {
                        input type="hidden" name="csrf" value=(csrf);
                        button type="submit" { "Revoke every link" }
                    }
                }
            }
        },
    )
}
