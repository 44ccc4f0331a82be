//! The `number_checks` table: lookups an instance already made.

use sqlx::PgExecutor;

use crate::ids::InstanceId;

/// A known answer: (number, exists, jid).
pub type Known = (String, bool, Option<String>);

/// The known answers among `numbers`.
pub async fn known(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    numbers: &[String],
) -> Result<Vec<Known>, sqlx::Error> {
    sqlx::query_as("SELECT number, exists, jid FROM number_checks WHERE instance_id = $1 AND number = ANY($2)")
        .bind(instance)
        .bind(numbers)
        .fetch_all(db)
        .await
}

/// Records answers (a repeated number keeps the newest).
pub async fn record(db: impl PgExecutor<'_>, instance: &InstanceId, answers: &[Known]) -> Result<(), sqlx::Error> {
    let numbers: Vec<&str> = answers.iter().map(|a| a.0.as_str()).collect();
    let exists: Vec<bool> = answers.iter().map(|a| a.1).collect();
    let jids: Vec<Option<&str>> = answers.iter().map(|a| a.2.as_deref()).collect();
    sqlx::query(
        "INSERT INTO number_checks (instance_id, number, exists, jid) \
         SELECT $1, * FROM UNNEST($2::text[], $3::bool[], $4::text[]) \
         ON CONFLICT (instance_id, number) DO UPDATE SET exists = EXCLUDED.exists, jid = EXCLUDED.jid, checked_at = now()",
    )
    .bind(instance)
    .bind(numbers)
    .bind(exists)
    .bind(jids)
    .execute(db)
    .await?;
    Ok(())
}
