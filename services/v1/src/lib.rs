//! paceline's own door: the `/v1` routes, the hosted pairing page, media by signed URL
//! and health. Each route extracts (who calls, for which instance, the validated
//! body), calls the core (`domain`) and shapes the answer; what only HTTP knows (the
//! large-body gate, the event stream over SSE, the pairing page's HTML) is here.

pub mod routes;
pub mod schemas;

pub use routes::all as router;
