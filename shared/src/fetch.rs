//! Fetching URLs that tenants give us (`media.url`, later webhook URLs) without letting
//! them reach internal addresses. The guard sits where connections are made: a DNS
//! resolver that drops every non-public address (so the address actually connected to is
//! the one checked, on the first request and on every redirect), plus a check of IP
//! literals in the URL and in each redirect target.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL points to a private, loopback, link-local or otherwise internal address.
    #[error("the URL points to a private or local address")]
    Refused,
    /// The body is larger than allowed (stopped early).
    #[error("the download is larger than allowed")]
    TooLarge,
    /// Anything else: DNS, connection, status, timeout.
    #[error("the download failed: {0}")]
    Failed(String),
}

/// A refused address, as an error the resolver can return and we can find again.
#[derive(Debug, thiserror::Error)]
#[error("refused non-public address")]
struct RefusedAddr;

/// Whether an address is on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1])) // CGNAT 100.64/10
                || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol 192.0.0/24
                || (o[0] == 198 && (18..20).contains(&o[1])) // benchmarking 198.18/15
                || o[0] >= 240) // reserved 240/4
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            let embedded =
                |hi: u16, lo: u16| std::net::Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
            // NAT64 64:ff9b::/96 embeds an IPv4 address.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                return is_public(IpAddr::V4(embedded(s[6], s[7])));
            }
            // 6to4 2002::/16 embeds the IPv4 address of its relay in bits 16-48.
            if s[0] == 0x2002 {
                return is_public(IpAddr::V4(embedded(s[1], s[2])));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || s[0..6] == [0, 0, 0, 0, 0, 0] // IPv4-compatible ::/96 (deprecated)
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // local-use NAT64 64:ff9b:1::/48
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8)) // documentation
        }
    }
}

/// Resolves names keeping only public addresses (unless private targets are allowed).
struct GuardedResolver {
    allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow_private;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = addrs.into_iter().filter(|a| allow || is_public(a.ip())).collect();
            if kept.is_empty() {
                return Err(Box::new(RefusedAddr) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

fn literal_ok(url: &url::Url, allow_private: bool) -> bool {
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(url::Host::Domain(d)) => match d.parse::<IpAddr>() {
            Ok(ip) => ip,
            // Names go through the guarded resolver.
            Err(_) => return !d.eq_ignore_ascii_case("localhost") || allow_private,
        },
        None => return false,
    };
    allow_private || is_public(ip)
}

/// Checks a URL tenants register (webhooks) before storing it: http(s), and every
/// address its host resolves to public (unless private targets are allowed). Deliveries
/// still go through [`GuardedClient`], which checks again where it connects.
pub async fn check_url(url: &url::Url, allow_private: bool) -> Result<(), FetchError> {
    if !matches!(url.scheme(), "http" | "https") || !literal_ok(url, allow_private) {
        return Err(FetchError::Refused);
    }
    let Some(url::Host::Domain(host)) = url.host() else { return Ok(()) };
    if host.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| FetchError::Failed("the host does not resolve".into()))?
        .collect();
    if addrs.is_empty() || (!allow_private && addrs.iter().any(|a| !is_public(a.ip()))) {
        return Err(FetchError::Refused);
    }
    Ok(())
}

/// The addresses a tenant's non-HTTP host (a broker's) resolves to, every one public
/// unless private ones are allowed: the caller connects to one of these, so the address
/// checked is the address connected to.
pub async fn resolve_checked(host: &str, port: u16, allow_private: bool) -> Result<Vec<SocketAddr>, FetchError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) if host.eq_ignore_ascii_case("localhost") && !allow_private => return Err(FetchError::Refused),
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| FetchError::Failed("the host does not resolve".into()))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(FetchError::Failed("the host does not resolve".into()));
    }
    if !allow_private && addrs.iter().any(|a| !is_public(a.ip())) {
        return Err(FetchError::Refused);
    }
    Ok(addrs)
}

/// An HTTP client for tenant URLs.
#[derive(Clone)]
pub struct GuardedClient {
    http: reqwest::Client,
    allow_private: bool,
}

impl GuardedClient {
    pub fn new(allow_private: bool, timeout: Duration) -> GuardedClient {
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            let ok = matches!(attempt.url().scheme(), "http" | "https") && literal_ok(attempt.url(), allow_private);
            if !ok {
                attempt.error(RefusedAddr)
            } else if attempt.previous().len() >= 5 {
                attempt.error("too many redirects")
            } else {
                attempt.follow()
            }
        });
        let http = guarded_builder(allow_private)
            .redirect(policy)
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .user_agent("paceline")
            .build()
            .expect("the HTTP client builds");
        GuardedClient { http, allow_private }
    }

    /// A client for webhook deliveries: the same address guard, and no redirects (an
    /// endpoint that answers 3xx failed the attempt; following it could reach anywhere).
    pub fn without_redirects(allow_private: bool, timeout: Duration) -> GuardedClient {
        let http = guarded_builder(allow_private)
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .pool_max_idle_per_host(64)
            .user_agent("paceline-webhooks")
            .build()
            .expect("the HTTP client builds");
        GuardedClient { http, allow_private }
    }

    /// POSTs `body` to `url` with `headers`: the answer's status, its `Retry-After` and
    /// the first `keep` bytes of its body.
    pub async fn post(
        &self,
        url: &url::Url,
        headers: reqwest::header::HeaderMap,
        body: bytes::Bytes,
        keep: usize,
    ) -> Result<Posted, FetchError> {
        if !matches!(url.scheme(), "http" | "https") || !literal_ok(url, self.allow_private) {
            return Err(FetchError::Refused);
        }
        let res = self.http.post(url.clone()).headers(headers).body(body).send().await.map_err(classify)?;
        let retry_after =
            res.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_string);
        let status = res.status().as_u16();
        // Read (a bounded part of) the body so the connection can be reused; keep its start.
        let mut stream = res.bytes_stream();
        let mut read = 0usize;
        let mut head = Vec::with_capacity(keep.min(4096));
        while let Some(Ok(chunk)) = stream.next().await {
            let room = keep.saturating_sub(head.len());
            head.extend_from_slice(&chunk[..chunk.len().min(room)]);
            read += chunk.len();
            if read > 64 * 1024 {
                break;
            }
        }
        Ok(Posted { status, retry_after, head })
    }

    /// POSTs a JSON body to `url` and reads the answer: its status and at most `limit`
    /// bytes of its body (more fails with `TooLarge`). For services that answer (the
    /// attendant's providers); the client's timeout bounds the whole call.
    pub async fn post_json(
        &self,
        url: &url::Url,
        headers: reqwest::header::HeaderMap,
        body: &serde_json::Value,
        limit: u64,
    ) -> Result<(u16, Vec<u8>), FetchError> {
        self.call(reqwest::Method::POST, url, headers, Some(body), limit).await
    }

    /// Calls `url` with `method` and a JSON body (or none), and reads the answer as
    /// [`GuardedClient::post_json`] does: for APIs a tenant points us at (Chatwoot).
    pub async fn call(
        &self,
        method: reqwest::Method,
        url: &url::Url,
        headers: reqwest::header::HeaderMap,
        body: Option<&serde_json::Value>,
        limit: u64,
    ) -> Result<(u16, Vec<u8>), FetchError> {
        if !matches!(url.scheme(), "http" | "https") || !literal_ok(url, self.allow_private) {
            return Err(FetchError::Refused);
        }
        let mut req = self.http.request(method, url.clone()).headers(headers);
        if let Some(b) = body {
            req = req.json(b);
        }
        let res = req.send().await.map_err(classify)?;
        let status = res.status().as_u16();
        Ok((status, read_capped(res, limit).await?))
    }

    /// POSTs a multipart form (a file upload) to `url` and reads the answer as
    /// [`GuardedClient::post_json`] does.
    pub async fn post_multipart(
        &self,
        url: &url::Url,
        headers: reqwest::header::HeaderMap,
        form: reqwest::multipart::Form,
        limit: u64,
    ) -> Result<(u16, Vec<u8>), FetchError> {
        if !matches!(url.scheme(), "http" | "https") || !literal_ok(url, self.allow_private) {
            return Err(FetchError::Refused);
        }
        let res = self.http.post(url.clone()).headers(headers).multipart(form).send().await.map_err(classify)?;
        let status = res.status().as_u16();
        Ok((status, read_capped(res, limit).await?))
    }

    /// GETs `url` and checks the answer before its body is read: a success status, and
    /// no declared length over `limit`. Returns the response (to stream) and its
    /// Content-Type without parameters.
    pub async fn open(&self, url: &url::Url, limit: u64) -> Result<(reqwest::Response, Option<String>), FetchError> {
        if !matches!(url.scheme(), "http" | "https") || !literal_ok(url, self.allow_private) {
            return Err(FetchError::Refused);
        }
        let res = self.http.get(url.clone()).send().await.map_err(classify)?;
        if !res.status().is_success() {
            return Err(FetchError::Failed(format!("status {}", res.status().as_u16())));
        }
        if res.content_length().is_some_and(|n| n > limit) {
            return Err(FetchError::TooLarge);
        }
        let content_type = res
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_string());
        Ok((res, content_type))
    }

    /// Downloads `url`, stopping as soon as the body passes `limit` bytes.
    /// Returns the bytes and the response's Content-Type.
    pub async fn download(&self, url: &url::Url, limit: u64) -> Result<(Vec<u8>, Option<String>), FetchError> {
        let (res, content_type) = self.open(url, limit).await?;
        Ok((read_capped(res, limit).await?, content_type))
    }
}

/// The answer to [`GuardedClient::post`].
#[derive(Debug, Clone)]
pub struct Posted {
    pub status: u16,
    pub retry_after: Option<String>,
    /// The start of the body (as many bytes as asked for, at most).
    pub head: Vec<u8>,
}

/// Every reqwest client of ours starts here: it trusts the bundled webpki roots only.
/// `object_store` turns on reqwest's native roots for the whole build, and a client that
/// uses them reads and parses the system's certificates each time it is built (about
/// 40 ms): a worker builds one per WhatsApp session.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_built_in_native_certs(false)
}

/// A reqwest client builder with the address guard: names resolve to public addresses
/// only (unless `allow_private`), no proxy from the environment, no redirects. Callers
/// that follow redirects set their own policy, which must check each target again.
pub fn guarded_builder(allow_private: bool) -> reqwest::ClientBuilder {
    client_builder()
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
}

/// Reads a response's body, stopping with `TooLarge` as soon as it passes `limit` bytes
/// (a declared length over it fails before a byte is read): a server that streams
/// forever costs at most `limit` bytes of memory.
pub async fn read_capped(res: reqwest::Response, limit: u64) -> Result<Vec<u8>, FetchError> {
    if res.content_length().is_some_and(|n| n > limit) {
        return Err(FetchError::TooLarge);
    }
    let mut body = Vec::with_capacity(res.content_length().unwrap_or(0).min(limit).min(1 << 20) as usize);
    let mut stream = res.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(classify)?;
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(FetchError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A refusal anywhere in the error's chain (resolver or redirect policy) is `Refused`.
fn classify(e: reqwest::Error) -> FetchError {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = src {
        if s.is::<RefusedAddr>() {
            return FetchError::Refused;
        }
        src = s.source();
    }
    // reqwest's message carries the URL, which may hold credentials: keep the kind only.
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_redirect() {
        "too many redirects"
    } else {
        "request failed"
    };
    FetchError::Failed(kind.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_and_internal_addresses() {
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "192.0.0.1",
            "240.0.0.1",
            "64:ff9b:1::808:808",
            "64:ff9b:1:ffff::1",
            "::8.8.8.8",
            "::7f00:1",
            "2002:7f00:1::1",
            "2002:a00:1::",
            "2002:c0a8:101::5",
            "fec0::1",
            "feff::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn literals_and_localhost_are_checked_before_connecting() {
        let u = |s: &str| url::Url::parse(s).unwrap();
        assert!(!literal_ok(&u("http://127.0.0.1/x"), false));
        assert!(!literal_ok(&u("http://[::1]/x"), false));
        assert!(!literal_ok(&u("http://localhost/x"), false));
        assert!(literal_ok(&u("http://example.com/x"), false));
        assert!(literal_ok(&u("http://127.0.0.1/x"), true));
    }
}
