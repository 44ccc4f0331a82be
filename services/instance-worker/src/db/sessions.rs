//! The worker's side of `instances`: claiming with a lease epoch and every write fenced
//! on it. A write returns `false` when the row's `owner_epoch` moved on (another worker
//! took the instance over): the caller must stop and write nothing more.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};

use shared::db::instances::InstanceState;
use shared::db::outbox;
use shared::events::{ConnectedEventData, EmptyEventData, Event, InstanceStateEventData, QrUpdatedEventData};
use shared::ids::InstanceId;

/// Which of `ids` are still owned at the epoch given beside each (a worker checks the
/// leases it took again after they had expired).
pub async fn still_owned(db: impl PgExecutor<'_>, owned: &[(InstanceId, i64)]) -> Result<Vec<InstanceId>, sqlx::Error> {
    let ids: Vec<&InstanceId> = owned.iter().map(|(id, _)| id).collect();
    let epochs: Vec<i64> = owned.iter().map(|(_, e)| *e).collect();
    sqlx::query_scalar(
        "SELECT i.id FROM instances i JOIN UNNEST($1::text[], $2::bigint[]) AS o(id, epoch) \
         ON o.id = i.id AND o.epoch = i.owner_epoch",
    )
    .bind(ids)
    .bind(epochs)
    .fetch_all(db)
    .await
}

/// Ids of instances that should run (connect asked, not logged out, banned or deleted).
pub async fn desired_ids(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<InstanceId>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM instances WHERE desired ORDER BY id LIMIT $1").bind(limit).fetch_all(db).await
}

/// How many instances should run (a worker at its share needs no more than this).
pub async fn desired_count(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM instances WHERE desired").fetch_one(db).await
}

/// How many of `ids` another worker than `worker` has claimed since (a stopping worker's
/// handover, caught up).
pub async fn claimed_elsewhere(db: impl PgExecutor<'_>, ids: &[InstanceId], worker: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM instances WHERE id = ANY($1) AND owner_worker IS DISTINCT FROM $2")
        .bind(ids)
        .bind(worker)
        .fetch_one(db)
        .await
}

/// What a worker loads when it claims an instance.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Claim {
    pub owner_epoch: i64,
    pub proxy_url: Option<String>,
    pub session: Option<serde_json::Value>,
    pub network: Option<String>,
    pub state: InstanceState,
}

/// Takes ownership of one instance ([`claim_many`] with one).
pub async fn claim(
    db: &sqlx::PgPool,
    id: &InstanceId,
    lease_epoch: i64,
    worker: &str,
) -> Result<Option<Claim>, sqlx::Error> {
    let mut claims = claim_many(db, &[(id.clone(), lease_epoch)], worker).await?;
    Ok(claims.pop().map(|(_, c)| c))
}

/// A claim with its instance.
#[derive(sqlx::FromRow)]
struct ClaimRow {
    id: InstanceId,
    #[sqlx(flatten)]
    claim: Claim,
    old_state: String,
}

/// Takes ownership of many instances in one transaction of two statements: each sets
/// `owner_epoch` to more than it was and at least its lease epoch (the Redis counter,
/// which may have been lost), only while the instance should run. The state becomes
/// `connecting` in the same write: whatever the previous owner last recorded (say
/// `connected`) is no longer true once it is gone; an `instance.state` is written for
/// each that moved. Rows are locked in id order, so two workers' batches never wait on
/// each other. Returns the claims of those still wanted (deleted or stopped ones are left
/// out); a worker taking over a stopping worker's batch does so in one round trip, not
/// one per instance.
pub async fn claim_many(
    db: &sqlx::PgPool,
    claims: &[(InstanceId, i64)],
    worker: &str,
) -> Result<Vec<(InstanceId, Claim)>, sqlx::Error> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = claims.iter().map(|(id, _)| id.as_str()).collect();
    let epochs: Vec<i64> = claims.iter().map(|(_, e)| *e).collect();
    let mut tx = db.begin().await?;
    let rows: Vec<ClaimRow> = sqlx::query_as(
        "WITH c AS (SELECT * FROM UNNEST($1::text[], $2::bigint[]) AS c(id, epoch)), \
              old AS (SELECT i.id, i.state, c.epoch FROM instances i JOIN c ON c.id = i.id \
                      WHERE i.desired ORDER BY i.id FOR UPDATE OF i) \
         UPDATE instances i SET owner_epoch = GREATEST(i.owner_epoch + 1, old.epoch), owner_worker = $3, \
             state = 'connecting', qr_code = NULL, qr_expires_at = NULL, \
             state_changed_at = CASE WHEN i.state = 'connecting' THEN i.state_changed_at ELSE now() END, \
             updated_at = now() \
         FROM old WHERE i.id = old.id AND i.desired \
         RETURNING i.id, i.owner_epoch, i.proxy_url, i.session, i.network, i.state, old.state AS old_state",
    )
    .bind(&ids)
    .bind(&epochs)
    .bind(worker)
    .fetch_all(&mut *tx)
    .await?;
    let moved: Vec<(&InstanceId, Event)> = rows
        .iter()
        .filter(|r| r.old_state != InstanceState::Connecting.as_str())
        .map(|r| {
            let data = InstanceStateEventData {
                state: InstanceState::Connecting.as_str().into(),
                previous_state: r.old_state.clone(),
                reason: None,
            };
            (&r.id, Event::InstanceState(data))
        })
        .collect();
    outbox::insert_many(&mut *tx, moved).await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(|r| (r.id, r.claim)).collect())
}

/// The row's state, locked until the transaction ends (to tell what a write changed).
async fn lock_state(tx: &mut PgConnection, id: &InstanceId) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT state FROM instances WHERE id = $1 FOR UPDATE").bind(id).fetch_optional(tx).await
}

/// What came with a state change, for its events.
enum Change<'a> {
    None,
    Qr(&'a str, DateTime<Utc>),
    Linked { phone: &'a str, business: bool },
}

/// The events of a state change, in the transaction that made it: `instance.state` when
/// the state moved, plus `instance.qr_updated` for each QR code shown and
/// `instance.connected`, `instance.logged_out` or `instance.banned` on arriving there.
async fn emit(
    tx: &mut PgConnection,
    id: &InstanceId,
    old: &str,
    new: InstanceState,
    change: Change<'_>,
) -> Result<(), sqlx::Error> {
    let moved = old != new.as_str();
    if moved {
        let data = InstanceStateEventData { state: new.as_str().into(), previous_state: old.into(), reason: None };
        outbox::insert(&mut *tx, id, &Event::InstanceState(data)).await?;
    }
    match (new, change) {
        (InstanceState::QrPending, Change::Qr(code, expires_at)) => {
            let data = QrUpdatedEventData { qr: code.to_string(), expires_at };
            outbox::insert(&mut *tx, id, &Event::QrUpdated(data)).await?;
        }
        (InstanceState::Connected, Change::Linked { phone, business }) if moved => {
            let account_type = if business { "business" } else { "personal" };
            let data = ConnectedEventData { phone: phone.to_string(), account_type: account_type.into() };
            outbox::insert(&mut *tx, id, &Event::Connected(data)).await?;
        }
        (InstanceState::LoggedOut, _) if moved => {
            outbox::insert(&mut *tx, id, &Event::LoggedOut(EmptyEventData {})).await.map(drop)?
        }
        (InstanceState::Banned, _) if moved => {
            outbox::insert(&mut *tx, id, &Event::Banned(EmptyEventData {})).await.map(drop)?
        }
        _ => {}
    }
    Ok(())
}

/// A state change, fenced. `qr` is set with `qr_pending` and cleared otherwise.
pub async fn set_state(
    db: &sqlx::PgPool,
    id: &InstanceId,
    epoch: i64,
    state: InstanceState,
    qr: Option<(&str, DateTime<Utc>)>,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(old) = lock_state(&mut tx, id).await? else { return Ok(false) };
    let res = sqlx::query(
        "UPDATE instances SET state = $3, qr_code = $4, qr_expires_at = $5, state_reason = NULL, \
         state_changed_at = CASE WHEN state = $3 THEN state_changed_at ELSE now() END, updated_at = now() \
         WHERE id = $1 AND owner_epoch = $2",
    )
    .bind(id)
    .bind(epoch)
    .bind(state.as_str())
    .bind(qr.map(|q| q.0))
    .bind(qr.map(|q| q.1))
    .execute(&mut *tx)
    .await?;
    if res.rows_affected() != 1 {
        return Ok(false);
    }
    emit(&mut tx, id, &old, state, qr.map_or(Change::None, |(c, e)| Change::Qr(c, e))).await?;
    tx.commit().await?;
    Ok(true)
}

/// Sessions stopped on request (a worker shutting down, an instance handed over), many in
/// one transaction of two statements: each row left `disconnected` where its epoch still
/// owns it (rows locked in id order, so two batches never wait on each other), and an
/// `instance.state` for each that moved, as [`set_state`] writes. Whether each was
/// written, in the order given.
pub async fn set_stopped_many(db: &sqlx::PgPool, stops: &[(InstanceId, i64)]) -> Result<Vec<bool>, sqlx::Error> {
    let ids: Vec<&str> = stops.iter().map(|(id, _)| id.as_str()).collect();
    let epochs: Vec<i64> = stops.iter().map(|(_, e)| *e).collect();
    let mut tx = db.begin().await?;
    let rows: Vec<(InstanceId, String)> = sqlx::query_as(
        "WITH j AS (SELECT * FROM UNNEST($1::text[], $2::bigint[]) AS j(id, epoch)), \
              old AS (SELECT i.id, i.state FROM instances i JOIN j ON j.id = i.id AND i.owner_epoch = j.epoch \
                      ORDER BY i.id FOR UPDATE OF i) \
         UPDATE instances i SET state = 'disconnected', qr_code = NULL, qr_expires_at = NULL, state_reason = NULL, \
             state_changed_at = CASE WHEN i.state = 'disconnected' THEN i.state_changed_at ELSE now() END, \
             updated_at = now() \
         FROM old WHERE i.id = old.id RETURNING i.id, old.state",
    )
    .bind(&ids)
    .bind(&epochs)
    .fetch_all(&mut *tx)
    .await?;
    let moved: Vec<(&InstanceId, Event)> = rows
        .iter()
        .filter(|(_, old)| old != InstanceState::Disconnected.as_str())
        .map(|(id, old)| {
            let data = InstanceStateEventData {
                state: InstanceState::Disconnected.as_str().into(),
                previous_state: old.clone(),
                reason: None,
            };
            (id, Event::InstanceState(data))
        })
        .collect();
    outbox::insert_many(&mut *tx, moved).await?;
    tx.commit().await?;
    let written: std::collections::HashSet<&InstanceId> = rows.iter().map(|(id, _)| id).collect();
    Ok(stops.iter().map(|(id, _)| written.contains(id)).collect())
}

/// The device is linked (or resumed): credentials, number, account type and the
/// profile name when the session knows it, `connected`.
pub async fn set_linked(
    db: &sqlx::PgPool,
    id: &InstanceId,
    epoch: i64,
    session: Option<&serde_json::Value>,
    phone: &str,
    business: bool,
    push_name: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(old) = lock_state(&mut tx, id).await? else { return Ok(false) };
    let res = sqlx::query(
        "UPDATE instances SET state = 'connected', session = COALESCE($3, session), phone = $4, account_type = $5, state_reason = NULL, \
         qr_code = NULL, qr_expires_at = NULL, profile_name = COALESCE($6, profile_name), \
         paired_at = CASE WHEN $3::jsonb IS NOT NULL OR paired_at IS NULL THEN now() ELSE paired_at END, \
         state_changed_at = CASE WHEN state = 'connected' THEN state_changed_at ELSE now() END, updated_at = now() \
         WHERE id = $1 AND owner_epoch = $2",
    )
    .bind(id)
    .bind(epoch)
    .bind(session)
    .bind(phone)
    .bind(if business { "business" } else { "personal" })
    .bind(push_name)
    .execute(&mut *tx)
    .await?;
    if res.rows_affected() != 1 {
        return Ok(false);
    }
    emit(&mut tx, id, &old, InstanceState::Connected, Change::Linked { phone, business }).await?;
    // The instance is paired: its hosted pairing links have done their work, whether or
    // not a page was open to see it, and never pair again.
    shared::db::pairing_links::use_all(&mut *tx, id).await?;
    tx.commit().await?;
    Ok(true)
}

/// The account's profile name changed (on this device's network, or another's), fenced.
pub async fn set_push_name(db: &sqlx::PgPool, id: &InstanceId, epoch: i64, name: &str) -> Result<bool, sqlx::Error> {
    let res = sqlx::query("UPDATE instances SET profile_name = $3 WHERE id = $1 AND owner_epoch = $2")
        .bind(id)
        .bind(epoch)
        .bind(name)
        .execute(db)
        .await?;
    Ok(res.rows_affected() == 1)
}

/// The session ended for good (`logged_out` or `banned`): it no longer should run, and
/// a logout forgets the credentials.
pub async fn set_ended(
    db: &sqlx::PgPool,
    id: &InstanceId,
    epoch: i64,
    state: InstanceState,
) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(old) = lock_state(&mut tx, id).await? else { return Ok(false) };
    let res = sqlx::query(
        "UPDATE instances SET state = $3, desired = FALSE, qr_code = NULL, qr_expires_at = NULL, state_reason = NULL, \
         session = CASE WHEN $3 = 'logged_out' THEN NULL ELSE session END, \
         state_changed_at = now(), updated_at = now() WHERE id = $1 AND owner_epoch = $2",
    )
    .bind(id)
    .bind(epoch)
    .bind(state.as_str())
    .execute(&mut *tx)
    .await?;
    if res.rows_affected() != 1 {
        return Ok(false);
    }
    emit(&mut tx, id, &old, state, Change::None).await?;
    tx.commit().await?;
    Ok(true)
}

/// The network paused the session (a temporary ban): `disconnected` with why and until
/// when, fenced, with an `instance.state` event that says so.
pub async fn set_paused(db: &sqlx::PgPool, id: &InstanceId, epoch: i64, reason: &str) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let Some(old) = lock_state(&mut tx, id).await? else { return Ok(false) };
    let res = sqlx::query(
        "UPDATE instances SET state = 'disconnected', state_reason = $3, qr_code = NULL, qr_expires_at = NULL, \
         state_changed_at = CASE WHEN state = 'disconnected' THEN state_changed_at ELSE now() END, updated_at = now() \
         WHERE id = $1 AND owner_epoch = $2",
    )
    .bind(id)
    .bind(epoch)
    .bind(reason)
    .execute(&mut *tx)
    .await?;
    if res.rows_affected() != 1 {
        return Ok(false);
    }
    let data = InstanceStateEventData {
        state: "disconnected".into(),
        previous_state: old.to_string(),
        reason: Some(reason.to_string()),
    };
    outbox::insert(&mut *tx, id, &Event::InstanceState(data)).await?;
    tx.commit().await?;
    Ok(true)
}

/// Call settings, read when a call comes in (so edits apply without telling the worker).
pub async fn call_settings(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Option<(bool, String)>, sqlx::Error> {
    sqlx::query_as("SELECT reject_call, msg_call FROM instances WHERE id = $1").bind(id).fetch_optional(db).await
}

/// An instance's pacing settings, as the worker's pacer reads them.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PacingRow {
    pub min_interval_ms: i32,
    pub max_per_minute: i32,
    pub time_zone: String,
    pub send_window_start: Option<chrono::NaiveTime>,
    pub send_window_end: Option<chrono::NaiveTime>,
    /// The last ban-risk level (adaptive pacing).
    pub risk_level: Option<String>,
    /// Set while a policy holds the queue, or (`account_suspended`) its account is
    /// suspended.
    pub queue_paused_reason: Option<String>,
    /// The instance's own ban-risk policies.
    pub risk_policy: Option<sqlx::types::Json<shared::risk::PolicyOverrides>>,
}

pub async fn pacing(db: impl PgExecutor<'_>, id: &InstanceId) -> Result<Option<PacingRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT min_interval_ms, max_per_minute, time_zone, send_window_start, send_window_end, risk_level, \
                coalesce(queue_paused_reason, (SELECT 'account_suspended' FROM accounts a \
                    WHERE a.id = instances.account_id AND a.state = 'suspended')) AS queue_paused_reason, \
                risk_policy FROM instances WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await
}
