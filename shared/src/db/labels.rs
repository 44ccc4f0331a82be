//! Labels of business accounts and what they are applied to (migration 0018). Each
//! change is written with its `label.updated` event in one transaction, and only when a
//! row changed: a change made through the API and then echoed by the network is
//! announced once. The worker's writes are fenced on its epoch; the API's are not (the
//! network already accepted the change when the API records it).

use std::collections::HashMap;

use sqlx::{PgExecutor, PgPool};

use crate::events::{Event, LabelEventLabel, LabelUpdatedEventData};
use crate::ids::InstanceId;

/// A label.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LabelRow {
    pub label_id: String,
    pub name: String,
    pub color: i32,
}

/// One change to an account's labels.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Created, renamed or recoloured.
    Edit {
        label_id: String,
        name: String,
        color: i32,
    },
    Delete {
        label_id: String,
    },
    /// Applied to (or removed from) a chat, or one message of it (`wa_message_id`).
    Target {
        label_id: String,
        chat_jid: String,
        wa_message_id: Option<String>,
        labeled: bool,
    },
}

impl Change {
    fn label_id(&self) -> &str {
        match self {
            Change::Edit { label_id, .. } | Change::Delete { label_id } | Change::Target { label_id, .. } => label_id,
        }
    }
}

/// Applies `change` for `instance` and, when something changed, writes its
/// `label.updated`. `epoch`: the worker's fence (`None` from the API). Returns
/// `Some(changed)`, or `None` when the fence refused (another worker owns the instance).
pub async fn apply(
    pool: &PgPool,
    instance: &InstanceId,
    epoch: Option<i64>,
    change: &Change,
) -> Result<Option<bool>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    if let Some(epoch) = epoch {
        if !super::log::fence(&mut tx, instance, epoch).await? {
            return Ok(None);
        }
    }
    let label_id = change.label_id();
    let changed = match change {
        Change::Edit { name, color, .. } => {
            sqlx::query(
                "INSERT INTO labels (instance_id, label_id, name, color) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (instance_id, label_id) DO UPDATE SET name = $3, color = $4, updated_at = now() \
                 WHERE (labels.name, labels.color) IS DISTINCT FROM ($3, $4)",
            )
            .bind(instance)
            .bind(label_id)
            .bind(name)
            .bind(color)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1
        }
        Change::Delete { .. } => {
            sqlx::query("DELETE FROM labels WHERE instance_id = $1 AND label_id = $2")
                .bind(instance)
                .bind(label_id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                == 1
        }
        Change::Target { chat_jid, wa_message_id, labeled, .. } => {
            let message = wa_message_id.as_deref().unwrap_or("");
            if *labeled {
                // A label the network applies before we heard of it: kept by its id.
                sqlx::query(
                    "INSERT INTO labels (instance_id, label_id, name, color) VALUES ($1, $2, $2, 0) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(instance)
                .bind(label_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO label_targets (instance_id, label_id, chat_jid, wa_message_id) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                )
            } else {
                sqlx::query(
                    "DELETE FROM label_targets WHERE instance_id = $1 AND label_id = $2 AND chat_jid = $3 \
                     AND wa_message_id = $4",
                )
            }
            .bind(instance)
            .bind(label_id)
            .bind(chat_jid)
            .bind(message)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1
        }
    };
    if changed {
        let event = event(&mut tx, instance, change).await?;
        super::outbox::insert(&mut *tx, instance, &event).await?;
    }
    tx.commit().await?;
    Ok(Some(changed))
}

/// The `label.updated` of `change`: the label as it now is (`deleted` once gone), what changed,
/// and the chats it is applied to.
async fn event(tx: &mut sqlx::PgConnection, instance: &InstanceId, change: &Change) -> Result<Event, sqlx::Error> {
    let label_id = change.label_id();
    let row = get(&mut *tx, instance, label_id).await?;
    let chats: Vec<String> = sqlx::query_scalar(
        "SELECT chat_jid FROM label_targets WHERE instance_id = $1 AND label_id = $2 AND wa_message_id = '' \
         ORDER BY chat_jid LIMIT 1000",
    )
    .bind(instance)
    .bind(label_id)
    .fetch_all(&mut *tx)
    .await?;
    let label = match &row {
        Some(r) => {
            LabelEventLabel { id: r.label_id.clone(), name: Some(r.name.clone()), color: Some(r.color), deleted: false }
        }
        None => LabelEventLabel { id: label_id.to_string(), name: None, color: None, deleted: true },
    };
    let (change, chat_jid, wa_message_id) = match change {
        Change::Edit { .. } => (if row.is_some() { "edited" } else { "deleted" }, None, None),
        Change::Delete { .. } => ("deleted", None, None),
        Change::Target { chat_jid, wa_message_id, labeled, .. } => {
            (if *labeled { "applied" } else { "removed" }, Some(chat_jid.clone()), wa_message_id.clone())
        }
    };
    Ok(Event::LabelUpdated(LabelUpdatedEventData { label, change: change.into(), chats, chat_jid, wa_message_id }))
}

/// The account's labels, by id.
pub async fn list(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<Vec<LabelRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT label_id, name, color FROM labels WHERE instance_id = $1 \
         ORDER BY length(label_id), label_id LIMIT 10000",
    )
    .bind(instance)
    .fetch_all(db)
    .await
}

pub async fn get(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    label_id: &str,
) -> Result<Option<LabelRow>, sqlx::Error> {
    sqlx::query_as("SELECT label_id, name, color FROM labels WHERE instance_id = $1 AND label_id = $2")
        .bind(instance)
        .bind(label_id)
        .fetch_optional(db)
        .await
}

/// The id for a new label: WhatsApp's are small integers, so one past the largest.
pub async fn next_id(db: impl PgExecutor<'_>, instance: &InstanceId) -> Result<String, sqlx::Error> {
    let max: Option<i64> = sqlx::query_scalar(
        "SELECT max(label_id::bigint) FROM labels WHERE instance_id = $1 AND label_id ~ '^[0-9]{1,15}$'",
    )
    .bind(instance)
    .fetch_one(db)
    .await?;
    Ok((max.unwrap_or(0) + 1).to_string())
}

/// The labels of these chats (chat jid -> label ids).
pub async fn for_chats(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    jids: &[String],
) -> Result<HashMap<String, Vec<String>>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT chat_jid, label_id FROM label_targets WHERE instance_id = $1 AND chat_jid = ANY($2) \
         AND wa_message_id = '' ORDER BY chat_jid, length(label_id), label_id",
    )
    .bind(instance)
    .bind(jids)
    .fetch_all(db)
    .await?;
    Ok(group(rows))
}

/// The labels of these messages of one chat (network id -> label ids).
pub async fn for_messages(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    chat_jid: &str,
    wa_message_ids: &[String],
) -> Result<HashMap<String, Vec<String>>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT wa_message_id, label_id FROM label_targets WHERE instance_id = $1 AND chat_jid = $2 \
         AND wa_message_id = ANY($3) ORDER BY wa_message_id, length(label_id), label_id",
    )
    .bind(instance)
    .bind(chat_jid)
    .bind(wa_message_ids)
    .fetch_all(db)
    .await?;
    Ok(group(rows))
}

fn group(rows: Vec<(String, String)>) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for (k, v) in rows {
        out.entry(k).or_default().push(v);
    }
    out
}
