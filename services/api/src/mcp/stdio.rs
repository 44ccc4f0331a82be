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
        let mut url = url::Url::parse(&base).context("PACELINE_URL is not a URL")?;
        anyhow::ensure!(matches!(url.scheme(), "http" | "https"), "PACELINE_URL must be an http or https URL");
        url.set_path("/mcp");
        let token = std::env::var("PACELINE_TOKEN").context("PACELINE_TOKEN is not set")?;
        anyhow::ensure!(!token.trim().is_empty(), "PACELINE_TOKEN is empty");
        Ok(Target { url, token: token.trim().to_string() })
    }
}

/// Forwards stdin to the endpoint until stdin ends.
pub async fn run(target: Target) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(CALL_TIMEOUT)
        .build()
        .context("building the HTTP client")?;
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
    if !is_sse {
        let body = res.bytes().await.context("reading the answer")?;
        return write_line(out, &body).await;
    }
    // Server-sent events: each `data:` block is one JSON-RPC message.
    let mut stream = res.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk.context("reading the event stream")?);
        while let Some(end) = find_event_end(&buf) {
            let event: Vec<u8> = buf.drain(..end.0 + end.1).collect();
            let data = sse_data(&event[..end.0]);
            if !data.trim().is_empty() {
                write_line(out, data.as_bytes()).await?;
            }
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

    #[tokio::test]
    async fn an_unreachable_endpoint_answers_requests_with_an_error_and_notifications_with_nothing() {
        let client = reqwest::Client::new();
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
