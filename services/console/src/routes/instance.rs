//! An instance's page and its forms: connect, log out, the QR code the page polls, a phone
//! pairing code, the settings (the API's refusals at their fields) and deletion behind a
//! typed confirmation.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use domain::instances::InstanceOut;
use domain::pairing::{PairingCodeOut, QrOut};
use domain::states::StateHistoryOut;
use serde::Deserialize;
use shared::db::instances::InstanceState;
use shared::ids::InstanceId;

use super::{form_session, no_instance, page, refused, to_sign_in, CsrfForm};
use crate::api::ApiError;
use crate::pages::{self, InstanceNote};
use crate::session::{Jar, Session};
use crate::settings::SettingsForm;
use crate::Console;

/// One instance.
pub async fn instance(State(c): State<Console>, headers: HeaderMap, Path(raw): Path<String>) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    show(&c, &s, &id, StatusCode::OK, &InstanceNote::default()).await
}

/// The instance, and its QR code while it waits for a scan.
async fn with_qr(c: &Console, s: &Session, id: &InstanceId) -> Result<(InstanceOut, Option<QrOut>), ApiError> {
    let i = c.api.get::<InstanceOut>(&s.token, &format!("/v1/instances/{id}"), &[]).await?;
    let qr = if i.state == InstanceState::QrPending {
        c.api.get::<QrOut>(&s.token, &format!("/v1/instances/{id}/qr"), &[]).await.ok()
    } else {
        None
    };
    Ok((i, qr))
}

/// The instance's page with the answer to a form.
async fn show(c: &Console, s: &Session, id: &InstanceId, status: StatusCode, note: &InstanceNote<'_>) -> Response {
    let states_path = format!("/v1/instances/{id}/states");
    let (found, states) =
        tokio::join!(with_qr(c, s, id), c.api.get::<StateHistoryOut>(&s.token, &states_path, &[("limit", "10")]));
    match found {
        Ok((i, qr)) => {
            let m = pages::instance((&s.who, &s.csrf), &i, qr.as_ref(), states.ok().as_ref(), note);
            page(c, s, status, m)
        }
        Err(e) => refused(c, s, e),
    }
}

/// `POST /i/{id}/connect` and `/logout`: the action, then the instance's page.
async fn act(c: Console, headers: HeaderMap, raw: String, f: CsrfForm, what: &str) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    match c.api.post::<serde_json::Value>(&s.token, &format!("/v1/instances/{id}/{what}")).await {
        Ok(_) => super::back(&c, &s, &format!("/i/{id}")),
        Err(e) if e.signed_out() || e.status == 403 || e.status == 404 => refused(&c, &s, e),
        Err(e) => {
            show(&c, &s, &id, StatusCode::CONFLICT, &InstanceNote { error: Some(&e.message), ..Default::default() })
                .await
        }
    }
}

pub async fn connect(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<CsrfForm>,
) -> Response {
    act(c, headers, raw, f, "connect").await
}

pub async fn logout(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<CsrfForm>,
) -> Response {
    act(c, headers, raw, f, "logout").await
}

/// What the page's script polls while pairing: the state and the current QR code.
pub async fn qr(State(c): State<Console>, headers: HeaderMap, Path(raw): Path<String>) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return StatusCode::UNAUTHORIZED.into_response() };
    let Ok(id) = InstanceId::parse(&raw) else { return StatusCode::NOT_FOUND.into_response() };
    let (i, qr) = match with_qr(&c, &s, &id).await {
        Ok(found) => found,
        Err(e) => return StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY).into_response(),
    };
    Json(serde_json::json!({
        "state": i.state,
        "qr": qr.as_ref().map(|q| &q.base64),
        "code": qr.as_ref().map(|q| &q.code),
    }))
    .into_response()
}

#[derive(Deserialize)]
pub struct PhoneForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    phone: String,
}

/// A phone pairing code for the number typed, shown on the instance's page.
pub async fn pairing_code(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<PhoneForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let body = serde_json::json!({ "phone": f.phone.trim() });
    match c.api.post_json::<PairingCodeOut>(&s.token, &format!("/v1/instances/{id}/pairing-code"), &body).await {
        Ok(p) => {
            let note = InstanceNote { pairing_code: Some(Ok(&p.pairing_code)), ..Default::default() };
            show(&c, &s, &id, StatusCode::OK, &note).await
        }
        Err(e) if matches!(e.status, 400 | 409) => {
            let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
            show(&c, &s, &id, status, &InstanceNote { pairing_code: Some(Err(&e.message)), ..Default::default() }).await
        }
        Err(e) => refused(&c, &s, e),
    }
}

#[derive(Deserialize)]
pub struct SettingsPost {
    #[serde(default)]
    csrf: String,
    #[serde(flatten)]
    form: SettingsForm,
}

/// Saves what the settings form changed; the API's refusal is shown at its field, with
/// what was typed.
pub async fn settings(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<SettingsPost>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let now = match c.api.get::<InstanceOut>(&s.token, &format!("/v1/instances/{id}"), &[]).await {
        Ok(i) => SettingsForm::of(&i),
        Err(e) => return refused(&c, &s, e),
    };
    let refusal = match f.form.patch(&now, s.who.is_admin()) {
        Ok(None) => return super::back(&c, &s, &format!("/i/{id}")),
        Ok(Some(patch)) => {
            match c.api.patch_json::<serde_json::Value>(&s.token, &format!("/v1/instances/{id}"), &patch).await {
                Ok(_) => return super::back(&c, &s, &format!("/i/{id}")),
                Err(e) if matches!(e.status, 400 | 403 | 409) => (
                    StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
                    (e.field.unwrap_or_default(), e.message),
                ),
                Err(e) => return refused(&c, &s, e),
            }
        }
        Err(at_field) => (StatusCode::BAD_REQUEST, at_field),
    };
    let (status, error) = refusal;
    show(&c, &s, &id, status, &InstanceNote { settings: Some((&f.form, &error)), ..Default::default() }).await
}

#[derive(Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    confirm: String,
}

/// Deletes the instance once its name is typed: the admin goes back to the fleet; the
/// instance's own token no longer works, so its session ends.
pub async fn delete(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<DeleteForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let i = match c.api.get::<InstanceOut>(&s.token, &format!("/v1/instances/{id}"), &[]).await {
        Ok(i) => i,
        Err(e) => return refused(&c, &s, e),
    };
    if f.confirm.trim() != i.name {
        let note = InstanceNote {
            delete_error: Some("That is not the instance's name: nothing was deleted."),
            ..Default::default()
        };
        return show(&c, &s, &id, StatusCode::BAD_REQUEST, &note).await;
    }
    match c.api.delete(&s.token, &format!("/v1/instances/{id}")).await {
        Ok(()) if s.who.sees_fleet() => super::back(&c, &s, "/fleet"),
        Ok(()) => ([(header::SET_COOKIE, c.sessions.clear(Jar::Session))], Redirect::to("/")).into_response(),
        Err(e) => refused(&c, &s, e),
    }
}
