//! An instance's events (or every instance's of an account) streamed into RabbitMQ
//! (issue #39): the settings of `{inst}/rabbitmq`, `/v1/accounts/{id}/rabbitmq` and
//! Evolution's `rabbitmq/set`, stored with the broker's address sealed. The dispatcher role delivers them (`paceline-dispatcher`'s `sinks`):
//! from the events stream, in order, at least once, moving the sink's cursor only after
//! the broker confirmed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::sinks::{self as rows, Owner, SinkRow, RABBITMQ};
use shared::db::webhooks::WebhookFormat;
use utoipa::ToSchema;

use crate::{Core, Error, Result};

const NAME_LIMIT: usize = 255;

fn yes() -> bool {
    true
}

/// Body of `PUT {inst}/rabbitmq`: the whole sink.
#[derive(Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RabbitmqIn {
    /// Default true. While false nothing is published; turned on again, publishing goes
    /// on from where it stopped (within the events stream's 7 days).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Write-only: the broker, `amqp://user:password@host:5672/vhost` or `amqps://...`.
    /// Absent: the one stored, or else the deployment's broker (`rabbitmq.url`; remove the
    /// sink to go back to it). It must resolve to public addresses unless the admin allows
    /// private ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 2048, pattern = "^amqps?://")]
    pub url: Option<String>,
    /// The topic exchange (declared durable) events are published to; default the
    /// deployment's `rabbitmq.exchange` (`paceline.events`), and always that one on the
    /// deployment's broker. Routing keys are `<instance id>.<event type>`, e.g.
    /// `inst_….message.received` (an account's sink: `<account id>.<instance id>.<event
    /// type>`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255)]
    pub exchange: Option<String>,
    /// A durable queue declared and bound to the instance's events (`<instance id>.#`; an
    /// account's sink: `<account id>.#`), so nothing is dropped while no consumer is
    /// there; default `paceline.<instance id>` (`paceline.<account id>`),
    /// and always that one on the deployment's broker; `""` declares none (your consumers
    /// bind their own queues; until one is bound, publishing waits).
    #[serde(default)]
    #[schema(max_length = 255)]
    pub queue: Option<String>,
    /// Event types to publish (empty: all).
    #[serde(default)]
    pub events: Vec<String>,
    /// Only the admin may set it: the broker may be on a private address (a broker in the
    /// cluster), for its host.
    #[serde(default)]
    pub allow_private_targets: bool,
}

impl std::fmt::Debug for RabbitmqIn {
    /// Without the broker's address, which carries its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitmqIn")
            .field("enabled", &self.enabled)
            .field("exchange", &self.exchange)
            .field("queue", &self.queue)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

/// An instance's RabbitMQ sink, its broker shown without credentials.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RabbitmqOut {
    pub enabled: bool,
    /// The broker without its credentials (`amqp://host:5672/vhost`); null: the
    /// deployment's.
    pub url: Option<String>,
    pub exchange: String,
    /// The queue declared for the instance's events, if any.
    pub queue: Option<String>,
    pub events: Vec<String>,
    /// `paceline` (our envelope, as webhooks carry it) or `evolution` (set by Evolution's
    /// `rabbitmq/set`: Evolution's payloads, exchange and queues).
    pub format: WebhookFormat,
    pub allow_private_targets: bool,
    /// Events published and confirmed by the broker so far.
    pub delivered: i64,
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// Why publishing is failing now (the broker down or refusing), and since when;
    /// null once it works again. Nothing is skipped meanwhile.
    pub last_error: Option<String>,
    pub failing_since: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

impl From<SinkRow> for RabbitmqOut {
    fn from(r: SinkRow) -> Self {
        RabbitmqOut {
            enabled: r.enabled,
            url: r.url_shown,
            exchange: r.exchange,
            queue: r.queue,
            events: r.events,
            format: r.format,
            allow_private_targets: r.private_host.is_some(),
            delivered: r.delivered,
            last_delivered_at: r.last_delivered_at,
            last_error: r.last_error,
            failing_since: r.failing_since,
            updated_at: r.updated_at,
        }
    }
}

/// Whose sealed secret is whose: a sink's broker address under a label of its own (its
/// owner's id: an instance's or an account's).
pub fn url_owner(owner: &str) -> String {
    format!("rabbitmq:{owner}")
}

/// A sink's stored broker address, opened (None: it does not open with this key, or is
/// no URL). The API (to keep it on a PUT without one) and the dispatcher (to connect)
/// both read it this way.
pub fn open_url(sealer: &shared::sealed::Sealer, owner: &str, sealed: &[u8]) -> Option<url::Url> {
    let plain = String::from_utf8(sealer.open(&url_owner(owner), sealed)?).ok()?;
    url::Url::parse(&plain).ok()
}

/// A broker address as it may be stored: `amqp(s)://`, a host, at most 2048 characters.
/// Answers it parsed.
pub fn parse_url(raw: &str) -> Result<url::Url> {
    let bad = || Error::field("url", "url must be an amqp:// or amqps:// address with a host");
    if raw.len() > 2048 {
        return Err(Error::field("url", "url must be at most 2048 characters"));
    }
    let url = url::Url::parse(raw).map_err(|_| bad())?;
    if !matches!(url.scheme(), "amqp" | "amqps") || url.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    Ok(url)
}

/// The address without its credentials, to show.
pub fn shown(url: &url::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.to_string()
}

/// The port an AMQP address names, or its scheme's.
pub fn port_of(url: &url::Url) -> u16 {
    url.port().unwrap_or(if url.scheme() == "amqps" { 5671 } else { 5672 })
}

fn check_name(field: &str, v: &str, empty_ok: bool) -> Result<()> {
    let ok = (empty_ok || !v.is_empty())
        && v.len() <= NAME_LIMIT
        && !v.starts_with("amq.")
        && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'));
    if ok {
        Ok(())
    } else {
        Err(Error::field(
            field,
            format!("{field} must be up to {NAME_LIMIT} of [A-Za-z0-9._:-], not starting with amq."),
        ))
    }
}

async fn start_seq(core: &Core) -> Result<i64> {
    let js = async_nats::jetstream::new(core.nats.clone());
    let mut stream = shared::bus::ensure_events_stream(&js, &core.subjects, core.config.events.stream_max_bytes)
        .await
        .map_err(Error::internal)?;
    let info = stream.info().await.map_err(Error::internal)?;
    Ok(info.state.last_sequence as i64)
}

/// What a sink stores besides its settings: its format and the Evolution names it was
/// given.
pub struct Shape {
    pub format: WebhookFormat,
    pub evolution_events: Vec<String>,
}

fn not_found(owner: &Owner) -> Error {
    match owner {
        Owner::Instance(_) => Error::InstanceNotFound,
        Owner::Account(_) => Error::NotFound("account"),
    }
}

/// Checks and stores an instance's or an account's sink (`admin`: the caller may allow a
/// private address). A sink already there keeps its cursor. An account's sink takes
/// paceline's format (Evolution has no accounts).
pub async fn put(core: &Core, owner: &Owner, admin: bool, body: RabbitmqIn, shape: Shape) -> Result<RabbitmqOut> {
    let id = owner.as_str();
    if matches!(owner, Owner::Account(_)) && shape.format != WebhookFormat::Paceline {
        return Err(Error::field("format", "an account's sink takes paceline's format"));
    }
    if body.events.iter().any(|t| !shared::events::known(t)) {
        return Err(Error::field("events", "events must be types of the event catalog (see the OpenAPI description)"));
    }
    let now = rows::get(&core.db, id, RABBITMQ).await?;
    // A key is needed only for an address of the sink's own.
    let needs_key = body.url.is_some() || now.as_ref().is_some_and(|n| n.url_sealed.is_some());
    let sealer = if needs_key { Some(crate::chatwoot::sealer(&core.config)?) } else { None };
    // The address: given, or the stored one, or the deployment's (then nothing is sealed).
    let given = body.url.as_deref().map(parse_url).transpose()?;
    let stored = match (&given, &now, &sealer) {
        (None, Some(SinkRow { url_sealed: Some(sealed), .. }), Some(sealer)) => Some(
            open_url(sealer, id, sealed)
                .ok_or_else(|| Error::internal("a stored broker address does not open with this key"))?,
        ),
        _ => None,
    };
    let url = given.or(stored);
    if url.is_none() && core.config.rabbitmq.url.is_none() {
        return Err(Error::field("url", "url is required: this deployment has no broker of its own (rabbitmq.url)"));
    }
    // On the deployment's broker, shared by every tenant, the exchange and the queue are
    // the deployment's (an Evolution sink's exchange is its instance's name): no tenant
    // binds its queue to another's events.
    let shared = url.is_none();
    let exchange = match (&body.exchange, shared, shape.format) {
        (Some(e), false, _) => e.clone(),
        (_, true, WebhookFormat::Evolution) => body.exchange.clone().unwrap_or_default(),
        _ => core.config.rabbitmq.exchange.clone(),
    };
    check_name("exchange", &exchange, false)?;
    let queue = match (body.queue.as_deref(), shared, shape.format) {
        (_, _, WebhookFormat::Evolution) => None,
        (Some(""), false, _) => None,
        (Some(q), false, _) => Some(q.to_string()),
        _ => Some(format!("paceline.{id}")),
    };
    if let Some(q) = &queue {
        check_name("queue", q, false)?;
    }
    // Only the admin allows a private address; another caller keeps the allowance only
    // while the broker stays on the host it was given for.
    let host = url.as_ref().and_then(|u| u.host_str().map(str::to_string));
    let approved = now.as_ref().and_then(|n| n.private_host.clone());
    let private_host = match (admin, body.allow_private_targets) {
        (true, true) => host.clone(),
        (true, false) => None,
        (false, true) if approved.is_none() || approved != host => {
            return Err(Error::forbidden("only the admin may set allow_private_targets"));
        }
        (false, _) => approved.filter(|a| Some(a) == host.as_ref()),
    };
    if let (Some(u), Some(h)) = (&url, &host) {
        let allow = private_host.is_some() || core.config.allow_private_targets;
        shared::fetch::resolve_checked(h, port_of(u), allow).await.map_err(|e| match e {
            shared::fetch::FetchError::Refused => Error::field(
                "url",
                "the broker must resolve to public addresses (the admin may allow private ones for this sink)",
            ),
            _ => Error::field("url", "the broker's host does not resolve"),
        })?;
    }
    let sealed = match (&url, &sealer) {
        (Some(u), Some(sealer)) => Some(sealer.seal(&url_owner(id), u.as_str().as_bytes())),
        _ => None,
    };
    let url_shown = url.as_ref().map(shown);
    let start_seq = match &now {
        Some(n) => n.cursor_seq,
        None => start_seq(core).await?,
    };
    let put = rows::Put {
        enabled: body.enabled,
        url_sealed: sealed.as_deref(),
        url_shown: url_shown.as_deref(),
        private_host: private_host.as_deref(),
        exchange: &exchange,
        queue: queue.as_deref(),
        events: &body.events,
        format: shape.format,
        evolution_events: &shape.evolution_events,
        start_seq,
    };
    if !rows::put(&core.db, owner, RABBITMQ, put).await? {
        return Err(not_found(owner));
    }
    tracing::info!(owner = %id, enabled = body.enabled, "rabbitmq sink set");
    get(core, owner).await?.ok_or_else(|| not_found(owner))
}

/// The sink of the instance or account, if it has one.
pub async fn get(core: &Core, owner: &Owner) -> Result<Option<RabbitmqOut>> {
    Ok(rows::get(&core.db, owner.as_str(), RABBITMQ).await?.map(RabbitmqOut::from))
}

/// The sink as stored (its Evolution names too), if it has one.
pub async fn stored(core: &Core, owner: &Owner) -> Result<Option<SinkRow>> {
    Ok(rows::get(&core.db, owner.as_str(), RABBITMQ).await?)
}

/// Removes the sink; false when there was none.
pub async fn delete(core: &Core, owner: &Owner) -> Result<bool> {
    Ok(rows::delete(&core.db, owner.as_str(), RABBITMQ).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_amqp_with_a_host_and_shown_without_credentials() {
        let u = parse_url("amqp://user:s3cret@broker.example.com:5673/vh").unwrap();
        assert_eq!(shown(&u), "amqp://broker.example.com:5673/vh");
        assert_eq!(port_of(&u), 5673);
        assert_eq!(port_of(&parse_url("amqps://b.example.com").unwrap()), 5671);
        for bad in ["http://b.example.com", "amqp://", "amqp:///vh", "nope"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert!(parse_url(&format!("amqp://b.example.com/{}", "v".repeat(2048))).is_err());
    }

    #[test]
    fn names_are_plain_and_never_amq() {
        assert!(check_name("exchange", "paceline.events", false).is_ok());
        assert!(check_name("exchange", "amq.topic", false).is_err());
        assert!(check_name("exchange", "a b", false).is_err());
        assert!(check_name("exchange", "", false).is_err());
        assert!(check_name("queue", &"q".repeat(256), false).is_err());
    }
}
