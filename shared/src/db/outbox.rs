//! The event outbox: an event row is written in the same transaction as the change it
//! describes (invariant 1); a relay publishes it to JetStream (the webhooks issue).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::events::Event;
use crate::ids::{EventId, InstanceId};

/// A new event's id and body (what webhooks receive and the stream shows), made `at`.
pub fn envelope(instance: &InstanceId, event: &Event, at: DateTime<Utc>) -> (EventId, serde_json::Value) {
    let id = EventId::new();
    let payload = serde_json::json!({
        "id": id, "type": event.kind(), "instance_id": instance, "created_at": at, "data": event.data(),
    });
    (id, payload)
}

/// Writes an event; returns its id.
pub async fn insert(db: impl PgExecutor<'_>, instance: &InstanceId, event: &Event) -> Result<EventId, sqlx::Error> {
    let kind = event.kind();
    let (id, payload) = envelope(instance, event, Utc::now());
    sqlx::query("INSERT INTO outbox (id, instance_id, type, payload) VALUES ($1, $2, $3, $4)")
        .bind(&id)
        .bind(instance)
        .bind(kind)
        .bind(payload)
        .execute(db)
        .await?;
    Ok(id)
}

/// Writes several events in one statement (each with its instance).
pub async fn insert_many(db: impl PgExecutor<'_>, events: Vec<(&InstanceId, Event)>) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let (mut ids, mut instances, mut kinds, mut payloads) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (instance, event) in events {
        let (id, payload) = envelope(instance, &event, Utc::now());
        ids.push(id.to_string());
        instances.push(instance.to_string());
        kinds.push(event.kind().to_string());
        payloads.push(payload);
    }
    sqlx::query(
        "INSERT INTO outbox (id, instance_id, type, payload) \
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::jsonb[])",
    )
    .bind(ids)
    .bind(instances)
    .bind(kinds)
    .bind(payloads)
    .execute(db)
    .await?;
    Ok(())
}

/// Event types of an instance, oldest first (tests and the delivery log read these).
pub async fn types_for(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
) -> Result<Vec<(String, serde_json::Value)>, sqlx::Error> {
    sqlx::query_as("SELECT type, payload FROM outbox WHERE instance_id = $1 ORDER BY created_at, id")
        .bind(instance)
        .fetch_all(db)
        .await
}

/// An instance's `instance.state` events, newest first, before `(created_at, id)`
/// (`outbox_states_idx`): (id, when, payload).
pub async fn states(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    before: Option<(DateTime<Utc>, EventId)>,
    limit: i64,
) -> Result<Vec<(EventId, DateTime<Utc>, serde_json::Value)>, sqlx::Error> {
    let (at, id) = before.unzip();
    sqlx::query_as(
        "SELECT id, created_at, payload FROM outbox WHERE instance_id = $1 AND type = 'instance.state' \
           AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3)) \
         ORDER BY created_at DESC, id DESC LIMIT $4",
    )
    .bind(instance)
    .bind(at)
    .bind(id)
    .bind(limit)
    .fetch_all(db)
    .await
}

/// An event waiting to be published.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Pending {
    pub id: EventId,
    pub instance_id: InstanceId,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub payload: serde_json::Value,
    /// The id of the transaction that wrote it (`xid8` as text): with `id`, the page
    /// cursor.
    pub xid: String,
}

/// Where the relay stands (`outbox_relay`, migration 0044): every event visible in
/// `done` is published, and `batch` is being published, a page at a time after
/// `after`. The snapshots and transaction ids travel as Postgres's text forms.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Position {
    pub done: String,
    pub batch: String,
    /// The last event of the batch published so far: `(xid, id)`; `("0", "")` before
    /// its first page.
    pub after_xid: String,
    pub after_id: String,
    /// `done` is past every transaction this database has begun: it came from another
    /// database (a logical dump restored), whose transaction ids these are not.
    pub ahead: bool,
}

impl Position {
    /// Whether no page of the batch is published yet.
    pub fn first_page(&self) -> bool {
        self.after_xid == "0" && self.after_id.is_empty()
    }

    /// Where the index range of transactions begun since `done` starts: after the
    /// cursor, or at `done`'s xmax while the cursor is still before it. One lower bound,
    /// so a btree scan starts there rather than at xmax with every later page.
    fn fresh_after(&self) -> (String, &str) {
        let xmax = self.done.split(':').nth(1).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        match self.after_xid.parse::<u64>() {
            Ok(x) if x >= xmax => (self.after_xid.clone(), &self.after_id),
            // No id is empty, so `> (xmax, '')` keeps all of xmax's events.
            _ => (xmax.to_string(), ""),
        }
    }
}

/// Takes the relay's turn for this transaction and reads its position, starting a new
/// batch (a snapshot of what is committed now) when none is open. `None` while another
/// relay has the turn: one relay publishes at a time, so the batches' order is the
/// stream's. The turn is a transaction-level advisory lock (one per schema), so an idle
/// relay's rounds take no transaction id and write nothing; the position is read after
/// it is held, so it is the last one committed.
pub async fn lock_position(tx: &mut sqlx::PgConnection) -> Result<Option<Position>, sqlx::Error> {
    let turn: bool =
        sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '.outbox_relay'))")
            .fetch_one(&mut *tx)
            .await?;
    if !turn {
        return Ok(None);
    }
    sqlx::query_as(
        "SELECT done::text, COALESCE(batch, pg_current_snapshot())::text AS batch, \
                COALESCE(after_xid, '0')::text AS after_xid, COALESCE(after_id, '') AS after_id, \
                pg_snapshot_xmax(done) > pg_snapshot_xmax(pg_current_snapshot()) AS ahead \
         FROM outbox_relay",
    )
    .fetch_optional(tx)
    .await
}

/// The next page of up to `limit` events of the position's batch, in `(xid, id)` order:
/// those visible in `batch` and not in `done`. Those are the transactions still running
/// when `done` was taken (a short list, looked up one by one) and those begun since
/// (a range of the index), so a transaction that stays open for long costs later pages
/// nothing. Each event is in exactly one batch, whichever order transactions commit in.
pub async fn page(tx: &mut sqlx::PgConnection, at: &Position, limit: i64) -> Result<Vec<Pending>, sqlx::Error> {
    let fresh = at.fresh_after();
    sqlx::query_as(
        "WITH late AS ( \
             SELECT id, instance_id, type, payload, xid FROM outbox \
             WHERE xid = ANY(ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))) AND (xid, id) > ($3::xid8, $4) \
               AND pg_visible_in_snapshot(xid, $2::pg_snapshot) \
             ORDER BY xid, id LIMIT $5), \
         fresh AS ( \
             SELECT id, instance_id, type, payload, xid FROM outbox \
             WHERE (xid, id) > ($6::xid8, $7) AND xid < pg_snapshot_xmax($2::pg_snapshot) \
               AND pg_visible_in_snapshot(xid, $2::pg_snapshot) \
             ORDER BY xid, id LIMIT $5) \
         SELECT id, instance_id, type, payload, xid::text AS xid \
         FROM (SELECT * FROM late UNION ALL SELECT * FROM fresh) p ORDER BY p.xid, p.id LIMIT $5",
    )
    .bind(&at.done)
    .bind(&at.batch)
    .bind(&at.after_xid)
    .bind(&at.after_id)
    .bind(limit)
    .bind(fresh.0)
    .bind(fresh.1)
    .fetch_all(tx)
    .await
}

/// Records a page as published, with the stream sequence JetStream acked for each event
/// (a repeat, which JetStream's de-duplication answered for an earlier copy, keeps the
/// sequence already recorded), and moves the position: past the page's last event, or,
/// for the batch's last page (`last` is `None`), to the next batch.
pub async fn published(
    tx: &mut sqlx::PgConnection,
    at: &Position,
    acks: &[(EventId, u64)],
    last: Option<&Pending>,
) -> Result<(), sqlx::Error> {
    let ids: Vec<&str> = acks.iter().map(|a| a.0.as_str()).collect();
    let seqs: Vec<i64> = acks.iter().map(|a| a.1 as i64).collect();
    sqlx::query(
        "WITH p AS ( \
             INSERT INTO outbox_published (event_id, stream_seq) \
             SELECT * FROM UNNEST($1::text[], $2::bigint[]) ON CONFLICT (event_id) DO NOTHING) \
         UPDATE outbox_relay SET \
             done = CASE WHEN $4::text IS NULL THEN $3::pg_snapshot ELSE done END, \
             batch = CASE WHEN $4::text IS NULL THEN NULL ELSE $3::pg_snapshot END, \
             after_xid = $4::xid8, after_id = $5",
    )
    .bind(&ids)
    .bind(&seqs)
    .bind(&at.batch)
    .bind(last.map(|p| p.xid.as_str()))
    .bind(last.map(|p| p.id.as_str()))
    .execute(tx)
    .await?;
    Ok(())
}

/// Where the real-time stream resumes after `event`: `Some(Some(seq))` once published,
/// `Some(None)` while it waits for the relay, `None` for an unknown event (or another
/// instance's, when `instance` is given).
pub async fn stream_seq(
    db: impl PgExecutor<'_>,
    event: &EventId,
    instance: Option<&InstanceId>,
) -> Result<Option<Option<i64>>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT p.stream_seq FROM outbox o LEFT JOIN outbox_published p ON p.event_id = o.id \
         WHERE o.id = $1 AND ($2::text IS NULL OR o.instance_id = $2)",
    )
    .bind(event)
    .bind(instance)
    .fetch_optional(db)
    .await
}

/// Writes an event only while `epoch` still owns the instance (a worker's events are
/// fenced like its other writes). Returns whether it was written.
pub async fn insert_fenced(
    db: impl PgExecutor<'_>,
    instance: &InstanceId,
    epoch: i64,
    event: &Event,
) -> Result<bool, sqlx::Error> {
    let kind = event.kind();
    let (id, payload) = envelope(instance, event, Utc::now());
    let r = sqlx::query(
        "INSERT INTO outbox (id, instance_id, type, payload) \
         SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM instances WHERE id = $2 AND owner_epoch = $5)",
    )
    .bind(&id)
    .bind(instance)
    .bind(kind)
    .bind(payload)
    .bind(epoch)
    .execute(db)
    .await?;
    Ok(r.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::Position;

    fn at(after_xid: &str, after_id: &str) -> Position {
        Position {
            done: "100:105:101,103".into(),
            batch: "100:110:".into(),
            after_xid: after_xid.into(),
            after_id: after_id.into(),
            ahead: false,
        }
    }

    #[test]
    fn the_range_of_new_transactions_starts_at_the_later_of_the_cursor_and_dones_xmax() {
        assert_eq!(at("0", "").fresh_after(), ("105".to_string(), ""), "a new batch");
        assert_eq!(at("103", "evt_b").fresh_after(), ("105".to_string(), ""), "still among the late ones");
        assert_eq!(at("105", "evt_c").fresh_after(), ("105".to_string(), "evt_c"));
        assert_eq!(at("107", "evt_d").fresh_after(), ("107".to_string(), "evt_d"));
        assert!(at("0", "").first_page() && !at("103", "evt_b").first_page());
    }
}
