//! Creating and editing an instance from a caller's request: what the admin sets it
//! locks, and what the instance's own token may change within those locks.

use serde::{Deserialize, Serialize};
use shared::db::instances::{self, InstanceFields, InstanceState, ListFilter};
use shared::ids::AccountId;
use shared::risk::PolicyOverrides;
use utoipa::{IntoParams, ToSchema};

use super::{
    create, decode_cursor, edit, narrows, valid_tag, InstanceOut, SendWindowIo, SettingsPatch, MAX_PER_MINUTE_CEILING,
    MIN_INTERVAL_FLOOR_MS,
};
use crate::{Caller, Core, Ctx, Error, Result};

/// Body of `POST /v1/instances`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceIn {
    /// 1-64 of `[A-Za-z0-9_-]`, unique: the `{instanceName}` of the action routes.
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    /// Up to 32 tags of 1-64 printable characters.
    #[serde(default)]
    #[schema(max_items = 32, value_type = Vec<crate::schemas::Tag>)]
    pub tags: Vec<String>,
    /// CIDRs or single addresses (up to 100).
    #[serde(default)]
    #[schema(max_items = 100, value_type = Vec<crate::schemas::Cidr>)]
    pub ip_allowlist: Vec<String>,
    /// At least 1000 unless `unsafe_pacing`; defaults from the server config.
    #[schema(maximum = 86_400_000)]
    pub min_interval_ms: Option<u32>,
    /// At most 60 unless `unsafe_pacing`; defaults from the server config.
    #[schema(minimum = 1, maximum = 100_000)]
    pub max_per_minute: Option<u32>,
    #[serde(default)]
    pub unsafe_pacing: bool,
    /// `http://`, `https://`, `socks5://` or `socks5h://`, with optional credentials.
    pub proxy_url: Option<String>,
    pub settings: Option<SettingsPatch>,
    /// IANA time zone, e.g. `America/Sao_Paulo` (default `UTC`).
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_+/-]{0,63}$")]
    pub time_zone: Option<String>,
    pub send_window: Option<SendWindowIo>,
    /// `sim` or `whatsapp`: the network this instance runs on (default: the
    /// deployment's `network`). Set at creation only.
    #[schema(pattern = "^(sim|whatsapp)$")]
    pub network: Option<String>,
    /// The instance's own ban-risk policies, each field replacing the deployment's
    /// (docs/ban-risk.md).
    pub risk_policy: Option<PolicyOverrides>,
}

/// Answer of `POST /v1/instances`: the only time the token is shown.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InstanceCreatedOut {
    pub instance: InstanceOut,
    /// `pl_inst_...`: store it now. `/v1` never shows it again (`POST
    /// /v1/instances/{id}/token` gives a new one); Evolution's `fetchInstances` shows it
    /// to the admin and the instance's account.
    pub token: String,
}

/// Body of `PATCH /v1/instances/{id}`: absent fields stay as they are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstancePatch {
    #[schema(pattern = r"^[A-Za-z0-9_-]{1,64}$")]
    pub name: Option<String>,
    #[schema(max_items = 32, value_type = Option<Vec<crate::schemas::Tag>>)]
    pub tags: Option<Vec<String>>,
    #[schema(max_items = 100, value_type = Option<Vec<crate::schemas::Cidr>>)]
    pub ip_allowlist: Option<Vec<String>>,
    #[schema(maximum = 86_400_000)]
    pub min_interval_ms: Option<u32>,
    #[schema(minimum = 1, maximum = 100_000)]
    pub max_per_minute: Option<u32>,
    /// Admin only.
    pub unsafe_pacing: Option<bool>,
    /// Admin only: whether the instance's token may only slow the pacing (set whenever
    /// the admin sets `min_interval_ms` or `max_per_minute`).
    pub pacing_locked: Option<bool>,
    /// Admin only: whether the instance's token may only make `risk_policy` stricter
    /// (set whenever the admin sets `risk_policy`; `null` from the admin clears it).
    pub risk_policy_locked: Option<bool>,
    /// Admin only; `null` removes the proxy.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>)]
    pub proxy_url: Option<Option<String>>,
    pub settings: Option<SettingsPatch>,
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_+/-]{0,63}$")]
    pub time_zone: Option<String>,
    /// `null` removes the window.
    #[serde(default, deserialize_with = "double_option_window")]
    #[schema(value_type = Option<SendWindowIo>)]
    pub send_window: Option<Option<SendWindowIo>>,
    /// The instance's own ban-risk policies (the whole object replaces the previous one;
    /// `null` returns to the deployment's). The instance's token may only make them
    /// stricter than the deployment's, or, once the admin set them
    /// (`risk_policy_locked`), than they are; looser ones need the admin token.
    #[serde(default, deserialize_with = "double_option_policy")]
    #[schema(value_type = Option<PolicyOverrides>)]
    pub risk_policy: Option<Option<PolicyOverrides>>,
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn double_option<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

fn double_option_window<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<SendWindowIo>>, D::Error> {
    Option::<SendWindowIo>::deserialize(d).map(Some)
}

fn double_option_policy<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<PolicyOverrides>>, D::Error> {
    Option::<PolicyOverrides>::deserialize(d).map(Some)
}

/// Parses a send window's `HH:MM` times.
fn parse_window(w: &SendWindowIo) -> Result<(chrono::NaiveTime, chrono::NaiveTime)> {
    let t = |s: &str| chrono::NaiveTime::parse_from_str(s, "%H:%M");
    match (t(&w.start), t(&w.end)) {
        (Ok(a), Ok(b)) if a != b => Ok((a, b)),
        _ => Err(Error::field("send_window", "send_window start and end must be different HH:MM times")),
    }
}

/// Query of `GET /v1/instances`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only instances carrying this tag.
    #[param(value_type = Option<crate::schemas::Tag>)]
    pub tag: Option<String>,
    /// Only instances in this state.
    pub state: Option<InstanceState>,
    /// Only instances whose name contains this, in any case.
    #[param(min_length = 1, max_length = 64)]
    pub name: Option<String>,
    /// Only instances last evaluated at this ban-risk level.
    pub risk: Option<shared::risk::Level>,
    /// Page size, 1-200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    #[param(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// `true`: the answer's `total` counts every instance the filters match.
    #[serde(default)]
    pub count: bool,
    /// Only instances of this account (the admin's filter; an account token lists only
    /// its own anyway).
    pub account_id: Option<AccountId>,
}

/// A page of instances.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InstanceListOut {
    pub instances: Vec<InstanceOut>,
    /// Absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// With `count=true`: how many instances the filters match, on every page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
}

/// Creates an instance from `POST /v1/instances`'s body; returns it with its token,
/// shown only now. The admin's creation locks what it sets (outside every account); an
/// account token's creates inside its account, may not set what only the admin sets
/// (`proxy_url`, `unsafe_pacing`, a risk policy looser than the deployment's), and
/// locks nothing.
pub async fn create_from(core: &Core, body: InstanceIn, account: Option<&AccountId>) -> Result<InstanceCreatedOut> {
    let admin = account.is_none();
    if !admin {
        if body.proxy_url.is_some() || body.unsafe_pacing {
            return Err(Error::forbidden("proxy_url and unsafe_pacing can only be set with the admin token"));
        }
        let deployment = core.config.risk_policy();
        if body.risk_policy.as_ref().is_some_and(|p| deployment.looser(&deployment.with(Some(p)))) {
            return Err(Error::forbidden(
                "a risk_policy looser than the deployment's (a higher threshold, a smaller slowdown, a policy off) can only be set with the admin token",
            ));
        }
    }
    let settings = body.settings.unwrap_or_default();
    let fields = InstanceFields {
        name: body.name,
        tags: body.tags,
        // The admin's list: the instance's token may only narrow it.
        ip_allowlist_locked: admin && !body.ip_allowlist.is_empty(),
        ip_allowlist: body.ip_allowlist,
        min_interval_ms: body.min_interval_ms.unwrap_or(core.config.pacing.default_min_interval_ms) as i32,
        max_per_minute: body.max_per_minute.unwrap_or(core.config.pacing.default_max_per_minute) as i32,
        unsafe_pacing: body.unsafe_pacing,
        // What the admin set, the instance's token cannot undo.
        pacing_locked: admin && (body.min_interval_ms.is_some() || body.max_per_minute.is_some()),
        proxy_url: body.proxy_url,
        reject_call: settings.reject_call.unwrap_or(false),
        msg_call: settings.msg_call.unwrap_or_default(),
        time_zone: body.time_zone.unwrap_or_else(|| "UTC".into()),
        send_window: body.send_window.as_ref().map(parse_window).transpose()?,
        network: body.network,
        risk_policy_locked: admin && body.risk_policy.is_some(),
        risk_policy: body.risk_policy,
    };
    let (row, token) = create(core, fields, account).await?;
    Ok(InstanceCreatedOut { instance: InstanceOut::shown_to(row, admin), token })
}

/// A page of instances, oldest first, filtered by tag and state: every instance for the
/// admin, only `account`'s for an account token (which sees no lease holder).
pub async fn list(core: &Core, q: ListQuery, account: Option<&AccountId>) -> Result<InstanceListOut> {
    let limit = crate::page::limit(q.limit, 50, 200)?;
    let after = q.cursor.as_deref().map(decode_cursor).transpose()?;
    if q.tag.as_deref().is_some_and(|t| !valid_tag(t)) {
        return Err(Error::field("tag", "tag must be 1-64 printable characters"));
    }
    if q.name.as_deref().is_some_and(|n| n.is_empty() || n.chars().count() > 64) {
        return Err(Error::field("name", "name must be 1-64 characters"));
    }
    let filter = ListFilter {
        tag: q.tag,
        state: q.state,
        name: q.name,
        risk: q.risk.map(|l| l.as_str().to_string()),
        account: account.cloned().or(q.account_id),
        after,
        limit: i64::from(limit) + 1,
    };
    let rows = instances::list(&core.db, &filter).await?;
    let total = match q.count {
        true => Some(instances::count(&core.db, &filter).await?),
        false => None,
    };
    let (rows, next_cursor) = crate::page::page(rows, limit, |r| crate::page::encode(&["i1", r.id.as_str()]));
    // The page's queue depths and lease holders: one statement and one round trip.
    let ids: Vec<shared::ids::InstanceId> = rows.iter().map(|r| r.id.clone()).collect();
    let depths = shared::db::messages::queue_stats(&core.db, &ids).await?;
    let holders = match account {
        None => crate::cluster::holders(core, &ids).await?,
        Some(_) => vec![None; ids.len()],
    };
    let instances = rows
        .into_iter()
        .zip(holders)
        .map(|(r, worker)| {
            let depth = depths.iter().find(|(id, _, _)| *id == r.id).map_or(0, |(_, n, _)| *n);
            InstanceOut { queue_depth: Some(depth), worker, ..InstanceOut::shown_to(r, account.is_none()) }
        })
        .collect();
    Ok(InstanceListOut { instances, next_cursor, total })
}

/// The instance as the caller sees it, with its queue depth and the pacing in force.
pub async fn get(ctx: Ctx<'_>) -> Result<InstanceOut> {
    let row = instances::get(&ctx.core.db, ctx.instance).await?.ok_or(Error::InstanceNotFound)?;
    let depth = shared::db::messages::depth(&ctx.core.db, ctx.instance).await?;
    let admin = ctx.caller == Caller::Admin;
    let out = InstanceOut::shown_to(row, admin);
    let pacing = super::EffectivePacingOut::of(&out, &ctx.core.config.risk_policy());
    let worker = match admin {
        true => crate::cluster::holders(ctx.core, std::slice::from_ref(ctx.instance)).await?.pop().flatten(),
        false => None,
    };
    Ok(InstanceOut { queue_depth: Some(depth), effective_pacing: Some(pacing), worker, ..out })
}

/// Edits the instance as `PATCH /v1/instances/{id}` asks: `proxy_url`, `unsafe_pacing`
/// and the lock flags are the admin's; the instance's own token stays within the locks.
pub async fn patch(ctx: Ctx<'_>, p: InstancePatch) -> Result<InstanceOut> {
    let admin = ctx.caller == Caller::Admin;
    let core = ctx.core;
    let id = ctx.instance;
    let admin_only = p.proxy_url.is_some()
        || p.unsafe_pacing.is_some()
        || p.pacing_locked.is_some()
        || p.risk_policy_locked.is_some();
    if !admin && admin_only {
        return Err(Error::forbidden(
            "proxy_url, unsafe_pacing, pacing_locked and risk_policy_locked can only be set with the admin token",
        ));
    }
    let deployment = core.config.risk_policy();
    let past_floors = p.min_interval_ms.is_some_and(|v| v < MIN_INTERVAL_FLOOR_MS)
        || p.max_per_minute.is_some_and(|v| v > MAX_PER_MINUTE_CEILING);
    // Past the floors says so in the same patch (as the description declares), so an
    // edit never leans on what is stored.
    if admin && past_floors && p.unsafe_pacing != Some(true) {
        let field = if p.min_interval_ms.is_some_and(|v| v < MIN_INTERVAL_FLOOR_MS) {
            "min_interval_ms"
        } else {
            "max_per_minute"
        };
        return Err(Error::field(
            field,
            format!(
                "min_interval_ms below {MIN_INTERVAL_FLOOR_MS} or max_per_minute above {MAX_PER_MINUTE_CEILING} needs \"unsafe_pacing\": true in the same patch"
            ),
        ));
    }
    let row = edit(core, id, |f| {
        if !admin {
            check_owner_limits(f, &p, &deployment, past_floors)?;
        } else {
            // What the admin sets, it locks (an explicit lock flag says otherwise).
            if p.min_interval_ms.is_some() || p.max_per_minute.is_some() {
                f.pacing_locked = true;
            }
            if let Some(v) = &p.risk_policy {
                f.risk_policy_locked = v.is_some();
            }
            if let Some(v) = p.pacing_locked {
                f.pacing_locked = v;
            }
            if let Some(v) = p.risk_policy_locked {
                f.risk_policy_locked = v;
            }
        }
        if let Some(v) = p.name {
            f.name = v;
        }
        if let Some(v) = p.tags {
            f.tags = v;
        }
        if let Some(v) = p.ip_allowlist {
            if admin {
                f.ip_allowlist_locked = !v.is_empty();
            } else if f.ip_allowlist_locked && !narrows(&v, &f.ip_allowlist) {
                return Err(Error::forbidden(
                    "the admin set this ip_allowlist: the instance may only narrow it (every entry inside an allowed one)",
                ));
            }
            f.ip_allowlist = v;
        }
        if let Some(v) = p.min_interval_ms {
            f.min_interval_ms = clamp_i32(v);
        }
        if let Some(v) = p.max_per_minute {
            f.max_per_minute = clamp_i32(v);
        }
        if let Some(v) = p.unsafe_pacing {
            f.unsafe_pacing = v;
        }
        if let Some(v) = p.proxy_url {
            f.proxy_url = v;
        }
        if let Some(v) = p.time_zone {
            f.time_zone = v;
        }
        if let Some(w) = p.send_window {
            f.send_window = w.as_ref().map(parse_window).transpose()?;
        }
        if let Some(s) = p.settings {
            s.apply(f);
        }
        if let Some(v) = p.risk_policy {
            f.risk_policy = v;
        }
        Ok(())
    })
    .await?;
    Ok(InstanceOut::shown_to(row, admin))
}

/// What the instance's own token may not change (`f` the stored fields): pacing past
/// the floors with `unsafe_pacing` on; pacing the admin set, except slower; a risk
/// policy looser than the deployment's, or than the admin's when it set one (`null`
/// included).
fn check_owner_limits(
    f: &InstanceFields,
    p: &InstancePatch,
    deployment: &shared::risk::Policy,
    past_floors: bool,
) -> Result<()> {
    // Pacing past the floors is what unsafe_pacing unlocks, for the admin to set
    // (without it, validation refuses such values for everyone).
    if f.unsafe_pacing && past_floors {
        return Err(Error::forbidden(format!(
            "min_interval_ms below {MIN_INTERVAL_FLOOR_MS} or max_per_minute above {MAX_PER_MINUTE_CEILING} can only be set with the admin token"
        )));
    }
    let faster = p.min_interval_ms.is_some_and(|v| i64::from(v) < i64::from(f.min_interval_ms))
        || p.max_per_minute.is_some_and(|v| i64::from(v) > i64::from(f.max_per_minute));
    if f.pacing_locked && faster {
        return Err(Error::forbidden(
            "the admin set this instance's pacing: its token may only slow it (a larger min_interval_ms, a smaller max_per_minute)",
        ));
    }
    if let Some(new) = &p.risk_policy {
        let floor = if f.risk_policy_locked { deployment.with(f.risk_policy.as_ref()) } else { *deployment };
        if floor.looser(&deployment.with(new.as_ref())) {
            return Err(Error::forbidden(if f.risk_policy_locked {
                "the admin set this risk_policy: the instance's token may only make it stricter (a lower threshold, a larger slowdown, a policy on)"
            } else {
                "a risk_policy looser than the deployment's (a higher threshold, a smaller slowdown, a policy off) can only be set with the admin token"
            }));
        }
    }
    Ok(())
}

fn clamp_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}
