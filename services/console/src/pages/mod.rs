//! The pages, rendered on the server (maud: the templates are Rust, checked by the
//! compiler, and every value is escaped). Each takes what it shows; the routes fetch it.

use maud::{html, Markup, DOCTYPE};
use shared::db::instances::InstanceState;

use crate::session::Who;

mod chats;
mod events;
mod fleet;
mod instance;
mod keys;
mod queue;
mod risk;
mod usage;
mod webhooks;

pub use chats::{chat, chats};
pub use events::events;
pub use fleet::{bulk_results, cluster, fleet, tag_run, FleetFilter, BULK};
pub use instance::{instance, InstanceNote};
pub use keys::{keys, KeysNote};
pub use queue::{queue, SendForm};
pub use risk::risk;
pub use usage::usage;
pub use webhooks::{delivery, endpoint, webhooks, EndpointPage, LogFilter, WebhooksNote};

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
                            @if who.is_admin() { a href="/fleet" { "Fleet" } a href="/cluster" { "Cluster" } }
                            @else if who.is_account() { a href="/fleet" { "Fleet" } }
                            @else if who.instance_id.is_some() {
                                a href=(who.home()) { (who.instance_name.as_deref().unwrap_or("Instance")) }
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
        ("account", _) => format!("account {}", who.account_name.as_deref().unwrap_or_default()),
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
            p { "Sign in with the admin token, an account's token, an instance's token or an API key. It stays in a sealed cookie and is never shown again." }
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

pub(crate) fn state_badge(s: InstanceState) -> Markup {
    let name = s.as_str();
    html! { span class={ "state state-" (name) } { (name.replace('_', " ")) } }
}

/// An instance's pages.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Queue,
    Chats,
    Webhooks,
    Events,
    Keys,
    Usage,
    Risk,
}

/// Who may open a tab: the owner's (API keys) only to the admin and the instance's token;
/// the queue to everyone (a `send_only` key sends from it); the rest to those who read.
fn tab_for(who: &Who, tab: Tab) -> bool {
    match tab {
        Tab::Keys => who.can_operate(),
        Tab::Queue => true,
        _ => who.can_read(),
    }
}

/// The links between an instance's pages that the token may open.
pub fn tabs(who: &Who, id: &str, on: Tab) -> Markup {
    const ALL: [(Tab, &str, &str); 8] = [
        (Tab::Overview, "", "Overview"),
        (Tab::Queue, "/queue", "Queue"),
        (Tab::Chats, "/chats", "Chats"),
        (Tab::Webhooks, "/webhooks", "Webhooks"),
        (Tab::Events, "/events", "Live events"),
        (Tab::Keys, "/keys", "API keys"),
        (Tab::Usage, "/usage", "Usage"),
        (Tab::Risk, "/risk", "Risk"),
    ];
    html! {
        nav.tabs aria-label="instance" {
            @for (tab, path, label) in ALL {
                @if tab_for(who, tab) {
                    a href={ "/i/" (id) (path) } aria-current=[(tab == on).then_some("page")] { (label) }
                }
            }
        }
    }
}

/// A page that is not there.
pub fn not_found() -> Markup {
    layout("Not found", None, html! { h1 { "Not found" } p { a href="/" { "Back" } } })
}

/// The stylesheet.
pub const CSS: &str = include_str!("../assets/console.css");
/// The script: refreshes the QR code while pairing.
pub const JS: &str = include_str!("../assets/console.js");
