//! The flat keys of releases before the sections (`PACELINE_LEASE_TTL_MS`,
//! `lease_ttl_ms = ...` in a file): still read, each as the sectioned key it became, so
//! a deployment's environment keeps working across the upgrade. A sectioned key given
//! too wins over its old name.

use figment::value::{Dict, Map, Tag, Value};
use figment::{Metadata, Profile, Provider};

/// Each old flat key and the `section.key` it became.
pub const ALIASES: &[(&str, &str)] = &[
    ("database_schema", "namespace.database_schema"),
    ("key_prefix", "namespace.key_prefix"),
    ("subject_prefix", "namespace.subject_prefix"),
    ("database_max_connections", "database.max_connections"),
    ("trusted_proxies", "api.trusted_proxies"),
    ("client_ip_header", "api.client_ip_header"),
    ("drain_ms", "api.drain_ms"),
    ("shutdown_timeout_ms", "api.shutdown_timeout_ms"),
    ("rpc_timeout_ms", "api.rpc_timeout_ms"),
    ("connect_qr_wait_ms", "api.connect_qr_wait_ms"),
    ("log_format", "log.format"),
    ("log_level", "log.level"),
    ("netsim_url", "netsim.url"),
    ("netsim_listen_addr", "netsim.listen_addr"),
    ("netsim_qr_rotate_ms", "netsim.qr_rotate_ms"),
    ("netsim_request_timeout_ms", "netsim.request_timeout_ms"),
    ("default_min_interval_ms", "pacing.default_min_interval_ms"),
    ("default_max_per_minute", "pacing.default_max_per_minute"),
    ("pacing_grace_min_ms", "pacing.grace_min_ms"),
    ("pacing_grace_max_ms", "pacing.grace_max_ms"),
    ("pacing_jitter", "pacing.jitter"),
    ("pacing_ramp_ms", "pacing.ramp_ms"),
    ("pacing_ramp_start", "pacing.ramp_start"),
    ("risk_elevated", "risk.elevated"),
    ("risk_high", "risk.high"),
    ("risk_critical", "risk.critical"),
    ("risk_slowdown", "risk.slowdown"),
    ("risk_auto_pause", "risk.auto_pause"),
    ("risk_hold_first_contacts", "risk.hold_first_contacts"),
    ("risk_interval_ms", "risk.interval_ms"),
    ("lease_ttl_ms", "worker.lease_ttl_ms"),
    ("worker_scan_ms", "worker.scan_ms"),
    ("worker_max_instances", "worker.max_instances"),
    ("queue_retry_base_ms", "worker.queue_retry_base_ms"),
    ("media_quota_bytes", "media.quota_bytes"),
    ("media_retention_days", "media.retention_days"),
    ("media_retry_base_ms", "media.retry_base_ms"),
    ("large_body_slots", "large_body.slots"),
    ("large_body_slot_ttl_ms", "large_body.slot_ttl_ms"),
    ("large_body_wait_ms", "large_body.wait_ms"),
    ("large_body_read_timeout_ms", "large_body.read_timeout_ms"),
    ("group_creates_per_day", "groups.creates_per_day"),
    ("group_participant_changes_per_minute", "groups.participant_changes_per_minute"),
    ("group_joins_per_day", "groups.joins_per_day"),
    ("events_streams_per_instance", "events.streams_per_instance"),
    ("events_streams_per_pod", "events.streams_per_pod"),
    ("events_stream_max_bytes", "events.stream_max_bytes"),
    ("metrics_per_instance", "metrics.per_instance"),
    ("webhook_timeout_ms", "webhooks.timeout_ms"),
    ("webhook_retry_base_ms", "webhooks.retry_base_ms"),
    ("webhook_retry_max_ms", "webhooks.retry_max_ms"),
    ("webhook_retry_span_ms", "webhooks.retry_span_ms"),
    ("webhook_disable_after_failures", "webhooks.disable_after_failures"),
    ("webhook_disable_after_ms", "webhooks.disable_after_ms"),
    ("webhook_endpoint_concurrency", "webhooks.endpoint_concurrency"),
    ("webhook_body_bytes_in_flight", "webhooks.body_bytes_in_flight"),
    ("usage_rollup_interval_ms", "usage.rollup_interval_ms"),
    ("whatsapp_ws_url", "whatsapp.ws_url"),
    ("whatsapp_connect_timeout_ms", "whatsapp.connect_timeout_ms"),
];

/// A provider whose old flat keys are read as their sectioned keys.
pub struct Renamed<P>(pub P);

impl<P: Provider> Provider for Renamed<P> {
    fn metadata(&self) -> Metadata {
        self.0.metadata()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut data = self.0.data()?;
        for dict in data.values_mut() {
            rename(dict);
        }
        Ok(data)
    }
}

fn rename(dict: &mut Dict) {
    for (old, new) in ALIASES {
        let Some(value) = dict.remove(*old) else { continue };
        let (section, key) = new.split_once('.').expect("a sectioned key");
        let table = dict.entry(section.to_string()).or_insert_with(|| Value::Dict(Tag::Default, Dict::new()));
        if let Value::Dict(_, table) = table {
            table.entry(key.to_string()).or_insert(value);
        }
    }
}
