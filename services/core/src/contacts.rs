//! The account's contacts and block list, asked of the running session through the
//! instance's worker (`instance_not_connected` when it is not running). A contact is
//! named by a JID or a phone number with country code.

use serde::{Deserialize, Serialize};
use shared::bus::NetOp;
use shared::jid::Jid;
use utoipa::ToSchema;

use crate::net::net;
use crate::{Ctx, Error, Result};

/// A contact of the account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContactOut {
    pub jid: String,
    /// The name the account saved for it.
    pub name: Option<String>,
    /// The name the contact set for itself.
    pub push_name: Option<String>,
    pub business: bool,
}

/// A contact's profile picture.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PictureOut {
    pub jid: String,
    /// Where the network serves it; null when the contact has none.
    pub url: Option<String>,
}

/// A contact's about text and business profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = ContactProfileOut)]
pub struct ProfileOut {
    pub jid: String,
    pub about: String,
    /// Business accounts only: `description`, `category`, `email`, `website`, `address`.
    pub business_profile: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlockOut {
    pub jid: String,
    pub blocked: bool,
}

/// A contact is a person: not a group or a channel.
pub fn person(jid: Jid) -> Result<String> {
    if !jid.is_person() {
        return Err(Error::invalid("the contact must be a user, not a group or channel"));
    }
    Ok(jid.into())
}

/// The account's contacts.
pub async fn list(ctx: Ctx<'_>) -> Result<Vec<ContactOut>> {
    net(ctx.core, ctx.instance, NetOp::Contacts).await
}

/// One contact (`not_found` when no account has the number).
pub async fn get(ctx: Ctx<'_>, jid: Jid) -> Result<ContactOut> {
    let jid = person(jid)?;
    net(ctx.core, ctx.instance, NetOp::Contact { jid }).await
}

/// A contact's profile picture.
pub async fn picture(ctx: Ctx<'_>, jid: Jid) -> Result<PictureOut> {
    let jid = person(jid)?;
    #[derive(Deserialize)]
    struct Pic {
        url: Option<String>,
    }
    let p: Pic = net(ctx.core, ctx.instance, NetOp::ContactPicture { jid: jid.clone() }).await?;
    Ok(PictureOut { jid, url: p.url })
}

/// A contact's about text and (business accounts) business profile.
pub async fn profile(ctx: Ctx<'_>, jid: Jid) -> Result<ProfileOut> {
    let jid = person(jid)?;
    net(ctx.core, ctx.instance, NetOp::ContactProfile { jid }).await
}

/// Blocks a contact (its messages no longer arrive) or unblocks it.
pub async fn block(ctx: Ctx<'_>, jid: Jid, blocked: bool) -> Result<BlockOut> {
    let jid = person(jid)?;
    net::<serde_json::Value>(ctx.core, ctx.instance, NetOp::Block { jid: jid.clone(), blocked }).await?;
    Ok(BlockOut { jid, blocked })
}

/// The JIDs the account blocked.
pub async fn blocklist(ctx: Ctx<'_>) -> Result<Vec<String>> {
    net(ctx.core, ctx.instance, NetOp::Blocklist).await
}
