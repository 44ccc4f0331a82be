//! The API's metrics, named in one place and described at start-up.

pub const HTTP_REQUESTS: &str = "paceline_http_requests_total";
pub const HTTP_DURATION: &str = "paceline_http_request_duration_seconds";

/// Installs the process's recorder (if not yet) and describes the API's metrics.
pub fn describe() {
    shared::telemetry::prometheus();
    metrics::describe_counter!(HTTP_REQUESTS, "HTTP requests answered, by route template, method and status");
    metrics::describe_histogram!(HTTP_DURATION, metrics::Unit::Seconds, "HTTP request latency by route template and method");
}
