//! An instance's webhook endpoints: listed, added (the signing secret shown once),
//! edited, enabled and disabled, their secret rotated (shown once), deleted; an
//! endpoint's page with its delivery log, a delivery's request, answers and attempts, and
//! a resend of a failed delivery.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Form;
use domain::webhooks::{DeliveryDetailOut, DeliveryListOut, WebhookListOut, WebhookOut};
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

/// An endpoint's page: the endpoint (with its edit form) and its delivery log.
pub async fn deliveries(
    State(c): State<Console>,
    headers: HeaderMap,
    Path((raw, raw_wh)): Path<(String, String)>,
    Query(q): Query<LogQuery>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let (Ok(id), Ok(wh)) = (InstanceId::parse(&raw), WebhookId::parse(&raw_wh)) else { return no_instance(&c, &s) };
    endpoint_page(&c, &s, (&id, &wh), &q, StatusCode::OK, None).await
}

/// The endpoint's page for `q`, with the API's refusal of its edit form if any.
async fn endpoint_page(
    c: &Console,
    s: &Session,
    (id, wh): (&InstanceId, &WebhookId),
    q: &LogQuery,
    status: StatusCode,
    refusal: Option<&str>,
) -> Response {
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
    let hook = format!("/v1/instances/{id}/webhooks/{wh}");
    let log = format!("{hook}/deliveries");
    let (hook, log) = tokio::join!(
        c.api.get::<WebhookOut>(&s.token, &hook, &[]),
        c.api.get::<DeliveryListOut>(&s.token, &log, &query)
    );
    match (hook, log) {
        (Ok(hook), Ok(log)) => {
            let filter = pages::LogFilter { state: &q.state, event: q.event.trim(), since: &q.since };
            let p = pages::EndpointPage { id: id.as_str(), hook: &hook, log: &log, filter: &filter, refusal };
            page(c, s, status, pages::endpoint((&s.who, &s.csrf), &p))
        }
        (Err(e), _) | (_, Err(e)) => refused(c, s, e),
    }
}

/// A delivery: its request, its attempts with the endpoint's answers, and a resend.
pub async fn delivery(
    State(c): State<Console>,
    headers: HeaderMap,
    Path((raw, raw_wh, raw_dlv)): Path<(String, String, String)>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let (Ok(id), Ok(wh), Ok(dlv)) = (InstanceId::parse(&raw), WebhookId::parse(&raw_wh), DeliveryId::parse(&raw_dlv))
    else {
        return no_instance(&c, &s);
    };
    let path = format!("/v1/instances/{id}/webhooks/{wh}/deliveries/{dlv}");
    match c.api.get::<DeliveryDetailOut>(&s.token, &path, &[]).await {
        Ok(d) => page(&c, &s, StatusCode::OK, pages::delivery((&s.who, &s.csrf), (id.as_str(), wh.as_str()), &d)),
        Err(e) => refused(&c, &s, e),
    }
}

#[derive(Deserialize, Default)]
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
    /// The edit form's URL as it was shown (masked): unchanged, it is not sent.
    #[serde(default)]
    url_shown: String,
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
    let body =
        serde_json::json!({ "url": f.url.trim(), "events": events_of(&f.events), "format": format_of(&f.format) });
    match c.api.post_json::<WebhookOut>(&s.token, &format!("/v1/instances/{id}/webhooks"), &body).await {
        Ok(wh) => show(&c, &s, &id, StatusCode::CREATED, WebhooksNote::Secret(&wh)).await,
        Err(e) if e.status == 400 => {
            show(&c, &s, &id, StatusCode::BAD_REQUEST, WebhooksNote::Refused(&e.message)).await
        }
        Err(e) => refused(&c, &s, e),
    }
}

/// An endpoint's form, the action named by the path: `edit` (URL, event types, format),
/// `enable`, `disable`, `rotate` (the new secret shown once) or `delete`.
pub async fn endpoint(
    State(c): State<Console>,
    headers: HeaderMap,
    Path((raw, raw_wh, action)): Path<(String, String, String)>,
    Form(f): Form<WebhookForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let Ok(wh) = WebhookId::parse(&raw_wh) else { return no_instance(&c, &s) };
    let path = format!("/v1/instances/{id}/webhooks/{wh}");
    let patch = match action.as_str() {
        "delete" => {
            return match c.api.delete(&s.token, &path).await {
                Ok(()) => back(&c, &s, &format!("/i/{id}/webhooks")),
                Err(e) => refused(&c, &s, e),
            }
        }
        "enable" => serde_json::json!({ "enabled": true }),
        "disable" => serde_json::json!({ "enabled": false }),
        "rotate" => serde_json::json!({ "rotate_secret": true }),
        "edit" => {
            let mut p = serde_json::json!({ "events": events_of(&f.events), "format": format_of(&f.format) });
            if f.url.trim() != f.url_shown {
                p["url"] = f.url.trim().into();
            }
            p
        }
        _ => return page(&c, &s, StatusCode::NOT_FOUND, pages::not_found()),
    };
    match c.api.patch_json::<WebhookOut>(&s.token, &path, &patch).await {
        Ok(out) if out.secret.is_some() => show(&c, &s, &id, StatusCode::OK, WebhooksNote::Secret(&out)).await,
        Ok(_) if action == "edit" => back(&c, &s, &format!("/i/{id}/webhooks/{wh}")),
        Ok(_) => back(&c, &s, &format!("/i/{id}/webhooks")),
        Err(e) if e.status == 400 && action == "edit" => {
            endpoint_page(&c, &s, (&id, &wh), &LogQuery::default(), StatusCode::BAD_REQUEST, Some(&e.message)).await
        }
        Err(e) if e.status == 400 => {
            show(&c, &s, &id, StatusCode::BAD_REQUEST, WebhooksNote::Refused(&e.message)).await
        }
        Err(e) => refused(&c, &s, e),
    }
}

/// The event types a form lists, comma-separated.
fn events_of(raw: &str) -> Vec<&str> {
    raw.split(',').map(str::trim).filter(|e| !e.is_empty()).collect()
}

fn format_of(raw: &str) -> &str {
    if raw.is_empty() {
        "paceline"
    } else {
        raw
    }
}
