//! paceline's shared library: everything more than one service needs.
//!
//! - [`config`]: layered configuration (defaults, file, `PACELINE_*` environment), validated.
//! - [`ids`]: typed, prefixed identifiers (`inst_`, `msg_`, ...).
//! - [`error`]: the one error type at the HTTP edge and its closed [`error::ErrorCode`] enum.
//! - [`db`]: the Postgres pool, migrations and the repository modules (all SQL lives there).
//! - [`bus`]: NATS connection and subject builders (nobody else formats a subject).
//! - [`contract`]: the worker contract, the operations on a running session with their typed replies.
//! - [`kv`]: the Redis pool and key builders (nobody else formats a key).
//! - [`auth`]: token formats, generation and hashing.
//! - [`net`]: client address resolution and IP allow-lists.
//! - [`telemetry`]: JSON logs and the Prometheus recorder.
//! - [`health`]: the readiness each role registers for the probes.

pub mod auth;
pub mod backoff;
pub mod bus;
pub mod config;
pub mod contract;
pub mod db;
pub mod error;
pub mod events;
pub mod fetch;
pub mod health;
#[cfg(feature = "http")]
pub mod http;
pub mod ids;
pub mod jid;
pub mod json;
pub mod kv;
pub mod message;
pub mod privacy;
pub mod risk;
pub mod sealed;
pub mod simproto;
pub mod telemetry;
pub mod window;

pub use config::Config;
pub use error::{ApiError, ErrorCode};

/// The cancellation signal every service's `run` takes: cancelled once on SIGTERM/Ctrl-C.
pub type Shutdown = tokio_util::sync::CancellationToken;
