//! The fleet: every instance (the admin's), filtered, a page at a time.

use domain::instances::InstanceListOut;
use maud::{html, Markup};

use super::{layout, state_badge};
use crate::session::Who;

/// The states the fleet filters by.
const STATES: [&str; 6] = ["disconnected", "connecting", "qr_pending", "connected", "logged_out", "banned"];

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
