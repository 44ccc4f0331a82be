//! An instance's ban risk: the score now, each signal's part of it, what to do, the
//! pacing it runs at, and the queue's pause with pause and resume.

use domain::instances::InstanceOut;
use domain::risk::RiskOut;
use maud::{html, Markup};

use super::{layout, tabs, Tab};
use crate::session::Who;

pub fn risk(who: (&Who, &str), i: &InstanceOut, r: &RiskOut, error: Option<&str>) -> Markup {
    let (w, csrf) = who;
    let id = i.id.to_string();
    layout(
        &format!("{}: risk", i.name),
        Some(who),
        html! {
            h1 { (i.name) }
            (tabs(w, &id, Tab::Risk))
            @if let Some(e) = error { p.error role="alert" { (e) } }
            dl.facts {
                dt { "Ban risk" } dd #risk-level { span class={ "state risk-" (r.level.as_str()) } { (r.level.as_str()) } " (" (format!("{:.0}", r.score)) " of 100)" }
                dt { "What to do" } dd { (r.recommendation) }
                @if let Some(p) = &i.effective_pacing {
                    dt { "Pacing in force" } dd {
                        "one message every " (p.min_interval_ms) " ms, at most " (p.max_per_minute) " a minute"
                        @if p.first_contacts_held { "; first contacts wait" }
                    }
                }
                dt { "Queue" } dd #queue-state {
                    @match &i.queue_paused {
                        Some(p) => { "paused (" (p.reason.replace('_', " ")) ") since " (p.since.format("%Y-%m-%d %H:%M UTC")) }
                        None => "sending",
                    }
                }
            }
            @if w.can_operate() {
                section.actions aria-label="queue actions" {
                    form.inline method="post" action={ "/i/" (id) "/risk/" (if i.queue_paused.is_some() { "resume" } else { "pause" }) } {
                        input type="hidden" name="csrf" value=(csrf);
                        button type="submit" { (if i.queue_paused.is_some() { "Resume the queue" } else { "Pause the queue" }) }
                    }
                }
            }
            div.scroll tabindex="0" {
                table {
                    caption { "Signals, largest part first" }
                    thead { tr { th scope="col" { "Signal" } th scope="col" { "Value" } th scope="col" { "Points" } } }
                    tbody {
                        @for c in &r.contributions {
                            tr {
                                td { (c.signal.replace('_', " ")) }
                                td { (format!("{:.2}", c.value)) }
                                td { (format!("{:.1}", c.points)) }
                            }
                        }
                    }
                }
            }
            p.hint { "Computed " (r.computed_at.format("%Y-%m-%d %H:%M:%S UTC")) "; docs/ban-risk.md explains each signal." }
        },
    )
}
