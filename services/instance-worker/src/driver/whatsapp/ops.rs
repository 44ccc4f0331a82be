//! The session operations beyond chats and contacts, on the WhatsApp network: groups,
//! communities, channels (newsletters), labels, privacy, profile and status. Each
//! `NetOp` answers the JSON its doc comment in `shared::bus` gives; the mappings from the
//! crate's types are plain functions, unit-tested below.

use serde_json::{json, Value};
use shared::bus::{ChannelAction, NetOp, ParticipantAction};
use shared::ErrorCode;
use whatsapp_rust::request::IqError;
use whatsapp_rust::{
    Client, CommunitySubgroup, CreateCommunityOptions, GroupCreateOptions, GroupDescription, GroupError, GroupMetadata,
    GroupParticipant, GroupParticipantOptions, GroupSubject, Jid, JoinGroupResult, NewsletterError, NewsletterMessage,
    NewsletterMetadata, NewsletterRole, NewsletterState, NewsletterVerification, ParticipantChangeResponse,
    ParticipantType, PreviousDescription,
};

use super::{failed, jid, map};
use crate::driver::DriverError;

/// The network's answer to a request it refused, as ours: its 404 is `not_found`, its
/// 401/403 `forbidden`, bad input `validation_failed`; the rest a worker error. The
/// crate's own text is never passed on (it may name numbers).
fn iq_error(e: &IqError, what: &str) -> DriverError {
    match e {
        IqError::ServerError { code: 404, .. } | IqError::ServerError { code: 406, .. } => {
            DriverError::new(ErrorCode::NotFound, format!("the network knows no such {what}"))
        }
        IqError::ServerError { code: 401 | 403, .. } => {
            DriverError::new(ErrorCode::Forbidden, format!("the network does not let this account change the {what}"))
        }
        IqError::ServerError { code: 400, .. } => {
            DriverError::new(ErrorCode::ValidationFailed, format!("the network refused the {what} request"))
        }
        IqError::NotConnected => DriverError::new(ErrorCode::InstanceNotConnected, "the session is not connected"),
        IqError::Timeout => DriverError::new(ErrorCode::WorkerTimeout, "the network did not answer in time"),
        _ => failed(&format!("handle the {what} request")),
    }
}

fn group_error(e: GroupError) -> DriverError {
    match e {
        GroupError::Iq(e) => iq_error(&e, "group"),
        GroupError::InvalidRequest(_) => {
            DriverError::new(ErrorCode::ValidationFailed, "the group request is not valid")
        }
        GroupError::DescriptionConflict => {
            DriverError::new(ErrorCode::Conflict, "the group description changed meanwhile; try again")
        }
        _ => failed("handle the group request"),
    }
}

fn community_error(e: whatsapp_rust::CommunityError) -> DriverError {
    use whatsapp_rust::CommunityError;
    match e {
        CommunityError::Iq(e) => iq_error(&e, "community"),
        CommunityError::Group(e) => group_error(e),
        CommunityError::InvalidRequest(_) => {
            DriverError::new(ErrorCode::ValidationFailed, "the community request is not valid")
        }
        _ => failed("handle the community request"),
    }
}

fn channel_error(e: NewsletterError) -> DriverError {
    match e {
        NewsletterError::Iq(e) => iq_error(&e, "channel"),
        NewsletterError::InvalidRequest(_) => {
            DriverError::new(ErrorCode::ValidationFailed, "the channel request is not valid")
        }
        _ => failed("handle the channel request"),
    }
}

fn jids(list: &[String]) -> Result<Vec<Jid>, DriverError> {
    list.iter().map(|s| jid(s)).collect()
}

/// A group JID: `<id>@g.us`, given whole or as its id.
fn group_jid(s: &str) -> Result<Jid, DriverError> {
    let full = if s.contains('@') { s.to_string() } else { format!("{s}@g.us") };
    full.parse().map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid group JID"))
}

/// A channel JID: `<id>@newsletter`, given whole or as its id.
fn channel_jid(s: &str) -> Result<Jid, DriverError> {
    let full = if s.contains('@') { s.to_string() } else { format!("{s}@newsletter") };
    full.parse().map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid channel JID"))
}

fn ts(secs: Option<u64>) -> Value {
    secs.and_then(|s| chrono::DateTime::from_timestamp(s as i64, 0)).map_or(Value::Null, |t| json!(t))
}

pub fn role(p: &ParticipantType) -> &'static str {
    match p {
        ParticipantType::SuperAdmin => "superadmin",
        ParticipantType::Admin => "admin",
        _ => "member",
    }
}

pub fn participant_json(p: &GroupParticipant) -> Value {
    json!({
        "jid": p.jid.to_string(),
        "phone": p.phone_number.as_ref().map(|pn| pn.user.to_string()),
        "role": role(&p.participant_type),
    })
}

pub fn group_json(g: &GroupMetadata) -> Value {
    json!({
        "jid": g.id.to_string(),
        "subject": g.subject,
        "description": g.description,
        "created_at": ts(g.creation_time),
        "owner": g.creator_pn.as_ref().or(g.creator.as_ref()).map(|o| map::phone_form(o, None)),
        "size": g.size.map_or(g.participants.len() as u64, u64::from),
        "announce": g.is_announcement,
        "locked": g.is_locked,
        "approval_required": g.membership_approval,
        "ephemeral": g.ephemeral.as_ref().and_then(|e| e.expiration).unwrap_or(0),
        "community": {
            "parent": g.parent_group_jid.as_ref().map(ToString::to_string),
            "is_parent": g.is_parent_group,
            "is_announcement_group": g.is_default_sub_group,
        },
        "participants": g.participants.iter().map(participant_json).collect::<Vec<_>>(),
    })
}

pub fn subgroup_json(g: &CommunitySubgroup) -> Value {
    json!({
        "jid": g.id.to_string(),
        "subject": g.subject,
        "size": g.participant_count,
        "is_announcement_group": g.is_default_sub_group,
    })
}

/// The network's code for one member of a participant change ("200", "403", "409",
/// ...), as a number; none given means done.
pub fn change_status(status: Option<&str>, error: Option<&str>) -> u16 {
    status.or(error).and_then(|s| s.parse::<u16>().ok()).unwrap_or(200)
}

pub fn change_json(r: &ParticipantChangeResponse) -> Value {
    let status = change_status(r.status.as_deref(), r.error.as_deref());
    json!({ "jid": r.phone_number.as_ref().unwrap_or(&r.jid).to_string(), "status": status })
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

/// `{category: value}` of the account's privacy settings.
pub fn privacy_json(p: &whatsapp_rust::wacore::iq::privacy::PrivacySettingsResponse) -> Value {
    Value::Object(p.settings.iter().map(|s| (s.category.as_str().to_string(), json!(s.value.as_str()))).collect())
}

/// A privacy setting by its network names, refused when the value does not fit the
/// category (e.g. `online` is `all` or `match_last_seen`).
pub fn privacy_setting(
    category: &str,
    value: &str,
) -> Result<
    (whatsapp_rust::wacore::iq::privacy::PrivacyCategory, whatsapp_rust::wacore::iq::privacy::PrivacyValue),
    DriverError,
> {
    use whatsapp_rust::wacore::iq::privacy::{PrivacyCategory, PrivacyValue};
    let c = PrivacyCategory::from(category);
    let v = PrivacyValue::from(value);
    let bad = |what: &str| DriverError::new(ErrorCode::ValidationFailed, what.to_string());
    if matches!(c, PrivacyCategory::Other(_)) {
        return Err(bad(
            "unknown privacy category (last, online, profile, status, groupadd, readreceipts, calladd, messages)",
        ));
    }
    if matches!(v, PrivacyValue::Other(_)) || !c.is_valid_value(&v) {
        return Err(bad("this value does not fit the privacy category"));
    }
    Ok((c, v))
}

/// Runs one of the operations this module carries; `None`: not one of them.
pub async fn run(c: &Client, op: &NetOp) -> Option<Result<Value, DriverError>> {
    Some(match op {
        NetOp::Groups
        | NetOp::Group { .. }
        | NetOp::CreateGroup { .. }
        | NetOp::UpdateGroup { .. }
        | NetOp::GroupParticipants { .. }
        | NetOp::GroupInviteLink { .. }
        | NetOp::LeaveGroup { .. }
        | NetOp::GroupInviteInfo { .. }
        | NetOp::GroupEphemeral { .. }
        | NetOp::SetGroupPicture { .. }
        | NetOp::JoinGroup { .. } => groups(c, op).await,
        NetOp::Communities
        | NetOp::CreateCommunity { .. }
        | NetOp::CommunityGroups { .. }
        | NetOp::LinkGroups { .. } => communities(c, op).await,
        NetOp::Channels
        | NetOp::Channel { .. }
        | NetOp::ChannelByInvite { .. }
        | NetOp::CreateChannel { .. }
        | NetOp::ChannelAction { .. }
        | NetOp::ChannelMessages { .. }
        | NetOp::ChannelReaction { .. } => channels(c, op).await,
        NetOp::SetLabel { .. } | NetOp::DeleteLabel { .. } | NetOp::LabelChat { .. } | NetOp::LabelMessage { .. } => {
            labels(c, op).await
        }
        NetOp::Privacy
        | NetOp::SetPrivacy { .. }
        | NetOp::SetProfile { .. }
        | NetOp::SetPicture { .. }
        | NetOp::PostStatus { .. } => account(c, op).await,
        _ => return None,
    })
}

async fn groups(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
    let g = c.groups();
    match op {
        NetOp::Groups => {
            let all = g.get_participating().await.map_err(group_error)?;
            let mut list: Vec<&GroupMetadata> = all.values().filter(|m| !m.is_parent_group).collect();
            list.sort_by(|a, b| a.subject.cmp(&b.subject));
            Ok(Value::Array(list.into_iter().map(group_json).collect()))
        }
        NetOp::Group { jid: j } => Ok(group_json(&g.get_metadata(&group_jid(j)?).await.map_err(group_error)?)),
        NetOp::CreateGroup { subject, participants } => {
            GroupSubject::new(subject.as_str())
                .map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "the subject is too long"))?;
            let members = jids(participants)?.into_iter().map(GroupParticipantOptions::new).collect();
            let options = GroupCreateOptions::builder().subject(subject.as_str()).participants(members).build();
            Ok(group_json(&g.create_group(options).await.map_err(group_error)?.metadata))
        }
        NetOp::UpdateGroup { jid: j, subject, description, announce, locked } => {
            let j = group_jid(j)?;
            let too_long =
                |what: &str| DriverError::new(ErrorCode::ValidationFailed, format!("the {what} is too long"));
            if let Some(s) = subject {
                g.set_subject(j.clone(), GroupSubject::new(s.as_str()).map_err(|_| too_long("subject"))?)
                    .await
                    .map_err(group_error)?;
            }
            if let Some(d) = description {
                let d = Some(d.as_str())
                    .filter(|d| !d.is_empty())
                    .map(GroupDescription::new)
                    .transpose()
                    .map_err(|_| too_long("description"))?;
                g.set_description(j.clone(), d, PreviousDescription::Resolve).await.map_err(group_error)?;
            }
            if let Some(a) = announce {
                g.set_announce(j.clone(), *a).await.map_err(group_error)?;
            }
            if let Some(l) = locked {
                g.set_locked(j, *l).await.map_err(group_error)?;
            }
            Ok(Value::Null)
        }
        NetOp::GroupParticipants { jid: j, action, participants } => {
            let (j, members) = (group_jid(j)?, jids(participants)?);
            let changed = match action {
                ParticipantAction::Add => g.add_participants(j, &members).await,
                ParticipantAction::Remove => g.remove_participants(j, &members).await,
                ParticipantAction::Promote => g.promote_participants(j, &members).await,
                ParticipantAction::Demote => g.demote_participants(j, &members).await,
            }
            .map_err(group_error)?;
            Ok(Value::Array(changed.iter().map(change_json).collect()))
        }
        NetOp::GroupInviteLink { jid: j, reset } => {
            let code = g.get_invite_link(group_jid(j)?, *reset).await.map_err(group_error)?;
            let link = if code.starts_with("https://") { code } else { format!("https://chat.whatsapp.com/{code}") };
            Ok(json!({ "link": link }))
        }
        NetOp::LeaveGroup { jid: j } => g.leave(group_jid(j)?).await.map(|_| Value::Null).map_err(group_error),
        NetOp::GroupInviteInfo { code } => Ok(group_json(&g.get_invite_info(code).await.map_err(group_error)?)),
        NetOp::GroupEphemeral { jid: j, expiration } => {
            g.set_ephemeral(group_jid(j)?, *expiration).await.map(|_| Value::Null).map_err(group_error)
        }
        NetOp::SetGroupPicture { jid: j, picture } => {
            let j = group_jid(j)?;
            match picture.as_ref().map(|p| p.bytes()) {
                Some(Some(bytes)) => g.set_profile_picture(j, bytes).await.map(drop),
                Some(None) => return Err(DriverError::new(ErrorCode::ValidationFailed, "the picture is not base64")),
                None => g.remove_profile_picture(j).await.map(drop),
            }
            .map_err(group_error)?;
            Ok(Value::Null)
        }
        NetOp::JoinGroup { link } => match g.join_with_invite_code(link).await.map_err(group_error)? {
            JoinGroupResult::Joined(j) => Ok(group_json(&g.get_metadata(&j).await.map_err(group_error)?)),
            JoinGroupResult::PendingApproval(j) => Ok(json!({ "jid": j.to_string(), "pending_approval": true })),
        },
        _ => unreachable!("routed by run()"),
    }
}

async fn communities(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
    let cm = c.community();
    match op {
        NetOp::Communities => {
            let all = cm.get_participating().await.map_err(community_error)?;
            let mut list: Vec<&GroupMetadata> = all.values().collect();
            list.sort_by(|a, b| a.subject.cmp(&b.subject));
            Ok(Value::Array(list.into_iter().map(group_json).collect()))
        }
        NetOp::CreateCommunity { name, description } => {
            let mut options = CreateCommunityOptions::new(name.as_str());
            options.description = description.clone();
            Ok(group_json(&cm.create(options).await.map_err(community_error)?.metadata))
        }
        NetOp::CommunityGroups { jid: j } => {
            let groups = cm.get_subgroups(&group_jid(j)?).await.map_err(community_error)?;
            Ok(Value::Array(groups.iter().map(subgroup_json).collect()))
        }
        NetOp::LinkGroups { jid: j, groups, link } => {
            let (j, groups) = (group_jid(j)?, groups.iter().map(|g| group_jid(g)).collect::<Result<Vec<_>, _>>()?);
            let (done, failed_groups) = if *link {
                let r = cm.link_subgroups(j, &groups).await.map_err(community_error)?;
                (r.linked_jids, r.failed_groups)
            } else {
                let r = cm.unlink_subgroups(j, &groups, false).await.map_err(community_error)?;
                (r.unlinked_jids, r.failed_groups)
            };
            Ok(json!({
                "done": done.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "failed": failed_groups.iter().map(|(j, code)| json!({ "jid": j.to_string(), "status": code })).collect::<Vec<_>>(),
            }))
        }
        _ => unreachable!("routed by run()"),
    }
}

async fn channels(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
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

async fn labels(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
    let l = c.labels();
    let refused = |_| failed("change the labels");
    match op {
        NetOp::SetLabel { label_id, name, color } => l.create_label(label_id, name, *color).await.map_err(refused)?,
        NetOp::DeleteLabel { label_id } => l.delete_label(label_id).await.map_err(refused)?,
        NetOp::LabelChat { label_id, jid: j, labeled: true } => {
            l.add_chat_label(label_id, &jid(j)?).await.map_err(refused)?
        }
        NetOp::LabelChat { label_id, jid: j, labeled: false } => {
            l.remove_chat_label(label_id, &jid(j)?).await.map_err(refused)?
        }
        NetOp::LabelMessage { label_id, jid: j, wa_message_id, labeled } => {
            // whatsapp-rust has no method for it: the action is ours (map::LABEL_MESSAGE),
            // sent through the crate's own app-state encoder.
            let chat = jid(j)?.to_string();
            let value = map::label_association(*labeled, chrono::Utc::now().timestamp_millis());
            c.send_app_state_action(&map::LABEL_MESSAGE, &[label_id, &chat, wa_message_id], &value)
                .await
                .map_err(refused)?
        }
        _ => unreachable!("routed by run()"),
    }
    Ok(Value::Null)
}

async fn account(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
    match op {
        NetOp::Privacy => Ok(privacy_json(&c.fetch_privacy_settings().await.map_err(|e| iq_error(&e, "privacy"))?)),
        NetOp::SetPrivacy { category, value } => {
            let (cat, val) = privacy_setting(category, value)?;
            c.set_privacy_setting(cat, val).await.map_err(|e| iq_error(&e, "privacy"))?;
            Ok(privacy_json(&c.fetch_privacy_settings().await.map_err(|e| iq_error(&e, "privacy"))?))
        }
        NetOp::SetProfile { about, push_name } => {
            let p = c.profile();
            if let Some(a) = about {
                p.set_status_text(a).await.map_err(|_| failed("set the about text"))?;
            }
            if let Some(n) = push_name {
                p.set_push_name(n).await.map_err(|_| failed("set the push name"))?;
            }
            Ok(Value::Null)
        }
        NetOp::SetPicture { picture } => {
            let p = c.profile();
            match picture.as_ref().map(|pic| pic.bytes()) {
                Some(Some(bytes)) => p.set_profile_picture(bytes).await.map(drop),
                Some(None) => return Err(DriverError::new(ErrorCode::ValidationFailed, "the picture is not base64")),
                None => p.remove_profile_picture().await.map(drop),
            }
            .map_err(|_| failed("set the profile picture"))?;
            Ok(Value::Null)
        }
        NetOp::PostStatus { text, background_argb, recipients } => {
            if recipients.is_empty() {
                return Err(DriverError::new(ErrorCode::ValidationFailed, "a status needs at least one recipient"));
            }
            let font = whatsapp_rust::waproto::whatsapp::message::extended_text_message::FontType::default();
            let sent = c
                .status()
                .send_text(text, background_argb.unwrap_or(0xFF1E_6E4F), font, &jids(recipients)?, Default::default())
                .await
                .map_err(|_| failed("post the status"))?;
            Ok(json!({ "wa_message_id": sent.message_id }))
        }
        _ => unreachable!("routed by run()"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pn(n: &str) -> Jid {
        shared::jid::Jid::user(n).as_str().parse().unwrap()
    }

    fn member(n: &str, t: ParticipantType) -> GroupParticipant {
        GroupParticipant {
            jid: pn(n),
            phone_number: Some(pn(n)),
            lid: None,
            username: None,
            participant_type: t,
            details: None,
        }
    }

    #[test]
    fn groups_map_with_their_members_and_community_place() {
        let g = GroupMetadata {
            id: "120363000000000001@g.us".parse().unwrap(),
            subject: "Team".into(),
            description: Some("weekly".into()),
            creation_time: Some(1_700_000_000),
            creator_pn: Some(pn("5511999990001")),
            participants: vec![
                member("5511999990001", ParticipantType::SuperAdmin),
                member("5511999990002", ParticipantType::Member),
            ],
            is_announcement: true,
            parent_group_jid: Some("120363000000000009@g.us".parse().unwrap()),
            ..Default::default()
        };
        let v = group_json(&g);
        assert_eq!(v["jid"], "120363000000000001@g.us");
        assert_eq!(v["subject"], "Team");
        assert_eq!(v["description"], "weekly");
        assert_eq!(v["created_at"], "2023-11-14T22:13:20Z");
        assert_eq!(v["owner"], shared::jid::Jid::user("5511999990001").as_str());
        assert_eq!(v["size"], 2, "counted when the network gives no size");
        assert_eq!(v["announce"], true);
        assert_eq!(v["locked"], false);
        assert_eq!(v["community"]["parent"], "120363000000000009@g.us");
        assert_eq!(v["community"]["is_parent"], false);
        assert_eq!(
            v["participants"][0],
            json!({ "jid": shared::jid::Jid::user("5511999990001").as_str(), "phone": "5511999990001", "role": "superadmin" })
        );
        assert_eq!(v["participants"][1]["role"], "member");
        assert_eq!(role(&ParticipantType::Admin), "admin");
    }

    #[test]
    fn participant_changes_carry_the_per_member_code() {
        assert_eq!(change_status(Some("200"), None), 200);
        assert_eq!(change_status(None, Some("403")), 403);
        assert_eq!(change_status(None, None), 200);
        assert_eq!(change_status(Some("409"), Some("ignored")), 409);
    }

    #[test]
    fn channels_map_with_role_and_state() {
        let c = NewsletterMetadata {
            jid: "120363000000000777@newsletter".parse().unwrap(),
            name: "News".into(),
            description: None,
            subscriber_count: 12,
            verification: NewsletterVerification::Verified,
            state: NewsletterState::Active,
            picture_url: None,
            preview_url: None,
            invite_code: Some("AbCd".into()),
            role: Some(NewsletterRole::Owner),
            creation_time: None,
        };
        let v = channel_json(&c);
        assert_eq!(v["jid"], "120363000000000777@newsletter");
        assert_eq!(v["subscribers"], 12);
        assert_eq!(v["verified"], true);
        assert_eq!(v["state"], "active");
        assert_eq!(v["role"], "owner");
        assert_eq!(v["invite_code"], "AbCd");
        assert_eq!(v["created_at"], Value::Null);
    }

    #[test]
    fn privacy_settings_are_checked_against_their_category() {
        assert!(privacy_setting("last", "contacts").is_ok());
        assert!(privacy_setting("online", "match_last_seen").is_ok());
        assert_eq!(privacy_setting("online", "contacts").unwrap_err().code, ErrorCode::ValidationFailed);
        assert_eq!(privacy_setting("favourite_colour", "all").unwrap_err().code, ErrorCode::ValidationFailed);
        assert_eq!(privacy_setting("last", "sometimes").unwrap_err().code, ErrorCode::ValidationFailed);
        use whatsapp_rust::wacore::iq::privacy::{PrivacySetting, PrivacySettingsResponse};
        let (category, value) = privacy_setting("readreceipts", "none").unwrap();
        let settings = PrivacySettingsResponse { settings: vec![PrivacySetting { category, value }] };
        assert_eq!(privacy_json(&settings), json!({ "readreceipts": "none" }));
    }

    #[test]
    fn group_and_channel_ids_take_their_server() {
        assert_eq!(group_jid("120363000000000001").unwrap().to_string(), "120363000000000001@g.us");
        assert_eq!(channel_jid("120363000000000777").unwrap().to_string(), "120363000000000777@newsletter");
        assert_eq!(group_jid("120363000000000001@g.us").unwrap().to_string(), "120363000000000001@g.us");
    }

    #[test]
    fn refusals_never_carry_the_networks_text() {
        let e = iq_error(
            &IqError::ServerError {
                code: 404,
                text: "5511999990001 not found".into(),
                error_type: None,
                backoff: None,
            },
            "group",
        );
        assert_eq!(e.code, ErrorCode::NotFound);
        assert!(!e.detail.contains("5511"), "{}", e.detail);
        let e =
            iq_error(&IqError::ServerError { code: 403, text: "x".into(), error_type: None, backoff: None }, "group");
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert_eq!(iq_error(&IqError::Timeout, "group").code, ErrorCode::WorkerTimeout);
    }
}
