//! The console: a web UI for operators and tenants, a role of its own (`paceline
//! console`, and inside `paceline dev`). It is a client of `/v1` with the signed-in
//! user's own token, so every access rule stays in the API: the admin token sees the
//! fleet, an instance token or an API key its own instance, with what its scope allows.
//!
//! Pages are rendered on the server (maud, compile-checked); a small script served from
//! here refreshes the QR code, and every page works without it by reloading. The session
//! is a cookie sealed by the console (HttpOnly, SameSite=Strict) holding the token, so
//! no token is ever in a page or a URL; every form carries the session's CSRF token; every
//! answer carries a strict CSP; a session idle for `console.idle_timeout_ms` is over.

use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use shared::{Config, Shutdown};
use tokio::net::TcpListener;

mod api;
mod ended;
mod limit;
mod pages;
mod routes;
mod session;
mod settings;

/// What every handler shares.
#[derive(Clone)]
pub struct Console {
    api: api::Api,
    sessions: session::Sessions,
    /// Sign-in attempts per client address.
    sign_ins: std::sync::Arc<limit::SignIns>,
    /// How the client's address is told behind a proxy (the API's own settings).
    client_ip_header: String,
    trusted_proxies: Vec<ipnet::IpNet>,
    /// Sessions signed out before their time.
    ended: ended::Ended,
}

impl Console {
    /// The console for `config`; `loopback`: it listens on a loopback address only (its
    /// cookies are `Secure` otherwise, or with `console.secure_cookie`).
    pub fn new(config: &Config, loopback: bool) -> anyhow::Result<Console> {
        let sealer = shared::sealed::Sealer::from_config(config)
            .ok_or_else(|| anyhow::anyhow!("the console needs secrets_key (or admin_token) to seal its sessions"))?;
        Ok(Console {
            api: api::Api::new(config.console.api_url.clone(), &config.api.client_ip_header)?,
            sessions: session::Sessions::new(
                sealer,
                config.console.idle_timeout,
                config.console.secure_cookie || !loopback,
            ),
            sign_ins: std::sync::Arc::new(limit::SignIns::default()),
            client_ip_header: config.api.client_ip_header.clone(),
            trusted_proxies: config.api.trusted_proxies.clone(),
            ended: ended::Ended::new(shared::kv::connect(config)?, shared::kv::Keys::new(config)),
        })
    }
}

/// The console's routes, with the headers every answer carries.
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/", get(routes::home).post(routes::sign_in))
        .route("/sign-out", post(routes::sign_out))
        .route("/fleet", get(routes::fleet))
        .route("/fleet/bulk", post(routes::bulk))
        .route("/fleet/bulk/tag", post(routes::bulk_tag))
        .route("/cluster", get(routes::cluster))
        .route("/i/{id}", get(routes::instance))
        .route("/i/{id}/connect", post(routes::connect))
        .route("/i/{id}/logout", post(routes::logout))
        .route("/i/{id}/qr.json", get(routes::qr))
        .route("/i/{id}/pairing-code", post(routes::pairing_code))
        .route("/i/{id}/settings", post(routes::settings))
        .route("/i/{id}/delete", post(routes::delete))
        .route("/i/{id}/chats", get(routes::chats))
        .route("/i/{id}/chats/{jid}", get(routes::chat))
        .route("/i/{id}/queue", get(routes::queue))
        .route("/i/{id}/queue/send", post(routes::send))
        .route("/i/{id}/risk", get(routes::risk))
        .route("/i/{id}/risk/pause", post(routes::pause))
        .route("/i/{id}/risk/resume", post(routes::resume))
        .route("/i/{id}/events", get(routes::events))
        .route("/i/{id}/events/stream", get(routes::events_stream))
        .route("/i/{id}/usage", get(routes::usage))
        .route("/i/{id}/keys", get(routes::keys).post(routes::create_key))
        .route("/i/{id}/keys/{key}/revoke", post(routes::revoke_key))
        .route("/i/{id}/links", post(routes::create_link))
        .route("/i/{id}/links/revoke", post(routes::revoke_links))
        .route("/i/{id}/webhooks", get(routes::webhooks).post(routes::create_webhook))
        .route("/i/{id}/webhooks/{webhook}", get(routes::deliveries))
        .route("/i/{id}/webhooks/{webhook}/{action}", post(routes::endpoint))
        .route("/i/{id}/webhooks/{webhook}/deliveries/{delivery}", get(routes::delivery))
        .route("/i/{id}/webhooks/{webhook}/deliveries/{delivery}/resend", post(routes::resend))
        .route("/healthz", get(|| async { "ok" }))
        .route("/assets/console.css", get(routes::css))
        .route("/assets/console.js", get(routes::js))
        .fallback(routes::not_found)
        .layer(axum::extract::DefaultBodyLimit::max(16 * 1024))
        .layer(axum::middleware::from_fn_with_state(console.clone(), per_request))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(console)
}

/// Before a request with a session is served: the session was not signed out elsewhere
/// ([`ended`]; signing out itself is not held up, it only ends sessions). Then serves it
/// with the user's address at hand for the calls it makes to the API ([`api::USER_IP`]):
/// as the API's own rule tells it, and none when a trusted proxy's header is missing or
/// unreadable (the API then refuses a token it trusts the console for, as it would).
async fn per_request(
    axum::extract::State(c): axum::extract::State<Console>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = req.uri().path();
    let checked = !(path.starts_with("/assets/") || path == "/healthz" || path == "/sign-out");
    if checked {
        if let Some(s) = c.sessions.read(req.headers()) {
            match c.ended.is_ended(&s).await {
                Ok(false) => {}
                Ok(true) => return routes::signed_out(&c),
                Err(ended::Unavailable) => return routes::unavailable(),
            }
        }
    }
    let ip = limit::told(&c, req.extensions(), req.headers());
    api::USER_IP.scope(ip, next.run(req)).await
}

/// The policy every answer carries: scripts, styles and images from the console only
/// (the QR code is a `data:` image), no framing, forms only to the console.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    res
}

/// Serves the console on `listener` until `shutdown`.
pub async fn run(config: Config, listener: TcpListener, shutdown: Shutdown) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    let console = Console::new(&config, addr.ip().is_loopback())?;
    tracing::info!(%addr, "console listening");
    let drain = config.api.shutdown_timeout;
    let app = router(console).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let serve = axum::serve(listener, app).with_graceful_shutdown({
        let shutdown = shutdown.clone();
        async move { shutdown.cancelled().await }
    });
    // Pages are short requests: once shutdown starts they get the API's timeout to end.
    tokio::select! {
        r = serve => r?,
        _ = async { shutdown.cancelled().await; tokio::time::sleep(drain + Duration::from_secs(1)).await } => {}
    }
    Ok(())
}
