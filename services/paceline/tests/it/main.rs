//! The one integration-test binary. In-process tests get real Postgres, Redis and NATS
//! with their own schema and prefixes (see the `harness` crate); cluster tests run the
//! `paceline` binary itself as separate processes, as an operator would.

use std::path::Path;

mod account_events;
mod accounts;
mod actor;
mod api_keys;
mod attendant;
mod auth_matrix;
mod channels;
mod chaos;
mod chart;
mod chatwoot;
mod cli;
mod cluster;
mod console;
mod deliveries;
mod errors;
mod events;
mod evolution;
mod evolution_manager;
mod fencing;
mod groups;
mod inbound;
mod instances;
mod labels;
mod leases;
mod lids;
mod mcp;
mod media;
mod media_store;
mod messages;
mod numbers;
mod operation;
mod pairing_page;
mod profile;
mod proxy;
mod queue;
mod rabbitmq;
mod receive;
mod retention;
mod risk;
mod schemathesis;
mod semaphore;
mod sending;
mod status;
mod usage;
mod wa_store;
mod webhook_bodies;
mod webhooks;

/// The `paceline` binary under test (built by cargo for this package's tests).
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_paceline"))
}
