//! Receipts for the account's own messages: delivered and read, each applied once, in
//! order, with its event.

use super::*;

/// Where a message the account sent is: `sent`, then `delivered`, then `read` (receipts
/// only move it forward). Stored as its name in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum LogStatus {
    Sent,
    Delivered,
    Read,
}

impl LogStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LogStatus::Sent => "sent",
            LogStatus::Delivered => "delivered",
            LogStatus::Read => "read",
        }
    }
}

/// A receipt for a message the account sent: it reached the recipient's phone, or was
/// read (played, for voice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Receipt {
    Delivered,
    Read,
}

impl Receipt {
    /// The log's `status` it moves a sent message to.
    pub fn as_str(self) -> &'static str {
        match self {
            Receipt::Delivered => "delivered",
            Receipt::Read => "read",
        }
    }

    /// A receipt named as the networks name it (`delivered`, `read`), if it is one.
    pub fn parse(s: &str) -> Option<Receipt> {
        match s {
            "delivered" => Some(Receipt::Delivered),
            "read" => Some(Receipt::Read),
            _ => None,
        }
    }
}

/// A receipt (`delivered` or `read`) for a message an instance sent, under the epoch
/// its worker holds.
#[derive(Debug, Clone)]
pub struct ReceiptIn {
    pub instance: InstanceId,
    pub epoch: i64,
    pub wa_message_id: String,
    pub receipt: Receipt,
    pub at: DateTime<Utc>,
}

/// Receipts for messages the instances sent, in one transaction, each fenced on its own
/// instance's epoch. Statuses only move forward; a receipt that changes nothing is not an
/// event. Two receipts for one message are applied in their order (in rounds), so each
/// step is its own event. Returns, in input order, whether each changed its message.
pub async fn apply_receipts(pool: &PgPool, items: &[ReceiptIn]) -> Result<Vec<bool>, sqlx::Error> {
    let mut changed = vec![false; items.len()];
    let mut tx = pool.begin().await?;
    // Rounds: a message's second receipt waits for the next round.
    let mut left: Vec<usize> = (0..items.len()).collect();
    while !left.is_empty() {
        let mut seen = std::collections::HashSet::new();
        let (round, later): (Vec<usize>, Vec<usize>) =
            left.iter().partition(|&&k| seen.insert((&items[k].instance, &items[k].wa_message_id)));
        let pick = |f: &dyn Fn(&ReceiptIn) -> String| round.iter().map(|&k| f(&items[k])).collect::<Vec<_>>();
        let rows: Vec<(InstanceId, MessageId, String, String, String)> = sqlx::query_as(
            "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[]) \
                        AS r(r_instance, r_epoch, r_wa, r_status)), \
             owner AS (SELECT i.id AS o_id FROM instances i JOIN (SELECT DISTINCT r_instance, r_epoch FROM r) e \
                       ON i.id = e.r_instance AND i.owner_epoch = e.r_epoch ORDER BY i.id FOR SHARE OF i) \
             UPDATE log_messages SET status = r_status FROM r \
             WHERE instance_id = r_instance AND instance_id IN (SELECT o_id FROM owner) AND wa_message_id = r_wa \
               AND from_me AND COALESCE(array_position(ARRAY['sent', 'delivered', 'read'], status), 0) \
                   < array_position(ARRAY['sent', 'delivered', 'read'], r_status) \
             RETURNING instance_id, id, chat_jid, source, wa_message_id",
        )
        .bind(pick(&|r| r.instance.to_string()))
        .bind(round.iter().map(|&k| items[k].epoch).collect::<Vec<_>>())
        .bind(pick(&|r| r.wa_message_id.clone()))
        .bind(pick(&|r| r.receipt.as_str().to_string()))
        .fetch_all(&mut *tx)
        .await?;
        let index: std::collections::HashMap<(&InstanceId, &str), usize> =
            round.iter().map(|&k| ((&items[k].instance, items[k].wa_message_id.as_str()), k)).collect();
        let mut events = Vec::with_capacity(rows.len());
        for (instance, id, chat, source, wa) in &rows {
            let Some(&k) = index.get(&(instance, wa.as_str())) else { continue };
            changed[k] = true;
            let at = items[k].at;
            let data = ReceiptEventData {
                message_id: (source == "queue").then(|| id.clone()),
                wa_message_id: wa.clone(),
                chat_jid: chat.clone(),
                status: items[k].receipt,
                at,
            };
            let event = match items[k].receipt {
                Receipt::Delivered => Event::MessageDelivered(data),
                Receipt::Read => Event::MessageRead(data),
            };
            events.push((instance, event));
        }
        outbox::insert_many(&mut *tx, events).await?;
        left = later;
    }
    tx.commit().await?;
    Ok(changed)
}
