//! Layered configuration: compiled-in defaults, then an optional TOML file
//! (`PACELINE_CONFIG` or `--config`), then `PACELINE_*` environment variables.
//!
//! One struct serves every role; a role validates what it needs with [`Config::validate`].
//! Tests build a [`Config`] directly (`Config { .., ..Config::default() }`) without
//! touching the process environment.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::auth::ADMIN_TOKEN_PREFIX;

/// Which messaging network the workers talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line (the default; what log pipelines want).
    Json,
    /// Human-readable lines for a terminal.
    Pretty,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
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
    Netsim,
    Migrate,
}

/// A value copied from an example instead of generated (`k8s/secrets.env.example` says
/// `CHANGE_ME`): refused, so a cluster never runs with a published secret.
fn placeholder(s: &str) -> bool {
    let up = s.to_ascii_uppercase();
    up.contains("CHANGE_ME") || up.contains("CHANGEME")
}

/// paceline's whole configuration. Durations are `Duration`s; their keys keep the unit
/// (`lease_ttl_ms`) and their values are milliseconds.
#[serde_with::serde_as]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Where the API listens (`PACELINE_LISTEN_ADDR`).
    pub listen_addr: SocketAddr,
    /// Where Prometheus `/metrics` is served (`PACELINE_METRICS_ADDR`).
    pub metrics_addr: SocketAddr,
    /// Postgres URL (`PACELINE_DATABASE_URL`), required by every role but netsim.
    pub database_url: String,
    /// Postgres schema to use (search_path); tests give each test its own.
    pub database_schema: Option<String>,
    /// Connections per process in the Postgres pool.
    pub database_max_connections: u32,
    /// Redis URL (`PACELINE_REDIS_URL`).
    pub redis_url: String,
    /// NATS URL (`PACELINE_NATS_URL`).
    pub nats_url: String,
    /// Prefix of every Redis key; tests give each test its own.
    pub key_prefix: String,
    /// Prefix of every NATS subject; tests give each test its own.
    pub subject_prefix: String,
    /// The admin token (`PACELINE_ADMIN_TOKEN`), `pl_admin_` + at least 24 characters.
    pub admin_token: Option<String>,
    /// The key that encrypts stored secrets (the attendant's provider keys):
    /// 32 bytes, base64 (`PACELINE_SECRETS_KEY`). Unset: derived from `admin_token`, so
    /// changing the admin token makes stored secrets unreadable; set it to rotate freely.
    pub secrets_key: Option<String>,
    /// The public base URL of the API, when it is served beyond loopback.
    pub public_url: Option<url::Url>,
    /// Peers whose client-address header is believed (CIDRs, comma-separated in the environment).
    #[serde(deserialize_with = "de::list")]
    pub trusted_proxies: Vec<IpNet>,
    /// The header a trusted proxy puts the client address in.
    pub client_ip_header: String,
    /// After SIGTERM: how long the API keeps its listener open answering 503 `shutting_down`
    /// (so load balancers see `/readyz` fail and move traffic) before it closes.
    #[serde(rename = "drain_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub drain: Duration,
    /// After the drain: how long in-flight requests get to finish.
    #[serde(rename = "shutdown_timeout_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub shutdown_timeout: Duration,
    /// `sim` or `whatsapp`.
    pub network: Network,
    /// Where workers reach netsim.
    pub netsim_url: url::Url,
    /// Where netsim listens (its socket protocol and control API).
    pub netsim_listen_addr: SocketAddr,
    /// Let `media.url` and webhook URLs reach loopback and private addresses (tests, demos).
    #[serde(deserialize_with = "de::flexible_bool")]
    pub allow_private_targets: bool,
    /// `json` or `pretty`.
    pub log_format: LogFormat,
    /// A tracing filter, e.g. `info` or `info,paceline_api=debug`.
    pub log_level: String,
    /// Pacing given to new instances that do not set `min_interval_ms`.
    pub default_min_interval_ms: u32,
    /// Pacing given to new instances that do not set `max_per_minute`.
    pub default_max_per_minute: u32,
    /// The ban-risk score (0-100) from which an instance's level is elevated, high and
    /// critical (docs/ban-risk.md).
    pub risk_elevated: f64,
    pub risk_high: f64,
    pub risk_critical: f64,
    /// Adaptive pacing: at `elevated` the interval is multiplied and the per-minute cap
    /// divided by this, at `high` and `critical` by its square; 1 turns it off.
    pub risk_slowdown: f64,
    /// Pause an instance's queue when its risk is critical or the network paused it.
    #[serde(deserialize_with = "de::flexible_bool")]
    pub risk_auto_pause: bool,
    /// At a high risk (or above), hold sends to chats that never wrote to the account.
    #[serde(deserialize_with = "de::flexible_bool")]
    pub risk_hold_first_contacts: bool,
    /// Apply migrations at start-up (under an advisory lock).
    #[serde(deserialize_with = "de::flexible_bool")]
    pub migrate_on_start: bool,
    /// Time-to-live of an instance lease; a dead worker's instances move within it.
    #[serde(rename = "lease_ttl_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub lease_ttl: Duration,
    /// How often a worker looks for instances that should run and nobody holds.
    #[serde(rename = "worker_scan_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub worker_scan: Duration,
    /// Most instances one worker runs.
    pub worker_max_instances: usize,
    /// How long the API waits for a worker's answer before 504 `worker_timeout`.
    #[serde(rename = "rpc_timeout_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub rpc_timeout: Duration,
    /// netsim: how often a shown QR code is replaced (the network's 20 s).
    #[serde(rename = "netsim_qr_rotate_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub netsim_qr_rotate: Duration,
    /// sim driver: how long a request to netsim may take before `worker_timeout`.
    #[serde(rename = "netsim_request_timeout_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub netsim_request_timeout: Duration,
    /// Queue: the first wait after a transient send failure; it doubles per attempt (cap 30 s).
    #[serde(rename = "queue_retry_base_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub queue_retry_base: Duration,
    /// Received media: the first wait before a failed download is tried again; it doubles
    /// per attempt (cap 1 h), and after 8 tries the media is recorded as unavailable.
    #[serde(rename = "media_retry_base_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub media_retry_base: Duration,
    /// `GET /instance/connect/{name}`: how long to wait for a first QR code.
    #[serde(rename = "connect_qr_wait_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub connect_qr_wait: Duration,
    /// Pacing: the post-connection grace is drawn from [min, max] after each (re)connect.
    #[serde(rename = "pacing_grace_min_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub pacing_grace_min: Duration,
    #[serde(rename = "pacing_grace_max_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub pacing_grace_max: Duration,
    /// Pacing: each interval is lengthened by a random 0..jitter fraction of itself.
    pub pacing_jitter: f64,
    /// Pacing: after the grace, the rate rises linearly from `pacing_ramp_start` of the
    /// full rate to all of it over `pacing_ramp_ms`.
    #[serde(rename = "pacing_ramp_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub pacing_ramp: Duration,
    pub pacing_ramp_start: f64,
    /// Cluster-wide slots for POST /messages bodies over 1 MB.
    pub large_body_slots: u32,
    /// A slot's lease; its holder renews it, a crashed pod's slot frees itself after it.
    #[serde(rename = "large_body_slot_ttl_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub large_body_slot_ttl: Duration,
    /// How long a large request waits for a slot before 503 `rate_limited`.
    #[serde(rename = "large_body_wait_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub large_body_wait: Duration,
    /// How long a request holding a slot may take to send its body (then 408
    /// `request_timeout`): a slow upload cannot keep a slot for long.
    #[serde(rename = "large_body_read_timeout_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub large_body_read_timeout: Duration,
    /// Bytes of media (sent and received) each instance may store; past it, sends with
    /// media get 413 `quota_exceeded` and received media is logged unavailable.
    pub media_quota_bytes: u64,
    /// Days media is kept; older media gives its bytes back (and its quota) and answers
    /// 410 `media_unavailable`. At least 8, so a queued message's media outlives it.
    pub media_retention_days: u32,
    /// Groups an instance may create in any 24 hours (cluster-wide); past it 429.
    pub group_creates_per_day: u32,
    /// Group members an instance may add, remove, promote or demote in any minute
    /// (counted per member, cluster-wide); past it 429.
    pub group_participant_changes_per_minute: u32,
    /// Groups an instance may join by invite link in any 24 hours; past it 429.
    pub group_joins_per_day: u32,
    /// Event streams (SSE) open at once per instance, across the cluster; past it 429.
    pub events_streams_per_instance: u32,
    /// Event streams open at once on one API pod; past it 429.
    pub events_streams_per_pod: u32,
    /// The most the JetStream events stream keeps (oldest events go first past it). NATS
    /// reserves it on the server's JetStream storage when the stream is created.
    pub events_stream_max_bytes: u64,
    /// Also export queue depth and age per instance (one series per instance: opt in
    /// only where the instance count keeps Prometheus comfortable).
    #[serde(deserialize_with = "de::flexible_bool")]
    pub metrics_per_instance: bool,
    /// Webhooks: one attempt's timeout (connect, send, answer).
    #[serde(rename = "webhook_timeout_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub webhook_timeout: Duration,
    /// Webhooks: the wait after the first failed attempt; it doubles per attempt (with
    /// jitter) up to `webhook_retry_max_ms`. A `Retry-After` answer is honoured up to that cap.
    #[serde(rename = "webhook_retry_base_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub webhook_retry_base: Duration,
    #[serde(rename = "webhook_retry_max_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub webhook_retry_max: Duration,
    /// Usage: how often a dispatcher rolls finished deliveries up into the daily usage
    /// counts (events are counted as the relay publishes them).
    /// How often each instance's ban risk is evaluated (dispatchers share the work).
    #[serde(rename = "risk_interval_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub risk_interval: Duration,
    #[serde(rename = "usage_rollup_interval_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub usage_rollup_interval: Duration,
    /// Webhooks: how long a delivery is retried before it is `failed` (default 3 days).
    #[serde(rename = "webhook_retry_span_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub webhook_retry_span: Duration,
    /// Webhooks: an endpoint is disabled once it has failed this many attempts in a row
    /// over at least `webhook_disable_after_ms` (default: 5 days).
    pub webhook_disable_after_failures: u32,
    #[serde(rename = "webhook_disable_after_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub webhook_disable_after: Duration,
    /// Webhooks: attempts in flight at once per endpoint URL (endpoints never wait on
    /// each other).
    pub webhook_endpoint_concurrency: usize,
    /// Webhooks: bytes of bodies built with media (Evolution's `webhook_base64`) that one
    /// dispatcher pod holds in attempts at once, at most half of them for one instance;
    /// past it an attempt waits for room, then goes back to be retried later. A body
    /// larger than half never carries its media's bytes (default 64 MiB).
    pub webhook_body_bytes_in_flight: u64,
    /// The WhatsApp driver's WebSocket address (default: WhatsApp Web's servers).
    pub whatsapp_ws_url: Option<String>,
    /// How long opening a WhatsApp session waits for the socket before retrying.
    #[serde(rename = "whatsapp_connect_timeout_ms")]
    #[serde_as(as = "serde_with::DurationMilliSeconds<u64>")]
    pub whatsapp_connect_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen_addr: ([127, 0, 0, 1], 8787).into(),
            metrics_addr: ([127, 0, 0, 1], 9464).into(),
            database_url: String::new(),
            database_schema: None,
            database_max_connections: 20,
            redis_url: String::new(),
            nats_url: String::new(),
            key_prefix: "pl".into(),
            subject_prefix: "pl".into(),
            admin_token: None,
            secrets_key: None,
            public_url: None,
            trusted_proxies: Vec::new(),
            client_ip_header: "x-forwarded-for".into(),
            drain: Duration::from_millis(5_000),
            shutdown_timeout: Duration::from_millis(25_000),
            network: Network::Whatsapp,
            netsim_url: url::Url::parse("http://127.0.0.1:8790").expect("static url"),
            netsim_listen_addr: ([127, 0, 0, 1], 8790).into(),
            allow_private_targets: false,
            log_format: LogFormat::Json,
            log_level: "info".into(),
            default_min_interval_ms: 2_000,
            default_max_per_minute: 20,
            risk_elevated: 25.0,
            risk_high: 50.0,
            risk_critical: 75.0,
            risk_slowdown: 2.0,
            risk_auto_pause: true,
            risk_hold_first_contacts: true,
            migrate_on_start: true,
            lease_ttl: Duration::from_millis(6_000),
            worker_scan: Duration::from_millis(1_000),
            worker_max_instances: 5_000,
            rpc_timeout: Duration::from_millis(10_000),
            netsim_qr_rotate: Duration::from_millis(20_000),
            netsim_request_timeout: Duration::from_millis(30_000),
            queue_retry_base: Duration::from_millis(500),
            media_retry_base: Duration::from_millis(30_000),
            connect_qr_wait: Duration::from_millis(5_000),
            pacing_grace_min: Duration::from_millis(15_000),
            pacing_grace_max: Duration::from_millis(30_000),
            pacing_jitter: 0.25,
            pacing_ramp: Duration::from_millis(600_000),
            pacing_ramp_start: 0.25,
            large_body_slots: 3,
            large_body_slot_ttl: Duration::from_millis(30_000),
            large_body_wait: Duration::from_millis(60_000),
            large_body_read_timeout: Duration::from_millis(120_000),
            media_quota_bytes: 2 * 1024 * 1024 * 1024,
            media_retention_days: 30,
            group_creates_per_day: 10,
            group_participant_changes_per_minute: 50,
            group_joins_per_day: 20,
            events_streams_per_instance: 5,
            events_streams_per_pod: 1_000,
            events_stream_max_bytes: 2 * 1024 * 1024 * 1024,
            metrics_per_instance: false,
            webhook_timeout: Duration::from_millis(10_000),
            webhook_retry_base: Duration::from_millis(5_000),
            webhook_retry_max: Duration::from_millis(3_600_000),
            webhook_retry_span: Duration::from_millis(3 * 24 * 3_600_000),
            usage_rollup_interval: Duration::from_millis(10_000),
            risk_interval: Duration::from_millis(60_000),
            webhook_disable_after_failures: 50,
            webhook_disable_after: Duration::from_millis(5 * 24 * 3_600_000),
            webhook_endpoint_concurrency: 8,
            webhook_body_bytes_in_flight: 64 * 1024 * 1024,
            whatsapp_ws_url: None,
            whatsapp_connect_timeout: Duration::from_millis(20_000),
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
    /// The deployment's ban-risk policies (an instance's `risk_policy` overrides them).
    pub fn risk_policy(&self) -> crate::risk::Policy {
        crate::risk::Policy {
            thresholds: crate::risk::Thresholds {
                elevated: self.risk_elevated,
                high: self.risk_high,
                critical: self.risk_critical,
            },
            slowdown: self.risk_slowdown,
            auto_pause: self.risk_auto_pause,
            hold_first_contacts: self.risk_hold_first_contacts,
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
            fig = fig.merge(Toml::file(path));
        }
        Self::from_figment(fig.merge(Env::prefixed("PACELINE_").ignore(&["CONFIG", "BIN"])))
    }

    fn from_figment(fig: Figment) -> Result<Config, ConfigError> {
        // figment's messages name the key and where it came from, never a secret's value:
        // every secret-bearing key is a plain string, which cannot fail to deserialize.
        fig.extract::<Config>().map_err(|e| ConfigError::Load(e.to_string()))
    }

    /// Checks every value the given role uses, with one clear message per bad value.
    pub fn validate(&self, role: Role) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        let needs_backends = role != Role::Netsim;
        if needs_backends {
            check_url(&mut errors, "database_url", &self.database_url, &["postgres", "postgresql"]);
        }
        if matches!(role, Role::Api | Role::Worker | Role::Dispatcher | Role::Attendant) {
            check_url(&mut errors, "redis_url", &self.redis_url, &["redis", "rediss", "redis+unix", "unix"]);
            check_url(&mut errors, "nats_url", &self.nats_url, &["nats", "tls", "ws", "wss"]);
            if !valid_prefix(&self.key_prefix) {
                errors.push("key_prefix must be 1-64 of [A-Za-z0-9_-]".to_string());
            }
            if !valid_prefix(&self.subject_prefix) {
                errors.push("subject_prefix must be 1-64 of [A-Za-z0-9_-]".to_string());
            }
        }
        if let Some(schema) = &self.database_schema {
            if !valid_prefix(schema) {
                errors.push("database_schema must be 1-64 of [A-Za-z0-9_-]".to_string());
            }
        }
        if self.database_max_connections == 0 {
            errors.push("database_max_connections must be at least 1".to_string());
        }
        if role == Role::Api && self.admin_token.is_none() {
            errors.push(
                "admin_token is required (set PACELINE_ADMIN_TOKEN to pl_admin_ followed by at least 24 random characters)"
                    .to_string(),
            );
        }
        if let Some(t) = &self.admin_token {
            if !crate::auth::valid_admin_token(t) {
                errors.push(format!(
                    "admin_token must be {ADMIN_TOKEN_PREFIX} followed by at least 24 characters of [A-Za-z0-9_-]"
                ));
            } else if placeholder(t) {
                errors.push("admin_token is the example's placeholder: generate a random one".to_string());
            }
        }
        if let Some(k) = &self.secrets_key {
            if crate::sealed::decode_key(k).is_none() {
                errors.push("secrets_key must be 32 bytes, base64".to_string());
            } else if placeholder(k) {
                errors.push("secrets_key is the example's placeholder: generate a random one".to_string());
            }
        }
        if role == Role::Attendant && self.secrets_key.is_none() && self.admin_token.is_none() {
            errors.push(
                "the attendant needs secrets_key (PACELINE_SECRETS_KEY) to open stored provider keys".to_string(),
            );
        }
        if role == Role::Api {
            if self.client_ip_header.is_empty()
                || http::HeaderName::from_bytes(self.client_ip_header.as_bytes()).is_err()
            {
                errors.push("client_ip_header must be a valid HTTP header name".to_string());
            }
            if let Some(u) = &self.public_url {
                if !matches!(u.scheme(), "http" | "https") {
                    errors.push("public_url must be an http or https URL".to_string());
                }
            }
        }
        if !(1_000..=60_000).contains(&self.default_min_interval_ms) {
            errors.push("default_min_interval_ms must be between 1000 and 60000".to_string());
        }
        if self.media_retry_base < ms(100) {
            errors.push("media_retry_base_ms must be at least 100".to_string());
        }
        if !(0.0 < self.risk_elevated && self.risk_elevated < self.risk_high && self.risk_high < self.risk_critical)
            || self.risk_critical > 100.0
        {
            errors.push("risk_elevated < risk_high < risk_critical must hold, between 0 and 100".to_string());
        }
        if !(1.0..=10.0).contains(&self.risk_slowdown) {
            errors.push("risk_slowdown must be between 1 and 10".to_string());
        }
        if self.risk_interval < ms(100) {
            errors.push("risk_interval_ms must be at least 100".to_string());
        }
        if !(1..=60).contains(&self.default_max_per_minute) {
            errors.push("default_max_per_minute must be between 1 and 60".to_string());
        }
        if self.lease_ttl < ms(300) {
            errors.push("lease_ttl_ms must be at least 300".to_string());
        }
        if self.worker_scan.is_zero() || self.rpc_timeout.is_zero() || self.netsim_qr_rotate.is_zero() {
            errors.push("worker_scan_ms, rpc_timeout_ms and netsim_qr_rotate_ms must be positive".to_string());
        }
        if self.pacing_grace_min > self.pacing_grace_max {
            errors.push("pacing_grace_min_ms must not exceed pacing_grace_max_ms".to_string());
        }
        if !(0.0..=1.0).contains(&self.pacing_jitter) {
            errors.push("pacing_jitter must be between 0 and 1".to_string());
        }
        if !(self.pacing_ramp_start > 0.0 && self.pacing_ramp_start <= 1.0) {
            errors.push("pacing_ramp_start must be in (0, 1]".to_string());
        }
        if self.large_body_slots == 0 || self.large_body_slot_ttl < ms(300) {
            errors.push("large_body_slots must be at least 1 and large_body_slot_ttl_ms at least 300".to_string());
        }
        if self.media_retention_days < 8 {
            errors.push("media_retention_days must be at least 8 (a queued message lives up to 7 days)".to_string());
        }
        if self.large_body_read_timeout < ms(1_000) {
            errors.push("large_body_read_timeout_ms must be at least 1000".to_string());
        }
        if self.group_creates_per_day == 0
            || self.group_participant_changes_per_minute == 0
            || self.group_joins_per_day == 0
        {
            errors.push("group_creates_per_day, group_participant_changes_per_minute and group_joins_per_day must be at least 1".to_string());
        }
        if self.events_streams_per_instance == 0 || self.events_streams_per_pod == 0 {
            errors.push("events_streams_per_instance and events_streams_per_pod must be at least 1".to_string());
        }
        if self.events_stream_max_bytes < 1024 * 1024 {
            errors.push("events_stream_max_bytes must be at least 1048576".to_string());
        }
        if self.webhook_timeout < ms(100)
            || self.webhook_retry_base.is_zero()
            || self.webhook_retry_max < self.webhook_retry_base
        {
            errors.push(
                "webhook_timeout_ms must be at least 100, webhook_retry_base_ms positive and webhook_retry_max_ms at least webhook_retry_base_ms"
                    .to_string(),
            );
        }
        if self.webhook_body_bytes_in_flight < 1024 * 1024 {
            errors.push("webhook_body_bytes_in_flight must be at least 1048576 (1 MiB)".to_string());
        }
        if self.webhook_disable_after_failures == 0 || self.webhook_endpoint_concurrency == 0 {
            errors
                .push("webhook_disable_after_failures and webhook_endpoint_concurrency must be at least 1".to_string());
        }
        if self.worker_max_instances == 0 {
            errors.push("worker_max_instances must be at least 1".to_string());
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log_level).is_err() {
            errors.push("log_level is not a valid tracing filter".to_string());
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(errors.join("; ")))
        }
    }
}

fn valid_prefix(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks a URL's form and scheme without ever echoing it (URLs carry passwords).
fn check_url(errors: &mut Vec<String>, key: &str, value: &str, schemes: &[&str]) {
    if value.is_empty() {
        errors.push(format!("{key} is required (PACELINE_{})", key.to_uppercase()));
        return;
    }
    // NATS accepts a comma-separated server list.
    for part in value.split(',') {
        match url::Url::parse(part.trim()) {
            Ok(u) if schemes.contains(&u.scheme()) => {}
            Ok(_) => {
                errors.push(format!("{key} must use one of the schemes {}", schemes.join(", ")));
                return;
            }
            Err(e) => {
                errors.push(format!("{key} is not a valid URL ({e})"));
                return;
            }
        }
    }
}

/// Lenient deserializers for values that arrive as environment strings.
mod de;

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment's Jail closures return its (large) error
mod tests;
