//! The admin's pages: the fleet (with counts by state, bulk actions over the instances
//! ticked, and runs over every instance with a tag, 100 at a time with their progress)
//! and the cluster.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use domain::bulk::BulkOut;
use domain::cluster::ClusterOut;
use domain::instances::InstanceListOut;
use serde::Deserialize;
use shared::ids::InstanceId;

use super::{forged, page, refused, to_sign_in};
use crate::pages::{self, FleetFilter, BULK};
use crate::session::{csrf_ok, Session};
use crate::Console;

/// The most instances one bulk form acts on (a fleet page shows 50).
const BULK_MAX: usize = 200;
/// Instances one step of a run over a tag acts on: 100 for tags (written at once); 16 for
/// actions that wait on workers (the API runs 16 at once, each within its RPC timeout),
/// so a step ends well inside the console's deadline on an API call.
pub fn step(action: &str) -> u32 {
    if matches!(action, "add_tag" | "remove_tag") {
        100
    } else {
        16
    }
}

/// The admin's session, or the answer for anyone else.
fn admin(c: &Console, headers: &HeaderMap) -> Result<Session, Box<Response>> {
    let Some(s) = c.sessions.read(headers) else { return Err(Box::new(to_sign_in(c, headers))) };
    if !s.who.is_admin() {
        let m =
            pages::problem(Some((&s.who, &s.csrf)), "Not allowed", "Only the admin sees the fleet and the cluster.");
        return Err(Box::new(page(c, &s, StatusCode::FORBIDDEN, m)));
    }
    Ok(s)
}

#[derive(Deserialize)]
pub struct FleetQuery {
    #[serde(default)]
    state: String,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    risk: String,
    #[serde(default)]
    cursor: String,
}

/// The session of a token that sees a fleet (the admin, an account's), or the answer
/// for anyone else.
fn fleet_session(c: &Console, headers: &HeaderMap) -> Result<Session, Box<Response>> {
    let Some(s) = c.sessions.read(headers) else { return Err(Box::new(to_sign_in(c, headers))) };
    if !s.who.sees_fleet() {
        let m = pages::problem(
            Some((&s.who, &s.csrf)),
            "Not allowed",
            "Only the admin and account tokens see a fleet; an instance's token sees its instance.",
        );
        return Err(Box::new(page(c, &s, StatusCode::FORBIDDEN, m)));
    }
    Ok(s)
}

/// The fleet (an account token's: its own instances), with the cluster's counts by
/// state at the top for the admin.
pub async fn fleet(State(c): State<Console>, headers: HeaderMap, Query(q): Query<FleetQuery>) -> Response {
    let s = match fleet_session(&c, &headers) {
        Ok(s) => s,
        Err(res) => return *res,
    };
    let query = [
        ("state", q.state.as_str()),
        ("tag", q.tag.as_str()),
        ("name", q.name.trim()),
        ("risk", q.risk.as_str()),
        ("cursor", q.cursor.as_str()),
        ("limit", "50"),
    ];
    let cluster = async {
        match s.who.is_admin() {
            true => c.api.get::<ClusterOut>(&s.token, "/v1/cluster", &[]).await.ok(),
            false => None,
        }
    };
    let (list, cluster) = tokio::join!(c.api.get::<InstanceListOut>(&s.token, "/v1/instances", &query), cluster);
    match list {
        Ok(list) => {
            let f = FleetFilter { state: &q.state, tag: &q.tag, name: q.name.trim(), risk: &q.risk };
            page(&c, &s, StatusCode::OK, pages::fleet((&s.who, &s.csrf), &f, &list, cluster.as_ref()))
        }
        Err(e) => refused(&c, &s, e),
    }
}

/// The cluster.
pub async fn cluster(State(c): State<Console>, headers: HeaderMap) -> Response {
    let s = match admin(&c, &headers) {
        Ok(s) => s,
        Err(res) => return *res,
    };
    match c.api.get::<ClusterOut>(&s.token, "/v1/cluster", &[]).await {
        Ok(out) => page(&c, &s, StatusCode::OK, pages::cluster((&s.who, &s.csrf), &out)),
        Err(e) => refused(&c, &s, e),
    }
}

/// Applies the action to the instances ticked (`POST /v1/instances/bulk`, each with its
/// own result), once confirmed.
pub async fn bulk(State(c): State<Console>, headers: HeaderMap, Form(f): Form<Vec<(String, String)>>) -> Response {
    let s = match admin(&c, &headers) {
        Ok(s) => s,
        Err(res) => return *res,
    };
    let field = |name: &str| f.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or_default();
    if !csrf_ok(&s.csrf, field("csrf")) {
        return forged(&c, &s);
    }
    let ids: Vec<&str> = f.iter().filter(|(k, _)| k == "id").map(|(_, v)| v.as_str()).collect();
    let action = field("action");
    if let Err(m) = bulk_checks(action, field("confirm")) {
        return bulk_refused(&c, &s, m);
    }
    if ids.is_empty() || ids.len() > BULK_MAX || ids.iter().any(|id| InstanceId::parse(id).is_err()) {
        return bulk_refused(&c, &s, "Tick between 1 and 200 instances of the fleet.");
    }
    let mut body = serde_json::json!({ "action": action, "ids": ids });
    with_value(&mut body, action, field("value"));
    match c.api.post_json::<BulkOut>(&s.token, "/v1/instances/bulk", &body).await {
        Ok(out) => {
            // The names, for the results: the fleet's form carries `id:name` of its rows.
            let names: Vec<(String, String)> = f
                .iter()
                .filter(|(k, _)| k == "label")
                .filter_map(|(_, v)| v.split_once(':'))
                .map(|(id, name)| (id.to_string(), name.to_string()))
                .collect();
            page(&c, &s, StatusCode::OK, pages::bulk_results((&s.who, &s.csrf), &out, &names))
        }
        Err(e) => refused(&c, &s, e),
    }
}

/// What every bulk form must carry: a known action, and the confirmation.
fn bulk_checks(action: &str, confirm: &str) -> Result<(), &'static str> {
    if confirm != "yes" {
        return Err("Tick the confirmation to apply an action to many instances.");
    }
    if !BULK.iter().any(|(a, _)| *a == action) {
        return Err("Choose an action.");
    }
    Ok(())
}

fn bulk_refused(c: &Console, s: &Session, m: &str) -> Response {
    page(c, s, StatusCode::BAD_REQUEST, pages::problem(Some((&s.who, &s.csrf)), "Nothing was done", m))
}

/// The tag the tag actions add or remove (the API checks it).
fn with_value(body: &mut serde_json::Value, action: &str, value: &str) {
    if matches!(action, "add_tag" | "remove_tag") {
        body["value"] = value.trim().into();
    }
}

/// A step of a run over every instance with a tag, as its form (or the page's script)
/// sends it: what was done so far rides along, so any console pod serves the next step.
#[derive(Deserialize)]
pub struct TagRun {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    value: String,
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    cursor: String,
    /// Empty on the first step (then counted).
    #[serde(default)]
    total: String,
    #[serde(default)]
    succeeded: u64,
    #[serde(default)]
    failed: u64,
}

/// Where a run over a tag stands after a step.
#[derive(Debug, serde::Serialize)]
pub struct TagProgress {
    pub action: String,
    pub tag: String,
    pub value: String,
    pub total: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// The next step's cursor; absent when the run is done.
    pub next_cursor: Option<String>,
    /// This step's failures: (instance, why).
    pub failures: Vec<(String, String)>,
}

/// One step (100 instances) of a run over every instance with a tag. The page answers
/// with the progress and a form for the next step, which its script sends by itself
/// (asking for JSON) until the run is done.
pub async fn bulk_tag(State(c): State<Console>, headers: HeaderMap, Form(f): Form<TagRun>) -> Response {
    let s = match admin(&c, &headers) {
        Ok(s) => s,
        Err(res) => return *res,
    };
    if !csrf_ok(&s.csrf, &f.csrf) {
        return forged(&c, &s);
    }
    if let Err(m) = bulk_checks(&f.action, &f.confirm) {
        return bulk_refused(&c, &s, m);
    }
    let tag = f.tag.trim();
    if tag.is_empty() {
        return bulk_refused(&c, &s, "Filter the fleet by a tag first.");
    }
    let total = match f.total.parse::<u64>() {
        Ok(t) => t,
        Err(_) => {
            let q = [("tag", tag), ("limit", "1"), ("count", "true")];
            match c.api.get::<InstanceListOut>(&s.token, "/v1/instances", &q).await {
                Ok(l) => l.total.unwrap_or(0).max(0) as u64,
                Err(e) => return refused(&c, &s, e),
            }
        }
    };
    let mut body = serde_json::json!({ "action": f.action, "tag": tag, "limit": step(&f.action) });
    if !f.cursor.is_empty() {
        body["cursor"] = f.cursor.clone().into();
    }
    with_value(&mut body, &f.action, &f.value);
    let out = match c.api.post_json::<BulkOut>(&s.token, "/v1/instances/bulk", &body).await {
        Ok(out) => out,
        Err(e) if e.status == 400 && wants_json(&headers) => {
            return (StatusCode::BAD_REQUEST, axum::Json(serde_json::json!({ "error": e.message }))).into_response()
        }
        Err(e) => return refused(&c, &s, e),
    };
    let progress = TagProgress {
        action: f.action.clone(),
        tag: tag.to_string(),
        value: f.value.trim().to_string(),
        total,
        succeeded: f.succeeded + out.succeeded as u64,
        failed: f.failed + out.failed as u64,
        next_cursor: out.next_cursor,
        failures: out.results.into_iter().filter_map(|r| r.error.map(|e| (r.id, e.message))).collect(),
    };
    if wants_json(&headers) {
        return ([(axum::http::header::SET_COOKIE, c.sessions.set_cookie(&s))], axum::Json(&progress)).into_response();
    }
    page(&c, &s, StatusCode::OK, pages::tag_run((&s.who, &s.csrf), &progress))
}

/// The page's script asks for JSON; a form without it gets the page.
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}
