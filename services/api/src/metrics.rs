//! The API's metrics, named in one place and described at start-up.

pub const HTTP_REQUESTS: &str = "paceline_http_requests_total";
pub const HTTP_DURATION: &str = "paceline_http_request_duration_seconds";

pub fn describe() {
    metrics::describe_counter!(HTTP_REQUESTS, "HTTP requests answered, by route template, method and status");
    metrics::describe_histogram!(HTTP_DURATION, metrics::Unit::Seconds, "HTTP request latency by route template and method");
}
