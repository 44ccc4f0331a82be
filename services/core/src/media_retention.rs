//! An instance's or an account's media retention: the days received (inbound) and sent
//! (outbound) media are kept, over the deployment's (`media.*retention_days`) and, for an
//! instance, over its account's. The admin sets them; the owner reads them. The
//! dispatcher's collector applies them (`db::media::retention::expire_due`).

use serde::{Deserialize, Serialize};
use shared::db::media::retention::{self, Days, MAX_DAYS, MIN_INBOUND_DAYS, MIN_OUTBOUND_DAYS};
use shared::db::webhooks::Owner;
use utoipa::ToSchema;

use crate::{Core, Error, Result};

/// An owner's retention: days each way, `null` (or absent) to inherit.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionIn {
    /// Days received media is kept, 1 to 3650; `null`: inherited.
    #[schema(minimum = 1, maximum = 3650)]
    pub inbound_days: Option<i32>,
    /// Days sent media is kept, 8 to 3650 (a queued message lives up to 7 days, and its
    /// media must outlive it); `null`: inherited.
    #[schema(minimum = 8, maximum = 3650)]
    pub outbound_days: Option<i32>,
}

/// An owner's retention and what applies.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetentionOut {
    /// The owner's own days for received media (`null`: inherited).
    pub inbound_days: Option<i32>,
    /// The owner's own days for sent media (`null`: inherited).
    pub outbound_days: Option<i32>,
    /// What applies: the owner's, else (for an instance) its account's, else the
    /// deployment's.
    pub effective: EffectiveDays,
}

/// The days that apply each way.
#[derive(Debug, Serialize, ToSchema)]
pub struct EffectiveDays {
    pub inbound_days: i32,
    pub outbound_days: i32,
}

fn not_found(owner: &Owner) -> Error {
    match owner {
        Owner::Instance(_) => Error::InstanceNotFound,
        Owner::Account(_) => Error::NotFound("account"),
    }
}

/// The owner's retention.
pub async fn get(core: &Core, owner: &Owner) -> Result<RetentionOut> {
    let own = retention::get(&core.db, owner).await?.ok_or_else(|| not_found(owner))?;
    out(core, owner, own).await
}

/// Sets the owner's retention (both ways at once: an absent one is inherited).
pub async fn set(core: &Core, owner: &Owner, b: RetentionIn) -> Result<RetentionOut> {
    let check = |field: &str, v: Option<i32>, min: i32| match v {
        Some(d) if !(min..=MAX_DAYS).contains(&d) => {
            Err(Error::field(field, format!("must be {min} to {MAX_DAYS} days, or null to inherit")))
        }
        _ => Ok(()),
    };
    check("inbound_days", b.inbound_days, MIN_INBOUND_DAYS)?;
    check("outbound_days", b.outbound_days, MIN_OUTBOUND_DAYS)?;
    let days = Days { inbound: b.inbound_days, outbound: b.outbound_days };
    if !retention::set(&core.db, owner, days).await? {
        return Err(not_found(owner));
    }
    tracing::info!(owner = owner.as_str(), "media retention set");
    out(core, owner, days).await
}

async fn out(core: &Core, owner: &Owner, own: Days) -> Result<RetentionOut> {
    let inherited = match owner {
        Owner::Instance(id) => retention::of_account_of(&core.db, id.as_str()).await?,
        Owner::Account(_) => Days::default(),
    };
    let (inbound, outbound) = core.config.media_retention();
    let effective = EffectiveDays {
        inbound_days: own.inbound.or(inherited.inbound).unwrap_or(inbound),
        outbound_days: own.outbound.or(inherited.outbound).unwrap_or(outbound),
    };
    Ok(RetentionOut { inbound_days: own.inbound, outbound_days: own.outbound, effective })
}
