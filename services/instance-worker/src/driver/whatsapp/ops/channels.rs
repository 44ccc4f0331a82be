//! Channels (newsletters) on the WhatsApp network: their records and posts as `NetOp`
//! answers them, and the operations.

use super::*;

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
    let full = if s.contains('@') { s.to_string() } else { format!("{s}@newsletter") };
    full.parse().map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid channel JID"))
}

pub fn channel_json(c: &NewsletterMetadata) -> Value {
    json!({
        "jid": c.jid.to_string(),
        "name": c.name,
        "description": c.description,
        "subscribers": c.subscriber_count,
        "verified": c.verification == NewsletterVerification::Verified,
        "state": match c.state {
            NewsletterState::Active => "active",
            NewsletterState::Suspended => "suspended",
            _ => "geosuspended",
        },
        "picture_url": c.picture_url,
        "invite_code": c.invite_code,
        "role": c.role.as_ref().map(|r| match r {
            NewsletterRole::Owner => "owner",
            NewsletterRole::Admin => "admin",
            NewsletterRole::Subscriber => "subscriber",
            _ => "guest",
        }),
        "created_at": ts(c.creation_time),
    })
}

pub fn post_json(m: &NewsletterMessage) -> Value {
    let text = m
        .message
        .as_ref()
        .map(|msg| map::incoming_content(msg).1)
        .and_then(|c| c.get("text").cloned())
        .unwrap_or(Value::Null);
    json!({
        "id": m.message_id,
        "server_id": m.server_id,
        "ts": ts(Some(m.timestamp)),
        "type": m.message_type.as_str(),
        "from_me": m.is_sender,
        "text": text,
        "reactions": m.reactions.iter().map(|r| json!({ "reaction": r.code, "count": r.count })).collect::<Vec<_>>(),
    })
}

pub(super) async fn channels(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
    let n = c.newsletter();
    match op {
        NetOp::Channels => {
            Ok(Value::Array(n.list_subscribed().await.map_err(channel_error)?.iter().map(channel_json).collect()))
        }
        NetOp::Channel { jid: j } => Ok(channel_json(&n.get_metadata(&channel_jid(j)?).await.map_err(channel_error)?)),
        NetOp::ChannelByInvite { code } => {
            let code = code.rsplit('/').next().unwrap_or(code);
            Ok(channel_json(&n.get_metadata_by_invite(code).await.map_err(channel_error)?))
        }
        NetOp::CreateChannel { name, description } => {
            Ok(channel_json(&n.create(name, description.as_deref()).await.map_err(channel_error)?))
        }
        NetOp::ChannelAction { jid: j, action } => {
            let j = channel_jid(j)?;
            match action {
                ChannelAction::Follow => n.join(&j).await.map(drop),
                ChannelAction::Unfollow => n.leave(&j).await,
                ChannelAction::Mute => n.set_follower_mute(&j, true).await,
                ChannelAction::Unmute => n.set_follower_mute(&j, false).await,
            }
            .map_err(channel_error)?;
            Ok(Value::Null)
        }
        NetOp::ChannelMessages { jid: j, count, before } => {
            let posts =
                n.get_messages(channel_jid(j)?, (*count).clamp(1, 100), *before).await.map_err(channel_error)?;
            Ok(Value::Array(posts.iter().map(post_json).collect()))
        }
        NetOp::ChannelReaction { jid: j, server_id, reaction } => {
            n.send_reaction(&channel_jid(j)?, *server_id, reaction).await.map_err(channel_error)?;
            Ok(Value::Null)
        }
        _ => unreachable!("routed by run()"),
    }
}
