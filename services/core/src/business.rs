//! Business accounts: what only they may do is checked here.

use shared::db::instances;
use shared::ErrorCode;

use crate::{Ctx, Error, Result};

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
