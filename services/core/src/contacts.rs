//! The account's contacts and block list, asked of the running session through the
//! instance's worker (`instance_not_connected` when it is not running). A contact is
//! named by a JID or a phone number with country code.

use serde::{Deserialize, Serialize};
use shared::contract::{self as wire, BusinessProfile, ContactDetails, ContactInfo};
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
    /// Business accounts only.
    pub business_profile: Option<BusinessOut>,
}

/// A business account's public profile (fields the network does not give are null).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct BusinessOut {
    pub description: Option<String>,
    pub category: Option<String>,
    pub email: Option<String>,
    pub website: Option<String>,
    pub address: Option<String>,
}

impl From<BusinessProfile> for BusinessOut {
    fn from(b: BusinessProfile) -> Self {
        BusinessOut {
            description: b.description,
            category: b.category,
            email: b.email,
            website: b.website,
            address: b.address,
        }
    }
}

impl From<ContactInfo> for ContactOut {
    fn from(c: ContactInfo) -> Self {
        // A contact the session knows no more of is shown as a personal account.
        ContactOut { jid: c.jid.into(), name: c.name, push_name: c.push_name, business: c.business.unwrap_or(false) }
    }
}

impl From<ContactDetails> for ProfileOut {
    fn from(p: ContactDetails) -> Self {
        ProfileOut {
            jid: p.jid.into(),
            about: p.about.unwrap_or_default(),
            business_profile: p.business_profile.map(BusinessOut::from),
        }
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlockOut {
    pub jid: String,
    pub blocked: bool,
}

/// A contact is a person: not a group or a channel.
pub fn person(jid: Jid) -> Result<Jid> {
    if !jid.is_person() {
        return Err(Error::invalid("the contact must be a user, not a group or channel"));
    }
    Ok(jid)
}

/// The account's contacts.
pub async fn list(ctx: Ctx<'_>) -> Result<Vec<ContactOut>> {
    Ok(net(ctx.core, ctx.instance, wire::Contacts {}).await?.into_iter().map(ContactOut::from).collect())
}

/// One contact (`not_found` when no account has the number).
pub async fn get(ctx: Ctx<'_>, jid: Jid) -> Result<ContactOut> {
    let jid = person(jid)?;
    Ok(net(ctx.core, ctx.instance, wire::Contact { jid }).await?.into())
}

/// A contact's profile picture.
pub async fn picture(ctx: Ctx<'_>, jid: Jid) -> Result<PictureOut> {
    let jid = person(jid)?;
    let p = net(ctx.core, ctx.instance, wire::ContactPicture { jid: jid.clone() }).await?;
    Ok(PictureOut { jid: jid.into(), url: p.url })
}

/// A contact's about text and (business accounts) business profile.
pub async fn profile(ctx: Ctx<'_>, jid: Jid) -> Result<ProfileOut> {
    let jid = person(jid)?;
    Ok(net(ctx.core, ctx.instance, wire::ContactProfile { jid }).await?.into())
}

/// Blocks a contact (its messages no longer arrive) or unblocks it.
pub async fn block(ctx: Ctx<'_>, jid: Jid, blocked: bool) -> Result<BlockOut> {
    let jid = person(jid)?;
    net(ctx.core, ctx.instance, wire::Block { jid: jid.clone(), blocked }).await?;
    Ok(BlockOut { jid: jid.into(), blocked })
}

/// The JIDs the account blocked.
pub async fn blocklist(ctx: Ctx<'_>) -> Result<Vec<String>> {
    Ok(net(ctx.core, ctx.instance, wire::Blocklist {}).await?.into_iter().map(String::from).collect())
}
