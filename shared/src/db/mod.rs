//! Postgres: the pool, migrations, and one repository module per table.
//! All SQL lives in these modules; handlers call functions taking `impl PgExecutor`.

pub mod api_keys;
pub mod deliveries;
pub mod instances;
pub mod log;
pub mod media;
pub mod messages;
pub mod outbox;
pub mod pairing_links;
pub mod usage;
pub mod webhooks;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::Config;

/// The migrations of `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Opens the pool. With `database_schema` set, every connection uses that schema
/// (tests give each test its own); the schema is created if missing.
pub async fn connect(config: &Config) -> Result<PgPool, sqlx::Error> {
    let mut opts: PgConnectOptions = config.database_url.parse()?;
    opts = opts.application_name("paceline");
    if let Some(schema) = &config.database_schema {
        // The schema name was validated as [A-Za-z0-9_-]{1,64}; quote it for the '-'.
        let mut conn_opts = opts.clone();
        conn_opts = conn_opts.options([("search_path", schema.as_str())]);
        let admin = PgPoolOptions::new().max_connections(1).connect_with(opts.clone()).await?;
        // IF NOT EXISTS still races between pods booting at once: a concurrent creator
        // surfaces as a unique violation (23505) or duplicate_schema (42P06).
        if let Err(e) = sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"")).execute(&admin).await {
            let code = e.as_database_error().and_then(|d| d.code()).map(|c| c.to_string());
            if !matches!(code.as_deref(), Some("23505" | "42P06")) {
                return Err(e);
            }
        }
        admin.close().await;
        opts = conn_opts;
    }
    PgPoolOptions::new()
        .max_connections(config.database_max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts)
        .await
}

/// Applies pending migrations. sqlx takes a Postgres advisory lock for the duration, so
/// many pods booting at once apply each migration exactly once and the rest wait.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Whether a database error is a violation of the named constraint.
pub fn is_constraint_violation(err: &sqlx::Error, constraint: &str) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.constraint() == Some(constraint))
}
