//! The queue page (with its send form) and the risk page (with pause and resume).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Form;
use domain::instances::InstanceOut;
use domain::queue::QueueOut;
use domain::risk::RiskOut;
use serde::Deserialize;
use shared::ids::InstanceId;

use super::{back, form_session, no_instance, page, refused, tab, to_sign_in, CsrfForm};
use crate::pages::{self, SendForm};
use crate::session::Session;
use crate::Console;

#[derive(Deserialize)]
pub struct QueueQuery {
    #[serde(default)]
    list: String,
    #[serde(default)]
    cursor: String,
}

/// The queue: its figures and a page of pending or failed messages, and the send form.
pub async fn queue(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Query(q): Query<QueueQuery>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    show(&c, &s, &id, &q, &SendForm::default(), StatusCode::OK).await
}

async fn show(
    c: &Console,
    s: &Session,
    id: &InstanceId,
    q: &QueueQuery,
    f: &SendForm<'_>,
    status: StatusCode,
) -> Response {
    let who = (&s.who, s.csrf.as_str());
    if !s.who.can_read() {
        // A send_only key: the form alone (it may not read the queue).
        let name = s.who.instance_name.as_deref().unwrap_or("Instance");
        return page(c, s, status, pages::queue(who, id.as_str(), name, None, f));
    }
    let query = [("list", q.list.as_str()), ("cursor", q.cursor.as_str()), ("limit", "50")];
    match tab::<QueueOut>(c, s, id, &format!("/v1/instances/{id}/queue"), &query).await {
        Ok((name, out)) => page(c, s, status, pages::queue(who, id.as_str(), &name, Some(&out), f)),
        Err(e) => refused(c, s, e),
    }
}

#[derive(Deserialize)]
pub struct SendMessageForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    body: String,
}

/// Queues the message the form holds (`to` and a JSON body of any type); the API's
/// refusal is shown at the form, with what was typed.
pub async fn send(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<SendMessageForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let again = |error| SendForm { to: &f.to, body: &f.body, error: Some(error) };
    let mut body = match serde_json::from_str::<serde_json::Value>(&f.body) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => {
            let e = again("The message must be a JSON object, such as {\"type\": \"text\", \"text\": \"hello\"}.");
            return show(&c, &s, &id, &pending(), &e, StatusCode::BAD_REQUEST).await;
        }
    };
    body["to"] = serde_json::Value::String(f.to.trim().to_string());
    match c.api.post_json::<serde_json::Value>(&s.token, &format!("/v1/instances/{id}/messages"), &body).await {
        Ok(_) => back(&c, &s, &format!("/i/{id}/queue")),
        Err(e) if matches!(e.status, 400 | 409 | 413 | 422 | 429) => {
            let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
            show(&c, &s, &id, &pending(), &again(&e.message), status).await
        }
        Err(e) => refused(&c, &s, e),
    }
}

fn pending() -> QueueQuery {
    QueueQuery { list: String::new(), cursor: String::new() }
}

/// The risk page.
pub async fn risk(State(c): State<Console>, headers: HeaderMap, Path(raw): Path<String>) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    show_risk(&c, &s, &id, None).await
}

async fn show_risk(c: &Console, s: &Session, id: &InstanceId, error: Option<&str>) -> Response {
    let got = async {
        let i = c.api.get::<InstanceOut>(&s.token, &format!("/v1/instances/{id}"), &[]).await?;
        let r = c.api.get::<RiskOut>(&s.token, &format!("/v1/instances/{id}/risk"), &[]).await?;
        Ok::<_, crate::api::ApiError>((i, r))
    };
    match got.await {
        Ok((i, r)) => {
            let status = if error.is_some() { StatusCode::CONFLICT } else { StatusCode::OK };
            page(c, s, status, pages::risk((&s.who, &s.csrf), &i, &r, error))
        }
        Err(e) => refused(c, s, e),
    }
}

/// `POST /i/{id}/risk/pause` and `/resume`: the queue held or released.
async fn hold(c: Console, headers: HeaderMap, raw: String, f: CsrfForm, what: &str) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    match c.api.post::<serde_json::Value>(&s.token, &format!("/v1/instances/{id}/queue/{what}")).await {
        Ok(_) => back(&c, &s, &format!("/i/{id}/risk")),
        Err(e) if e.status == 409 => show_risk(&c, &s, &id, Some(&e.message)).await,
        Err(e) => refused(&c, &s, e),
    }
}

pub async fn pause(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<CsrfForm>,
) -> Response {
    hold(c, headers, raw, f, "pause").await
}

pub async fn resume(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<CsrfForm>,
) -> Response {
    hold(c, headers, raw, f, "resume").await
}
