//! Instances as more than one route edits them: the rules every settable field obeys,
//! the one edit transaction, deletion with token revocation, and the record as a caller
//! sees it. The `/v1/instances` routes, Evolution's instance routes and the bulk route
//! all call these.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::instances::{self, InstanceFields, InstanceRow, InstanceState, WriteError};
use shared::events::{Event, InstanceLifecycleEventData};
use shared::ids::{AccountId, InstanceId};
use utoipa::ToSchema;

use crate::{Core, Error, Result};

/// Pacing floors that only `unsafe_pacing` (admin-set) lifts.
pub const MIN_INTERVAL_FLOOR_MS: u32 = 1_000;
pub const MAX_PER_MINUTE_CEILING: u32 = 60;

mod rules;
pub mod token;
mod write;

pub use rules::*;
pub use write::*;

/// Call handling settings (`PATCH /instance/settings/{instanceName}` edits the same).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SettingsOut {
    /// Reject incoming voice calls.
    pub reject_call: bool,
    /// Text sent to the caller on rejection; empty sends nothing.
    pub msg_call: String,
}

/// A daily send window in the instance's time zone (`end` before `start` spans midnight).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SendWindowIo {
    /// Local time the window opens, `HH:MM`.
    #[schema(example = "09:00", pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub start: String,
    /// Local time the window closes, `HH:MM` (not the same as `start`).
    #[schema(example = "18:00", pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub end: String,
}

/// An instance.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InstanceOut {
    pub id: InstanceId,
    /// Unique, 1-64 of `[A-Za-z0-9_-]`; the `{instanceName}` of the action routes.
    pub name: String,
    pub state: InstanceState,
    /// Why the instance is in its state, when that needs saying (e.g. a temporary ban
    /// and until when); cleared by the next state change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_reason: Option<String>,
    pub tags: Vec<String>,
    /// CIDRs the instance's tokens may be used from; empty allows every address.
    pub ip_allowlist: Vec<String>,
    /// The admin set the allow-list: the instance's own token may only narrow it.
    pub ip_allowlist_locked: bool,
    pub min_interval_ms: u32,
    pub max_per_minute: u32,
    pub unsafe_pacing: bool,
    /// The admin set the pacing: the instance's own token may only slow it (a larger
    /// `min_interval_ms`, a smaller `max_per_minute`).
    pub pacing_locked: bool,
    /// The proxy the session connects through: its password shown as `***` (to the
    /// admin), its whole user info as `***` (to anyone else).
    pub proxy_url: Option<String>,
    /// `sim` or `whatsapp` when set for this instance (else the deployment's network).
    pub network: Option<String>,
    /// The linked number, once paired.
    pub phone: Option<String>,
    /// `personal` or `business`, once paired.
    pub account_type: Option<String>,
    /// The account's profile name as its session last reported it (or as last changed
    /// through `{inst}/profile`).
    pub push_name: Option<String>,
    pub settings: SettingsOut,
    /// IANA time zone of the send window (default `UTC`).
    pub time_zone: String,
    /// Sends happen only inside this window; absent: any time.
    pub send_window: Option<SendWindowIo>,
    /// The instance's own ban-risk policies, each replacing the deployment's
    /// (docs/ban-risk.md); absent: the deployment's. `GET {inst}/risk` shows the policy in
    /// force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk_policy: Option<shared::risk::PolicyOverrides>,
    /// The admin set `risk_policy`: the instance's own token may only make it stricter
    /// (and not return it to the deployment's with `null`).
    pub risk_policy_locked: bool,
    /// The last ban-risk evaluation (docs/ban-risk.md); absent until the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskBrief>,
    /// Set while a policy holds the queue (critical risk, a temporary ban): nothing is
    /// sent until `POST {inst}/queue/resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_paused: Option<QueuePausedOut>,
    /// The pacing the queue runs at now: the instance's, slowed by its ban risk. Only on
    /// `GET /v1/instances/{id}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_pacing: Option<EffectivePacingOut>,
    /// Messages accepted and not yet sent (queued or in flight). On
    /// `GET /v1/instances/{id}` and in the admin's list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<i64>,
    /// The worker holding the instance's lease now (`wk_...`), when one does: to the admin
    /// only, on `GET /v1/instances/{id}` and in the list.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub worker: Option<String>,
    /// The account holding the instance; absent when none does.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub account_id: Option<AccountId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Why and since when a policy holds the queue.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueuePausedOut {
    /// `risk_critical`, `temporary_ban` or `manual` (`POST {inst}/queue/pause`).
    pub reason: String,
    pub since: DateTime<Utc>,
}

/// The pacing in force (docs/ban-risk.md: adaptive pacing).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EffectivePacingOut {
    pub min_interval_ms: u32,
    pub max_per_minute: u32,
    /// Sends to chats that never wrote to the account wait (a high risk); replies go.
    pub first_contacts_held: bool,
}

impl EffectivePacingOut {
    /// The instance's pacing at its risk level, under `deployment`'s policies with the
    /// instance's own applied.
    pub fn of(r: &InstanceOut, deployment: &shared::risk::Policy) -> EffectivePacingOut {
        let policy = deployment.with(r.risk_policy.as_ref());
        let level = r.risk.as_ref().and_then(|k| shared::risk::parse_level(&k.level));
        let (min_interval_ms, max_per_minute) =
            shared::risk::effective_pacing(r.min_interval_ms, r.max_per_minute, level, policy.slowdown);
        EffectivePacingOut { min_interval_ms, max_per_minute, first_contacts_held: policy.holds_first_contacts(level) }
    }
}

/// An instance's last ban-risk evaluation; `GET {inst}/risk` explains it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RiskBrief {
    /// 0-100.
    pub score: f64,
    /// `low`, `elevated`, `high` or `critical`.
    pub level: String,
    pub evaluated_at: DateTime<Utc>,
}

impl InstanceOut {
    /// The record as `admin` or not sees it: the proxy's password is never shown, and its
    /// user name only to the admin.
    pub fn shown_to(r: InstanceRow, admin: bool) -> InstanceOut {
        let proxy = r.proxy_url.as_deref().map(|p| masked_url(p, admin));
        InstanceOut { proxy_url: proxy, ..InstanceOut::from(r) }
    }
}

impl From<InstanceRow> for InstanceOut {
    /// As anyone may see it (the proxy's whole userinfo hidden).
    fn from(r: InstanceRow) -> Self {
        InstanceOut {
            state: r.state,
            state_reason: r.state_reason.clone(),
            proxy_url: r.proxy_url.as_deref().map(hide_credentials),
            ip_allowlist_locked: r.ip_allowlist_locked,
            network: r.network.clone(),
            id: r.id,
            name: r.name,
            tags: r.tags,
            ip_allowlist: r.ip_allowlist,
            min_interval_ms: r.min_interval_ms.max(0) as u32,
            max_per_minute: r.max_per_minute.max(0) as u32,
            unsafe_pacing: r.unsafe_pacing,
            pacing_locked: r.pacing_locked,
            phone: r.phone,
            account_type: r.account_type,
            push_name: r.profile_name,
            settings: SettingsOut { reject_call: r.reject_call, msg_call: r.msg_call },
            send_window: r.send_window_start.zip(r.send_window_end).map(|(a, b)| SendWindowIo {
                start: a.format("%H:%M").to_string(),
                end: b.format("%H:%M").to_string(),
            }),
            time_zone: r.time_zone,
            risk_policy: r.risk_policy.map(|p| p.0),
            risk_policy_locked: r.risk_policy_locked,
            risk: match (r.risk_score, r.risk_level, r.risk_at) {
                (Some(score), Some(level), Some(at)) => {
                    Some(RiskBrief { score: (f64::from(score) * 10.0).round() / 10.0, level, evaluated_at: at })
                }
                _ => None,
            },
            queue_paused: r
                .queue_paused_reason
                .zip(r.queue_paused_at)
                .map(|(reason, since)| QueuePausedOut { reason, since }),
            effective_pacing: None,
            queue_depth: None,
            worker: None,
            account_id: r.account_id,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Settings fields; absent ones stay as they are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    pub reject_call: Option<bool>,
    /// Up to 4,096 characters.
    #[schema(max_length = 4096)]
    pub msg_call: Option<String>,
}

impl SettingsPatch {
    /// Sets the fields present.
    pub fn apply(self, f: &mut InstanceFields) {
        if let Some(v) = self.reject_call {
            f.reject_call = v;
        }
        if let Some(v) = self.msg_call {
            f.msg_call = v;
        }
    }
}

/// Edits an instance's settable fields in one transaction: locks the row, lets `apply`
/// change the fields, validates the result and writes it. Shared by every edit route.
pub async fn edit(
    core: &Core,
    id: &InstanceId,
    apply: impl FnOnce(&mut InstanceFields) -> Result<()>,
) -> Result<InstanceRow> {
    let mut tx = core.db.begin().await?;
    let current = instances::get_for_update(&mut *tx, id).await?.ok_or(Error::InstanceNotFound)?;
    let mut f = InstanceFields::from(&current);
    apply(&mut f)?;
    let f = validate(f, &core.config.risk_policy())?;
    let row = instances::update(&mut *tx, id, &f).await.map_err(write_error)?.ok_or(Error::InstanceNotFound)?;
    tx.commit().await?;
    if row.name != current.name || row.ip_allowlist != current.ip_allowlist {
        crate::auth::invalidate(core, id).await;
    }
    rules_changed(core, id).await;
    Ok(row)
}

/// Tells the instance's worker to read its pacing, policies and pause again now (it does
/// within 5 s anyway).
pub async fn rules_changed(core: &Core, id: &InstanceId) {
    let rules = bytes::Bytes::from_static(shared::bus::RULES_CHANGED);
    if let Err(e) = core.nats.publish(core.subjects.instance_queue(id), rules).await {
        tracing::debug!(error = %e, "queue wake publish failed");
    }
}

/// Creates an instance from `fields` (validated here), inside `account` when one is
/// given (within its instance quota, counted under its row lock so concurrent creations
/// take turns); returns it and its token, shown now (and again only to the admin and
/// its account, by Evolution's `fetchInstances`: [`token`]). Shared by
/// `POST /v1/instances` and Evolution's `instance/create`.
pub async fn create(core: &Core, fields: InstanceFields, account: Option<&AccountId>) -> Result<(InstanceRow, String)> {
    let fields = validate(fields, &core.config.risk_policy())?;
    let token = shared::auth::generate_token(shared::auth::INSTANCE_TOKEN_PREFIX);
    let id = InstanceId::new();
    let mut tx = core.db.begin().await?;
    if let Some(account) = account {
        let row = shared::db::accounts::get_for_update(&mut tx, account).await?.ok_or(Error::NotFound("account"))?;
        crate::accounts::quota::room_for_instance(&mut tx, &row).await?;
    }
    let sealed = token::seal(core, &id, &token);
    let row =
        instances::insert(&mut *tx, &id, (&shared::auth::hash_token(&token), sealed.as_deref()), &fields, account)
            .await
            .map_err(write_error)?;
    let event =
        Event::InstanceCreated(InstanceLifecycleEventData { name: row.name.clone(), account_id: account.cloned() });
    shared::db::outbox::insert(&mut *tx, &row.id, &event).await?;
    tx.commit().await?;
    tracing::info!(instance_id = %row.id, "instance created");
    Ok((row, token))
}

/// Deletes the instance and revokes its token on every API pod. Shared with the bulk
/// route.
pub async fn delete_one(core: &Core, id: &InstanceId) -> Result<()> {
    if !instances::delete(&core.db, id).await? {
        return Err(Error::InstanceNotFound);
    }
    crate::auth::invalidate(core, id).await;
    tracing::info!(instance_id = %id, "instance deleted");
    Ok(())
}

pub fn write_error(e: WriteError) -> Error {
    match e {
        WriteError::NameTaken => {
            Error::refused(shared::ErrorCode::Conflict, "an instance with this name already exists")
        }
        WriteError::Db(e) => e.into(),
    }
}
