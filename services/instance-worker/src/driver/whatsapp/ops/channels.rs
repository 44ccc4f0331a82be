//! Channels (newsletters) on the WhatsApp network: their records and posts as the
//! contract's replies, and the operations.

use super::*;
use shared::contract::{ChannelInfo, ChannelPost, ChannelRole, ChannelState, ReactionCount};

pub(super) fn channel_error(e: NewsletterError) -> DriverError {
    match e {
        NewsletterError::Iq(e) => iq_error(&e, "channel"),
        NewsletterError::InvalidRequest(_) => {
            DriverError::new(ErrorCode::ValidationFailed, "the channel request is not valid")
        }
        _ => failed("handle the channel request"),
    }
}

/// A channel JID: `<id>@newsletter`, given whole or as its id.
pub(super) fn channel_jid(s: &str) -> Result<Jid, DriverError> {
    let full = if s.contains('@') { s.to_string() } else { shared::jid::at(s, shared::jid::NEWSLETTER_SERVER) };
    full.parse().map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid channel JID"))
}

pub fn channel_info(c: &NewsletterMetadata) -> Result<ChannelInfo, DriverError> {
    Ok(ChannelInfo {
        jid: ours_or_fail(&c.jid, "channel")?,
        name: c.name.clone(),
        description: c.description.clone(),
        subscribers: Some(c.subscriber_count),
        verified: c.verification == NewsletterVerification::Verified,
        state: match c.state {
            NewsletterState::Active => ChannelState::Active,
            NewsletterState::Suspended => ChannelState::Suspended,
            _ => ChannelState::Geosuspended,
        },
        picture_url: c.picture_url.clone(),
        invite_code: c.invite_code.clone(),
        role: c.role.as_ref().map(|r| match r {
            NewsletterRole::Owner => ChannelRole::Owner,
            NewsletterRole::Admin => ChannelRole::Admin,
            NewsletterRole::Subscriber => ChannelRole::Subscriber,
            _ => ChannelRole::Guest,
        }),
        created_at: ts(c.creation_time),
    })
}

pub fn post(m: &NewsletterMessage) -> ChannelPost {
    let text = m
        .message
        .as_ref()
        .map(|msg| map::incoming_content(msg).1)
        .and_then(|c| c.get("text").and_then(|t| t.as_str()).map(str::to_owned));
    ChannelPost {
        id: m.message_id.clone(),
        server_id: m.server_id,
        ts: ts(Some(m.timestamp)),
        kind: m.message_type.as_str().to_string(),
        from_me: m.is_sender,
        text,
        reactions: m.reactions.iter().map(|r| ReactionCount { reaction: r.code.clone(), count: r.count }).collect(),
    }
}

pub(super) async fn channels(c: &Client, op: &ChannelOp) -> Result<Answer, DriverError> {
    let n = c.newsletter();
    match op {
        ChannelOp::Channels(o) => {
            let list = n.list_subscribed().await.map_err(channel_error)?;
            Ok(o.answer(list.iter().map(channel_info).collect::<Result<_, _>>()?))
        }
        ChannelOp::Channel(o) => {
            Ok(o.answer(channel_info(&n.get_metadata(&channel_jid(o.jid.as_str())?).await.map_err(channel_error)?)?))
        }
        ChannelOp::ChannelByInvite(o) => {
            let code = o.code.rsplit('/').next().unwrap_or(&o.code);
            Ok(o.answer(channel_info(&n.get_metadata_by_invite(code).await.map_err(channel_error)?)?))
        }
        ChannelOp::CreateChannel(o) => {
            Ok(o.answer(channel_info(&n.create(&o.name, o.description.as_deref()).await.map_err(channel_error)?)?))
        }
        ChannelOp::ChannelAction(o) => {
            let j = channel_jid(o.jid.as_str())?;
            match o.action {
                ChannelVerb::Follow => n.join(&j).await.map(drop),
                ChannelVerb::Unfollow => n.leave(&j).await,
                ChannelVerb::Mute => n.set_follower_mute(&j, true).await,
                ChannelVerb::Unmute => n.set_follower_mute(&j, false).await,
            }
            .map_err(channel_error)?;
            Ok(o.answer(()))
        }
        ChannelOp::ChannelMessages(o) => {
            let posts = n
                .get_messages(channel_jid(o.jid.as_str())?, o.count.clamp(1, 100), o.before)
                .await
                .map_err(channel_error)?;
            Ok(o.answer(posts.iter().map(post).collect()))
        }
        ChannelOp::ChannelReaction(o) => {
            n.send_reaction(&channel_jid(o.jid.as_str())?, o.server_id, &o.reaction).await.map_err(channel_error)?;
            Ok(o.answer(()))
        }
    }
}
