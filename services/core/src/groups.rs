//! Groups: the account's groups as the running session knows them (asked of the
//! instance's worker), the network's limits, the checks of a subject and a group JID,
//! and the per-instance caps on the actions that carry ban risk (creating groups,
//! changing members, joining by link). Communities are parent groups: their routes use
//! the records and checks here.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::contract::{self as wire, GroupInfo, Member, ParticipantAction};
use shared::error::ErrorDetail;
use shared::jid::Jid;
use shared::ErrorCode;
use utoipa::ToSchema;

use crate::caps::{self, Cap};
use crate::net::net;
use crate::{Caller, Core, Ctx, Error, Result};

/// The longest subject the network takes (characters).
pub const SUBJECT_LIMIT: usize = 100;
/// The longest description (characters).
pub const DESCRIPTION_LIMIT: usize = 2048;
/// The most members one call may name (the network's group size).
pub const PARTICIPANTS_LIMIT: usize = 1024;

/// A member of a group.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ParticipantOut {
    pub jid: String,
    /// The member's number, when the network shows it.
    #[serde(default)]
    pub phone: Option<String>,
    /// `member`, `admin` or `superadmin`.
    #[schema(pattern = "^(member|admin|superadmin)$")]
    pub role: String,
}

/// A group (or a community, which is a parent group).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupOut {
    pub jid: String,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The creator's JID.
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// Only admins send.
    #[serde(default)]
    pub announce: bool,
    /// Only admins edit the group's info.
    #[serde(default)]
    pub locked: bool,
    /// Disappearing messages: seconds a message lives (0: off).
    #[serde(default)]
    pub ephemeral: u32,
    #[serde(default)]
    pub participants: Vec<ParticipantOut>,
    /// Its place in a community.
    #[serde(default)]
    pub community: Option<CommunityOut>,
    /// Joined by a link whose group approves members first: not a member yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending_approval: bool,
}

/// A group's place in a community.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct CommunityOut {
    /// The community it belongs to.
    #[serde(default)]
    pub parent: Option<String>,
    /// It is a community (a parent group).
    #[serde(default)]
    pub is_parent: bool,
    /// It is its community's announcement group (only admins send).
    #[serde(default)]
    pub is_announcement_group: bool,
}

impl From<Member> for ParticipantOut {
    fn from(m: Member) -> Self {
        ParticipantOut { jid: m.jid.into(), phone: m.phone, role: m.role.as_str().to_string() }
    }
}

impl From<GroupInfo> for GroupOut {
    fn from(g: GroupInfo) -> Self {
        GroupOut {
            jid: g.jid.into(),
            subject: g.subject,
            description: g.description,
            owner: g.owner,
            created_at: g.created_at,
            announce: g.announce,
            locked: g.locked,
            ephemeral: g.ephemeral,
            participants: g.participants.into_iter().map(ParticipantOut::from).collect(),
            community: (!g.pending_approval).then(|| CommunityOut {
                parent: g.community.parent.map(String::from),
                is_parent: g.community.is_parent,
                is_announcement_group: g.community.is_announcement_group,
            }),
            pending_approval: g.pending_approval,
        }
    }
}

/// Group creations (communities too) a day.
pub fn cap_create(core: &Core) -> Cap {
    Cap {
        name: "group_create",
        limit: core.config.groups.creates_per_day,
        window: Duration::from_secs(86_400),
        what: "group creations a day",
    }
}

/// Member changes a minute, counted per member.
pub fn cap_participants(core: &Core) -> Cap {
    Cap {
        name: "group_participants",
        limit: core.config.groups.participant_changes_per_minute,
        window: Duration::from_secs(60),
        what: "group member changes a minute",
    }
}

/// Joins by invite link a day.
pub fn cap_joins(core: &Core) -> Cap {
    Cap {
        name: "group_join",
        limit: core.config.groups.joins_per_day,
        window: Duration::from_secs(86_400),
        what: "joins by link a day",
    }
}

/// A subject (or community name) as the network takes it: 1-100 visible characters.
pub fn check_subject(subject: &str) -> Result<String> {
    let s = crate::text::trim_ecma(subject);
    if s.is_empty() || s.chars().count() > SUBJECT_LIMIT {
        return Err(Error::invalid(format!("subject must be 1-{SUBJECT_LIMIT} characters")));
    }
    Ok(s.to_string())
}

/// A group's (or community's) JID, refusing any other kind.
pub fn group(jid: Jid) -> Result<Jid> {
    if !jid.is_group() {
        return Err(Error::invalid(format!("jid must be a group's JID (…@{})", shared::jid::GROUP_SERVER)));
    }
    Ok(jid)
}

/// One member's outcome: `ok`, or `error` with a code.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ParticipantResult {
    pub jid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// What to change of a group: absent fields stay as they are.
#[derive(Debug, Default)]
pub struct GroupChange {
    pub subject: Option<String>,
    /// Empty removes it.
    pub description: Option<String>,
    pub announce: Option<bool>,
    pub locked: Option<bool>,
    /// Disappearing messages: seconds a message lives (0 turns them off).
    pub ephemeral: Option<u32>,
}

/// The lifetimes the network offers for disappearing messages (seconds; 0 is off).
pub const EPHEMERAL_CHOICES: [u32; 4] = [0, 86_400, 604_800, 7_776_000];

/// Persons' JIDs from numbers or JIDs, de-duplicated in order.
pub fn members(list: &[String], at_least_one: bool) -> Result<Vec<Jid>> {
    if list.len() > PARTICIPANTS_LIMIT || (at_least_one && list.is_empty()) {
        return Err(Error::invalid(format!("participants must name 1 to {PARTICIPANTS_LIMIT} members")));
    }
    let mut out: Vec<Jid> = Vec::with_capacity(list.len());
    for p in list {
        let j = Jid::parse(p).ok().filter(Jid::is_person).ok_or_else(|| {
            Error::invalid("each participant must be a phone number with country code or a person's JID")
        })?;
        if !out.contains(&j) {
            out.push(j);
        }
    }
    Ok(out)
}

/// The network's status for one member as our result.
fn member_result(jid: Jid, status: u16) -> ParticipantResult {
    let jid = String::from(jid);
    let error = |code: ErrorCode, message: &str| ParticipantResult {
        jid: jid.clone(),
        ok: None,
        error: Some(ErrorDetail { code, message: message.into(), retryable: false, field: None }),
    };
    match status {
        200 => ParticipantResult { jid: jid.clone(), ok: Some(true), error: None },
        403 => error(ErrorCode::Forbidden, "the network refused this member (the owner, or its privacy settings)"),
        404 => error(ErrorCode::InvalidNumber, "no account has this number, or it is not a member"),
        408 => error(ErrorCode::Conflict, "the member left recently and cannot be added again yet"),
        409 => error(ErrorCode::Conflict, "already a member, or the group is full"),
        _ => error(ErrorCode::WorkerError, "the network refused this member"),
    }
}

/// The code of a group invite: the code itself (6-64 letters and digits) or its link
/// `https://chat.whatsapp.com/<code>`.
pub fn invite_code(link: &str) -> Option<&str> {
    let code = link.strip_prefix("https://chat.whatsapp.com/").unwrap_or(link);
    ((6..=64).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(code)
}

fn check_invite(link: &str) -> Result<String> {
    invite_code(link.trim())
        .map(str::to_string)
        .ok_or_else(|| Error::invalid("link must be a group invite link (https://chat.whatsapp.com/<code>)"))
}

/// A description as the network takes it: up to 2,048 characters.
pub fn check_description(description: Option<&String>) -> Result<()> {
    if description.is_some_and(|d| d.chars().count() > DESCRIPTION_LIMIT) {
        return Err(Error::invalid(format!("description must be at most {DESCRIPTION_LIMIT} characters")));
    }
    Ok(())
}

/// The groups the account is in.
pub async fn list(ctx: Ctx<'_>) -> Result<Vec<GroupOut>> {
    Ok(net(ctx.core, ctx.instance, wire::Groups {}).await?.into_iter().map(GroupOut::from).collect())
}

/// One group the account is in.
pub async fn get(ctx: Ctx<'_>, jid: Jid) -> Result<GroupOut> {
    let jid = group(jid)?;
    Ok(net(ctx.core, ctx.instance, wire::Group { jid }).await?.into())
}

/// Creates a group with the account as its owner (numbers with no account are left
/// out), under the daily cap; a description is set after, checked before.
pub async fn create(
    ctx: Ctx<'_>,
    subject: &str,
    participants: &[String],
    description: Option<String>,
) -> Result<GroupOut> {
    let subject = check_subject(subject)?;
    check_description(description.as_ref())?;
    let participants = members(participants, false)?;
    let make = net(ctx.core, ctx.instance, wire::CreateGroup { subject, participants });
    let g = caps::capped(ctx.core, ctx.instance, cap_create(ctx.core), make).await?;
    match description {
        Some(description) => {
            edit(ctx, g.jid, GroupChange { description: Some(description), ..GroupChange::default() }).await
        }
        None => Ok(g.into()),
    }
}

/// Changes a group's subject, description, modes or disappearing messages (admins
/// only, as the network rules) and answers the group as it is now.
pub async fn edit(ctx: Ctx<'_>, jid: Jid, change: GroupChange) -> Result<GroupOut> {
    let jid = apply(ctx, jid, change).await?;
    Ok(net(ctx.core, ctx.instance, wire::Group { jid }).await?.into())
}

/// [`edit`] without reading the group back (for a door that does not show it): the
/// group's JID.
pub async fn apply(ctx: Ctx<'_>, jid: Jid, change: GroupChange) -> Result<Jid> {
    let jid = group(jid)?;
    let subject = change.subject.as_deref().map(check_subject).transpose()?;
    check_description(change.description.as_ref())?;
    if change.ephemeral.is_some_and(|e| !EPHEMERAL_CHOICES.contains(&e)) {
        return Err(Error::invalid("ephemeral must be 0, 86400, 604800 or 7776000 seconds"));
    }
    let GroupChange { description, announce, locked, ephemeral, .. } = change;
    if subject.is_some() || description.is_some() || announce.is_some() || locked.is_some() {
        let op = wire::UpdateGroup { jid: jid.clone(), subject, description, announce, locked };
        net(ctx.core, ctx.instance, op).await?;
    }
    if let Some(expiration) = ephemeral {
        net(ctx.core, ctx.instance, wire::GroupEphemeral { jid: jid.clone(), expiration }).await?;
    }
    Ok(jid)
}

/// Adds, removes, promotes or demotes members, with a result per member: one refused
/// member stops none of the others. Counted against the per-minute cap per member the
/// network changed.
pub async fn participants(
    ctx: Ctx<'_>,
    jid: Jid,
    action: ParticipantAction,
    participants: &[String],
) -> Result<Vec<ParticipantResult>> {
    let jid = group(jid)?;
    let list = members(participants, true)?;
    let n = list.len();
    let taken = caps::take(ctx.core, ctx.instance, cap_participants(ctx.core), n as u32).await?;
    let op = wire::GroupParticipants { jid, action, participants: list };
    let changes = match net(ctx.core, ctx.instance, op).await {
        Ok(c) => c,
        Err(e) => {
            taken.give_back(ctx.core, n).await;
            return Err(e);
        }
    };
    // Members the network did not change do not count against the cap.
    let refused = changes.iter().filter(|c| c.status != 200).count();
    taken.give_back(ctx.core, refused).await;
    Ok(changes.into_iter().map(|c| member_result(c.jid, c.status)).collect())
}

/// The group's invite link (admins only); `reset` revokes it and makes a new one, which
/// changes the group: no API key may.
pub async fn invite_link(ctx: Ctx<'_>, jid: Jid, reset: bool) -> Result<String> {
    if reset && ctx.caller == Caller::Key {
        return Err(Error::Forbidden("an API key may read the invite link, not reset it".into()));
    }
    let jid = group(jid)?;
    Ok(net(ctx.core, ctx.instance, wire::GroupInviteLink { jid, reset }).await?.link)
}

/// A group's record by its invite link (or the link's code), without joining.
pub async fn invite_info(ctx: Ctx<'_>, link: &str) -> Result<GroupOut> {
    let code = check_invite(link)?;
    Ok(net(ctx.core, ctx.instance, wire::GroupInviteInfo { code }).await?.into())
}

/// Joins a group by its invite link, under the daily cap.
pub async fn join(ctx: Ctx<'_>, link: &str) -> Result<GroupOut> {
    let code = check_invite(link)?;
    let join = net(ctx.core, ctx.instance, wire::JoinGroup { link: code });
    Ok(caps::capped(ctx.core, ctx.instance, cap_joins(ctx.core), join).await?.into())
}

/// Leaves a group.
pub async fn leave(ctx: Ctx<'_>, jid: Jid) -> Result<()> {
    let jid = group(jid)?;
    net(ctx.core, ctx.instance, wire::LeaveGroup { jid }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invite_codes_from_links_or_codes() {
        assert_eq!(invite_code("https://chat.whatsapp.com/AbC123xyz"), Some("AbC123xyz"));
        assert_eq!(invite_code("AbC123xyz"), Some("AbC123xyz"));
        assert_eq!(invite_code("http://chat.whatsapp.com/AbC123xyz"), None);
        assert_eq!(invite_code("abc"), None);
        assert_eq!(invite_code(&"a".repeat(65)), None);
        assert_eq!(invite_code("AbC-123xyz"), None);
    }

    #[test]
    fn members_are_persons_once_each_in_order() {
        let (one, two) = (Jid::user("5511999990001"), Jid::user("5511999990002"));
        let list = ["+5511999990001".to_string(), two.as_str().into(), "+5511999990001".into()];
        let out = members(&list, true).unwrap();
        assert_eq!(out, [one, two]);
        assert!(matches!(members(&[], true), Err(Error::Invalid(_))));
        assert!(members(&[], false).unwrap().is_empty());
        let group = shared::jid::at("120363000000000001", shared::jid::GROUP_SERVER);
        assert!(matches!(members(&[group], false), Err(Error::Invalid(_))));
        let too_many: Vec<String> = (0..=PARTICIPANTS_LIMIT).map(|i| format!("+55119{i:08}")).collect();
        assert!(matches!(members(&too_many, false), Err(Error::Invalid(_))));
    }

    #[test]
    fn network_statuses_become_per_member_results() {
        let ok = member_result(Jid::user("5511999990001"), 200);
        assert_eq!((ok.ok, ok.error.is_none()), (Some(true), true));
        for (status, code) in [
            (403, ErrorCode::Forbidden),
            (404, ErrorCode::InvalidNumber),
            (408, ErrorCode::Conflict),
            (409, ErrorCode::Conflict),
            (500, ErrorCode::WorkerError),
        ] {
            let r = member_result(Jid::user("5511999990001"), status);
            let e = r.error.expect("an error");
            assert_eq!((r.ok, e.code, e.retryable), (None, code, false), "{status}");
        }
    }
}
