//! The hosted pairing page behind a pairing link (`routes::pairing_links`), outside `/v1`:
//! no bearer token, and it shows none. Opening it connects the instance if needed and
//! shows the QR code; a small script (served from here, no CDN) asks
//! `/pair/{token}/status` for the fresh QR, the state and the expiry every 2 s and turns
//! the page to success once the instance is connected. Without JavaScript the page works
//! by reloading. It also pairs by phone number (a form: the number in, the 8-character
//! code out). A link that was used, revoked or has expired says so and shows no QR.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Form, Json};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::auth::hash_token;
use shared::db::instances::{self, InstanceState};
use shared::db::pairing_links::{self, LinkRow, LinkState};
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::pairing;
use door::extract::Path;
use door::AppState;

/// Where the pages live: `/pair/{token}`.
pub const PAGE_PREFIX: &str = "/pair";
/// The page's script.
const SCRIPT: &str = include_str!("pair_page.js");
/// How often the script asks for the state.
const POLL_MS: u32 = 2000;
/// Pairing codes the page asks the network for, per instance.
const CODES: domain::caps::Cap = domain::caps::Cap {
    name: "pair_page_codes",
    limit: 5,
    window: std::time::Duration::from_secs(600),
    what: "pairing codes in 10 minutes",
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(page))
        .routes(routes!(status))
        .routes(routes!(code))
        .route("/pair-assets/pair.js", axum::routing::get(script))
}

/// What the page's script is told.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PairStatusOut {
    /// The link: `active`, `used`, `revoked` or `expired`.
    pub link: String,
    /// The instance is connected: pairing succeeded (the link is now used).
    pub paired: bool,
    /// The instance's state while the link is active.
    pub state: Option<InstanceState>,
    /// The QR code to show, as a PNG `data:` URL, while one is on show.
    pub qr: Option<String>,
    /// What the QR code encodes.
    pub code: Option<String>,
    /// When the network replaces the QR code.
    pub qr_expires_at: Option<DateTime<Utc>>,
    /// When the link stops working.
    pub expires_at: DateTime<Utc>,
}

/// The form of the phone-number pairing.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PhoneForm {
    /// The number with its country code.
    #[schema(min_length = 1, max_length = 32)]
    pub phone: String,
}

/// What the page shows.
enum View {
    Qr { qr: Option<pairing::QrOut>, expires_at: DateTime<Utc> },
    Code { code: String, expires_at: DateTime<Utc> },
    Paired,
    Ended(&'static str),
}

/// The link of `token` and where it stands.
async fn link(state: &AppState, token: &str) -> Result<Option<(LinkRow, LinkState)>, ApiError> {
    let row = pairing_links::by_token_hash(&state.db, &hash_token(token)).await?;
    Ok(row.map(|r| {
        let s = r.state(Utc::now());
        (r, s)
    }))
}

/// The link of `token` while it is active; otherwise the page that says why not (404
/// unknown, 410 used, revoked or expired).
async fn active(state: &AppState, token: &str) -> Result<Result<LinkRow, Response>, ApiError> {
    Ok(match link(state, token).await? {
        None => Err(html(StatusCode::NOT_FOUND, token, View::Ended("This link is not valid. Check the address."))),
        Some((_, s)) if s != LinkState::Active => Err(html(StatusCode::GONE, token, View::Ended(ended(s)))),
        Some((l, _)) => Ok(l),
    })
}

fn ended(s: LinkState) -> &'static str {
    match s {
        LinkState::Used => "This link was already used to link a phone. Ask for a new link if you need one.",
        LinkState::Revoked => "This link was withdrawn. Ask for a new link.",
        LinkState::Expired => "This link has expired. Ask for a new link.",
        LinkState::Active => "",
    }
}

/// For an active link: success (and the link used) once the instance is connected;
/// otherwise its session started if needed, and the QR code when one is on show.
async fn progress(state: &AppState, l: &LinkRow) -> Result<(InstanceState, Option<pairing::QrOut>), ApiError> {
    let inst = instances::get(&state.db, &l.instance_id).await?.ok_or_else(ApiError::instance_not_found)?;
    if inst.state == InstanceState::Connected {
        pairing_links::mark_used(&state.db, &l.id).await?;
        return Ok((inst.state, None));
    }
    if inst.state == InstanceState::Banned {
        return Ok((inst.state, None));
    }
    if !inst.desired {
        pairing::start(state, &l.instance_id).await?;
    }
    let qr = pairing::current_qr(state, &l.instance_id).await?.ok();
    Ok((inst.state, qr))
}

/// The hosted pairing page.
#[utoipa::path(get, path = "/pair/{token}", tag = "pairing page",
    params(("token" = String, Path, description = "the link's token, from its URL")),
    responses(
        (status = 200, description = "the page: the QR code and the phone-number form, or success", content_type = "text/html"),
        (status = 404, description = "no such link", content_type = "text/html"),
        (status = 410, description = "the link was used, revoked or has expired", content_type = "text/html"),
    ),
    security(()))]
async fn page(State(state): State<AppState>, Path(token): Path<String>) -> Result<Response, ApiError> {
    let l = match active(&state, &token).await? {
        Ok(l) => l,
        Err(page) => return Ok(page),
    };
    let view = match progress(&state, &l).await? {
        (InstanceState::Connected, _) => View::Paired,
        (InstanceState::Banned, _) => View::Ended("This number cannot be linked: WhatsApp has banned it."),
        (_, qr) => View::Qr { qr, expires_at: l.expires_at },
    };
    Ok(html(StatusCode::OK, &token, view))
}

/// The page's state, for its script: the link, the instance's state, the QR code.
#[utoipa::path(get, path = "/pair/{token}/status", tag = "pairing page",
    params(("token" = String, Path, description = "the link's token, from its URL")),
    responses(
        (status = 200, description = "where pairing stands", body = PairStatusOut),
        (status = 404, description = "`not_found`: no such link", body = shared::error::ErrorBody),
    ),
    security(()))]
async fn status(State(state): State<AppState>, Path(token): Path<String>) -> Result<Response, ApiError> {
    let (l, s) = link(&state, &token).await?.ok_or_else(|| ApiError::not_found("pairing link"))?;
    let mut out = PairStatusOut {
        link: link_name(s).into(),
        paired: false,
        state: None,
        qr: None,
        code: None,
        qr_expires_at: None,
        expires_at: l.expires_at,
    };
    if s == LinkState::Used {
        // Used by the pairing this page was showing (the worker marks an instance's links
        // used as it connects): the open page turns to success.
        let inst = instances::get(&state.db, &l.instance_id).await?.ok_or_else(ApiError::instance_not_found)?;
        out.paired = inst.state == InstanceState::Connected;
    }
    if s == LinkState::Active {
        let (st, qr) = progress(&state, &l).await?;
        out.paired = st == InstanceState::Connected;
        out.link = if out.paired { "used".into() } else { "active".into() };
        out.state = Some(st);
        if let Some(q) = qr {
            out.qr_expires_at = Some(q.expires_at);
            out.code = Some(q.code);
            out.qr = Some(q.base64);
        }
    }
    Ok(with_page_headers((StatusCode::OK, Json(out)).into_response()))
}

fn link_name(s: LinkState) -> &'static str {
    match s {
        LinkState::Active => "active",
        LinkState::Used => "used",
        LinkState::Revoked => "revoked",
        LinkState::Expired => "expired",
    }
}

/// Pair by phone number: the page again, with the code to type on the phone.
#[utoipa::path(post, path = "/pair/{token}/code", tag = "pairing page",
    params(("token" = String, Path, description = "the link's token, from its URL")),
    request_body(content = PhoneForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "the page with the pairing code, or with what went wrong", content_type = "text/html"),
        (status = 400, description = "the number is not a phone number", content_type = "text/html"),
        (status = 404, description = "no such link", content_type = "text/html"),
        (status = 410, description = "the link was used, revoked or has expired", content_type = "text/html"),
        (status = 429, description = "more than 5 codes asked for in 10 minutes", content_type = "text/html"),
    ),
    security(()))]
async fn code(
    State(state): State<AppState>,
    Path(token): Path<String>,
    form: Result<Form<PhoneForm>, axum::extract::rejection::FormRejection>,
) -> Result<Response, ApiError> {
    let l = match active(&state, &token).await? {
        Ok(l) => l,
        Err(page) => return Ok(page),
    };
    let phone = match form.ok().map(|Form(f)| domain::numbers::normalize_phone(&f.phone)) {
        Some(Ok(p)) => p,
        _ => {
            let view = View::Ended("That is not a phone number. Go back and type it with its country code.");
            return Ok(html(StatusCode::BAD_REQUEST, &token, view));
        }
    };
    let view = match progress(&state, &l).await? {
        (InstanceState::Connected, _) => View::Paired,
        (InstanceState::Banned, _) => View::Ended("This number cannot be linked: WhatsApp has banned it."),
        // Each code is a request to the network: a link's holder gets a few at a time.
        _ if domain::caps::take(&state.core, &l.instance_id, CODES, 1).await.map(|t| t.keep()).is_err() => {
            let view =
                View::Ended("Too many codes were asked for just now. Wait a few minutes, then go back and try again.");
            return Ok(html(StatusCode::TOO_MANY_REQUESTS, &token, view));
        }
        _ => match pairing::pairing_code(&state, &l.instance_id, phone).await {
            Ok(code) => View::Code { code, expires_at: l.expires_at },
            Err(domain::Error::Refused { code: shared::ErrorCode::InvalidNumber, .. }) => {
                View::Ended("That number has no WhatsApp account. Go back and check it.")
            }
            // Not ready yet (the session is starting), or the network did not answer.
            Err(_) => View::Ended("The code could not be made just now. Go back and try again in a few seconds."),
        },
    };
    Ok(html(StatusCode::OK, &token, view))
}

async fn script() -> Response {
    let mut res = ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT).into_response();
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    res
}

/// The headers every page answer carries: nothing cached, no referrer (the URL holds the
/// link's token), no framing, and only our own script.
fn with_page_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'; \
             form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    res
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

fn html(status: StatusCode, token: &str, view: View) -> Response {
    let token = esc(token);
    let when =
        |t: DateTime<Utc>| format!("<time datetime=\"{}\">{}</time>", t.to_rfc3339(), t.format("%Y-%m-%d %H:%M UTC"));
    let form = format!(
        "<form method=\"post\" action=\"{PAGE_PREFIX}/{token}/code\">\
         <label for=\"phone\">Or link with your phone number (with its country code):</label>\
         <input id=\"phone\" name=\"phone\" type=\"tel\" inputmode=\"tel\" autocomplete=\"tel\" required maxlength=\"32\" placeholder=\"+55 11 99999 0000\">\
         <button type=\"submit\">Get a code</button></form>"
    );
    let paired = "<section id=\"paired\"><h2>Connected &#10003;</h2><p>Your WhatsApp is linked. You can close this page.</p></section>";
    // On a page still pairing, success is there but hidden until the script shows it.
    let later = paired.replace("id=\"paired\">", "id=\"paired\" hidden>");
    let body = match view {
        View::Qr { qr, expires_at } => {
            let (img, wait) = match &qr {
                Some(q) => (
                    format!("<img id=\"qr\" src=\"{}\" data-code=\"{}\" alt=\"QR code to link WhatsApp\" width=\"264\" height=\"264\">", esc(&q.base64), esc(&q.code)),
                    "<p id=\"wait\" hidden>Preparing the QR code&hellip;</p>",
                ),
                None => (
                    "<img id=\"qr\" alt=\"QR code to link WhatsApp\" width=\"264\" height=\"264\" hidden>".to_string(),
                    "<p id=\"wait\">Preparing the QR code&hellip; (reload the page if it does not appear)</p>",
                ),
            };
            format!(
                "<section id=\"pairing\"><p>On your phone open <b>WhatsApp &rarr; Settings &rarr; Linked devices &rarr; Link a device</b> and scan this code:</p>\
                 {wait}{img}<p class=\"note\">The code changes every 20 seconds; this page follows it (without JavaScript, reload the page).</p>{form}</section>\
                 {later}<p id=\"ended\" hidden></p><p id=\"expiry\" class=\"note\">This link works until {}.</p>",
                when(expires_at)
            )
        }
        View::Code { code, expires_at } => format!(
            "<section id=\"pairing\"><p>On your phone open <b>WhatsApp &rarr; Settings &rarr; Linked devices &rarr; Link a device &rarr; Link with phone number instead</b> and type this code:</p>\
             <p id=\"pairing-code\" class=\"code\">{}</p>{form}</section>\
             {later}<p id=\"ended\" hidden></p><p id=\"expiry\" class=\"note\">This link works until {}.</p>",
            esc(&code),
            when(expires_at)
        ),
        View::Paired => paired.to_string(),
        View::Ended(why) => format!("<p id=\"ended\">{}</p>", esc(why)),
    };
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>Link your WhatsApp</title>\
         <style>body{{font-family:system-ui,sans-serif;margin:0;background:#f4f6f5;color:#1b1f1d}}\
         main{{max-width:28rem;margin:0 auto;padding:1.5rem 1rem}}h1{{font-size:1.4rem}}\
         img{{display:block;margin:1rem auto;max-width:100%;height:auto;image-rendering:pixelated;background:#fff}}\
         .note{{color:#555;font-size:.9rem}}.code{{font-size:2rem;letter-spacing:.2rem;text-align:center;font-family:monospace}}\
         form{{margin-top:1.5rem;display:grid;gap:.5rem}}input,button{{font-size:1rem;padding:.6rem}}\
         #paired h2{{color:#137333}}</style></head>\
         <body><main id=\"page\" data-status=\"{PAGE_PREFIX}/{token}/status\" data-poll-ms=\"{POLL_MS}\"><h1>Link your WhatsApp</h1>{body}</main>\
         <script src=\"/pair-assets/pair.js\" defer></script></body></html>"
    );
    with_page_headers((status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response())
}
