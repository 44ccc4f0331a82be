//! Channels (interface.md 4.5): reading, following and reacting go to the network
//! through the instance's worker; publishing goes through the send queue like any
//! message, and only the channel's owner or an admin may publish. The network's limits
//! (interface.md part 8) are kept per instance, cluster-wide in Redis (`caps`); a call
//! that fails takes nothing from them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::contract::{self as wire, ChannelInfo, ChannelRole, ChannelState, ChannelVerb};
use shared::jid::Jid;
use utoipa::ToSchema;

use crate::caps::{capped_all, Cap};
use crate::net::net;
use crate::{Ctx, Error, Result};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// Follows and unfollows: 3 a minute, 10 an hour, 30 a day.
pub const FOLLOWS: [Cap; 3] = [
    Cap { name: "channel_follows_m", limit: 3, window: MINUTE, what: "channel follows and unfollows a minute" },
    Cap { name: "channel_follows_h", limit: 10, window: HOUR, what: "channel follows and unfollows an hour" },
    Cap { name: "channel_follows_d", limit: 30, window: DAY, what: "channel follows and unfollows a day" },
];
/// Creations: 2 a day.
pub const CREATES: Cap = Cap { name: "channel_creates", limit: 2, window: DAY, what: "channel creations a day" };
/// Reactions: 30 a minute.
pub const REACTIONS: Cap =
    Cap { name: "channel_reactions", limit: 30, window: MINUTE, what: "channel reactions a minute" };
/// Publications: 20 a day.
pub const PUBLICATIONS: Cap = Cap { name: "channel_posts", limit: 20, window: DAY, what: "channel publications a day" };

/// A channel as the network describes it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChannelOut {
    /// `<id>@newsletter`.
    pub jid: String,
    pub name: String,
    pub description: Option<String>,
    pub subscribers: Option<u64>,
    pub verified: bool,
    /// `active`, `suspended` or `geosuspended`.
    pub state: String,
    pub picture_url: Option<String>,
    /// The last part of the channel's link (`https://whatsapp.com/channel/<code>`).
    pub invite_code: Option<String>,
    /// The account's role: `owner`, `admin`, `subscriber` or `guest`.
    pub role: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
}

impl From<ChannelInfo> for ChannelOut {
    fn from(c: ChannelInfo) -> Self {
        let state = match c.state {
            ChannelState::Active => "active",
            ChannelState::Suspended => "suspended",
            ChannelState::Geosuspended => "geosuspended",
        };
        let role = c.role.map(|r| match r {
            ChannelRole::Owner => "owner",
            ChannelRole::Admin => "admin",
            ChannelRole::Subscriber => "subscriber",
            ChannelRole::Guest => "guest",
        });
        ChannelOut {
            jid: c.jid.into(),
            name: c.name,
            description: c.description,
            subscribers: c.subscribers,
            verified: c.verified,
            state: state.into(),
            picture_url: c.picture_url,
            invite_code: c.invite_code,
            role: role.map(str::to_owned),
            created_at: c.created_at,
        }
    }
}

/// A channel's JID: `<digits>@newsletter`.
pub fn channel(jid: Jid) -> Result<Jid> {
    match jid.as_str().split_once('@') {
        Some((id, shared::jid::NEWSLETTER_SERVER)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(jid)
        }
        _ => Err(Error::invalid("not a channel JID (<id>@newsletter)")),
    }
}

/// An invite code from a channel's link or the code itself.
pub fn invite_code(link: &str) -> Result<String> {
    if link.chars().count() > 200 {
        return Err(Error::invalid("link must be at most 200 characters"));
    }
    let link = link.trim();
    let code = link
        .strip_prefix("https://whatsapp.com/channel/")
        .or_else(|| link.strip_prefix("https://www.whatsapp.com/channel/"))
        .unwrap_or(link)
        .trim_end_matches('/');
    if code.is_empty() || code.len() > 64 || !code.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(Error::invalid("link must be a channel link (https://whatsapp.com/channel/<code>) or its code"));
    }
    Ok(code.to_string())
}

/// The channels the account follows, owns or administers.
pub async fn list(ctx: Ctx<'_>) -> Result<Vec<ChannelOut>> {
    Ok(net(ctx.core, ctx.instance, wire::Channels {}).await?.into_iter().map(ChannelOut::from).collect())
}

/// Creates a channel the account owns: a name of 1-100 characters (not only spaces), a
/// description of up to 2,048; at most 2 a day.
pub async fn create(ctx: Ctx<'_>, name: &str, description: Option<String>) -> Result<ChannelOut> {
    let trimmed = crate::text::trim_ecma(name).to_string();
    if trimmed.is_empty() || name.chars().count() > 100 {
        return Err(Error::invalid("name must be 1 to 100 characters, not only spaces"));
    }
    if description.as_ref().is_some_and(|d| d.chars().count() > 2048) {
        return Err(Error::invalid("description must be at most 2048 characters"));
    }
    let make = net(ctx.core, ctx.instance, wire::CreateChannel { name: trimmed, description });
    Ok(capped_all(ctx.core, ctx.instance, &[CREATES], make).await?.into())
}

/// A channel by its invite link, before following it.
pub async fn preview(ctx: Ctx<'_>, link: &str) -> Result<ChannelOut> {
    let code = invite_code(link)?;
    Ok(net(ctx.core, ctx.instance, wire::ChannelByInvite { code }).await?.into())
}

/// A channel's record and the account's role in it.
pub async fn get(ctx: Ctx<'_>, jid: Jid) -> Result<ChannelOut> {
    let jid = channel(jid)?;
    Ok(net(ctx.core, ctx.instance, wire::Channel { jid }).await?.into())
}

/// What an action on a channel does, by its name in the API.
pub fn verb(action: &str) -> Result<ChannelVerb> {
    Ok(match action {
        "follow" => ChannelVerb::Follow,
        "unfollow" => ChannelVerb::Unfollow,
        "mute" => ChannelVerb::Mute,
        "unmute" => ChannelVerb::Unmute,
        _ => return Err(Error::invalid("action must be follow, unfollow, mute or unmute")),
    })
}

/// Follows, unfollows, mutes or unmutes a channel (follows and unfollows count against
/// their limits); the channel after.
pub async fn act(ctx: Ctx<'_>, jid: Jid, action: ChannelVerb) -> Result<ChannelOut> {
    let jid = channel(jid)?;
    let done = net(ctx.core, ctx.instance, wire::ChannelAction { jid: jid.clone(), action });
    if matches!(action, ChannelVerb::Follow | ChannelVerb::Unfollow) {
        capped_all(ctx.core, ctx.instance, &FOLLOWS, done).await?;
    } else {
        done.await?;
    }
    get(ctx, jid).await
}

/// Reacts to a channel post (an empty reaction removes the account's); 30 a minute.
pub async fn react(ctx: Ctx<'_>, jid: Jid, server_id: u64, reaction: String) -> Result<()> {
    let jid = channel(jid)?;
    if server_id == 0 || reaction.chars().count() > 16 || reaction.chars().any(char::is_control) {
        return Err(Error::invalid("server_id must be a post's, and reaction one emoji or empty"));
    }
    let op = wire::ChannelReaction { jid, server_id, reaction };
    capped_all(ctx.core, ctx.instance, &[REACTIONS], net(ctx.core, ctx.instance, op)).await
}

/// `forbidden` unless the account owns or administers the channel (asked of the
/// network through the session).
pub async fn check_publisher(ctx: Ctx<'_>, jid: Jid) -> Result<()> {
    let c = net(ctx.core, ctx.instance, wire::Channel { jid }).await?;
    if !matches!(c.role, Some(ChannelRole::Owner | ChannelRole::Admin)) {
        return Err(Error::Forbidden("only the channel's owner or an admin may publish".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_jids_and_invite_links_are_checked() {
        let j = |s: &str| channel(Jid::parse(s).unwrap()).map(String::from);
        assert_eq!(j("120363000000000777@newsletter").unwrap(), "120363000000000777@newsletter");
        assert!(j("1-2@g.us").is_err() && j("5511999990001").is_err());
        assert_eq!(invite_code("https://whatsapp.com/channel/0029VaAbC").unwrap(), "0029VaAbC");
        assert_eq!(invite_code("0029VaAbC").unwrap(), "0029VaAbC");
        assert!(invite_code("https://evil.example/x?y").is_err() && invite_code("").is_err());
        assert!(verb("follow").is_ok() && verb("explode").is_err());
    }

    #[test]
    fn the_limits_are_the_specs() {
        let l: Vec<(u32, u64)> = FOLLOWS.iter().map(|c| (c.limit, c.window.as_secs())).collect();
        assert_eq!(l, [(3, 60), (10, 3600), (30, 86_400)]);
        assert_eq!((CREATES.limit, CREATES.window.as_secs()), (2, 86_400));
        assert_eq!((REACTIONS.limit, REACTIONS.window.as_secs()), (30, 60));
        assert_eq!((PUBLICATIONS.limit, PUBLICATIONS.window.as_secs()), (20, 86_400));
    }
}
