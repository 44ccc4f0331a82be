//! The dispatcher's metrics, named in one place and described at start-up.

pub const RELAY_PUBLISHED: &str = "paceline_events_published_total";
pub const RELAY_LAG: &str = "paceline_events_relay_lag_seconds";

pub fn describe() {
    shared::telemetry::prometheus();
    metrics::describe_counter!(RELAY_PUBLISHED, "outbox events published to JetStream");
    metrics::describe_gauge!(RELAY_LAG, "age of the newest event of the last published batch");
}
