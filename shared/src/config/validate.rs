//! Checks every value a role uses, with one clear message per bad value, naming its key
//! (`section.key`) and never a secret's value.

use std::time::Duration;

use super::section::ms;
use super::{placeholder, Config, ConfigError, Role};
use crate::auth::ADMIN_TOKEN_PREFIX;

impl Config {
    /// Checks every value the given role uses, with one clear message per bad value.
    pub fn validate(&self, role: Role) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        let needs_backends = !matches!(role, Role::Netsim | Role::Console);
        if needs_backends {
            check_url(&mut errors, "database_url", &self.database_url, &["postgres", "postgresql"]);
        }
        if matches!(role, Role::Api | Role::Worker | Role::Dispatcher | Role::Attendant | Role::Chatwoot) {
            check_url(&mut errors, "redis_url", &self.redis_url, &["redis", "rediss", "redis+unix", "unix"]);
            check_url(&mut errors, "nats_url", &self.nats_url, &["nats", "tls", "ws", "wss"]);
            if !valid_prefix(&self.namespace.key_prefix) {
                errors.push("namespace.key_prefix must be 1-64 of [A-Za-z0-9_-]".to_string());
            }
            if !valid_prefix(&self.namespace.subject_prefix) {
                errors.push("namespace.subject_prefix must be 1-64 of [A-Za-z0-9_-]".to_string());
            }
        }
        if let Some(schema) = &self.namespace.database_schema {
            if !valid_prefix(schema) {
                errors.push("namespace.database_schema must be 1-64 of [A-Za-z0-9_-]".to_string());
            }
        }
        if self.database.max_connections == 0 {
            errors.push("database.max_connections must be at least 1".to_string());
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
        if role == Role::Console {
            if self.secrets_key.is_none() && self.admin_token.is_none() {
                errors.push("the console needs secrets_key (PACELINE_SECRETS_KEY) to seal its sessions".to_string());
            }
            if !matches!(self.console.api_url.scheme(), "http" | "https") {
                errors.push("console.api_url must be an http or https URL".to_string());
            }
            if self.console.idle_timeout < ms(60_000) {
                errors.push("console.idle_timeout_ms must be at least 60000".to_string());
            }
        }
        if role == Role::Attendant && self.secrets_key.is_none() && self.admin_token.is_none() {
            errors.push(
                "the attendant needs secrets_key (PACELINE_SECRETS_KEY) to open stored provider keys".to_string(),
            );
        }
        if role == Role::Chatwoot && self.secrets_key.is_none() && self.admin_token.is_none() {
            errors.push(
                "the chatwoot bridge needs secrets_key (PACELINE_SECRETS_KEY) to open stored Chatwoot tokens"
                    .to_string(),
            );
        }
        if role == Role::Api {
            for o in &self.api.cors_allowed_origins {
                if !valid_origin(o) {
                    errors.push(format!(
                        "api.cors_allowed_origins: {o:?} is not `*` nor an origin (scheme://host[:port], no path)"
                    ));
                }
            }
            if self.api.client_ip_header.is_empty()
                || http::HeaderName::from_bytes(self.api.client_ip_header.as_bytes()).is_err()
            {
                errors.push("api.client_ip_header must be a valid HTTP header name".to_string());
            }
            if let Some(u) = &self.public_url {
                if !matches!(u.scheme(), "http" | "https") {
                    errors.push("public_url must be an http or https URL".to_string());
                }
            }
        }
        if !(1_000..=60_000).contains(&self.pacing.default_min_interval_ms) {
            errors.push("pacing.default_min_interval_ms must be between 1000 and 60000".to_string());
        }
        if self.media.retry_base < ms(100) {
            errors.push("media.retry_base_ms must be at least 100".to_string());
        }
        if !(0.0 < self.risk.elevated && self.risk.elevated < self.risk.high && self.risk.high < self.risk.critical)
            || self.risk.critical > 100.0
        {
            errors.push("risk.elevated < risk.high < risk.critical must hold, between 0 and 100".to_string());
        }
        if !(1.0..=10.0).contains(&self.risk.slowdown) {
            errors.push("risk.slowdown must be between 1 and 10".to_string());
        }
        if self.risk.interval < ms(100) {
            errors.push("risk.interval_ms must be at least 100".to_string());
        }
        if !(1..=60).contains(&self.pacing.default_max_per_minute) {
            errors.push("pacing.default_max_per_minute must be between 1 and 60".to_string());
        }
        if self.worker.lease_ttl < ms(300) {
            errors.push("worker.lease_ttl_ms must be at least 300".to_string());
        }
        if self.worker.scan.is_zero() || self.api.rpc_timeout.is_zero() || self.netsim.qr_rotate.is_zero() {
            errors.push("worker.scan_ms, api.rpc_timeout_ms and netsim.qr_rotate_ms must be positive".to_string());
        }
        if self.pacing.grace_min > self.pacing.grace_max {
            errors.push("pacing.grace_min_ms must not exceed pacing.grace_max_ms".to_string());
        }
        if !(0.0..=1.0).contains(&self.pacing.jitter) {
            errors.push("pacing.jitter must be between 0 and 1".to_string());
        }
        if !(self.pacing.ramp_start > 0.0 && self.pacing.ramp_start <= 1.0) {
            errors.push("pacing.ramp_start must be in (0, 1]".to_string());
        }
        if self.large_body.slots == 0 || self.large_body.slot_ttl < ms(300) {
            errors.push("large_body.slots must be at least 1 and large_body.slot_ttl_ms at least 300".to_string());
        }
        if self.media.retention_days < 8 || self.media.retention_days > 3650 {
            errors.push("media.retention_days must be 8 to 3650 (a queued message lives up to 7 days)".to_string());
        }
        if self.media.inbound_retention_days.is_some_and(|d| !(1..=3650).contains(&d)) {
            errors.push("media.inbound_retention_days must be 1 to 3650".to_string());
        }
        if self.media.outbound_retention_days.is_some_and(|d| !(8..=3650).contains(&d)) {
            errors.push(
                "media.outbound_retention_days must be 8 to 3650 (a queued message lives up to 7 days)".to_string(),
            );
        }
        let store = &self.media_store;
        if store.backend == super::section::MediaBackend::S3 && store.bucket.as_deref().is_none_or(str::is_empty) {
            errors.push("media_store.bucket is required with media_store.backend = s3".to_string());
        }
        if store.endpoint.as_deref().is_some_and(|e| url::Url::parse(e).is_err()) {
            errors.push("media_store.endpoint must be a URL (https://host:port)".to_string());
        } else if store.bucket.as_deref().is_some_and(|b| !b.is_empty()) {
            if let Err(e) = crate::db::media::Objects::new(store) {
                errors.push(e);
            }
        }
        if store.timeout < ms(1_000) || store.presigned_ttl > Duration::from_secs(7 * 24 * 3600) {
            errors.push(
                "media_store.timeout_ms must be at least 1000 and media_store.presigned_ttl_ms at most 7 days"
                    .to_string(),
            );
        }
        if self.large_body.read_timeout < ms(1_000) {
            errors.push("large_body.read_timeout_ms must be at least 1000".to_string());
        }
        if self.groups.creates_per_day == 0
            || self.groups.participant_changes_per_minute == 0
            || self.groups.joins_per_day == 0
        {
            errors.push("groups.creates_per_day, groups.participant_changes_per_minute and groups.joins_per_day must be at least 1".to_string());
        }
        if self.events.streams_per_instance == 0 || self.events.streams_per_pod == 0 {
            errors.push("events.streams_per_instance and events.streams_per_pod must be at least 1".to_string());
        }
        if self.events.stream_max_bytes < 1024 * 1024 {
            errors.push("events.stream_max_bytes must be at least 1048576".to_string());
        }
        if self.webhooks.timeout < ms(100)
            || self.webhooks.retry_base.is_zero()
            || self.webhooks.retry_max < self.webhooks.retry_base
        {
            errors.push(
                "webhooks.timeout_ms must be at least 100, webhooks.retry_base_ms positive and webhooks.retry_max_ms at least webhooks.retry_base_ms"
                    .to_string(),
            );
        }
        if self.webhooks.body_bytes_in_flight < 1024 * 1024 {
            errors.push("webhooks.body_bytes_in_flight must be at least 1048576 (1 MiB)".to_string());
        }
        if self.webhooks.disable_after_failures == 0 || self.webhooks.endpoint_concurrency == 0 {
            errors.push(
                "webhooks.disable_after_failures and webhooks.endpoint_concurrency must be at least 1".to_string(),
            );
        }
        if self.worker.max_instances == 0 {
            errors.push("worker.max_instances must be at least 1".to_string());
        }
        if self.worker.connects_per_second == 0 {
            errors.push("worker.connects_per_second must be at least 1".to_string());
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            errors.push("log.level is not a valid tracing filter".to_string());
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

/// `*`, or an http(s) origin as browsers send it: scheme, host and port only.
fn valid_origin(o: &str) -> bool {
    if o == "*" {
        return true;
    }
    match url::Url::parse(o) {
        Ok(u) => {
            matches!(u.scheme(), "http" | "https")
                && u.host_str().is_some()
                && u.path() == "/"
                && !o.ends_with('/')
                && u.query().is_none()
                && u.fragment().is_none()
                && u.username().is_empty()
        }
        Err(_) => false,
    }
}
