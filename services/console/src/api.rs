//! The console's client of `/v1`: every call carries the signed-in user's own token, so
//! the API decides what they may see and do; its error envelope comes back as
//! [`ApiError`], whose message the page shows (it names no token or number).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;

/// How long one call to the API may take.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The most of an answer the console reads.
const MAX_BODY: usize = 4 << 20;

/// How long an event stream may stay silent: the API sends a keep-alive every 15 s.
const STREAM_SILENCE: Duration = Duration::from_secs(45);

tokio::task_local! {
    /// The signed-in user's address, as the console tells it, while a request of theirs
    /// is served: every call to the API made for it carries the address in the API's
    /// client address header (`api.client_ip_header`). The API believes it only from a
    /// peer in its `api.trusted_proxies`, so an IP allow-list sees the user, not the
    /// console, once the operator lists the console there.
    pub static USER_IP: Option<std::net::IpAddr>;
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    /// For event streams: no deadline on the whole answer, one on each silence.
    streams: reqwest::Client,
    base: url::Url,
    /// Where the user's address goes (the API's `api.client_ip_header`).
    ip_header: reqwest::header::HeaderName,
}

/// The API's refusal (its status, code and message), or that it did not answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
    /// The request field at fault (`error.field`), when the API names one.
    pub field: Option<String>,
}

impl ApiError {
    fn unavailable() -> ApiError {
        ApiError {
            status: 502,
            code: "unavailable".into(),
            message: "The API did not answer; try again.".into(),
            field: None,
        }
    }

    /// The token is no longer accepted (revoked, deleted, rotated).
    pub fn signed_out(&self) -> bool {
        self.status == 401
    }
}

#[derive(Deserialize)]
struct Envelope {
    error: Body,
}

#[derive(Deserialize)]
struct Body {
    code: String,
    message: String,
    #[serde(default)]
    field: Option<String>,
}

impl Api {
    pub fn new(base: url::Url, ip_header: &str) -> anyhow::Result<Api> {
        let ip_header = reqwest::header::HeaderName::from_bytes(ip_header.as_bytes())?;
        let http =
            shared::fetch::client_builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none()).build()?;
        let streams = shared::fetch::client_builder()
            .connect_timeout(TIMEOUT)
            .read_timeout(STREAM_SILENCE)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Api { http, streams, base, ip_header })
    }

    /// `req` with the user's address, when a user's request is being served.
    fn with_user_ip(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match USER_IP.try_with(|ip| *ip).ok().flatten() {
            Some(ip) => req.header(self.ip_header.clone(), ip.to_string()),
            None => req,
        }
    }

    /// `path` (with its query) under the API's base URL.
    fn url(&self, path: &str, query: &[(&str, &str)]) -> url::Url {
        let mut u = self.base.clone();
        u.set_path(path);
        if !query.is_empty() {
            u.query_pairs_mut().extend_pairs(query.iter().filter(|(_, v)| !v.is_empty()));
        }
        u
    }

    pub async fn get<T: DeserializeOwned>(
        &self,
        token: &str,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, ApiError> {
        self.send(self.http.get(self.url(path, query)).bearer_auth(token)).await
    }

    pub async fn post<T: DeserializeOwned>(&self, token: &str, path: &str) -> Result<T, ApiError> {
        self.post_json(token, path, &serde_json::json!({})).await
    }

    pub async fn post_json<T: DeserializeOwned>(
        &self,
        token: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ApiError> {
        self.send(self.http.post(self.url(path, &[])).bearer_auth(token).json(body)).await
    }

    pub async fn patch_json<T: DeserializeOwned>(
        &self,
        token: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ApiError> {
        self.send(self.http.patch(self.url(path, &[])).bearer_auth(token).json(body)).await
    }

    /// A DELETE; its answer (204, no body) reads as `()`.
    pub async fn delete(&self, token: &str, path: &str) -> Result<(), ApiError> {
        self.send::<serde_json::Value>(self.http.delete(self.url(path, &[])).bearer_auth(token)).await.map(drop)
    }

    /// An event stream (SSE) of the API, resuming after `last_event_id`: the open answer
    /// to pass on, or the API's refusal.
    pub async fn stream(
        &self,
        token: &str,
        path: &str,
        query: &[(&str, &str)],
        last_event_id: Option<&str>,
    ) -> Result<reqwest::Response, ApiError> {
        let mut req = self.streams.get(self.url(path, query)).bearer_auth(token).header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let res = self.with_user_ip(req).send().await.map_err(|e| {
            tracing::warn!(error = %e.without_url(), "the API did not answer");
            ApiError::unavailable()
        })?;
        if res.status().is_success() {
            return Ok(res);
        }
        Err(ApiError { status: res.status().as_u16(), ..ApiError::unavailable() })
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T, ApiError> {
        let res = self.with_user_ip(req).send().await.map_err(|e| {
            tracing::warn!(error = %e.without_url(), "the API did not answer");
            ApiError::unavailable()
        })?;
        let status = res.status().as_u16();
        let mut res = res;
        if res.content_length().is_some_and(|n| n > MAX_BODY as u64) {
            return Err(ApiError::unavailable());
        }
        // Read a chunk at a time, and stop past the cap: a chunked answer has no length.
        let mut bytes = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(|_| ApiError::unavailable())? {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(ApiError::unavailable());
            }
            bytes.extend_from_slice(&chunk);
        }
        if (200..300).contains(&status) {
            let body = if bytes.is_empty() { &b"null"[..] } else { &bytes[..] };
            return serde_json::from_slice(body).map_err(|e| {
                tracing::warn!(error = %e, "an answer of the API did not read");
                ApiError::unavailable()
            });
        }
        Err(match serde_json::from_slice::<Envelope>(&bytes) {
            Ok(e) => ApiError { status, code: e.error.code, message: e.error.message, field: e.error.field },
            Err(_) => ApiError { status, ..ApiError::unavailable() },
        })
    }
}
