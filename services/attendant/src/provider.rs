//! Calling the attendant's provider: an OpenAI-compatible Chat Completions server, or a
//! webhook bot. Every call goes through the guarded client (the provider's address is a
//! tenant's), reads at most 1 MiB of answer, retries what can pass (connection failures,
//! timeouts, 408, 429, 5xx) with backoff, and ends by the message's deadline. Errors name
//! a reason and a status, never the URL, the key or the answer's body.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};
use shared::fetch::{FetchError, GuardedClient};
use tokio::time::Instant;

use super::decide::{Inbound, Turn};
use domain::attendant::ProviderIn;

/// The most of an answer read.
const ANSWER_LIMIT: u64 = 1024 * 1024;
const ATTEMPTS: u32 = 3;

/// What the provider answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// The reply; `None` when the bot chose to say nothing.
    pub text: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct ProviderError {
    /// `timeout`, `unreachable`, `refused_address`, `http_status`, `bad_answer`, `too_large`.
    pub reason: &'static str,
    pub detail: String,
    pub retryable: bool,
}

fn err(reason: &'static str, detail: impl Into<String>, retryable: bool) -> ProviderError {
    ProviderError { reason, detail: detail.into(), retryable }
}

/// A provider and how to reach it.
pub struct Call<'a> {
    pub provider: &'a ProviderIn,
    pub secret: Option<&'a str>,
    pub client: &'a GuardedClient,
    pub deadline: Instant,
}

impl Call<'_> {
    /// Asks for a reply to `m` given the conversation, retrying until the deadline.
    pub async fn ask(&self, instance: &str, m: &Inbound, turns: &[Turn]) -> Result<Answer, ProviderError> {
        let (url, body) = match self.provider {
            ProviderIn::Openai(o) => {
                let base = o.base_url.trim_end_matches('/');
                let url = format!("{base}/chat/completions");
                let mut body = json!({ "model": o.model, "messages": turns });
                if let Some(t) = o.temperature {
                    body["temperature"] = json!(t);
                }
                if let Some(t) = o.max_tokens {
                    body["max_tokens"] = json!(t);
                }
                (url, body)
            }
            ProviderIn::Webhook(w) => {
                let (system, rest): (Vec<&Turn>, Vec<&Turn>) = turns.iter().partition(|t| t.role == "system");
                let body = json!({
                    "instance_id": instance,
                    "chat_jid": m.chat_jid,
                    "message": {
                        "message_id": m.message_id, "from_jid": m.from_jid, "type": m.kind,
                        "content": m.content, "timestamp": m.timestamp,
                    },
                    "system_prompt": system.first().map(|t| t.content.as_str()).unwrap_or(""),
                    "messages": rest,
                });
                (w.url.clone(), body)
            }
        };
        let url = url::Url::parse(&url).map_err(|_| err("bad_config", "the provider's URL does not parse", false))?;
        let headers = self.headers()?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(err("timeout", "no answer before the reply timeout", true));
            }
            let res =
                match tokio::time::timeout(left, self.client.post_json(&url, headers.clone(), &body, ANSWER_LIMIT))
                    .await
                {
                    Err(_) => Err(err("timeout", "no answer before the reply timeout", true)),
                    Ok(Err(FetchError::Refused)) => {
                        Err(err("refused_address", "the provider's address is not allowed", false))
                    }
                    Ok(Err(FetchError::TooLarge)) => Err(err("too_large", "the answer passed 1 MiB", false)),
                    Ok(Err(FetchError::Failed(d))) => Err(err("unreachable", d, true)),
                    Ok(Ok((status, body))) => answer(self.provider, status, &body),
                };
            match res {
                Err(e) if e.retryable && attempt < ATTEMPTS => {
                    let wait =
                        shared::backoff::doubling(Duration::from_millis(500), attempt - 1, Duration::from_secs(2));
                    if Instant::now() + wait >= self.deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(wait).await;
                }
                other => return other,
            }
        }
    }
}

impl Call<'_> {
    /// Transcribes audio through an OpenAI-compatible `/audio/transcriptions` with `model`:
    /// one attempt within the deadline (a message without its transcription is still
    /// answered, described by its type).
    pub async fn transcribe(
        &self,
        model: &str,
        audio: Vec<u8>,
        mime: &str,
        filename: &str,
    ) -> Result<String, ProviderError> {
        let ProviderIn::Openai(o) = self.provider else {
            return Err(err("bad_config", "only OpenAI-compatible providers transcribe", false));
        };
        let url = format!("{}/audio/transcriptions", o.base_url.trim_end_matches('/'));
        let url = url::Url::parse(&url).map_err(|_| err("bad_config", "the provider's URL does not parse", false))?;
        let file = reqwest::multipart::Part::bytes(audio)
            .file_name(filename.to_string())
            .mime_str(mime)
            .map_err(|_| err("bad_config", "the audio's type is not a MIME type", false))?;
        let form = reqwest::multipart::Form::new().text("model", model.to_string()).part("file", file);
        let left = self.deadline.saturating_duration_since(Instant::now());
        let (status, body) =
            match tokio::time::timeout(left, self.client.post_multipart(&url, self.headers()?, form, ANSWER_LIMIT))
                .await
            {
                Err(_) => return Err(err("timeout", "no transcription before the reply timeout", true)),
                Ok(Err(FetchError::Refused)) => {
                    return Err(err("refused_address", "the provider's address is not allowed", false))
                }
                Ok(Err(FetchError::TooLarge)) => return Err(err("too_large", "the answer passed 1 MiB", false)),
                Ok(Err(FetchError::Failed(d))) => return Err(err("unreachable", d, true)),
                Ok(Ok(r)) => r,
            };
        if !(200..300).contains(&status) {
            return Err(err("http_status", format!("the provider answered {status}"), status >= 500));
        }
        let v: Value = serde_json::from_slice(&body).map_err(|_| err("bad_answer", "the answer is not JSON", false))?;
        let text =
            v.get("text").and_then(Value::as_str).ok_or_else(|| err("bad_answer", "the answer has no text", false))?;
        nonempty(text).ok_or_else(|| err("bad_answer", "the transcription is empty", false))
    }

    /// The secret as a bearer token, marked sensitive.
    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(s) = self.secret {
            let mut v = HeaderValue::from_str(&format!("Bearer {s}"))
                .map_err(|_| err("bad_config", "the secret is not a valid header value", false))?;
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        Ok(headers)
    }
}

/// Reads an answer by its status and body.
fn answer(provider: &ProviderIn, status: u16, body: &[u8]) -> Result<Answer, ProviderError> {
    if !(200..300).contains(&status) {
        let retryable = matches!(status, 408 | 429) || status >= 500;
        return Err(err("http_status", format!("the provider answered {status}"), retryable));
    }
    match provider {
        ProviderIn::Openai(_) => {
            let v: Value =
                serde_json::from_slice(body).map_err(|_| err("bad_answer", "the answer is not JSON", false))?;
            let text = v
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .ok_or_else(|| err("bad_answer", "the answer has no choices[0].message.content", false))?;
            let tokens = |k: &str| v.pointer(&format!("/usage/{k}")).and_then(Value::as_i64).unwrap_or(0).max(0);
            Ok(Answer {
                text: nonempty(text),
                prompt_tokens: tokens("prompt_tokens"),
                completion_tokens: tokens("completion_tokens"),
            })
        }
        ProviderIn::Webhook(_) => Ok(Answer { text: webhook_text(body)?, ..Answer::default() }),
    }
}

fn nonempty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| truncate(t, shared::message::TEXT_LIMIT))
}

/// At most `limit` bytes, cut at a character boundary.
fn truncate(s: &str, limit: usize) -> String {
    let mut end = s.len().min(limit);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// A webhook bot's reply: a JSON string, or an object with `reply`, `text`, `output`,
/// `answer` or `message` (n8n, Flowise, Dify and Typebot answer one of these), or the
/// first element of an array of such; plain text as it is. Empty or null: no reply.
fn webhook_text(body: &[u8]) -> Result<Option<String>, ProviderError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => {
            let s = std::str::from_utf8(body).map_err(|_| err("bad_answer", "the answer is not text", false))?;
            return Ok(nonempty(s));
        }
    };
    let v = match v {
        Value::Array(mut a) if !a.is_empty() => a.swap_remove(0),
        v => v,
    };
    match v {
        Value::String(s) => Ok(nonempty(&s)),
        Value::Null => Ok(None),
        Value::Object(o) => {
            for k in ["reply", "text", "output", "answer", "message"] {
                match o.get(k) {
                    Some(Value::String(s)) => return Ok(nonempty(s)),
                    Some(Value::Null) => return Ok(None),
                    _ => {}
                }
            }
            Err(err("bad_answer", "the answer has none of reply, text, output, answer or message", false))
        }
        _ => Err(err("bad_answer", "the answer is not a reply", false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::attendant::{OpenAiIn, OpenAiKind, WebhookIn, WebhookKind};

    fn openai() -> ProviderIn {
        ProviderIn::Openai(OpenAiIn {
            kind: OpenAiKind::Openai,
            base_url: "https://x/v1".into(),
            model: "m".into(),
            api_key: None,
            temperature: None,
            max_tokens: None,
            transcription_model: None,
        })
    }

    fn webhook() -> ProviderIn {
        ProviderIn::Webhook(WebhookIn { kind: WebhookKind::Webhook, url: "https://x".into(), secret: None })
    }

    #[test]
    fn openai_answers_and_usage() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":" Hi! "}}],"usage":{"prompt_tokens":12,"completion_tokens":3}}"#;
        assert_eq!(
            answer(&openai(), 200, body).unwrap(),
            Answer { text: Some("Hi!".into()), prompt_tokens: 12, completion_tokens: 3 }
        );
        assert_eq!(answer(&openai(), 200, b"{}").unwrap_err().reason, "bad_answer");
        let e = answer(&openai(), 500, b"secret stuff").unwrap_err();
        assert!(e.retryable && !e.to_string().contains("secret"));
        assert!(answer(&openai(), 429, b"").unwrap_err().retryable);
        assert!(!answer(&openai(), 401, b"").unwrap_err().retryable);
    }

    #[test]
    fn webhook_bots_answer_in_their_shapes() {
        let w = webhook();
        for (body, want) in [
            (&br#"{"reply":"a"}"#[..], Some("a")),
            (br#"[{"output":"b"}]"#, Some("b")),
            (br#"{"text":"c","other":1}"#, Some("c")),
            (br#""d""#, Some("d")),
            (b"plain e", Some("plain e")),
            (br#"{"reply":null}"#, None),
            (b"", None),
            (br#"{"reply":"  "}"#, None),
        ] {
            assert_eq!(answer(&w, 200, body).unwrap().text.as_deref(), want, "{}", String::from_utf8_lossy(body));
        }
        assert_eq!(answer(&w, 200, br#"{"nothing":1}"#).unwrap_err().reason, "bad_answer");
        assert_eq!(answer(&w, 200, b"\xff\xfe").unwrap_err().reason, "bad_answer");
        let long = "é".repeat(shared::message::TEXT_LIMIT);
        assert!(nonempty(&long).unwrap().len() <= shared::message::TEXT_LIMIT);
    }
}
