//! `paceline mcp`: MCP over stdio for local clients (desktop assistants), forwarded message
//! by message to `POST {PACELINE_URL}/mcp` with `PACELINE_TOKEN`. One implementation and
//! one authorization path: the bridge only moves bytes. Only protocol goes to stdout.
//!
//! Each line on stdin is one JSON-RPC message. A JSON answer is written as one line; an
//! SSE answer (progress, then the result) as one line per event; a notification's 202
//! writes nothing. When the HTTP call itself fails (unreachable, 401), a request gets a
//! JSON-RPC error naming the status, never the token.

use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest line read from stdin (one JSON-RPC message).
const LINE_LIMIT: usize = crate::mcp::BODY_LIMIT;
/// The longest any one answer may take (a `wait=true` send stops at 2 minutes).
const CALL_TIMEOUT: Duration = Duration::from_secs(180);
/// The most of one answer (a JSON body, or one event of a stream) held before it is
/// written: past it the answer is refused, never buffered without bound.
const ANSWER_LIMIT: usize = 16 * 1024 * 1024;

/// Where to forward, from the environment.
pub struct Target {
    pub url: url::Url,
    pub token: String,
}

impl Target {
    /// `PACELINE_URL` (the API's base URL; default `http://127.0.0.1:8080`) and
    /// `PACELINE_TOKEN`.
    pub fn from_env() -> anyhow::Result<Target> {
        let base = std::env::var("PACELINE_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
        let token = std::env::var("PACELINE_TOKEN").context("PACELINE_TOKEN is not set")?;
        Target::new(&base, &token)
    }

    /// The endpoint under `base`: https, or plain http only on this machine (loopback),
    /// so the token never crosses a network in the clear.
    pub fn new(base: &str, token: &str) -> anyhow::Result<Target> {
        let mut url = url::Url::parse(base).context("PACELINE_URL is not a URL")?;
        let loopback = match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => false,
        };
        match url.scheme() {
            "https" => {}
            "http" => anyhow::ensure!(
                loopback,
                "PACELINE_URL must be https unless it is on this machine (127.0.0.1, ::1, localhost): the token would cross the network in the clear"
            ),
            _ => anyhow::bail!("PACELINE_URL must be an http or https URL"),
        }
        url.set_path("/mcp");
        anyhow::ensure!(!token.trim().is_empty(), "PACELINE_TOKEN is empty");
        Ok(Target { url, token: token.trim().to_string() })
    }
}

/// Forwards stdin to the endpoint until stdin ends.
pub async fn run(target: Target) -> anyhow::Result<()> {
    let client = client()?;
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut stdout = tokio::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut stdin).take(LINE_LIMIT as u64 + 1).read_until(b'\n', &mut line).await?;
        if n == 0 {
            return Ok(());
        }
        if line.len() > LINE_LIMIT && !line.ends_with(b"\n") {
            tracing::warn!(limit = LINE_LIMIT, "a message over the size limit was dropped");
            // Skip the rest of that line.
            let mut rest = Vec::new();
            stdin.read_until(b'\n', &mut rest).await?;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        forward(&client, &target, text, &mut stdout).await?;
    }
}

/// The bridge's HTTP client: no redirect is followed (the token goes to `PACELINE_URL`
/// and nowhere else), no environment proxy, and every call within [`CALL_TIMEOUT`].
fn client() -> anyhow::Result<reqwest::Client> {
    shared::fetch::client_builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(CALL_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .context("building the HTTP client")
}

/// One message: POSTs it, writes what comes back.
async fn forward<W: AsyncWrite + Unpin>(
    client: &reqwest::Client,
    target: &Target,
    message: &str,
    out: &mut W,
) -> anyhow::Result<()> {
    let id = serde_json::from_str::<Value>(message).ok().and_then(|v| v.get("id").cloned()).filter(|v| !v.is_null());
    let sent = client
        .post(target.url.clone())
        .bearer_auth(&target.token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(message.to_string())
        .send()
        .await;
    let res = match sent {
        Ok(r) => r,
        Err(e) => {
            let why = if e.is_timeout() { "timed out" } else { "unreachable" };
            tracing::warn!(why, "the MCP endpoint did not answer");
            return reply_error(out, id, &format!("the paceline API at PACELINE_URL is {why}")).await;
        }
    };
    let status = res.status();
    let is_sse = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status == reqwest::StatusCode::ACCEPTED {
        return Ok(());
    }
    if !status.is_success() {
        let body: Value = res.json().await.unwrap_or(Value::Null);
        let detail = body["error"]["message"].as_str().map(|m| format!(": {m}")).unwrap_or_default();
        return reply_error(out, id, &format!("the MCP endpoint answered HTTP {}{detail}", status.as_u16())).await;
    }
    let too_large = || format!("the MCP endpoint's answer is over {} MiB", ANSWER_LIMIT >> 20);
    let mut stream = res.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    if !is_sse {
        while let Some(chunk) = stream.next().await {
            buf.extend_from_slice(&chunk.context("reading the answer")?);
            if buf.len() > ANSWER_LIMIT {
                tracing::warn!(limit = ANSWER_LIMIT, "an answer over the size limit was dropped");
                return reply_error(out, id, &too_large()).await;
            }
        }
        return write_line(out, &buf).await;
    }
    // Server-sent events: each `data:` block is one JSON-RPC message. What was searched
    // for an event's end is not searched again.
    let mut searched: usize = 0;
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk.context("reading the event stream")?);
        loop {
            let from = searched.saturating_sub(3);
            let Some((len, sep)) = find_event_end(&buf[from..]) else {
                searched = buf.len();
                break;
            };
            let event: Vec<u8> = buf.drain(..from + len + sep).collect();
            searched = 0;
            let data = sse_data(&event[..from + len]);
            if !data.trim().is_empty() {
                write_line(out, data.as_bytes()).await?;
            }
        }
        if buf.len() > ANSWER_LIMIT {
            tracing::warn!(limit = ANSWER_LIMIT, "an event over the size limit ended the stream");
            return reply_error(out, id, &too_large()).await;
        }
    }
    Ok(())
}

/// Where the first event of `buf` ends: its length and the blank line's.
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2));
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| (p, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The joined `data:` lines of one event.
fn sse_data(event: &[u8]) -> String {
    String::from_utf8_lossy(event)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn reply_error<W: AsyncWrite + Unpin>(out: &mut W, id: Option<Value>, message: &str) -> anyhow::Result<()> {
    // A notification gets no answer.
    let Some(id) = id else { return Ok(()) };
    let err = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32603, "message": message } });
    write_line(out, err.to_string().as_bytes()).await
}

async fn write_line<W: AsyncWrite + Unpin>(out: &mut W, bytes: &[u8]) -> anyhow::Result<()> {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    // One message per line: a pretty-printed answer is made compact.
    let compact = match serde_json::from_slice::<Value>(trimmed) {
        Ok(v) => v.to_string().into_bytes(),
        Err(_) => trimmed.to_vec(),
    };
    out.write_all(&compact).await?;
    out.write_all(b"\n").await?;
    out.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_and_join_their_data() {
        let buf = b"id: 1\ndata: {\"a\":1}\n\ndata: {\"b\":\ndata: 2}\r\n\r\nrest";
        let (len, sep) = find_event_end(buf).unwrap();
        assert_eq!(sse_data(&buf[..len]), "{\"a\":1}");
        let rest = &buf[len + sep..];
        let (len2, _) = find_event_end(rest).unwrap();
        assert_eq!(sse_data(&rest[..len2]), "{\"b\":\n2}");
        assert_eq!(find_event_end(b"data: x"), None);
    }

    #[test]
    fn plain_http_only_on_this_machine() {
        for ok in ["http://127.0.0.1:8787", "http://localhost:8787/x", "http://[::1]:8787", "https://gw.example.com"] {
            let t = Target::new(ok, "pl_inst_x").unwrap();
            assert_eq!(t.url.path(), "/mcp", "{ok}");
        }
        for bad in ["http://gw.example.com", "http://10.0.0.7:8787", "http://127.0.0.1.nip.io", "ftp://localhost"] {
            let e = Target::new(bad, "pl_inst_secret").err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(!e.to_string().contains("secret"));
        }
        assert!(Target::new("https://gw.example.com", " ").is_err());
    }

    /// A redirect is not followed (the token would go along), and an answer without
    /// end is cut off at the limit.
    #[tokio::test]
    async fn redirects_are_not_followed_and_answers_are_bounded() {
        use axum::routing::post;
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = hits.clone();
        let app = axum::Router::new()
            .route("/mcp", post(|| async { axum::response::Redirect::temporary("/elsewhere") }))
            .route(
                "/elsewhere",
                post(move || {
                    seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    async { "{}" }
                }),
            )
            .route(
                "/big/mcp",
                post(|| async {
                    let chunks = futures::stream::repeat(bytes::Bytes::from(vec![b'x'; 1 << 20]))
                        .take(ANSWER_LIMIT / (1 << 20) + 2)
                        .map(Ok::<_, std::io::Error>);
                    ([("content-type", "text/event-stream")], axum::body::Body::from_stream(chunks))
                }),
            );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        let client = client().unwrap();
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let mut out = Vec::new();
        let target = Target::new(&format!("http://{addr}"), "pl_inst_secret").unwrap();
        forward(&client, &target, ping, &mut out).await.unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert!(v["error"]["message"].as_str().unwrap().contains("HTTP 307"), "{v}");
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "the redirect was not followed");
        let mut out = Vec::new();
        let target = Target { url: format!("http://{addr}/big/mcp").parse().unwrap(), token: "t".into() };
        forward(&client, &target, ping, &mut out).await.unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert!(v["error"]["message"].as_str().unwrap().contains("MiB"), "{v}");
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_answers_requests_with_an_error_and_notifications_with_nothing() {
        let client = shared::fetch::client_builder().build().expect("a client builds");
        let target = Target { url: "http://127.0.0.1:1/mcp".parse().unwrap(), token: "pl_inst_secret".into() };
        let mut out = Vec::new();
        forward(&client, &target, r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#, &mut out).await.unwrap();
        forward(&client, &target, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, &mut out).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let v: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["id"], 7);
        assert!(v["error"]["message"].as_str().unwrap().contains("unreachable"));
        assert!(!text.contains("secret"), "the token is never echoed");
    }
}
