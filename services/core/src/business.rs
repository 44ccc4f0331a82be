//! Business accounts: what only they may do is checked here.

use serde::{Deserialize, Serialize};
use shared::contract as wire;
use shared::db::instances;
use shared::jid::Jid;
use shared::ErrorCode;
use utoipa::ToSchema;

use crate::net::net;
use crate::{Ctx, Error, Result};

/// The account's business profile (fields the network does not give are null).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BusinessProfileOut {
    /// The account's JID.
    pub jid: String,
    pub description: Option<String>,
    pub category: Option<String>,
    pub email: Option<String>,
    pub website: Option<String>,
    pub address: Option<String>,
}

/// The account's own business profile, as the network shows it to others.
pub async fn profile(ctx: Ctx<'_>) -> Result<BusinessProfileOut> {
    let jid = Jid::user(&require(ctx).await?);
    let p = net(ctx.core, ctx.instance, wire::ContactProfile { jid: jid.clone() }).await?;
    let b = p.business_profile.unwrap_or_default();
    Ok(BusinessProfileOut {
        jid: jid.into(),
        description: b.description,
        category: b.category,
        email: b.email,
        website: b.website,
        address: b.address,
    })
}

/// The account's number when it is a business account: `business_account_required` for
/// a personal one, and what `net::not_running` says for one never paired.
pub async fn require(ctx: Ctx<'_>) -> Result<String> {
    let row = instances::get(&ctx.core.db, ctx.instance).await?.ok_or(Error::InstanceNotFound)?;
    let Some(phone) = row.phone.filter(|_| row.account_type.is_some()) else {
        // Never paired: no account to ask about.
        return Err(crate::net::not_running(ctx.core, ctx.instance).await?);
    };
    if row.account_type.as_deref() != Some("business") {
        return Err(Error::refused(
            ErrorCode::BusinessAccountRequired,
            "a business account is needed; this one is personal",
        ));
    }
    Ok(phone)
}
