//! The account's own profile (push name, about text, picture) and its privacy
//! settings, asked of and changed through the running session (`instance_not_connected`
//! without one).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use shared::bus::RpcRequest;
use shared::contract::{self as wire, OwnProfile};
use utoipa::ToSchema;

use crate::net::{call, net};
use crate::{Ctx, Error, Result};

/// The longest push name the network takes (characters).
pub const PUSH_NAME_LIMIT: usize = 25;
/// The longest about text (characters).
pub const ABOUT_LIMIT: usize = 139;

/// The account's own profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProfileOut {
    /// The name others see when the account is not in their contacts.
    pub push_name: Option<String>,
    /// The about text; null when the network did not say.
    pub about: Option<String>,
    /// Where the network serves its picture; null when it has none.
    pub picture_url: Option<String>,
}

impl From<OwnProfile> for ProfileOut {
    fn from(p: OwnProfile) -> Self {
        ProfileOut { push_name: p.push_name, about: p.about, picture_url: p.picture_url }
    }
}

/// The privacy settings, by category: `last`, `online`, `profile`, `status`, `groupadd`,
/// `readreceipts`, `calladd`, `messages`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({ "last": "contacts", "online": "all", "readreceipts": "all" }))]
pub struct PrivacyOut(pub BTreeMap<String, String>);

/// Body of `PATCH {inst}/privacy`: the categories to change; absent ones stay as they
/// are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrivacyPatch {
    /// Who sees when the account was last seen.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub last: Option<String>,
    /// Who sees when it is online.
    #[schema(pattern = "^(all|match_last_seen)$")]
    pub online: Option<String>,
    /// Who sees its profile picture.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub profile: Option<String>,
    /// Who sees its statuses.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub status: Option<String>,
    /// Who may add it to groups.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub groupadd: Option<String>,
    /// Whether it sends read receipts.
    #[schema(pattern = "^(all|none)$")]
    pub readreceipts: Option<String>,
    /// Who may call it.
    #[schema(pattern = "^(all|known)$")]
    pub calladd: Option<String>,
    /// Who may message it.
    #[schema(pattern = "^(all|contacts)$")]
    pub messages: Option<String>,
}

impl PrivacyPatch {
    pub fn changes(self) -> Vec<(&'static str, String)> {
        [
            ("last", self.last),
            ("online", self.online),
            ("profile", self.profile),
            ("status", self.status),
            ("groupadd", self.groupadd),
            ("readreceipts", self.readreceipts),
            ("calladd", self.calladd),
            ("messages", self.messages),
        ]
        .into_iter()
        .filter_map(|(c, v)| v.map(|v| (c, v)))
        .collect()
    }
}

/// The account's push name, about text and picture.
pub async fn get(ctx: Ctx<'_>) -> Result<ProfileOut> {
    Ok(net(ctx.core, ctx.instance, wire::Profile {}).await?.into())
}

/// Changes the push name (1-25 characters, trimmed) or the about text (up to 139; empty
/// clears it); answers the profile as it is now.
pub async fn change(ctx: Ctx<'_>, push_name: Option<String>, about: Option<String>) -> Result<ProfileOut> {
    let push_name = push_name.map(|n| crate::text::trim_ecma(&n).to_string());
    if push_name.as_ref().is_some_and(|n| n.is_empty() || n.chars().count() > PUSH_NAME_LIMIT) {
        return Err(Error::invalid(format!("push_name must be 1-{PUSH_NAME_LIMIT} characters")));
    }
    if about.as_ref().is_some_and(|a| a.chars().count() > ABOUT_LIMIT) {
        return Err(Error::invalid(format!("about must be at most {ABOUT_LIMIT} characters")));
    }
    let renamed = push_name.is_some();
    if push_name.is_some() || about.is_some() {
        net(ctx.core, ctx.instance, wire::SetProfile { about, push_name }).await?;
    }
    let now = get(ctx).await?;
    // Lists show the name without asking the network (Evolution's `profileName`).
    if let Some(name) = now.push_name.as_deref().filter(|_| renamed) {
        shared::db::instances::set_profile_name(&ctx.core.db, ctx.instance, name).await?;
    }
    Ok(now)
}

/// Removes the account's picture; answers the profile as it is now.
pub async fn delete_picture(ctx: Ctx<'_>) -> Result<ProfileOut> {
    call(ctx.core, ctx.instance, RpcRequest::SetPicture { media_id: None, group: None }).await?;
    get(ctx).await
}

/// The account's presence for everyone: online (`available`) or not.
pub async fn set_presence(ctx: Ctx<'_>, available: bool) -> Result<()> {
    net(ctx.core, ctx.instance, wire::SetPresence { available }).await
}

/// The account's privacy settings.
pub async fn privacy(ctx: Ctx<'_>) -> Result<PrivacyOut> {
    Ok(PrivacyOut(net(ctx.core, ctx.instance, wire::Privacy {}).await?))
}

/// Changes privacy settings, each checked against its category before any is sent (a
/// bad one changes nothing); answers the settings as they are now.
pub async fn set_privacy(ctx: Ctx<'_>, patch: PrivacyPatch) -> Result<PrivacyOut> {
    let changes = patch.changes();
    for (category, value) in &changes {
        shared::privacy::check(category, value).map_err(|e| Error::invalid(e.to_string()))?;
    }
    if changes.is_empty() {
        return privacy(ctx).await;
    }
    let mut now = BTreeMap::new();
    for (category, value) in changes {
        now = net(ctx.core, ctx.instance, wire::SetPrivacy { category: category.to_string(), value }).await?;
    }
    Ok(PrivacyOut(now))
}
