//! An instance's webhook endpoints: listed, added (the signing secret shown once),
//! enabled and disabled, their secret rotated (shown once), deleted; an endpoint's
//! delivery log with a resend of a failed delivery.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Form;
use domain::webhooks::{DeliveryListOut, WebhookListOut, WebhookOut};
use serde::Deserialize;
use shared::ids::{DeliveryId, InstanceId, WebhookId};

use super::{back, form_session, no_instance, page, refused, tab, to_sign_in, CsrfForm};
use crate::pages::{self, WebhooksNote};
use crate::session::Session;
use crate::Console;

/// An instance's webhook endpoints.
pub async fn webhooks(State(c): State<Console>, headers: HeaderMap, Path(raw): Path<String>) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    show(&c, &s, &id, StatusCode::OK, WebhooksNote::None).await
}

/// The endpoints page with the answer to a form.
async fn show(c: &Console, s: &Session, id: &InstanceId, status: StatusCode, note: WebhooksNote<'_>) -> Response {
    match tab::<WebhookListOut>(c, s, id, &format!("/v1/instances/{id}/webhooks"), &[]).await {
        Ok((name, list)) => page(c, s, status, pages::webhooks((&s.who, &s.csrf), id.as_str(), &name, &list, note)),
        Err(e) => refused(c, s, e),
    }
}

/// An endpoint's delivery log.
pub async fn deliveries(
    State(c): State<Console>,
    headers: HeaderMap,
    Path((raw, raw_wh)): Path<(String, String)>,
    Query(q): Query<LogQuery>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let (Ok(id), Ok(wh)) = (InstanceId::parse(&raw), WebhookId::parse(&raw_wh)) else { return no_instance(&c, &s) };
    // `since` is offered as a span back from now; the API takes the time.
    let since = match q.since.as_str() {
        "hour" => Some(chrono::Duration::hours(1)),
        "day" => Some(chrono::Duration::days(1)),
        "week" => Some(chrono::Duration::days(7)),
        _ => None,
    }
    .map(|d| (chrono::Utc::now() - d).to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    .unwrap_or_default();
    let query = [
        ("cursor", q.cursor.as_str()),
        ("state", q.state.as_str()),
        ("event", q.event.trim()),
        ("since", since.as_str()),
        ("limit", "50"),
    ];
    let path = format!("/v1/instances/{id}/webhooks/{wh}/deliveries");
    let filter = pages::LogFilter { state: &q.state, event: q.event.trim(), since: &q.since };
    match c.api.get::<DeliveryListOut>(&s.token, &path, &query).await {
        Ok(p) => {
            let m = pages::deliveries((&s.who, &s.csrf), id.as_str(), wh.as_str(), &p, &filter, s.who.can_operate());
            page(&c, &s, StatusCode::OK, m)
        }
        Err(e) => refused(&c, &s, e),
    }
}

#[derive(Deserialize)]
pub struct LogQuery {
    #[serde(default)]
    cursor: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    event: String,
    /// `hour`, `day` or `week` back from now; empty: any time.
    #[serde(default)]
    since: String,
}

/// Resends a failed delivery, then shows the log again.
pub async fn resend(
    State(c): State<Console>,
    headers: HeaderMap,
    Path((raw, raw_wh, raw_dlv)): Path<(String, String, String)>,
    Form(f): Form<CsrfForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let (Ok(wh), Ok(dlv)) = (WebhookId::parse(&raw_wh), DeliveryId::parse(&raw_dlv)) else {
        return no_instance(&c, &s);
    };
    let path = format!("/v1/instances/{id}/webhooks/{wh}/deliveries/{dlv}/resend");
    match c.api.post::<serde_json::Value>(&s.token, &path).await {
        Ok(_) => back(&c, &s, &format!("/i/{id}/webhooks/{wh}")),
        Err(e) => refused(&c, &s, e),
    }
}

#[derive(Deserialize)]
pub struct WebhookForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    events: String,
    #[serde(default)]
    format: String,
}

/// Adds an endpoint: the answer shows its signing secret, once; the API's refusal is
/// shown above the list.
pub async fn create_webhook(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<WebhookForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let events: Vec<&str> = f.events.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    let format = if f.format.is_empty() { "paceline" } else { f.format.as_str() };
    let body = serde_json::json!({ "url": f.url.trim(), "events": events, "format": format });
    match c.api.post_json::<WebhookOut>(&s.token, &format!("/v1/instances/{id}/webhooks"), &body).await {
        Ok(wh) => show(&c, &s, &id, StatusCode::CREATED, WebhooksNote::Secret(&wh)).await,
        Err(e) if e.status == 400 => {
            show(&c, &s, &id, StatusCode::BAD_REQUEST, WebhooksNote::Refused(&e.message)).await
        }
        Err(e) => refused(&c, &s, e),
    }
}

/// The session, instance and endpoint of an endpoint's form.
fn endpoint_form(
    c: &Console,
    headers: &HeaderMap,
    (raw, raw_wh): &(String, String),
    csrf: &str,
) -> Result<(Session, InstanceId, WebhookId), Box<Response>> {
    let (s, id) = form_session(c, headers, raw, csrf)?;
    match WebhookId::parse(raw_wh) {
        Ok(wh) => Ok((s, id, wh)),
        Err(_) => Err(Box::new(no_instance(c, &s))),
    }
}

/// `PATCH` an endpoint with `patch`; a new secret (a rotation) is shown once.
async fn edit(
    c: Console,
    headers: HeaderMap,
    ids: (String, String),
    f: CsrfForm,
    patch: serde_json::Value,
) -> Response {
    let (s, id, wh) = match endpoint_form(&c, &headers, &ids, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    match c.api.patch_json::<WebhookOut>(&s.token, &format!("/v1/instances/{id}/webhooks/{wh}"), &patch).await {
        Ok(out) if out.secret.is_some() => show(&c, &s, &id, StatusCode::OK, WebhooksNote::Secret(&out)).await,
        Ok(_) => back(&c, &s, &format!("/i/{id}/webhooks")),
        Err(e) if e.status == 400 => {
            show(&c, &s, &id, StatusCode::BAD_REQUEST, WebhooksNote::Refused(&e.message)).await
        }
        Err(e) => refused(&c, &s, e),
    }
}

pub async fn enable_webhook(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(ids): Path<(String, String)>,
    Form(f): Form<CsrfForm>,
) -> Response {
    edit(c, headers, ids, f, serde_json::json!({ "enabled": true })).await
}

pub async fn disable_webhook(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(ids): Path<(String, String)>,
    Form(f): Form<CsrfForm>,
) -> Response {
    edit(c, headers, ids, f, serde_json::json!({ "enabled": false })).await
}

pub async fn rotate_webhook(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(ids): Path<(String, String)>,
    Form(f): Form<CsrfForm>,
) -> Response {
    edit(c, headers, ids, f, serde_json::json!({ "rotate_secret": true })).await
}

/// Deletes an endpoint (its delivery log goes with it).
pub async fn delete_webhook(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(ids): Path<(String, String)>,
    Form(f): Form<CsrfForm>,
) -> Response {
    let (s, id, wh) = match endpoint_form(&c, &headers, &ids, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    match c.api.delete(&s.token, &format!("/v1/instances/{id}/webhooks/{wh}")).await {
        Ok(()) => back(&c, &s, &format!("/i/{id}/webhooks")),
        Err(e) => refused(&c, &s, e),
    }
}
