//! Postgres: the pool, migrations, and one repository module per table.
//! All SQL lives in these modules; handlers call functions taking `impl PgExecutor`.

pub mod accounts;
pub mod api_keys;
pub mod attendants;
pub mod chatwoot;
pub mod deliveries;
pub mod instances;
pub mod labels;
pub mod log;
pub mod media;
pub mod messages;
pub mod number_checks;
pub mod outbox;
pub mod pairing_links;
pub mod risk;
pub mod sinks;
pub mod usage;
pub mod webhooks;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::Config;

/// The migrations of `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Opens the pool. With `namespace.database_schema` set, every connection uses that schema
/// (tests give each test its own); the schema is created if missing.
pub async fn connect(config: &Config) -> Result<PgPool, sqlx::Error> {
    let mut opts: PgConnectOptions = config.database_url.parse()?;
    opts = opts.application_name("paceline");
    if let Some(schema) = &config.namespace.database_schema {
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
        .max_connections(config.database.max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts)
        .await
}

/// Applies pending migrations. sqlx takes a Postgres advisory lock for the duration, so
/// many pods booting at once apply each migration exactly once and the rest wait.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Makes the schema ready for this build before a role starts: applies the migrations
/// (`migrate_on_start`), or waits until someone else has (the Helm chart's migration Job),
/// so a pod never runs against an older schema. A newer one is fine: migrations only add,
/// so pods of the previous release keep running during a rolling upgrade.
pub async fn prepare(pool: &PgPool, config: &Config, shutdown: &crate::Shutdown) -> anyhow::Result<()> {
    if config.migrate_on_start {
        return Ok(migrate(pool).await?);
    }
    let mut told = false;
    loop {
        if schema_current(pool).await? {
            return Ok(());
        }
        if !told {
            tracing::warn!(
                want = latest_migration(),
                "waiting for the database schema: run `paceline migrate` (the chart's migration Job does)"
            );
            told = true;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = shutdown.cancelled() => anyhow::bail!("shut down while waiting for migrations"),
        }
    }
}

/// The newest migration this build knows.
pub fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Whether every migration of this build has been applied.
pub async fn schema_current(pool: &PgPool) -> Result<bool, sqlx::Error> {
    let applied: Option<i64> =
        match sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success").fetch_one(pool).await {
            Ok(v) => v,
            // No migrations table yet (42P01): nothing applied.
            Err(e) if e.as_database_error().and_then(|d| d.code()).as_deref() == Some("42P01") => None,
            Err(e) => return Err(e),
        };
    Ok(applied.is_some_and(|v| v >= latest_migration()))
}

/// Whether a database error is a violation of the named constraint.
pub fn is_constraint_violation(err: &sqlx::Error, constraint: &str) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.constraint() == Some(constraint))
}

#[cfg(test)]
mod tests {
    /// A landed migration never changes: a deployment that applied its old text would
    /// fail sqlx's checksum on the upgrade. `migrations/checksums.txt` holds each one's
    /// (SHA-384, as sqlx stores it); a new migration is appended to it with
    /// `PACELINE_APPEND_MIGRATION_CHECKSUMS=1`, which never rewrites a line.
    #[test]
    fn landed_migrations_never_change() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/checksums.txt");
        let listed = std::fs::read_to_string(path).unwrap_or_default();
        let mut known = std::collections::BTreeMap::new();
        for line in listed.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            let (version, sum) = line.split_once(' ').expect("`<version> <sha384>`");
            known.insert(version.parse::<i64>().expect("a version"), sum.to_string());
        }
        let mut appended = String::new();
        for m in super::MIGRATOR.iter() {
            let sum = hex::encode(&m.checksum);
            match known.remove(&m.version) {
                Some(listed) => assert_eq!(
                    listed, sum,
                    "migration {} ({}) changed after it landed: add a new migration instead",
                    m.version, m.description
                ),
                None => appended.push_str(&format!("{} {sum}\n", m.version)),
            }
        }
        assert!(known.is_empty(), "migrations listed but gone: {:?}", known.keys().collect::<Vec<_>>());
        if !appended.is_empty() {
            assert!(
                std::env::var_os("PACELINE_APPEND_MIGRATION_CHECKSUMS").is_some(),
                "new migrations: run with PACELINE_APPEND_MIGRATION_CHECKSUMS=1 to append\n{appended}"
            );
            let mut all = if listed.is_empty() {
                "# <version> <SHA-384 of the migration, as sqlx checks it>: append only (shared/src/db/mod.rs)\n"
                    .to_string()
            } else {
                listed
            };
            all.push_str(&appended);
            std::fs::write(path, all).expect("writing the checksums");
        }
    }
}
