//! The admin's pages: the fleet (with counts by state and bulk actions over the instances
//! ticked) and the cluster.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
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

/// The fleet, with the cluster's counts by state at the top.
pub async fn fleet(State(c): State<Console>, headers: HeaderMap, Query(q): Query<FleetQuery>) -> Response {
    let s = match admin(&c, &headers) {
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
    let (list, cluster) = tokio::join!(
        c.api.get::<InstanceListOut>(&s.token, "/v1/instances", &query),
        c.api.get::<ClusterOut>(&s.token, "/v1/cluster", &[]),
    );
    match list {
        Ok(list) => {
            let f = FleetFilter { state: &q.state, tag: &q.tag, name: q.name.trim(), risk: &q.risk };
            page(&c, &s, StatusCode::OK, pages::fleet((&s.who, &s.csrf), &f, &list, cluster.ok().as_ref()))
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
    let problem =
        |m: &str| page(&c, &s, StatusCode::BAD_REQUEST, pages::problem(Some((&s.who, &s.csrf)), "Nothing was done", m));
    if field("confirm") != "yes" {
        return problem("Tick the confirmation to apply an action to many instances.");
    }
    if !BULK.iter().any(|(a, _)| *a == action) {
        return problem("Choose an action.");
    }
    if ids.is_empty() || ids.len() > BULK_MAX || ids.iter().any(|id| InstanceId::parse(id).is_err()) {
        return problem("Tick between 1 and 200 instances of the fleet.");
    }
    let body = serde_json::json!({ "action": action, "ids": ids });
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
