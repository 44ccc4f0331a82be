//! The fleet (the admin's): counts by state, every instance filtered a page at a time with
//! its queue depth and the worker holding it, and bulk actions over the ones ticked; the
//! cluster page: the workers, the unleased, the webhook backlog and the slots.

use domain::bulk::BulkOut;
use domain::cluster::ClusterOut;
use domain::instances::InstanceListOut;
use maud::{html, Markup};
use shared::db::instances::InstanceState;

use super::{layout, state_badge};
use crate::session::Who;

const RISKS: [&str; 4] = ["low", "elevated", "high", "critical"];

/// The filters a fleet page was asked for.
pub struct FleetFilter<'a> {
    pub state: &'a str,
    pub tag: &'a str,
    pub name: &'a str,
    pub risk: &'a str,
}

/// The actions the fleet applies to many instances, with their labels.
pub const BULK: [(&str, &str); 5] = [
    ("connect", "Connect"),
    ("restart", "Restart (disconnect and connect again)"),
    ("logout", "Log out"),
    ("add_tag", "Add the tag below"),
    ("remove_tag", "Remove the tag below"),
];

/// A bulk form's action and the tag its tag actions take; `prefix` keeps ids apart.
fn bulk_fields(prefix: &str) -> Markup {
    html! {
        label for={ (prefix) "-action" } { "Action" }
        select id={ (prefix) "-action" } name="action" {
            @for (value, label) in BULK { option value=(value) { (label) } }
        }
        label for={ (prefix) "-value" } { "Tag (to add or remove)" }
        input id={ (prefix) "-value" } name="value" maxlength="64" autocomplete="off";
    }
}

/// The fleet, filtered, a page at a time: every instance for the admin (with bulk actions and the cluster's
/// counts), an account's own for its token (no bulk action: the bulk route is the
/// admin's).
pub fn fleet(who: (&Who, &str), f: &FleetFilter<'_>, page: &InstanceListOut, cluster: Option<&ClusterOut>) -> Markup {
    let (_, csrf) = who;
    layout(
        "Fleet",
        Some(who),
        html! {
            h1 { "Fleet" }
            @if let Some(c) = cluster {
                ul.counts aria-label="instances by state" {
                    li { a href="/fleet" { strong { (c.instances.total) } " in all" } }
                    @for (state, n) in &c.instances.by_state {
                        li { a href={ "/fleet?state=" (state) } { strong { (n) } " " (state.replace('_', " ")) } }
                    }
                    li { a href="/cluster" { strong { (c.instances.unleased) } " waiting for a worker" } }
                }
            }
            form.filters method="get" action="/fleet" role="search" {
                div { label for="name" { "Name" } input #name name="name" value=(f.name) maxlength="64"; }
                div {
                    label for="state" { "State" }
                    select #state name="state" {
                        option value="" selected[f.state.is_empty()] { "any" }
                        @for s in InstanceState::ALL { option value=(s.as_str()) selected[f.state == s.as_str()] { (s.as_str().replace('_', " ")) } }
                    }
                }
                div { label for="tag" { "Tag" } input #tag name="tag" value=(f.tag) maxlength="64"; }
                div {
                    label for="risk" { "Risk" }
                    select #risk name="risk" {
                        option value="" selected[f.risk.is_empty()] { "any" }
                        @for r in RISKS { option value=(r) selected[f.risk == r] { (r) } }
                    }
                }
                button type="submit" { "Filter" }
            }
            @if page.instances.is_empty() {
                p { "No instance matches." }
            } @else {
                form #bulk method="post" action="/fleet/bulk" {
                    input type="hidden" name="csrf" value=(csrf);
                    @let admin = who.0.is_admin();
                    div.scroll tabindex="0" {
                        table {
                            caption { "Instances" }
                            thead { tr {
                                @if admin { th scope="col" { span.visually-hidden { "Select" } } }
                                th scope="col" { "Name" } th scope="col" { "State" } th scope="col" { "Network" } th scope="col" { "Tags" }
                                th scope="col" { "Risk" } th scope="col" { "Queue" } th scope="col" { "Worker" } th scope="col" { "Last change" }
                            } }
                            tbody {
                                @for i in &page.instances {
                                    tr {
                                        @if admin {
                                            td {
                                                input type="checkbox" name="id" value=(i.id) aria-label={ "Select " (i.name) };
                                                input type="hidden" name="label" value={ (i.id) ":" (i.name) };
                                            }
                                        }
                                        td { a href={ "/i/" (i.id) } { (i.name) } }
                                        td { (state_badge(i.state)) }
                                        td { (i.network.as_deref().unwrap_or("default")) }
                                        td { (i.tags.join(", ")) }
                                        td { (i.risk.as_ref().map_or("—", |r| r.level.as_str())) }
                                        td { (i.queue_depth.unwrap_or(0)) }
                                        td { code { (i.worker.as_deref().unwrap_or("—")) } }
                                        td { (i.updated_at.format("%Y-%m-%d %H:%M UTC")) }
                                    }
                                }
                            }
                        }
                    }
                    @if admin { fieldset.bulk {
                        legend { "With the instances ticked" }
                        (bulk_fields("bulk"))
                        label.check { input type="checkbox" name="confirm" value="yes" required; " I confirm: this acts on every instance ticked" }
                        button type="submit" { "Apply" }
                    } }
                }
            }
            @if let Some(next) = &page.next_cursor {
                p { a rel="next" href=(next_page(f, next)) { "Next page" } }
            }
            @if !f.tag.is_empty() && who.0.is_admin() {
                form #bulk-tag method="post" action="/fleet/bulk/tag" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="tag" value=(f.tag);
                    fieldset.bulk {
                        legend { "With every instance tagged “" (f.tag) "”, on every page (in steps, with progress)" }
                        (bulk_fields("tag-run"))
                        label.check { input type="checkbox" name="confirm" value="yes" required; " I confirm: this acts on every instance with the tag" }
                        button type="submit" { "Start" }
                    }
                }
            }
        },
    )
}

/// A run over every instance with a tag, after a step: its progress, the step's
/// failures, and the form for the next step (sent by the page's script by itself).
pub fn tag_run(who: (&Who, &str), p: &crate::routes::TagProgress) -> Markup {
    let (_, csrf) = who;
    let done = p.succeeded + p.failed;
    let label =
        BULK.iter().find(|(a, _)| *a == p.action).map_or(p.action.as_str(), |(_, l)| l.trim_end_matches(" below"));
    layout(
        "Bulk action",
        Some(who),
        html! {
            h1 { "Every instance tagged “" (p.tag) "”" }
            p { "Action: " (label) @if !p.value.is_empty() { ": “" (p.value) "”" } }
            label for="run-progress" { "Instances done" }
            progress #run-progress max=(p.total.max(done)) value=(done) { (done) " of " (p.total) }
            p #run-summary role="status" {
                span #run-done { (done) } " of " (p.total) " done: " span #run-succeeded { (p.succeeded) } " succeeded, "
                span #run-failed { (p.failed) } " failed."
                @if p.next_cursor.is_none() { " Finished." }
            }
            h2 { "Failures" }
            ul #run-failures {
                @for (id, why) in &p.failures { li { a href={ "/i/" (id) } { (id) } ": " (why) } }
            }
            @if let Some(next) = &p.next_cursor {
                form #run-next method="post" action="/fleet/bulk/tag" {
                    @for (k, v) in [("csrf", csrf), ("action", p.action.as_str()), ("tag", p.tag.as_str()), ("value", p.value.as_str()), ("confirm", "yes"), ("cursor", next.as_str())] {
                        input type="hidden" name=(k) value=(v);
                    }
                    input type="hidden" name="total" value=(p.total);
                    input type="hidden" name="succeeded" value=(p.succeeded);
                    input type="hidden" name="failed" value=(p.failed);
                    button #run-continue type="submit" { "Continue with the next " (crate::routes::step(&p.action)) }
                    button #run-stop type="button" hidden { "Stop" }
                }
            }
            p { a href={ "/fleet?tag=" (url::form_urlencoded::byte_serialize(p.tag.as_bytes()).collect::<String>()) } { "Back to the fleet" } }
        },
    )
}

fn next_page(f: &FleetFilter<'_>, cursor: &str) -> String {
    let mut u = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [("name", f.name), ("state", f.state), ("tag", f.tag), ("risk", f.risk), ("cursor", cursor)] {
        if !v.is_empty() {
            u.append_pair(k, v);
        }
    }
    format!("/fleet?{}", u.finish())
}

/// The answer to a bulk action: each instance's result.
pub fn bulk_results(who: (&Who, &str), out: &BulkOut, names: &[(String, String)]) -> Markup {
    let name = |id: &str| names.iter().find(|(i, _)| i == id).map_or(id.to_string(), |(_, n)| n.clone());
    layout(
        "Bulk action",
        Some(who),
        html! {
            h1 { "Bulk action" }
            p #bulk-summary role="status" { (out.succeeded) " succeeded, " (out.failed) " failed." }
            div.scroll tabindex="0" {
                table {
                    caption { "Each instance's result" }
                    thead { tr { th scope="col" { "Instance" } th scope="col" { "Result" } } }
                    tbody {
                        @for r in &out.results {
                            tr {
                                td { a href={ "/i/" (r.id) } { (name(&r.id)) } }
                                td {
                                    @match &r.error {
                                        None => span.state.state-succeeded { "done" },
                                        Some(e) => { span.state.state-failed { "failed" } " " (e.message) },
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p { a href="/fleet" { "Back to the fleet" } }
        },
    )
}

/// The cluster: workers and what they hold, the instances no worker holds, the webhook
/// backlog, the large-body slots.
pub fn cluster(who: (&Who, &str), c: &ClusterOut) -> Markup {
    let i = &c.instances;
    let w = &c.webhooks;
    layout(
        "Cluster",
        Some(who),
        html! {
            h1 { "Cluster" }
            dl.facts {
                dt { "Instances" } dd { (i.total) " in all, " (i.running) " running, " strong #unleased { (i.unleased) } " held by no worker" }
                dt { "Webhook backlog" } dd #backlog {
                    (w.pending) " pending (" (w.due) " due now, " (w.retrying) " retrying)"
                    @if let Some(at) = w.oldest_pending_at { ", the oldest from " (at.format("%Y-%m-%d %H:%M:%S UTC")) }
                }
                dt { "Large-body slots" } dd { (c.large_body_slots.in_use) " of " (c.large_body_slots.capacity) " in use" }
            }
            @if c.workers.is_empty() {
                p.notice role="status" { "No live worker: no session runs." }
            } @else {
                div.scroll tabindex="0" {
                    table #workers {
                        caption { "Live workers, the most loaded first" }
                        thead { tr { th scope="col" { "Worker" } th scope="col" { "Instances held" } th scope="col" { "Last seen" } } }
                        tbody {
                            @for wk in &c.workers {
                                tr { td { code { (wk.id) } } td { (wk.instances) } td { (wk.last_seen_at.format("%H:%M:%S UTC")) } }
                            }
                        }
                    }
                }
            }
            p.hint { "Read " (c.computed_at.format("%Y-%m-%d %H:%M:%S UTC")) "; reload for the latest." }
        },
    )
}
