//! Communities (interface.md 4.8): parent groups that gather groups; creating one makes
//! its announcement group too. A community's name, description, settings, invite link
//! and members are the group operations with its JID. Asked of the running session
//! (`instance_not_connected` without one); creating counts against the instance's
//! group-creation cap.

use serde::{Deserialize, Serialize};
use shared::contract::{self as wire, MemberChange, Subgroup};
use shared::error::ErrorDetail;
use shared::jid::Jid;
use shared::ErrorCode;
use utoipa::ToSchema;

use crate::groups::{cap_create, check_description, check_subject, group, GroupOut};
use crate::net::net;
use crate::{caps, Ctx, Error, Result};

/// The most groups one link call may name.
pub const LINK_LIMIT: usize = 50;

/// A group of a community.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CommunityGroupOut {
    pub jid: String,
    pub subject: String,
    pub size: u32,
    /// The community's announcement group (made with it; only admins send).
    pub is_announcement_group: bool,
}

impl From<Subgroup> for CommunityGroupOut {
    fn from(g: Subgroup) -> Self {
        CommunityGroupOut {
            jid: g.jid.into(),
            subject: g.subject,
            size: g.size,
            is_announcement_group: g.is_announcement_group,
        }
    }
}

/// One group's outcome: `ok`, or `error` with a code.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LinkResult {
    pub jid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// The network's refusal of one group, as ours (never retryable: the group is as it is).
fn failure(status: u16) -> (ErrorCode, &'static str) {
    match status {
        403 => (ErrorCode::Forbidden, "not an admin of the group, or the group cannot be linked"),
        404 => (ErrorCode::NotFound, "no such group in reach"),
        409 => (ErrorCode::Conflict, "the group belongs to a community already"),
        _ => (ErrorCode::WorkerError, "the network refused the group"),
    }
}

/// Groups' JIDs, 1 to 50, de-duplicated in order.
fn groups_of(list: &[String]) -> Result<Vec<Jid>> {
    if list.is_empty() || list.len() > LINK_LIMIT {
        return Err(Error::invalid(format!("groups must name 1 to {LINK_LIMIT} groups")));
    }
    let mut out: Vec<Jid> = Vec::new();
    for g in list {
        let j = Jid::parse(g).map_err(|_| Error::invalid("each group must be a group's JID"))?;
        let j = group(j)?;
        if !out.contains(&j) {
            out.push(j);
        }
    }
    Ok(out)
}

/// The communities the account is in.
pub async fn list(ctx: Ctx<'_>) -> Result<Vec<GroupOut>> {
    Ok(net(ctx.core, ctx.instance, wire::Communities {}).await?.into_iter().map(GroupOut::from).collect())
}

/// Creates a community (and its announcement group), owned by the account, under the
/// group-creation cap.
pub async fn create(ctx: Ctx<'_>, name: &str, description: Option<String>) -> Result<GroupOut> {
    let name = check_subject(name)?;
    check_description(description.as_ref())?;
    let create = net(ctx.core, ctx.instance, wire::CreateCommunity { name, description });
    Ok(caps::capped(ctx.core, ctx.instance, cap_create(ctx.core), create).await?.into())
}

/// A community's record (`not_found` for a group that is not one).
pub async fn get(ctx: Ctx<'_>, jid: Jid) -> Result<GroupOut> {
    let g = crate::groups::get(ctx, jid).await?;
    if !g.community.as_ref().is_some_and(|c| c.is_parent) {
        return Err(Error::NotFound("community"));
    }
    Ok(g)
}

/// The groups of a community, its announcement group first.
pub async fn groups(ctx: Ctx<'_>, jid: Jid) -> Result<Vec<CommunityGroupOut>> {
    let jid = group(jid)?;
    let list = net(ctx.core, ctx.instance, wire::CommunityGroups { jid }).await?;
    let mut groups: Vec<CommunityGroupOut> = list.into_iter().map(CommunityGroupOut::from).collect();
    groups.sort_by(|a, b| b.is_announcement_group.cmp(&a.is_announcement_group).then(a.jid.cmp(&b.jid)));
    Ok(groups)
}

/// Links groups to the community (admins of both), with a result per group.
pub async fn link(ctx: Ctx<'_>, jid: Jid, list: &[String]) -> Result<Vec<LinkResult>> {
    let jid = group(jid)?;
    let groups = groups_of(list)?;
    let r = net(ctx.core, ctx.instance, wire::LinkGroups { jid, groups, link: true }).await?;
    let mut results: Vec<LinkResult> =
        r.done.into_iter().map(|jid| LinkResult { jid: jid.into(), ok: Some(true), error: None }).collect();
    results.extend(r.failed.into_iter().map(|f: MemberChange| {
        let (code, message) = failure(f.status);
        LinkResult {
            jid: f.jid.into(),
            ok: None,
            error: Some(ErrorDetail { code, message: message.into(), retryable: false, field: None }),
        }
    }));
    Ok(results)
}

/// Unlinks a group from the community (admins of both; the announcement group stays).
pub async fn unlink(ctx: Ctx<'_>, jid: Jid, member: Jid) -> Result<()> {
    let jid = group(jid)?;
    let g = group(member)?;
    let r = net(ctx.core, ctx.instance, wire::LinkGroups { jid, groups: vec![g], link: false }).await?;
    match r.failed.first() {
        Some(f) => {
            let (code, message) = failure(f.status);
            Err(Error::Refused { code, message: message.into(), retryable: false })
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_groups_are_group_jids_once_each() {
        let (a, b) = (
            shared::jid::at("1203630001", shared::jid::GROUP_SERVER),
            shared::jid::at("1203630002", shared::jid::GROUP_SERVER),
        );
        let jids = groups_of(&[a.clone(), b.clone(), a.clone()]).unwrap();
        assert_eq!(jids.iter().map(Jid::as_str).collect::<Vec<_>>(), [a.as_str(), b.as_str()]);
        assert!(groups_of(&[]).is_err());
        assert!(groups_of(&vec![a; LINK_LIMIT + 1]).is_err());
        assert!(groups_of(&[shared::jid::Jid::user("5511999990001").as_str().to_string()]).is_err());
    }

    #[test]
    fn refusals_name_their_codes() {
        assert_eq!(failure(403).0, ErrorCode::Forbidden);
        assert_eq!(failure(404).0, ErrorCode::NotFound);
        assert_eq!(failure(409).0, ErrorCode::Conflict);
        assert_eq!(failure(500).0, ErrorCode::WorkerError);
    }
}
