//! whatsapp-rust's HTTP (media downloads and uploads, version checks) on a guarded
//! reqwest client. Media locators come from strangers' messages, so nothing here trusts
//! a URL: only https to WhatsApp's own hosts, no redirects, no proxy from the
//! environment (the instance's own `proxy_url` when it has one), public addresses only,
//! and every body read with a cap, stopping as soon as it passes it.
//!
//! The cap of a media download is its declared length (plus the encryption's padding
//! and MAC), set around the download with [`with_cap`]: the crate calls `execute` inline
//! in the same task, so a task-local carries it. Requests outside a download (uploads'
//! answers, version checks, the crate's own history and app-state blobs) get
//! [`DEFAULT_CAP`].

use std::future::Future;
use std::time::Duration;

use shared::fetch::FetchError;
use std::io::Read;

use whatsapp_rust::http::{HttpClient, HttpRequest, HttpResponse};
use whatsapp_rust::wacore::net::UploadBody;

/// The most a response outside a capped download may bring.
pub const DEFAULT_CAP: u64 = 128 * 1024 * 1024;
/// What AES-CBC padding (up to a block) and the media MAC (10 bytes) add to a plaintext.
pub const ENCRYPTION_OVERHEAD: u64 = 16 + 10;
/// The longest one request may take, body included.
const TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

tokio::task_local! {
    static BODY_CAP: u64;
}

/// Runs `f` (a media download) with every response body it reads capped at `cap` bytes.
pub async fn with_cap<F: Future>(cap: u64, f: F) -> F::Output {
    BODY_CAP.scope(cap, f).await
}

/// Why a request was not made or its answer not read.
#[derive(Debug, thiserror::Error)]
pub enum WaHttpError {
    /// The URL is not https to one of WhatsApp's hosts.
    #[error("the URL is not one of WhatsApp's hosts")]
    Refused,
    /// The body passed its cap (the download stopped there).
    #[error("the answer is larger than declared")]
    TooLarge,
    #[error("the request failed: {0}")]
    Failed(String),
}

/// Which hosts requests may go to.
#[derive(Debug, Clone)]
enum Hosts {
    /// WhatsApp's domains and their subdomains, over https.
    WhatsApp,
    /// Tests: one host, plain http allowed, private addresses reachable.
    #[cfg(test)]
    Only(String),
}

/// A session's HTTP client.
#[derive(Clone)]
pub struct WaHttp {
    http: reqwest::Client,
    hosts: Hosts,
}

/// WhatsApp's domains: media (`mmg.whatsapp.net`, `media-*.cdn.whatsapp.net`),
/// pictures (`pps.whatsapp.net`) and the web client's version check (`web.whatsapp.com`).
const DOMAINS: [&str; 2] = ["whatsapp.net", "whatsapp.com"];

fn whatsapp_host(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    DOMAINS.iter().any(|d| host == *d || host.strip_suffix(d).is_some_and(|rest| rest.ends_with('.')))
}

impl WaHttp {
    /// The client of an instance: through its `proxy_url` when it has one (http, socks5,
    /// socks5h), else straight out with the address guard.
    pub fn new(proxy_url: Option<&str>) -> Result<WaHttp, WaHttpError> {
        let builder = match proxy_url {
            // The proxy is the operator's (admin-set) and may sit on a private address:
            // the connection goes to it, and the target is still one of WhatsApp's hosts.
            Some(p) => shared::fetch::client_builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .proxy(reqwest::Proxy::all(p).map_err(|_| WaHttpError::Failed("the proxy URL is not usable".into()))?),
            None => shared::fetch::guarded_builder(false),
        };
        let http = builder
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TIMEOUT)
            .build()
            .map_err(|_| WaHttpError::Failed("the HTTP client does not build".into()))?;
        Ok(WaHttp { http, hosts: Hosts::WhatsApp })
    }

    /// Tests: requests only to `host`, over http too, private addresses allowed.
    #[cfg(test)]
    fn for_tests(host: &str) -> WaHttp {
        let http = shared::fetch::guarded_builder(true).timeout(TIMEOUT).build().unwrap();
        WaHttp { http, hosts: Hosts::Only(host.to_string()) }
    }

    fn allowed(&self, url: &url::Url) -> bool {
        if !url.username().is_empty() || url.password().is_some() {
            return false;
        }
        match &self.hosts {
            Hosts::WhatsApp => url.scheme() == "https" && url.host_str().is_some_and(whatsapp_host),
            #[cfg(test)]
            Hosts::Only(h) => matches!(url.scheme(), "http" | "https") && url.host_str() == Some(h.as_str()),
        }
    }

    /// One exchange; any status is an answer, only a refused, failed or oversized
    /// exchange errs.
    pub async fn request(&self, request: HttpRequest) -> Result<HttpResponse, WaHttpError> {
        let body = request.body.as_ref().map(|b| reqwest::Body::from(b.to_vec()));
        self.exchange(request, body, TIMEOUT).await
    }

    /// One exchange with `body` (none: the request's own).
    async fn exchange(
        &self,
        request: HttpRequest,
        body: Option<reqwest::Body>,
        timeout: Duration,
    ) -> Result<HttpResponse, WaHttpError> {
        let url = url::Url::parse(&request.url).map_err(|_| WaHttpError::Refused)?;
        if !self.allowed(&url) {
            return Err(WaHttpError::Refused);
        }
        let method = reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|_| WaHttpError::Refused)?;
        let mut rb = self.http.request(method, url).timeout(timeout);
        for (k, v) in &request.headers {
            rb = rb.header(k, v);
        }
        if let Some(body) = body {
            rb = rb.body(body);
        }
        let res = rb.send().await.map_err(|e| WaHttpError::Failed(kind_of(&e).into()))?;
        let status_code = res.status().as_u16();
        let cap = BODY_CAP.try_with(|c| *c).unwrap_or(DEFAULT_CAP);
        let body = shared::fetch::read_capped(res, cap).await.map_err(|e| match e {
            FetchError::TooLarge => WaHttpError::TooLarge,
            FetchError::Refused => WaHttpError::Refused,
            FetchError::Failed(why) => WaHttpError::Failed(why),
        })?;
        Ok(HttpResponse { status_code, body })
    }

    /// An upload whose body `reader` gives, exactly `length` bytes of it, sent as they
    /// are read (an exact `Content-Length`, never chunked: WhatsApp's CDN refuses that).
    /// Called from a blocking thread, which reads the body a few pieces ahead of the
    /// connection (the exchange runs on the runtime), so the body is never held whole;
    /// when the exchange ends (answered, failed, timed out) the reading stops.
    pub fn upload(&self, request: HttpRequest, reader: UploadBody, length: u64) -> Result<HttpResponse, WaHttpError> {
        let rt = tokio::runtime::Handle::try_current().map_err(|_| WaHttpError::Failed("no runtime".into()))?;
        // Refused before anything is read.
        let url = url::Url::parse(&request.url).map_err(|_| WaHttpError::Refused)?;
        if !self.allowed(&url) {
            return Err(WaHttpError::Refused);
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(2);
        let pieces = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|p| (p, rx)) });
        let mut request = request;
        request.headers.retain(|k, _| !k.eq_ignore_ascii_case("content-length"));
        request.headers.insert("Content-Length".into(), length.to_string());
        let this = self.clone();
        let exchange = rt.spawn(async move {
            this.exchange(request, Some(reqwest::Body::wrap_stream(pieces)), upload_timeout(length)).await
        });
        pump(reader, length, tx);
        rt.block_on(exchange).map_err(|_| WaHttpError::Failed("the upload was cut short".into()))?
    }
}

/// How long an upload of `length` bytes may take: the usual minute, and a second more for
/// every 256 KiB, at most 15 minutes.
fn upload_timeout(length: u64) -> Duration {
    (TIMEOUT + Duration::from_secs(length / (256 * 1024))).min(Duration::from_secs(15 * 60))
}

/// Reads `length` bytes of `reader` into `tx` in pieces of 64 KiB, stopping at the first
/// error (sent on, so the request fails) or when the request is gone (its body dropped:
/// answered, failed or timed out).
fn pump(mut reader: UploadBody, length: u64, tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>) {
    let mut left = length;
    while left > 0 {
        let mut buf = vec![0u8; left.min(64 * 1024) as usize];
        let piece = match reader.read(&mut buf) {
            Ok(0) => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the upload's body ended early")),
            Ok(n) => {
                buf.truncate(n);
                left -= n as u64;
                Ok(bytes::Bytes::from(buf))
            }
            Err(e) => Err(e),
        };
        let failed = piece.is_err();
        if tx.blocking_send(piece).is_err() || failed {
            return;
        }
    }
}

/// reqwest's messages carry the URL (the media's auth token): keep the kind only.
fn kind_of(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    }
}

#[whatsapp_rust::async_trait]
impl HttpClient for WaHttp {
    async fn execute(&self, request: HttpRequest) -> whatsapp_rust::anyhow::Result<HttpResponse> {
        Ok(self.request(request).await?)
    }

    fn execute_upload(
        &self,
        request: HttpRequest,
        body: UploadBody,
        content_length: u64,
    ) -> whatsapp_rust::anyhow::Result<HttpResponse> {
        Ok(self.upload(request, body, content_length)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn only_whatsapp_hosts_over_https() {
        let c = WaHttp::new(None).unwrap();
        let ok = |u: &str| c.allowed(&url::Url::parse(u).unwrap());
        assert!(ok("https://mmg.whatsapp.net/v/t62.7118-24/1_2_n.enc?ccb=11-4&oh=x&oe=y"));
        assert!(ok("https://media-gru2-1.cdn.whatsapp.net/v/x"));
        assert!(ok("https://web.whatsapp.com/check-update"));
        assert!(ok("https://MMG.WhatsApp.NET./x"));
        assert!(!ok("http://mmg.whatsapp.net/x"), "plain http");
        assert!(!ok("https://evil.example/x"));
        assert!(!ok("https://mmg.whatsapp.net.evil.example/x"));
        assert!(!ok("https://evilwhatsapp.net/x"));
        assert!(!ok("https://token@evil.example/x"));
        assert!(!ok("https://user:pw@mmg.whatsapp.net/x"), "credentials in the URL");
        assert!(!ok("https://127.0.0.1/x"));
        // What `https://{host}{direct_path}` makes of a hostile path: another host.
        assert!(!ok(&format!("https://mmg.whatsapp.net{}", "@evil.example/x")));
    }

    /// A server that answers every connection with headers, then `body` bytes, then
    /// zeros forever (or closes after `body` when `forever` is false). Counts connections.
    async fn server(
        head: &'static str,
        forever: bool,
    ) -> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    let _ = sock.write_all(head.as_bytes()).await;
                    let chunk = vec![0u8; 64 * 1024];
                    while forever && sock.write_all(&chunk).await.is_ok() {}
                });
            }
        });
        (addr, hits)
    }

    /// A server that reads one request whole and answers with what it saw: whether the
    /// body came chunked, its `Content-Length`, and the body's length and first bytes.
    async fn echo() -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = vec![0u8; 64 * 1024];
                    let head_end = loop {
                        let n = sock.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        got.extend_from_slice(&buf[..n]);
                        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                    };
                    let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while got.len() - head_end < length {
                        let n = sock.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    let body = &got[head_end..];
                    let answer = format!(
                        "chunked={} length={length} got={} first={}",
                        head.contains("transfer-encoding: chunked"),
                        body.len(),
                        hex::encode(&body[..body.len().min(4)])
                    );
                    let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}", answer.len());
                    let _ = sock.write_all(reply.as_bytes()).await;
                });
            }
        });
        addr
    }

    /// An upload's body goes as it is read, with the exact length declared (WhatsApp's
    /// CDN refuses chunked bodies), to allowed hosts only; a body that ends early or
    /// fails fails the exchange.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn uploads_stream_their_body_with_an_exact_length() {
        let addr = echo().await;
        let len = 3 * 1024 * 1024 + 5;
        let data: Vec<u8> = (0..len).map(|i| (i % 256) as u8).collect();
        let up = |url: String, data: Vec<u8>, declared: u64| {
            tokio::task::spawn_blocking(move || {
                let c = WaHttp::for_tests("127.0.0.1");
                let request = HttpRequest::post(url).with_header("content-length", "1");
                c.upload(request, Box::new(std::io::Cursor::new(data)), declared)
            })
        };
        let r = up(format!("http://{addr}/mms/document/x"), data.clone(), len as u64).await.unwrap().unwrap();
        assert_eq!(r.status_code, 200);
        assert_eq!(String::from_utf8(r.body).unwrap(), format!("chunked=false length={len} got={len} first=00010203"));
        // The reader gives fewer bytes than declared: no answer is taken for a whole body.
        let r = up(format!("http://{addr}/mms/document/x"), data[..1000].to_vec(), len as u64).await.unwrap();
        assert!(matches!(r, Err(WaHttpError::Failed(_))), "{r:?}");
        // Another host: refused before anything is read or sent.
        let r = up(format!("http://localhost:{}/x", addr.port()), data, len as u64).await.unwrap();
        assert!(matches!(r, Err(WaHttpError::Refused)), "{r:?}");
    }

    #[tokio::test]
    async fn an_endless_body_stops_at_its_cap() {
        let (addr, _) = server("HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n\r\n", true).await;
        let c = WaHttp::for_tests("127.0.0.1");
        let url = format!("http://{addr}/v/t62/endless.enc");
        let started = std::time::Instant::now();
        let r = with_cap(1024 * 1024, c.request(HttpRequest::get(&url))).await;
        assert!(matches!(r, Err(WaHttpError::TooLarge)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "stopped early, not at the timeout");
        // Outside a download the default cap holds, still far below "forever".
        let r = c.request(HttpRequest::get(&url)).await;
        assert!(matches!(r, Err(WaHttpError::TooLarge)), "{r:?}");
    }

    #[tokio::test]
    async fn a_declared_length_over_the_cap_is_refused_before_reading() {
        let (addr, _) = server("HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n", false).await;
        let c = WaHttp::for_tests("127.0.0.1");
        let r = with_cap(1000, c.request(HttpRequest::get(format!("http://{addr}/x")))).await;
        assert!(matches!(r, Err(WaHttpError::TooLarge)), "{r:?}");
    }

    #[tokio::test]
    async fn redirects_are_answers_never_followed() {
        let (target, hits) = server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false).await;
        let head: &'static str = Box::leak(
            format!("HTTP/1.1 302 Found\r\nLocation: http://{target}/stolen\r\nContent-Length: 0\r\n\r\n")
                .into_boxed_str(),
        );
        let (addr, _) = server(head, false).await;
        let c = WaHttp::for_tests("127.0.0.1");
        let r = c.request(HttpRequest::get(format!("http://{addr}/x"))).await.unwrap();
        assert_eq!(r.status_code, 302);
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "the redirect target was never asked");
    }

    #[tokio::test]
    async fn other_hosts_are_never_contacted() {
        let (addr, hits) = server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false).await;
        let c = WaHttp::for_tests("localhost.invalid");
        let r = c.request(HttpRequest::get(format!("http://{addr}/x"))).await;
        assert!(matches!(r, Err(WaHttpError::Refused)), "{r:?}");
        // And the production client refuses anything but WhatsApp's hosts over https.
        let r = WaHttp::new(None).unwrap().request(HttpRequest::get(format!("http://{addr}/x"))).await;
        assert!(matches!(r, Err(WaHttpError::Refused)), "{r:?}");
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn the_environment_proxy_is_ignored_and_the_instance_proxy_used() {
        // A "proxy" that counts who reached it: the instance's proxy carries the request,
        // HTTPS_PROXY in the environment never does.
        let (proxy, hits) = server("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", false).await;
        let with_proxy = WaHttp::new(Some(&format!("http://{proxy}"))).unwrap();
        let _ = with_proxy.request(HttpRequest::get("https://mmg.whatsapp.net/v/x")).await;
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1, "the instance's proxy was used");
        // reqwest reads the environment when a client is built: build one with it set.
        // SAFETY of the test: no other test in this binary reads HTTPS_PROXY.
        std::env::set_var("HTTPS_PROXY", format!("http://{proxy}"));
        let plain = WaHttp::new(None).unwrap();
        std::env::remove_var("HTTPS_PROXY");
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            plain.request(HttpRequest::get("https://mmg.whatsapp.net/v/x")),
        )
        .await;
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1, "the environment's proxy was not used");
    }
}
