//! An instance's attendant configuration: the body of `PUT {inst}/attendant` and its
//! checks, how it is stored (its secret sealed apart from the rest) and shown (the secret
//! never: only whether it is set), and `PATCH` as a JSON merge patch over what is stored.

use crate::{Error, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::attendants::{AttendantRow, Pause};
use shared::ids::InstanceId;
use shared::jid::Jid;
use shared::sealed::Sealer;
use utoipa::ToSchema;

/// Longest system prompt (bytes).
pub const SYSTEM_PROMPT_LIMIT: usize = 16 * 1024;
const KEYWORDS_LIMIT: usize = 20;
const KEYWORD_LIMIT: usize = 64;
const IGNORE_LIMIT: usize = 1000;
const SECRET_LIMIT: usize = 512;

fn yes() -> bool {
    true
}
fn d_memory() -> u32 {
    20
}
fn d_replies() -> u32 {
    30
}
fn d_timeout() -> u32 {
    60
}
fn d_pause() -> u32 {
    60
}
fn d_loop() -> u32 {
    10
}

/// Body of `PUT {inst}/attendant`: the whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttendantIn {
    /// Default true.
    #[serde(default = "yes")]
    pub enabled: bool,
    pub provider: ProviderIn,
    /// Up to 16 KiB.
    #[serde(default)]
    #[schema(max_length = 16384)]
    pub system_prompt: String,
    /// How many earlier messages of the chat go with each request (default 20).
    #[serde(default = "d_memory")]
    #[schema(minimum = 0, maximum = 100)]
    pub memory_messages: u32,
    #[serde(default)]
    pub triggers: Triggers,
    #[serde(default)]
    pub handoff: Handoff,
    /// Replies per chat in any hour (default 30); past it messages go unanswered.
    #[serde(default = "d_replies")]
    #[schema(minimum = 1, maximum = 1000)]
    pub max_replies_per_chat_per_hour: u32,
    /// From the message's arrival to its reply being queued, including the provider's
    /// retries (default 60); a message older than this is not answered.
    #[serde(default = "d_timeout")]
    #[schema(minimum = 5, maximum = 300)]
    pub reply_timeout_seconds: u32,
    /// The provider may be on a private or loopback address (a model server in the
    /// cluster). Only the admin may set it.
    #[serde(default)]
    pub allow_private_targets: bool,
    /// How much the attendant may answer for this instance, over every chat.
    #[serde(default)]
    pub budget: Budget,
}

/// The instance's budget: replies and provider tokens (as the provider reports them)
/// per hour and per day, over every chat. Past one, messages go unanswered
/// (`attendant.failed`, `budget`) until the window has room.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Budget {
    /// Default 200.
    #[schema(minimum = 1, maximum = 10000)]
    pub replies_per_hour: u32,
    /// Default 1,000.
    #[schema(minimum = 1, maximum = 100000)]
    pub replies_per_day: u32,
    /// Default 200,000.
    #[schema(minimum = 1, maximum = 10000000)]
    pub tokens_per_hour: u64,
    /// Default 1,000,000.
    #[schema(minimum = 1, maximum = 100000000)]
    pub tokens_per_day: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { replies_per_hour: 200, replies_per_day: 1000, tokens_per_hour: 200_000, tokens_per_day: 1_000_000 }
    }
}

impl Budget {
    fn check(&self) -> Result<()> {
        let ok = (1..=10_000).contains(&self.replies_per_hour)
            && (1..=100_000).contains(&self.replies_per_day)
            && (1..=10_000_000).contains(&self.tokens_per_hour)
            && (1..=100_000_000).contains(&self.tokens_per_day);
        if !ok {
            return Err(Error::invalid(
                "budget: replies_per_hour 1-10000, replies_per_day 1-100000, tokens_per_hour 1-10000000, tokens_per_day 1-100000000",
            ));
        }
        Ok(())
    }
}

/// `openai`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpenAiKind {
    Openai,
}

/// `webhook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookKind {
    Webhook,
}

/// Where answers come from, by `kind`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ProviderIn {
    /// Any OpenAI-compatible Chat Completions server.
    Openai(OpenAiIn),
    /// An HTTP trigger (n8n, Flowise, Dify, Typebot) given the conversation.
    Webhook(WebhookIn),
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenAiIn {
    pub kind: OpenAiKind,
    /// E.g. `https://api.openai.com/v1`; `/chat/completions` is added.
    #[schema(min_length = 1, max_length = 2048, pattern = "^https?://")]
    pub base_url: String,
    #[schema(min_length = 1, max_length = 200)]
    pub model: String,
    /// Write-only: sent as `Authorization: Bearer`; absent for servers that take none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 512)]
    pub api_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0.0, maximum = 2.0)]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 16384)]
    pub max_tokens: Option<u32>,
    /// E.g. `whisper-1`: received voice and audio messages (up to 25 MiB) are transcribed
    /// through `{base_url}/audio/transcriptions` with it, once each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub transcription_model: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = AttendantWebhookIn)]
pub struct WebhookIn {
    pub kind: WebhookKind,
    #[schema(min_length = 1, max_length = 2048, pattern = "^https?://")]
    pub url: String,
    /// Write-only: sent as `Authorization: Bearer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 512)]
    pub secret: Option<String>,
}

/// Which messages it answers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Triggers {
    /// Direct chats (default true).
    #[serde(default = "yes")]
    pub direct: bool,
    /// Groups, only when a message mentions the account (default false).
    #[serde(default)]
    pub groups: bool,
    /// When given, a chat is answered only once one of its last `memory_messages`
    /// messages from the contact holds one of them (case-insensitive).
    #[serde(default)]
    #[schema(max_items = 20, value_type = Vec<String>)]
    pub keywords: Vec<String>,
    /// Numbers or JIDs never answered (chats and senders).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub ignore: Vec<String>,
}

impl Default for Triggers {
    fn default() -> Self {
        Triggers { direct: true, groups: false, keywords: Vec::new(), ignore: Vec::new() }
    }
}

/// When a human takes over.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// A reply from the account's phone pauses the attendant in that chat (default true).
    #[serde(default = "yes")]
    pub on_human_reply: bool,
    /// How long a handoff pauses the chat (default 60).
    #[serde(default = "d_pause")]
    #[schema(minimum = 1, maximum = 10080)]
    pub pause_minutes: u32,
    /// A contact's message holding one of these (case-insensitive) hands the chat over
    /// and emits `attendant.handoff`.
    #[serde(default)]
    #[schema(max_items = 20)]
    pub keywords: Vec<String>,
    /// A chat whose last this many messages are all automatic on both sides (the
    /// attendant's replies, and the contact's each faster than a person types it) is a
    /// loop with another bot: it is handed over (`bot_loop`). Default 10; 0 never (1
    /// counts as 2: one exchange).
    #[serde(default = "d_loop")]
    #[schema(maximum = 100)]
    pub loop_messages: u32,
}

impl Default for Handoff {
    fn default() -> Self {
        Handoff { on_human_reply: true, pause_minutes: d_pause(), keywords: Vec::new(), loop_messages: d_loop() }
    }
}

/// An OpenAI-compatible provider as shown: its key never, only whether it is set.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct OpenAiOut {
    pub kind: OpenAiKind,
    pub base_url: String,
    pub model: String,
    pub api_key_set: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcription_model: Option<String>,
}

/// A webhook bot as shown: its secret never, only whether it is set.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = AttendantWebhookOut)]
pub struct WebhookOut {
    pub kind: WebhookKind,
    pub url: String,
    pub secret_set: bool,
}

/// The provider as shown, by `kind`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ProviderOut {
    Openai(OpenAiOut),
    Webhook(WebhookOut),
}

/// A chat left to a human.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PausedChatOut {
    pub jid: String,
    pub until: DateTime<Utc>,
    /// `human_reply`, `keyword` or `bot_loop`.
    pub reason: String,
}

/// An instance's attendant.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttendantOut {
    pub enabled: bool,
    pub provider: ProviderOut,
    pub system_prompt: String,
    pub memory_messages: u32,
    pub triggers: Triggers,
    pub handoff: Handoff,
    pub max_replies_per_chat_per_hour: u32,
    pub reply_timeout_seconds: u32,
    pub allow_private_targets: bool,
    pub budget: Budget,
    /// Chats paused now (at most 1,000).
    pub paused_chats: Vec<PausedChatOut>,
    pub updated_at: DateTime<Utc>,
}

/// Body of `PATCH {inst}/attendant`: a JSON merge patch (RFC 7396) over the stored
/// configuration. Absent fields stay; `triggers` and `handoff` merge field by field; a
/// `provider` of the same `kind` keeps its secret unless a new one is given.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttendantPatch {
    pub enabled: Option<bool>,
    pub provider: Option<ProviderIn>,
    #[schema(max_length = 16384)]
    pub system_prompt: Option<String>,
    #[schema(minimum = 0, maximum = 100)]
    pub memory_messages: Option<u32>,
    pub triggers: Option<TriggersPatch>,
    pub handoff: Option<HandoffPatch>,
    #[schema(minimum = 1, maximum = 1000)]
    pub max_replies_per_chat_per_hour: Option<u32>,
    #[schema(minimum = 5, maximum = 300)]
    pub reply_timeout_seconds: Option<u32>,
    pub allow_private_targets: Option<bool>,
    pub budget: Option<BudgetPatch>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetPatch {
    #[schema(minimum = 1, maximum = 10000)]
    pub replies_per_hour: Option<u32>,
    #[schema(minimum = 1, maximum = 100000)]
    pub replies_per_day: Option<u32>,
    #[schema(minimum = 1, maximum = 10000000)]
    pub tokens_per_hour: Option<u64>,
    #[schema(minimum = 1, maximum = 100000000)]
    pub tokens_per_day: Option<u64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggersPatch {
    pub direct: Option<bool>,
    pub groups: Option<bool>,
    #[schema(max_items = 20)]
    pub keywords: Option<Vec<String>>,
    #[schema(max_items = 1000)]
    pub ignore: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffPatch {
    pub on_human_reply: Option<bool>,
    #[schema(minimum = 1, maximum = 10080)]
    pub pause_minutes: Option<u32>,
    #[schema(max_items = 20)]
    pub keywords: Option<Vec<String>>,
    #[schema(maximum = 100)]
    pub loop_messages: Option<u32>,
}

fn check_keywords(field: &str, k: &mut [String]) -> Result<()> {
    if k.len() > KEYWORDS_LIMIT {
        return Err(Error::invalid(format!("{field} holds at most {KEYWORDS_LIMIT} keywords")));
    }
    for w in k.iter_mut() {
        let t = crate::text::trim_ecma(w);
        if t.is_empty() || t.chars().count() > KEYWORD_LIMIT {
            return Err(Error::invalid(format!("each of {field} is 1 to {KEYWORD_LIMIT} characters")));
        }
        *w = t.to_lowercase();
    }
    Ok(())
}

pub(crate) fn check_url(field: &str, s: &str) -> Result<url::Url> {
    let u = url::Url::parse(s).map_err(|_| Error::invalid(format!("{field} must be an http(s) URL")))?;
    if !matches!(u.scheme(), "http" | "https") || s.len() > 2048 || u.host().is_none() {
        return Err(Error::invalid(format!("{field} must be an http(s) URL")));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(Error::invalid(format!("{field} must not carry credentials; use the secret fields")));
    }
    Ok(u)
}

pub(crate) fn check_secret(field: &str, s: &Option<String>) -> Result<()> {
    match s {
        Some(v) if v.is_empty() || v.len() > SECRET_LIMIT || v.chars().any(|c| c.is_control()) => {
            Err(Error::invalid(format!("{field} must be 1 to {SECRET_LIMIT} bytes without control characters")))
        }
        _ => Ok(()),
    }
}

impl AttendantIn {
    /// Checks what a schema cannot say and normalizes (keywords lower-cased, ignored
    /// numbers as JIDs). The provider's address is checked by [`check_target`].
    pub fn validate(mut self) -> Result<AttendantIn> {
        if self.system_prompt.len() > SYSTEM_PROMPT_LIMIT {
            return Err(Error::invalid("system_prompt is at most 16 KiB"));
        }
        if self.memory_messages > 100 {
            return Err(Error::invalid("memory_messages must be 0 to 100"));
        }
        if !(1..=1000).contains(&self.max_replies_per_chat_per_hour) {
            return Err(Error::invalid("max_replies_per_chat_per_hour must be 1 to 1000"));
        }
        if !(5..=300).contains(&self.reply_timeout_seconds) {
            return Err(Error::invalid("reply_timeout_seconds must be 5 to 300"));
        }
        if !(1..=10080).contains(&self.handoff.pause_minutes) {
            return Err(Error::invalid("handoff.pause_minutes must be 1 to 10080"));
        }
        if self.handoff.loop_messages > 100 {
            return Err(Error::invalid("handoff.loop_messages must be 0 (never) to 100"));
        }
        self.budget.check()?;
        check_keywords("triggers.keywords", &mut self.triggers.keywords)?;
        check_keywords("handoff.keywords", &mut self.handoff.keywords)?;
        if self.triggers.ignore.len() > IGNORE_LIMIT {
            return Err(Error::invalid(format!("triggers.ignore holds at most {IGNORE_LIMIT} entries")));
        }
        for j in self.triggers.ignore.iter_mut() {
            *j = Jid::parse(j)
                .map_err(|_| Error::invalid("each of triggers.ignore must be a JID or a phone number"))?
                .to_string();
        }
        match &self.provider {
            ProviderIn::Openai(o) => {
                check_url("provider.base_url", &o.base_url)?;
                let model = crate::text::trim_ecma(&o.model);
                if model.is_empty() || o.model.chars().count() > 200 {
                    return Err(Error::invalid("provider.model must be 1 to 200 characters"));
                }
                check_secret("provider.api_key", &o.api_key)?;
                if o.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
                    return Err(Error::invalid("provider.temperature must be 0 to 2"));
                }
                if o.max_tokens.is_some_and(|t| !(1..=16384).contains(&t)) {
                    return Err(Error::invalid("provider.max_tokens must be 1 to 16384"));
                }
                if o.transcription_model
                    .as_deref()
                    .is_some_and(|m| crate::text::trim_ecma(m).is_empty() || m.chars().count() > 200)
                {
                    return Err(Error::invalid("provider.transcription_model must be 1 to 200 characters"));
                }
            }
            ProviderIn::Webhook(w) => {
                check_url("provider.url", &w.url)?;
                check_secret("provider.secret", &w.secret)?;
            }
        }
        Ok(self)
    }

    /// The provider's URL (checked by `validate`).
    pub fn target(&self) -> url::Url {
        let s = match &self.provider {
            ProviderIn::Openai(o) => &o.base_url,
            ProviderIn::Webhook(w) => &w.url,
        };
        url::Url::parse(s).expect("validated")
    }

    /// The origin (scheme, host and port) of the provider's URL, if it parses.
    pub fn origin(&self) -> Option<String> {
        let s = match &self.provider {
            ProviderIn::Openai(o) => &o.base_url,
            ProviderIn::Webhook(w) => &w.url,
        };
        origin_of(s)
    }

    /// The secret given with it, taken out (the rest is stored as JSON).
    pub fn take_secret(&mut self) -> Option<String> {
        match &mut self.provider {
            ProviderIn::Openai(o) => o.api_key.take(),
            ProviderIn::Webhook(w) => w.secret.take(),
        }
    }
}

impl ProviderIn {
    /// `openai` or `webhook`.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderIn::Openai(_) => "openai",
            ProviderIn::Webhook(_) => "webhook",
        }
    }
}

mod stored;
pub use stored::*;

#[cfg(test)]
mod tests;
