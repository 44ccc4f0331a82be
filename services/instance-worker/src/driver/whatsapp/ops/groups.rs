//! Groups and communities on the WhatsApp network: their records as the contract's
//! replies, the network's refusals as ours, and the operations.

use super::*;
use shared::contract::{CommunityPlace, GroupInfo, InviteLink, Linked, Member, MemberChange, Role, Subgroup};

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
    let full = if s.contains('@') { s.to_string() } else { shared::jid::at(s, shared::jid::GROUP_SERVER) };
    full.parse().map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid group JID"))
}

pub fn role(p: &ParticipantType) -> Role {
    match p {
        ParticipantType::SuperAdmin => Role::Superadmin,
        ParticipantType::Admin => Role::Admin,
        _ => Role::Member,
    }
}

/// A member as ours; none for one whose JID is in a form ours does not take.
pub fn member(p: &GroupParticipant) -> Option<Member> {
    Some(Member {
        jid: ours(&p.jid)?,
        phone: p.phone_number.as_ref().map(|pn| pn.user.to_string()),
        role: role(&p.participant_type),
    })
}

pub fn group_info(g: &GroupMetadata) -> Result<GroupInfo, DriverError> {
    Ok(GroupInfo {
        jid: ours_or_fail(&g.id, "group")?,
        subject: g.subject.clone(),
        description: g.description.clone(),
        owner: g.creator_pn.as_ref().or(g.creator.as_ref()).map(|o| map::phone_form(o, None)),
        created_at: ts(g.creation_time),
        size: Some(g.size.map_or(g.participants.len() as u64, u64::from)),
        announce: g.is_announcement,
        locked: g.is_locked,
        approval_required: g.membership_approval,
        ephemeral: g.ephemeral.as_ref().and_then(|e| e.expiration).unwrap_or(0),
        community: CommunityPlace {
            parent: g.parent_group_jid.as_ref().and_then(ours),
            is_parent: g.is_parent_group,
            is_announcement_group: g.is_default_sub_group,
        },
        participants: g.participants.iter().filter_map(member).collect(),
        pending_approval: false,
    })
}

fn group_list<'a>(list: impl Iterator<Item = &'a GroupMetadata>) -> Result<Vec<GroupInfo>, DriverError> {
    let mut list: Vec<&GroupMetadata> = list.collect();
    list.sort_by(|a, b| a.subject.cmp(&b.subject));
    list.into_iter().map(group_info).collect()
}

pub fn subgroup(g: &CommunitySubgroup) -> Option<Subgroup> {
    Some(Subgroup {
        jid: ours(&g.id)?,
        subject: g.subject.clone(),
        size: g.participant_count.unwrap_or(0),
        is_announcement_group: g.is_default_sub_group,
    })
}

/// The network's code for one member of a participant change ("200", "403", "409",
/// ...), as a number; none given means done.
pub fn change_status(status: Option<&str>, error: Option<&str>) -> u16 {
    status.or(error).and_then(|s| s.parse::<u16>().ok()).unwrap_or(200)
}

pub fn change(r: &ParticipantChangeResponse) -> Option<MemberChange> {
    let status = change_status(r.status.as_deref(), r.error.as_deref());
    Some(MemberChange { jid: ours(r.phone_number.as_ref().unwrap_or(&r.jid))?, status })
}

pub(super) async fn groups(c: &Client, op: &GroupOp) -> Result<Answer, DriverError> {
    let g = c.groups();
    match op {
        GroupOp::Groups(o) => {
            let all = g.get_participating().await.map_err(group_error)?;
            Ok(o.answer(group_list(all.values().filter(|m| !m.is_parent_group))?))
        }
        GroupOp::Group(o) => {
            Ok(o.answer(group_info(&g.get_metadata(&group_jid(o.jid.as_str())?).await.map_err(group_error)?)?))
        }
        GroupOp::CreateGroup(o) => {
            GroupSubject::new(o.subject.as_str())
                .map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "the subject is too long"))?;
            let members = jids(&o.participants)?.into_iter().map(GroupParticipantOptions::new).collect();
            let options = GroupCreateOptions::builder().subject(o.subject.as_str()).participants(members).build();
            Ok(o.answer(group_info(&g.create_group(options).await.map_err(group_error)?.metadata)?))
        }
        GroupOp::UpdateGroup(o) => {
            let j = group_jid(o.jid.as_str())?;
            let too_long =
                |what: &str| DriverError::new(ErrorCode::ValidationFailed, format!("the {what} is too long"));
            if let Some(s) = &o.subject {
                g.set_subject(j.clone(), GroupSubject::new(s.as_str()).map_err(|_| too_long("subject"))?)
                    .await
                    .map_err(group_error)?;
            }
            if let Some(d) = &o.description {
                let d = Some(d.as_str())
                    .filter(|d| !d.is_empty())
                    .map(GroupDescription::new)
                    .transpose()
                    .map_err(|_| too_long("description"))?;
                g.set_description(j.clone(), d, PreviousDescription::Resolve).await.map_err(group_error)?;
            }
            if let Some(a) = o.announce {
                g.set_announce(j.clone(), a).await.map_err(group_error)?;
            }
            if let Some(l) = o.locked {
                g.set_locked(j, l).await.map_err(group_error)?;
            }
            Ok(o.answer(()))
        }
        GroupOp::GroupParticipants(o) => {
            let (j, members) = (group_jid(o.jid.as_str())?, jids(&o.participants)?);
            let changed = match o.action {
                ParticipantAction::Add => g.add_participants(j, &members).await,
                ParticipantAction::Remove => g.remove_participants(j, &members).await,
                ParticipantAction::Promote => g.promote_participants(j, &members).await,
                ParticipantAction::Demote => g.demote_participants(j, &members).await,
            }
            .map_err(group_error)?;
            Ok(o.answer(changed.iter().filter_map(change).collect()))
        }
        GroupOp::GroupInviteLink(o) => {
            let code = g.get_invite_link(group_jid(o.jid.as_str())?, o.reset).await.map_err(group_error)?;
            let link = if code.starts_with("https://") { code } else { format!("https://chat.whatsapp.com/{code}") };
            Ok(o.answer(InviteLink { link }))
        }
        GroupOp::LeaveGroup(o) => {
            g.leave(group_jid(o.jid.as_str())?).await.map_err(group_error)?;
            Ok(o.answer(()))
        }
        GroupOp::GroupInviteInfo(o) => {
            Ok(o.answer(group_info(&g.get_invite_info(&o.code).await.map_err(group_error)?)?))
        }
        GroupOp::GroupEphemeral(o) => {
            g.set_ephemeral(group_jid(o.jid.as_str())?, o.expiration).await.map_err(group_error)?;
            Ok(o.answer(()))
        }
        GroupOp::SetGroupPicture(o) => {
            let j = group_jid(o.jid.as_str())?;
            match o.picture.as_ref().map(|p| p.bytes()) {
                Some(Some(bytes)) => g.set_profile_picture(j, bytes).await.map(drop),
                Some(None) => return Err(DriverError::new(ErrorCode::ValidationFailed, "the picture is not base64")),
                None => g.remove_profile_picture(j).await.map(drop),
            }
            .map_err(group_error)?;
            Ok(o.answer(()))
        }
        GroupOp::JoinGroup(o) => match g.join_with_invite_code(&o.link).await.map_err(group_error)? {
            JoinGroupResult::Joined(j) => Ok(o.answer(group_info(&g.get_metadata(&j).await.map_err(group_error)?)?)),
            JoinGroupResult::PendingApproval(j) => Ok(o.answer(GroupInfo::pending(ours_or_fail(&j, "group")?))),
        },
    }
}

pub(super) async fn communities(c: &Client, op: &CommunityOp) -> Result<Answer, DriverError> {
    let cm = c.community();
    match op {
        CommunityOp::Communities(o) => {
            let all = cm.get_participating().await.map_err(community_error)?;
            Ok(o.answer(group_list(all.values())?))
        }
        CommunityOp::CreateCommunity(o) => {
            let mut options = CreateCommunityOptions::new(o.name.as_str());
            options.description = o.description.clone();
            Ok(o.answer(group_info(&cm.create(options).await.map_err(community_error)?.metadata)?))
        }
        CommunityOp::CommunityGroups(o) => {
            let groups = cm.get_subgroups(&group_jid(o.jid.as_str())?).await.map_err(community_error)?;
            Ok(o.answer(groups.iter().filter_map(subgroup).collect()))
        }
        CommunityOp::LinkGroups(o) => {
            let j = group_jid(o.jid.as_str())?;
            let groups = o.groups.iter().map(|g| group_jid(g.as_str())).collect::<Result<Vec<_>, _>>()?;
            let (done, failed_groups) = if o.link {
                let r = cm.link_subgroups(j, &groups).await.map_err(community_error)?;
                (r.linked_jids, r.failed_groups)
            } else {
                let r = cm.unlink_subgroups(j, &groups, false).await.map_err(community_error)?;
                (r.unlinked_jids, r.failed_groups)
            };
            Ok(o.answer(Linked {
                done: done.iter().filter_map(ours).collect(),
                failed: failed_groups
                    .iter()
                    .filter_map(|(j, code)| {
                        Some(MemberChange { jid: ours(j)?, status: u16::try_from(*code).unwrap_or(500) })
                    })
                    .collect(),
            }))
        }
    }
}
