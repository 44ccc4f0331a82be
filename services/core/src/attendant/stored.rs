//! How an attendant is stored and changed: its secret sealed apart from the rest, the
//! provider's origin it was approved for, and `PATCH` as a JSON merge patch over what is
//! stored (a new origin drops the secret).

use super::*;

/// A URL's origin as stored beside `allow_private_targets` (`https://host[:port]`); a
/// URL without a host (or not a URL) has none.
pub fn origin_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    let o = u.origin();
    o.is_tuple().then(|| o.ascii_serialization())
}

/// The provider origin for which the admin allowed private addresses, if any.
pub fn approved_origin(row: &AttendantRow) -> Option<String> {
    row.private_origin.as_deref().filter(|_| row.allow_private).and_then(origin_of)
}

/// The provider's address must be public, unless private targets are allowed (by the
/// deployment, or by the admin for this instance).
pub async fn check_target(url: &url::Url, allow_private: bool) -> Result<()> {
    shared::fetch::check_url(url, allow_private).await.map_err(|e| match e {
        shared::fetch::FetchError::Refused => Error::invalid(
            "the provider's URL must resolve to public addresses (the admin may allow private ones for this instance)",
        ),
        _ => Error::invalid("the provider's URL does not resolve"),
    })
}

/// A stored attendant, read back: the configuration and its secret opened.
#[derive(Debug, Clone)]
pub struct Stored {
    pub config: AttendantIn,
    pub secret: Option<String>,
    /// Private addresses are allowed (by the admin) for the provider at this origin.
    pub private_origin: Option<String>,
    pub updated_at: DateTime<Utc>,
}

impl Stored {
    /// Reads a stored row; a row this build cannot read (or a secret the key does not
    /// open) is an error, never a guess.
    pub fn open(row: AttendantRow, id: &InstanceId, sealer: &Sealer) -> Result<Stored> {
        let private_origin = approved_origin(&row);
        let config: AttendantIn = serde_json::from_value(row.config).map_err(Error::internal)?;
        let secret = match row.secret {
            Some(s) => Some(
                sealer
                    .open(id.as_str(), &s)
                    .and_then(|p| String::from_utf8(p).ok())
                    .ok_or_else(|| Error::internal("a stored attendant secret does not open with this key"))?,
            ),
            None => None,
        };
        Ok(Stored { config, secret, private_origin, updated_at: row.updated_at })
    }

    /// Whether the provider may be called on a private address: the admin allowed it for
    /// the origin the provider has now.
    pub fn allow_private(&self) -> bool {
        self.private_origin.is_some() && self.private_origin == self.config.origin()
    }

    /// What `GET` shows.
    pub fn shown(&self, pauses: Vec<Pause>) -> AttendantOut {
        let c = self.config.clone();
        let set = self.secret.is_some();
        let provider = match c.provider {
            ProviderIn::Openai(o) => ProviderOut::Openai(OpenAiOut {
                kind: OpenAiKind::Openai,
                base_url: o.base_url,
                model: o.model,
                api_key_set: set,
                temperature: o.temperature,
                max_tokens: o.max_tokens,
                transcription_model: o.transcription_model,
            }),
            ProviderIn::Webhook(w) => {
                ProviderOut::Webhook(WebhookOut { kind: WebhookKind::Webhook, url: w.url, secret_set: set })
            }
        };
        AttendantOut {
            enabled: c.enabled,
            provider,
            system_prompt: c.system_prompt,
            memory_messages: c.memory_messages,
            triggers: c.triggers,
            handoff: c.handoff,
            max_replies_per_chat_per_hour: c.max_replies_per_chat_per_hour,
            reply_timeout_seconds: c.reply_timeout_seconds,
            allow_private_targets: self.allow_private(),
            budget: c.budget,
            paused_chats: pauses
                .into_iter()
                .map(|p| PausedChatOut { jid: p.chat_jid.into(), until: p.until, reason: p.reason })
                .collect(),
            updated_at: self.updated_at,
        }
    }
}

/// RFC 7396 merge patch of `patch` into `target`.
pub(crate) fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// The configuration after `patch` (a JSON object) over `now`, and the secret it keeps
/// or brings: a new provider secret replaces it; a provider of another kind, or at
/// another origin (scheme, host, port), given without one drops it, so a key never
/// follows the provider to an address it was not given for.
pub fn patched(now: &Stored, patch: &serde_json::Value) -> Result<(AttendantIn, Option<String>)> {
    let mut v = serde_json::to_value(&now.config).map_err(Error::internal)?;
    // The provider is replaced whole, never merged: fields of another kind must not stay.
    if let Some(p) = patch.get("provider") {
        if let Some(o) = v.as_object_mut() {
            o.insert("provider".into(), p.clone());
        }
    }
    merge(&mut v, patch);
    let mut next: AttendantIn = shared::json::parse_json(&serde_json::to_vec(&v).map_err(Error::internal)?)?;
    let given = next.take_secret();
    let secret = match given {
        Some(s) => Some(s),
        None if next.provider.kind() == now.config.provider.kind()
            && next.origin().is_some()
            && next.origin() == now.config.origin() =>
        {
            now.secret.clone()
        }
        None => None,
    };
    Ok((next, secret))
}
