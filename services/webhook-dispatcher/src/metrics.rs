//! The dispatcher's metrics, named in one place and described at start-up.

pub const RELAY_PUBLISHED: &str = "paceline_events_published_total";
pub const RELAY_LAG: &str = "paceline_events_relay_lag_seconds";
pub const ATTEMPTS: &str = "paceline_webhook_attempts_total";
pub const ATTEMPT_SECONDS: &str = "paceline_webhook_attempt_seconds";
pub const LAG_SECONDS: &str = "paceline_webhook_delivery_lag_seconds";
pub const DEFERRED: &str = "paceline_webhook_deferred_total";
pub const RETRY_QUEUE: &str = "paceline_webhook_retry_queue";
pub const DISABLED_ENDPOINTS: &str = "paceline_webhook_disabled_endpoints";
pub const BODY_BYTES: &str = "paceline_webhook_body_bytes_in_flight";
pub const MEDIA_COLLECTED: &str = "paceline_media_collected_total";
pub const MEDIA_STORED_BYTES: &str = "paceline_media_stored_bytes";
pub const MEDIA_OBJECTS_DELETED: &str = "paceline_media_objects_deleted_total";
pub const MEDIA_OBJECT_DELETIONS_FAILED: &str = "paceline_media_object_deletions_failed_total";
pub const MEDIA_OBJECT_DELETIONS_QUEUED: &str = "paceline_media_object_deletions_queued";

/// Enabled event sinks, by `state`: `enabled` (all) and `failing`.
pub const SINKS: &str = "paceline_sinks";
/// Events of the sinks this pod delivers not yet confirmed by their brokers.
pub const SINK_BACKLOG: &str = "paceline_sink_backlog";
/// How long the oldest event a failing sink of this pod holds back has waited.
pub const SINK_OLDEST: &str = "paceline_sink_oldest_undelivered_seconds";
/// Messages published to sinks' brokers, by `result`: `confirmed` or `failed`.
pub const SINK_PUBLISHED: &str = "paceline_sink_published_total";
/// A sink's events found gone from the stream (past its retention or size cap), or the
/// stream found reset.
pub const SINK_GAPS: &str = "paceline_sink_gaps_total";
/// Failed connections or batches (each followed by a backoff and a retry).
pub const SINK_FAILURES: &str = "paceline_sink_failures_total";

pub fn describe() {
    shared::telemetry::prometheus();
    metrics::describe_counter!(RELAY_PUBLISHED, "outbox events published to JetStream");
    metrics::describe_gauge!(RELAY_LAG, "age of the newest event of the last published batch");
    metrics::describe_counter!(
        ATTEMPTS,
        "webhook delivery attempts by result: succeeded, refused (non-2xx), gone (410), no_answer"
    );
    metrics::describe_histogram!(ATTEMPT_SECONDS, "duration of one webhook delivery attempt");
    metrics::describe_histogram!(LAG_SECONDS, "from an event's creation to its successful first delivery attempt");
    metrics::describe_counter!(DEFERRED, "deliveries put back unattempted (their endpoint's queue was full or slow)");
    metrics::describe_gauge!(RETRY_QUEUE, "deliveries waiting for a retry (pending after a failed attempt)");
    metrics::describe_gauge!(DISABLED_ENDPOINTS, "webhook endpoints disabled (by their owner or after failing)");
    metrics::describe_gauge!(
        BODY_BYTES,
        "bytes of webhook bodies built with media (Evolution's base64) held by attempts in flight on this pod"
    );
    metrics::describe_counter!(MEDIA_COLLECTED, "media rows no message referred to, collected after their grace");
    metrics::describe_gauge!(MEDIA_STORED_BYTES, "bytes of media stored by every instance together");
    metrics::describe_counter!(
        MEDIA_OBJECTS_DELETED,
        "objects deleted from the media bucket (expired or no longer referred to)"
    );
    metrics::describe_counter!(
        MEDIA_OBJECT_DELETIONS_FAILED,
        "object deletions the media bucket failed (tried again later)"
    );
    metrics::describe_gauge!(MEDIA_OBJECT_DELETIONS_QUEUED, "objects waiting to be deleted from the media bucket");
    metrics::describe_gauge!(SINKS, "enabled event sinks (RabbitMQ), and how many of them are failing");
    metrics::describe_gauge!(SINK_BACKLOG, "events of this pod's sinks not yet confirmed by their brokers");
    metrics::describe_gauge!(SINK_OLDEST, "age of the oldest event a failing sink of this pod holds back");
    metrics::describe_counter!(SINK_PUBLISHED, "messages published to sinks' brokers, by result (confirmed, failed)");
    metrics::describe_counter!(
        SINK_GAPS,
        "sinks that found events gone from the stream (retention, size cap) or the stream reset"
    );
    metrics::describe_counter!(SINK_FAILURES, "failed sink connections or batches, each retried after a backoff");
}
