//! The `webhooks` table: endpoints of an instance, or of an account (receiving the
//! events of all its instances). Every query is scoped by its owner, so another
//! owner's webhook is simply not found.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::ids::{AccountId, InstanceId, WebhookId};

/// Who a webhook belongs to. Instance and account ids never look alike, so one value
/// matches one column: `(instance_id = $1 OR account_id = $1)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Instance(InstanceId),
    Account(AccountId),
}

impl Owner {
    pub fn as_str(&self) -> &str {
        match self {
            Owner::Instance(i) => i.as_str(),
            Owner::Account(a) => a.as_str(),
        }
    }
}

/// The owner condition on `webhooks`, its id as `$1`.
const OWNED: &str = "(instance_id = $1 OR account_id = $1)";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookRow {
    pub id: WebhookId,
    /// The instance it belongs to (none for an account's).
    pub instance_id: Option<InstanceId>,
    /// The account it belongs to (none for an instance's).
    pub account_id: Option<AccountId>,
    pub url: String,
    pub events: Vec<String>,
    pub secret: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    #[sqlx(flatten)]
    pub shape: Shape,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a webhook's deliveries look like: the Postgres enum `webhook_format`. The
/// dispatcher picks the payload's shaper by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, sqlx::Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "webhook_format", rename_all = "snake_case")]
pub enum WebhookFormat {
    /// Our envelope: `{id, type, instance_id, created_at, data}`, signed.
    #[default]
    Paceline,
    /// Evolution API v2's: `{event, instance, data, destination, date_time, sender,
    /// server_url}` (docs/evolution.md), signed the same way.
    Evolution,
}

impl WebhookFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookFormat::Paceline => "paceline",
            WebhookFormat::Evolution => "evolution",
        }
    }
}

/// How a webhook's deliveries are shaped (docs/evolution.md).
#[derive(Debug, Clone, PartialEq, Default, sqlx::FromRow)]
pub struct Shape {
    pub format: WebhookFormat,
    /// Evolution's `webhook_by_events`: the event's name appended to the URL.
    pub by_events: bool,
    /// Evolution's `webhook_base64`: received media's bytes in the payload.
    pub base64: bool,
    /// The Evolution event names `webhook/set` was given (`events` holds ours).
    pub evolution_events: Vec<String>,
}

impl Shape {
    pub fn is_evolution(&self) -> bool {
        self.format == WebhookFormat::Evolution
    }
}

const COLUMNS: &str =
    "id, instance_id, account_id, url, events, secret, enabled, disabled_reason, format, by_events, base64, \
    evolution_events, created_at, updated_at";

/// What [`insert`] did.
#[derive(Debug)]
pub enum Inserted {
    Row(Box<WebhookRow>),
    /// The instance has `max` webhooks already.
    Full,
    /// The new one carries media in base64, and the instance has `max_base64` such already.
    Base64Full,
    /// The instance's account holds its quota of webhooks (this many).
    AccountFull(i32),
}

/// Registers a webhook unless its owner has `max` already (or `max_base64` carrying
/// media, when this one would), or the account it counts against holds its quota of
/// webhooks. Concurrent registrations take turns on the owner's row.
#[allow(clippy::too_many_arguments)]
pub async fn insert(
    db: &sqlx::PgPool,
    owner: &Owner,
    url: &str,
    events: &[String],
    shape: &Shape,
    secret: &str,
    max: i64,
    max_base64: i64,
) -> Result<Inserted, sqlx::Error> {
    let mut tx = db.begin().await?;
    // The account's quota first, under its row lock (accounts lock before instances).
    let account = match owner {
        Owner::Instance(i) => super::accounts::locked_of_instance(&mut tx, i).await?,
        Owner::Account(a) => super::accounts::get_for_update(&mut tx, a).await?.map(|r| (r.id, r.quotas.webhooks)),
    };
    if let Some((account, Some(limit))) = account {
        if super::accounts::webhook_count(&mut *tx, &account).await? >= i64::from(limit) {
            return Ok(Inserted::AccountFull(limit));
        }
    }
    let (all, base64) = counts_locked(&mut tx, owner, None).await?;
    if all >= max {
        return Ok(Inserted::Full);
    }
    if shape.base64 && base64 >= max_base64 {
        return Ok(Inserted::Base64Full);
    }
    let (instance, account) = match owner {
        Owner::Instance(i) => (Some(i.as_str()), None),
        Owner::Account(a) => (None, Some(a.as_str())),
    };
    let row = sqlx::query_as(&format!(
        "INSERT INTO webhooks (id, instance_id, account_id, url, events, secret, format, by_events, base64, \
             evolution_events) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
    ))
    .bind(WebhookId::new())
    .bind(instance)
    .bind(account)
    .bind(url)
    .bind(events)
    .bind(secret)
    .bind(shape.format)
    .bind(shape.by_events)
    .bind(shape.base64)
    .bind(&shape.evolution_events)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Inserted::Row(Box::new(row)))
}

/// Takes the owner's row (so concurrent registrations and edits take turns) and counts
/// its webhooks, and those carrying media in base64, leaving `except` out.
async fn counts_locked(
    tx: &mut sqlx::PgConnection,
    owner: &Owner,
    except: Option<&WebhookId>,
) -> Result<(i64, i64), sqlx::Error> {
    match owner {
        Owner::Instance(i) => super::instances::lock(tx, i).await?,
        Owner::Account(a) => super::accounts::get_for_update(tx, a).await.map(drop)?,
    }
    sqlx::query_as(&format!(
        "SELECT count(*), count(*) FILTER (WHERE base64) FROM webhooks \
         WHERE {OWNED} AND ($2::text IS NULL OR id <> $2)"
    ))
    .bind(owner.as_str())
    .bind(except)
    .fetch_one(&mut *tx)
    .await
}

/// Whether webhook `id` may carry media in base64: its owner's others that do are
/// fewer than `max_base64`. Takes the owner's row until `tx` ends, so call it in the
/// transaction of the [`update`] it guards.
pub async fn base64_room(
    tx: &mut sqlx::PgConnection,
    owner: &Owner,
    id: &WebhookId,
    max_base64: i64,
) -> Result<bool, sqlx::Error> {
    Ok(counts_locked(tx, owner, Some(id)).await?.1 < max_base64)
}

pub async fn get(db: impl PgExecutor<'_>, owner: &Owner, id: &WebhookId) -> Result<Option<WebhookRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM webhooks WHERE {OWNED} AND id = $2"))
        .bind(owner.as_str())
        .bind(id)
        .fetch_optional(db)
        .await
}

pub async fn list(db: impl PgExecutor<'_>, owner: &Owner) -> Result<Vec<WebhookRow>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM webhooks WHERE {OWNED} ORDER BY id"))
        .bind(owner.as_str())
        .fetch_all(db)
        .await
}

/// A webhook's editable fields, as [`update`] writes them.
pub struct Edit<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub shape: &'a Shape,
    pub enabled: bool,
    /// Rotates the secret (the old one stays as the previous).
    pub new_secret: Option<&'a str>,
}

/// Sets the editable fields.
pub async fn update(
    db: impl PgExecutor<'_>,
    owner: &Owner,
    id: &WebhookId,
    e: &Edit<'_>,
) -> Result<Option<WebhookRow>, sqlx::Error> {
    let shape = e.shape;
    sqlx::query_as(&format!(
        "UPDATE webhooks SET url = $3, events = $4, enabled = $5, \
         format = $7, by_events = $8, base64 = $9, evolution_events = $10, \
         disabled_reason = CASE WHEN $5 THEN NULL ELSE disabled_reason END, \
         failure_streak = CASE WHEN $5 AND NOT enabled THEN 0 ELSE failure_streak END, \
         failing_since = CASE WHEN $5 AND NOT enabled THEN NULL ELSE failing_since END, \
         previous_secret = CASE WHEN $6::text IS NULL THEN previous_secret ELSE secret END, \
         secret_rotated_at = CASE WHEN $6::text IS NULL THEN secret_rotated_at ELSE now() END, \
         secret = COALESCE($6, secret), updated_at = now() \
         WHERE {OWNED} AND id = $2 RETURNING {COLUMNS}"
    ))
    .bind(owner.as_str())
    .bind(id)
    .bind(e.url)
    .bind(e.events)
    .bind(e.enabled)
    .bind(e.new_secret)
    .bind(shape.format)
    .bind(shape.by_events)
    .bind(shape.base64)
    .bind(&shape.evolution_events)
    .fetch_optional(db)
    .await
}

pub async fn delete(db: impl PgExecutor<'_>, owner: &Owner, id: &WebhookId) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(&format!("DELETE FROM webhooks WHERE {OWNED} AND id = $2"))
        .bind(owner.as_str())
        .bind(id)
        .execute(db)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// An enabled endpoint with what signing a delivery needs (the dispatcher's view), as it
/// applies to one instance's events: its own, or its account's.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActiveHook {
    pub id: WebhookId,
    /// The instance whose events it receives (the webhook's own, or one of its
    /// account's).
    pub instance_id: InstanceId,
    pub url: String,
    pub events: Vec<String>,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub secret_rotated_at: Option<DateTime<Utc>>,
    /// When it was registered: it receives the events made from then on.
    pub created_at: DateTime<Utc>,
    /// The account whose webhook it is (none: the instance's own).
    pub account_id: Option<AccountId>,
    /// An account's webhook: when the instance joined the account, and when it left
    /// (still in it: none). It receives the instance's events made in between only.
    pub member_from: Option<DateTime<Utc>>,
    pub member_until: Option<DateTime<Utc>>,
    #[sqlx(flatten)]
    pub origin: Origin,
}

/// What an Evolution-format payload says of its webhook and instance.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Origin {
    #[sqlx(flatten)]
    pub shape: Shape,
    pub instance_name: String,
    /// The account's number, once paired.
    pub phone: Option<String>,
}

impl ActiveHook {
    /// Whether the endpoint's event filter takes this type (an empty filter takes all),
    /// for an event made at `made`: an event made before the endpoint was registered is
    /// not its, nor, for an account's endpoint, one made while the instance was not in
    /// the account. An event written with the change of account itself (`instance.created`,
    /// `instance.deleted`) says which account held its instance, `held_by`, and that
    /// decides, whatever the clocks of the pod and the database. (What a payload format
    /// can carry is the dispatcher's to say.)
    pub fn wants(&self, kind: &str, made: Option<DateTime<Utc>>, held_by: Option<Option<&str>>) -> bool {
        let member = match (&self.account_id, held_by) {
            (None, _) => true,
            (Some(account), Some(held)) => held == Some(account.as_str()),
            (Some(_), None) => made.is_none_or(|at| {
                self.member_from.is_none_or(|from| at >= from) && self.member_until.is_none_or(|until| at < until)
            }),
        };
        member
            && made.is_none_or(|at| at >= self.created_at)
            && (self.events.is_empty() || self.events.iter().any(|e| e == kind))
    }
}

/// The enabled endpoints receiving these instances' events: each instance's own, its
/// account's, and those of the accounts it left (moved out, or deleted), each with the
/// span of time whose events it receives; one row per instance, endpoint and span.
pub async fn active_for(db: impl PgExecutor<'_>, instances: &[&str]) -> Result<Vec<ActiveHook>, sqlx::Error> {
    const HOOK: &str =
        "w.id, w.account_id, w.url, w.events, w.secret, w.previous_secret, w.secret_rotated_at, w.created_at, \
                        w.format, w.by_events, w.base64, w.evolution_events";
    sqlx::query_as(&format!(
        "SELECT {HOOK}, i.id AS instance_id, i.name AS instance_name, i.phone, \
                CASE WHEN w.account_id IS NULL THEN NULL ELSE COALESCE(i.account_joined_at, i.created_at) END \
                    AS member_from, \
                NULL::timestamptz AS member_until \
         FROM instances i JOIN webhooks w ON w.instance_id = i.id OR w.account_id = i.account_id \
         WHERE i.id = ANY($1) AND w.enabled \
         UNION ALL \
         SELECT {HOOK}, d.instance_id, d.name AS instance_name, NULL::text AS phone, \
                d.joined_at AS member_from, d.left_at AS member_until \
         FROM account_departures d JOIN webhooks w ON w.account_id = d.account_id \
         WHERE d.instance_id = ANY($1) AND w.enabled"
    ))
    .bind(instances)
    .fetch_all(db)
    .await
}
