//! The console's handlers: each reads the session, calls `/v1` with its token, and
//! renders a page; each form checks its CSRF token first. A token the API no longer
//! accepts ends the session.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use domain::chats::ChatListOut;
use domain::history::MessagePageOut;
use domain::instances::InstanceOut;
use domain::keys::{KeyCreatedOut, KeyListOut};
use domain::pairing::LinkOut;
use domain::usage::UsageOut;
use maud::Markup;
use serde::Deserialize;
use shared::ids::{InstanceId, KeyId};
use shared::jid::Jid;

use crate::api::ApiError;
use crate::limit::ClientIp;
use crate::pages;
use crate::session::{csrf_ok, Jar, Session, Who};
use crate::Console;

mod events;
mod fleet;
mod instance;
mod queue;
mod webhooks;

pub use events::{events, stream as events_stream};
pub use fleet::{bulk, bulk_tag, cluster, fleet, step, TagProgress};
pub use instance::{connect, delete, instance, logout, pairing_code, qr, settings};
pub use queue::{pause, queue, resume, risk, send};
pub use webhooks::{create_webhook, deliveries, delivery, endpoint, resend, webhooks};

/// A page with the session's cookie renewed (its idle time starts again).
fn page(c: &Console, s: &Session, status: StatusCode, m: Markup) -> Response {
    (status, [(header::SET_COOKIE, c.sessions.set_cookie(s))], axum::response::Html(m.into_string())).into_response()
}

/// Back to the sign-in page, the session (if any) ended.
pub(crate) fn signed_out(c: &Console) -> Response {
    ([(header::SET_COOKIE, c.sessions.clear(Jar::Session))], Redirect::to("/")).into_response()
}

/// Back to the sign-in page for a request without a session. The cookie is cleared only
/// when the request carried one (expired, tampered): a link from another site arrives
/// without the SameSite=Strict cookie, and must not sign the user out.
fn to_sign_in(c: &Console, headers: &HeaderMap) -> Response {
    if c.sessions.carries(headers, Jar::Session) {
        signed_out(c)
    } else {
        Redirect::to("/").into_response()
    }
}

/// An API refusal as a page (its own message), or the end of a session whose token no
/// longer works.
fn refused(c: &Console, s: &Session, e: ApiError) -> Response {
    if e.signed_out() {
        return signed_out(c);
    }
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
    tracing::debug!(status = e.status, code = %e.code, "the API refused a console request");
    let title = if status == StatusCode::FORBIDDEN { "Not allowed" } else { "Something went wrong" };
    page(c, s, status, pages::problem(Some((&s.who, &s.csrf)), title, &e.message))
}

/// A redirect to `to` with the session's cookie renewed: where a form's action ends.
fn back(c: &Console, s: &Session, to: &str) -> Response {
    ([(header::SET_COOKIE, c.sessions.set_cookie(s))], Redirect::to(to)).into_response()
}

/// The session of a form: read, its CSRF token checked, its instance id parsed; or the
/// answer that ends the request.
fn form_session(
    c: &Console,
    headers: &HeaderMap,
    raw: &str,
    csrf: &str,
) -> Result<(Session, InstanceId), Box<Response>> {
    let Some(s) = c.sessions.read(headers) else { return Err(Box::new(to_sign_in(c, headers))) };
    if !csrf_ok(&s.csrf, csrf) {
        return Err(Box::new(forged(c, &s)));
    }
    match InstanceId::parse(raw) {
        Ok(id) => Ok((s, id)),
        Err(_) => Err(Box::new(no_instance(c, &s))),
    }
}

/// The page of an instance id that is none (checked before it goes into an API path).
fn no_instance(c: &Console, s: &Session) -> Response {
    page(c, s, StatusCode::NOT_FOUND, pages::not_found())
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
}

/// `/`: the sign-in form, or the signed-in user's first page.
pub async fn home(State(c): State<Console>, headers: HeaderMap) -> Response {
    if let Some(s) = c.sessions.read(&headers) {
        return back(&c, &s, &s.who.home());
    }
    sign_in_page(&c, StatusCode::OK, None)
}

fn sign_in_page(c: &Console, status: StatusCode, error: Option<&str>) -> Response {
    let (csrf, cookie) = c.sessions.sign_in_form();
    let clear = c.sessions.clear(Jar::Session);
    let mut res = (status, axum::response::Html(pages::sign_in(&csrf, error).into_string())).into_response();
    let h = res.headers_mut();
    for v in [cookie, clear] {
        h.append(header::SET_COOKIE, v.parse().expect("a cookie is a header value"));
    }
    res
}

/// Signs in with a token `GET /v1/me` accepts.
pub async fn sign_in(
    State(c): State<Console>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    Form(f): Form<SignInForm>,
) -> Response {
    if !c.sessions.sign_in_ok(&headers, &f.csrf) {
        return sign_in_page(&c, StatusCode::FORBIDDEN, Some("The form expired; sign in again."));
    }
    // The attempt counts now, before the API is asked; an accepted token forgives it.
    if let Some(Err(wait)) = ip.map(|ip| c.sign_ins.attempt(ip, std::time::Instant::now())) {
        let mut res =
            sign_in_page(&c, StatusCode::TOO_MANY_REQUESTS, Some("Too many tokens were refused; wait a minute."));
        res.headers_mut().insert(header::RETRY_AFTER, wait.as_secs().max(1).into());
        return res;
    }
    let forgive = |c: &Console| {
        if let Some(ip) = ip {
            c.sign_ins.accepted(ip);
        }
    };
    let refused = |c: &Console| sign_in_page(c, StatusCode::UNAUTHORIZED, Some("That token was not accepted."));
    let token = f.token.trim().to_string();
    if token.is_empty() || token.len() > 512 {
        return refused(&c);
    }
    match c.api.get::<Who>(&token, "/v1/me", &[]).await {
        Ok(who) => {
            forgive(&c);
            let s = c.sessions.start(token, who);
            let mut res = Redirect::to(&s.who.home()).into_response();
            let h = res.headers_mut();
            for v in [c.sessions.set_cookie(&s), c.sessions.clear(Jar::SignIn)] {
                h.append(header::SET_COOKIE, v.parse().expect("a cookie is a header value"));
            }
            res
        }
        Err(e) if e.status == 401 || e.status == 403 => refused(&c),
        Err(e) => {
            // The token was not tried: the API did not answer.
            forgive(&c);
            sign_in_page(&c, StatusCode::BAD_GATEWAY, Some(&e.message))
        }
    }
}

/// Ends the session.
pub async fn sign_out(State(c): State<Console>, headers: HeaderMap, Form(f): Form<CsrfForm>) -> Response {
    match c.sessions.read_unexpired(&headers) {
        Some(s) if !csrf_ok(&s.csrf, &f.csrf) => forged(&c, &s),
        Some(s) => match c.ended.end(&s, c.sessions.remaining(&s)).await {
            Ok(()) => signed_out(&c),
            // Not listed: cleared here, but a copy of the cookie would still open pages
            // until it lapses; say so.
            Err(_) => {
                let m = pages::problem(
                    None,
                    "Signed out in this browser only",
                    "The session's cookie is cleared here, but the console could not end the session for any copy of it, which lapses at its idle timeout.",
                );
                let clear = [(header::SET_COOKIE, c.sessions.clear(Jar::Session))];
                (StatusCode::SERVICE_UNAVAILABLE, clear, axum::response::Html(m.into_string())).into_response()
            }
        },
        None => signed_out(&c),
    }
}

/// The answer while sessions cannot be checked (Redis does not answer).
pub(crate) fn unavailable() -> Response {
    let m = pages::problem(None, "Try again", "The console cannot check sessions right now; try again in a moment.");
    (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "5")], axum::response::Html(m.into_string()))
        .into_response()
}

fn forged(c: &Console, s: &Session) -> Response {
    page(
        c,
        s,
        StatusCode::FORBIDDEN,
        pages::problem(Some((&s.who, &s.csrf)), "Not allowed", "The form expired; try again."),
    )
}

pub async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=300")], pages::CSS)
        .into_response()
}

pub async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=300")],
        pages::JS,
    )
        .into_response()
}

pub async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, axum::response::Html(pages::not_found().into_string())).into_response()
}

/// The instance's name (its tabs' heading) and what `path` answers.
async fn tab<T: serde::de::DeserializeOwned>(
    c: &Console,
    s: &Session,
    id: &InstanceId,
    path: &str,
    query: &[(&str, &str)],
) -> Result<(String, T), ApiError> {
    let i = c.api.get::<InstanceOut>(&s.token, &format!("/v1/instances/{id}"), &[]).await?;
    Ok((i.name, c.api.get::<T>(&s.token, path, query).await?))
}

#[derive(Deserialize)]
pub struct CursorQuery {
    #[serde(default)]
    cursor: String,
}

/// An instance's chats.
pub async fn chats(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Query(q): Query<CursorQuery>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    let query = [("cursor", q.cursor.as_str()), ("limit", "50")];
    match tab::<ChatListOut>(&c, &s, &id, &format!("/v1/instances/{id}/chats"), &query).await {
        Ok((name, list)) => page(&c, &s, StatusCode::OK, pages::chats((&s.who, &s.csrf), id.as_str(), &name, &list)),
        Err(e) => refused(&c, &s, e),
    }
}

/// A chat's history.
pub async fn chat(
    State(c): State<Console>,
    headers: HeaderMap,
    Path((raw, raw_jid)): Path<(String, String)>,
    Query(q): Query<CursorQuery>,
) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let (Ok(id), Ok(jid)) = (InstanceId::parse(&raw), Jid::parse(&raw_jid)) else { return no_instance(&c, &s) };
    let query = [("cursor", q.cursor.as_str()), ("limit", "50")];
    let path = format!("/v1/instances/{id}/chats/{jid}/messages");
    match c.api.get::<MessagePageOut>(&s.token, &path, &query).await {
        Ok(p) => page(&c, &s, StatusCode::OK, pages::chat((&s.who, &s.csrf), id.as_str(), jid.as_str(), &p)),
        Err(e) => refused(&c, &s, e),
    }
}

/// The instance's name and its keys, for the keys page.
async fn keys_of(c: &Console, s: &Session, id: &InstanceId) -> Result<(String, KeyListOut), ApiError> {
    tab(c, s, id, &format!("/v1/instances/{id}/api-keys"), &[("limit", "100")]).await
}

/// An instance's API keys.
pub async fn keys(State(c): State<Console>, headers: HeaderMap, Path(raw): Path<String>) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    match keys_of(&c, &s, &id).await {
        Ok((name, list)) => page(
            &c,
            &s,
            StatusCode::OK,
            pages::keys((&s.who, &s.csrf), id.as_str(), &name, &list, pages::KeysNote::None),
        ),
        Err(e) => refused(&c, &s, e),
    }
}

#[derive(Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    scope: String,
}

/// Creates a key: the answer shows its token, once.
pub async fn create_key(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<KeyForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let body = serde_json::json!({ "name": f.name, "scope": f.scope });
    let created = c.api.post_json::<KeyCreatedOut>(&s.token, &format!("/v1/instances/{id}/api-keys"), &body).await;
    let (name, list) = match keys_of(&c, &s, &id).await {
        Ok(k) => k,
        Err(e) => return refused(&c, &s, e),
    };
    let who = (&s.who, s.csrf.as_str());
    match created {
        Ok(k) => {
            page(&c, &s, StatusCode::CREATED, pages::keys(who, id.as_str(), &name, &list, pages::KeysNote::Created(&k)))
        }
        Err(e) if e.status == 400 => page(
            &c,
            &s,
            StatusCode::BAD_REQUEST,
            pages::keys(who, id.as_str(), &name, &list, pages::KeysNote::Refused(&e.message)),
        ),
        Err(e) => refused(&c, &s, e),
    }
}

#[derive(Deserialize)]
pub struct LinkForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    expires_in: String,
}

/// Makes a hosted pairing link (the admin's): the answer shows it.
pub async fn create_link(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<LinkForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let body = serde_json::json!({ "expires_in": f.expires_in });
    let made = c.api.post_json::<LinkOut>(&s.token, &format!("/v1/instances/{id}/pairing-links"), &body).await;
    let (name, list) = match keys_of(&c, &s, &id).await {
        Ok(k) => k,
        Err(e) => return refused(&c, &s, e),
    };
    let who = (&s.who, s.csrf.as_str());
    match made {
        Ok(l) => {
            page(&c, &s, StatusCode::CREATED, pages::keys(who, id.as_str(), &name, &list, pages::KeysNote::Link(&l)))
        }
        Err(e) if matches!(e.status, 400 | 409 | 429) => {
            let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
            page(&c, &s, status, pages::keys(who, id.as_str(), &name, &list, pages::KeysNote::Refused(&e.message)))
        }
        Err(e) => refused(&c, &s, e),
    }
}

/// Revokes every pairing link of the instance (the admin's).
pub async fn revoke_links(
    State(c): State<Console>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Form(f): Form<CsrfForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    if let Err(e) = c.api.delete(&s.token, &format!("/v1/instances/{id}/pairing-links")).await {
        return refused(&c, &s, e);
    }
    match keys_of(&c, &s, &id).await {
        Ok((name, list)) => {
            let m = pages::keys((&s.who, &s.csrf), id.as_str(), &name, &list, pages::KeysNote::LinksRevoked);
            page(&c, &s, StatusCode::OK, m)
        }
        Err(e) => refused(&c, &s, e),
    }
}

/// Revokes a key.
pub async fn revoke_key(
    State(c): State<Console>,
    headers: HeaderMap,
    Path((raw, raw_key)): Path<(String, String)>,
    Form(f): Form<CsrfForm>,
) -> Response {
    let (s, id) = match form_session(&c, &headers, &raw, &f.csrf) {
        Ok(found) => found,
        Err(res) => return *res,
    };
    let Ok(key) = KeyId::parse(&raw_key) else { return no_instance(&c, &s) };
    match c.api.delete(&s.token, &format!("/v1/instances/{id}/api-keys/{key}")).await {
        Ok(()) => back(&c, &s, &format!("/i/{id}/keys")),
        Err(e) => refused(&c, &s, e),
    }
}

/// What an instance used over the last 30 days.
pub async fn usage(State(c): State<Console>, headers: HeaderMap, Path(raw): Path<String>) -> Response {
    let Some(s) = c.sessions.read(&headers) else { return to_sign_in(&c, &headers) };
    let Ok(id) = InstanceId::parse(&raw) else { return no_instance(&c, &s) };
    match tab::<UsageOut>(&c, &s, &id, &format!("/v1/instances/{id}/usage"), &[]).await {
        Ok((name, u)) => page(&c, &s, StatusCode::OK, pages::usage((&s.who, &s.csrf), id.as_str(), &name, &u)),
        Err(e) => refused(&c, &s, e),
    }
}
