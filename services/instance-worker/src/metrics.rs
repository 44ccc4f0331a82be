//! The worker's metrics, named in one place and described at start-up.

pub const LEASES_HELD: &str = "paceline_worker_leases_held";
pub const LEASE_ACQUIRED: &str = "paceline_worker_lease_acquired_total";
pub const LEASE_LOST: &str = "paceline_worker_lease_lost_total";
pub const ACTOR_PANICS: &str = "paceline_worker_actor_panics_total";
pub const LEASE_REVIVED: &str = "paceline_worker_lease_revived_total";
pub const LEASE_RENEWAL_SECONDS: &str = "paceline_worker_lease_renewal_seconds";
pub const LEASE_RENEWAL_FAILED: &str = "paceline_worker_lease_renewal_failed_total";
pub const FENCED_WRITES: &str = "paceline_worker_fenced_writes_total";
pub const SESSIONS: &str = "paceline_worker_session_events_total";
pub const RPC: &str = "paceline_worker_rpc_total";
pub const SENDS: &str = "paceline_queue_sends_total";
pub const READS_FAILED: &str = "paceline_queue_reads_failed_total";
pub const PACING_DELAY: &str = "paceline_queue_pacing_delay_seconds";
pub const SEND_LATENCY: &str = "paceline_queue_send_latency_seconds";
pub const SEND_LATENESS: &str = "paceline_queue_send_lateness_seconds";
pub const QUEUE_DEPTH: &str = "paceline_queue_depth";
pub const QUEUE_OLDEST: &str = "paceline_queue_oldest_age_seconds";
pub const QUEUE_DEPTH_INSTANCE: &str = "paceline_queue_instance_depth";
pub const QUEUE_OLDEST_INSTANCE: &str = "paceline_queue_instance_oldest_age_seconds";
pub const MEDIA_QUOTA_REFUSED: &str = "paceline_media_quota_refused_total";
pub const INSTANCES_UNLEASED: &str = "paceline_instances_unleased";
pub const INSTANCES_DESIRED: &str = "paceline_instances_desired";
pub const INSTANCES_SHED: &str = "paceline_worker_instances_shed_total";
pub const WRITE_BATCH: &str = "paceline_worker_write_batch_size";
pub const CONNECTS_WAITING: &str = "paceline_worker_connects_waiting";
pub const RECEIVED: &str = "paceline_worker_received_total";

pub fn describe() {
    shared::telemetry::prometheus();
    metrics::describe_gauge!(LEASES_HELD, "instance leases this worker holds");
    metrics::describe_gauge!(
        CONNECTS_WAITING,
        "sessions waiting for their slot to connect (worker.connects_per_second paces connects and reconnects)"
    );
    metrics::describe_histogram!(
        WRITE_BATCH,
        "jobs per transaction of the worker's batched writers (writer: finish for the ends of sends, receipts)"
    );
    metrics::describe_gauge!(
        INSTANCES_UNLEASED,
        "instances that should run and no worker holds, cluster-wide as this worker last saw (every 5 s)"
    );
    metrics::describe_gauge!(INSTANCES_DESIRED, "instances that should run, cluster-wide (every 5 s)");
    metrics::describe_counter!(
        INSTANCES_SHED,
        "instances handed over to other workers because this one held more than its share"
    );
    metrics::describe_counter!(
        MEDIA_QUOTA_REFUSED,
        "received media logged unavailable because its instance's media quota was used up"
    );
    metrics::describe_counter!(LEASE_ACQUIRED, "instance leases acquired (instance moves onto this worker)");
    metrics::describe_counter!(
        LEASE_LOST,
        "leases lost to another worker (or to Redis for a whole TTL) before release"
    );
    metrics::describe_counter!(ACTOR_PANICS, "instance tasks that panicked (their leases were released)");
    metrics::describe_counter!(
        LEASE_REVIVED,
        "leases that expired unrenewed while nobody took them, taken again under the same epoch"
    );
    metrics::describe_histogram!(
        LEASE_RENEWAL_SECONDS,
        metrics::Unit::Seconds,
        "time of one renewal round of every held lease (on the renewal thread)"
    );
    metrics::describe_counter!(LEASE_RENEWAL_FAILED, "renewal rounds that failed (Redis unreachable or slow)");
    metrics::describe_counter!(
        FENCED_WRITES,
        "fenced Postgres writes, by result (applied or rejected: ownership moved on)"
    );
    metrics::describe_counter!(
        RECEIVED,
        "messages from the network newly logged, by source (live, history); redeliveries of logged ones not counted"
    );
    metrics::describe_counter!(SESSIONS, "network session events, by kind (`open_failed`: an opening that failed)");
    metrics::describe_counter!(RPC, "worker RPC requests handled, by type and result");
    metrics::describe_counter!(SENDS, "messages by send result (sent, a failure code, or retried)");
    metrics::describe_counter!(
        READS_FAILED,
        "sends put off because reading what they carry (media, the quoted message) failed: tried again shortly"
    );
    metrics::describe_histogram!(PACING_DELAY, metrics::Unit::Seconds, "time from queueing to the send attempt");
    metrics::describe_gauge!(QUEUE_DEPTH, "unfinished messages of the instances this worker runs");
    metrics::describe_gauge!(QUEUE_OLDEST, "age of the oldest unfinished message among them");
    metrics::describe_gauge!(QUEUE_DEPTH_INSTANCE, "unfinished messages per instance (metrics_per_instance only)");
    metrics::describe_gauge!(
        QUEUE_OLDEST_INSTANCE,
        "oldest unfinished message's age per instance (metrics_per_instance only)"
    );
    metrics::describe_histogram!(SEND_LATENCY, metrics::Unit::Seconds, "time the network took to accept a send");
    metrics::describe_histogram!(
        SEND_LATENESS,
        metrics::Unit::Seconds,
        "how long after the moment the pacer chose a send started (scheduling and preparing the head)"
    );
}
