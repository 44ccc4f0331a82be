//! Groups and communities on the WhatsApp network: their records as `NetOp` answers
//! them, the network's refusals as ours, and the operations.

use super::*;

pub(super) fn group_error(e: GroupError) -> DriverError {
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

pub(super) fn community_error(e: whatsapp_rust::CommunityError) -> DriverError {
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

/// A group JID: `<id>@g.us`, given whole or as its id.
pub(super) fn group_jid(s: &str) -> Result<Jid, DriverError> {
    let full = if s.contains('@') { s.to_string() } else { format!("{s}@g.us") };
    full.parse().map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid group JID"))
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

pub(super) async fn groups(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
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

pub(super) async fn communities(c: &Client, op: &NetOp) -> Result<Value, DriverError> {
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
