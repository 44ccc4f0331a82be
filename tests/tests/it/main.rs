//! One integration-test binary: every test gets real Postgres, Redis and NATS with its
//! own schema and prefixes (see the `harness` crate).

mod actor;
mod auth_matrix;
mod deliveries;
mod errors;
mod events;
mod fencing;
mod instances;
mod leases;
mod media;
mod messages;
mod operation;
mod proxy;
mod schemathesis;
mod wa_store;
mod webhooks;
