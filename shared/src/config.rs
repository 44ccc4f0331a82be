//! Layered configuration: compiled-in defaults, then an optional TOML file
//! (`PACELINE_CONFIG` or `--config`), then `PACELINE_*` environment variables.
//!
//! One struct serves every role; a role validates what it needs with [`Config::validate`].
//! Tests build a [`Config`] directly (`Config { .., ..Config::default() }`) without
//! touching the process environment.

use std::net::SocketAddr;
use std::path::Path;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

/// Which messaging network the workers talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The simulator, `services/netsim`.
    Sim,
    /// The real WhatsApp network.
    Whatsapp,
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Network::Sim => "sim",
            Network::Whatsapp => "whatsapp",
        })
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line (the default; what log pipelines want).
    Json,
    /// Human-readable lines for a terminal.
    Pretty,
}

/// The roles a process can run; each validates the part of the config it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Api,
    Worker,
    Dispatcher,
    /// The AI attendant: the API's backends and the key that opens stored secrets, but
    /// no admin token (it serves nobody).
    Attendant,
    /// The Chatwoot bridge: like the attendant, the API's backends and the key that
    /// opens stored secrets.
    Chatwoot,
    Netsim,
    Migrate,
    /// The console: no backends of its own, the API's address and the key that seals its
    /// sessions.
    Console,
}

/// A value copied from an example instead of generated (`k8s/secrets.env.example` says
/// `CHANGE_ME`): refused, so a cluster never runs with a published secret.
fn placeholder(s: &str) -> bool {
    let up = s.to_ascii_uppercase();
    up.contains("CHANGE_ME") || up.contains("CHANGEME")
}

/// paceline's whole configuration: the keys `spec/contract.md` fixes at the top level,
/// everything else in a section per role or concern ([`section`]). Durations are
/// `Duration`s; their keys keep the unit (`lease_ttl_ms`) and their values are
/// milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct Config {
    /// Where the API listens.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub listen_addr: SocketAddr,
    /// Where Prometheus `/metrics` and the probes are served.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub metrics_addr: SocketAddr,
    /// Postgres URL, required by every role but netsim.
    pub database_url: String,
    /// Redis URL.
    pub redis_url: String,
    /// NATS URL (a comma-separated list of servers is accepted).
    pub nats_url: String,
    /// The admin token, `pl_admin_` + at least 24 of `[A-Za-z0-9_-]`; required by the API.
    pub admin_token: Option<String>,
    /// The key that encrypts stored secrets (the attendant's provider keys): 32 bytes,
    /// base64. Unset: derived from `admin_token`, so changing the admin token makes
    /// stored secrets unreadable; set it to rotate freely.
    pub secrets_key: Option<String>,
    /// The public base URL of the API, when it is served beyond loopback.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub public_url: Option<url::Url>,
    /// `sim` (the simulator) or `whatsapp`.
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub network: Network,
    /// Let `media.url` and webhook URLs reach loopback and private addresses (tests, demos).
    #[serde(deserialize_with = "de::flexible_bool")]
    pub allow_private_targets: bool,
    /// Apply migrations at start-up (under an advisory lock); when false, each role waits
    /// until `paceline migrate` has brought the schema up to its build.
    #[serde(deserialize_with = "de::flexible_bool")]
    pub migrate_on_start: bool,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub namespace: section::Namespace,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub database: section::Database,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub api: section::Api,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub log: section::Log,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub netsim: section::Netsim,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub pacing: section::Pacing,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub risk: section::Risk,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub worker: section::Worker,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub media: section::Media,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub media_store: section::MediaStore,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub large_body: section::LargeBody,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub groups: section::Groups,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub events: section::Events,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub metrics: section::Metrics,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub webhooks: section::Webhooks,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub chatwoot: section::Chatwoot,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub rabbitmq: section::Rabbitmq,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub usage: section::Usage,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub whatsapp: section::Whatsapp,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub console: section::Console,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen_addr: ([127, 0, 0, 1], 8787).into(),
            metrics_addr: ([127, 0, 0, 1], 9464).into(),
            database_url: String::new(),
            redis_url: String::new(),
            nats_url: String::new(),
            admin_token: None,
            secrets_key: None,
            public_url: None,
            network: Network::Whatsapp,
            allow_private_targets: false,
            migrate_on_start: true,
            namespace: Default::default(),
            database: Default::default(),
            api: Default::default(),
            log: Default::default(),
            netsim: Default::default(),
            pacing: Default::default(),
            risk: Default::default(),
            worker: Default::default(),
            media: Default::default(),
            media_store: Default::default(),
            large_body: Default::default(),
            groups: Default::default(),
            events: Default::default(),
            metrics: Default::default(),
            webhooks: Default::default(),
            chatwoot: Default::default(),
            rabbitmq: Default::default(),
            usage: Default::default(),
            whatsapp: Default::default(),
            console: Default::default(),
        }
    }
}

/// A configuration that could not be loaded or is invalid; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration could not be read: {0}")]
    Load(String),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Where the API is reached: `public_url`, else the listen address (what webhooks'
    /// payloads name as the server, and the Chatwoot inbox's webhook URL is built on).
    pub fn server_url(&self) -> String {
        match &self.public_url {
            Some(u) => u.as_str().trim_end_matches('/').to_string(),
            None => format!("http://{}", self.listen_addr),
        }
    }

    /// The deployment's media retention in days: (received, sent).
    pub fn media_retention(&self) -> (i32, i32) {
        let m = &self.media;
        let days = |d: Option<u32>| d.unwrap_or(m.retention_days) as i32;
        (days(m.inbound_retention_days), days(m.outbound_retention_days))
    }

    /// The deployment's ban-risk policies (an instance's `risk_policy` overrides them).
    pub fn risk_policy(&self) -> crate::risk::Policy {
        crate::risk::Policy {
            thresholds: crate::risk::Thresholds {
                elevated: self.risk.elevated,
                high: self.risk.high,
                critical: self.risk.critical,
            },
            slowdown: self.risk.slowdown,
            auto_pause: self.risk.auto_pause,
            hold_first_contacts: self.risk.hold_first_contacts,
        }
    }

    /// Loads defaults, then `file` (or `PACELINE_CONFIG`) if given, then the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        let env_file = std::env::var_os("PACELINE_CONFIG");
        if let Some(path) = file.or(env_file.as_deref().map(Path::new)) {
            if !path.exists() {
                return Err(ConfigError::Load(format!("config file {} does not exist", path.display())));
            }
            fig = fig.merge(Renamed(Toml::file(path)));
        }
        Self::from_figment(fig.merge(Renamed(env())))
    }

    /// One key (`log.level`) from the environment alone, its former flat name included,
    /// without a file or the rest of the configuration: what `paceline mcp` reads.
    pub fn from_env<T: serde::de::DeserializeOwned>(path: &str) -> Option<T> {
        Figment::from(Renamed(env())).extract_inner(path).ok()
    }

    fn from_figment(fig: Figment) -> Result<Config, ConfigError> {
        // figment's messages name the key and where it came from, never a secret's value:
        // every secret-bearing key is a plain string, which cannot fail to deserialize.
        fig.extract::<Config>().map_err(|e| ConfigError::Load(e.to_string()))
    }
}

/// The `PACELINE_*` environment: `PACELINE_PACING__JITTER` is `[pacing] jitter`, and the
/// old flat names still count (through [`Renamed`]).
fn env() -> Env {
    Env::prefixed("PACELINE_").ignore(&["CONFIG", "BIN"]).split("__")
}

mod aliases;
/// Lenient deserializers for values that arrive as environment strings.
mod de;
#[cfg(feature = "openapi")]
pub mod reference;
pub mod section;
mod validate;

use aliases::Renamed;
pub use aliases::ALIASES;

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment's Jail closures return its (large) error
mod tests;
