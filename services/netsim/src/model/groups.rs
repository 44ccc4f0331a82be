//! Groups: members with roles, the admin-only rules (announcement mode: only admins
//! send; locked: only admins edit the info; only admins add, remove, promote or demote),
//! invite links, and messages to a group delivered once to every other member. The
//! network's limits are enforced here so the gateway's mapping of refusals is tested.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use shared::contract::{
    self as wire, Answer, CommunityOp, CommunityPlace, GroupInfo, GroupOp, Linked, Member, MemberChange, Operation,
    ParticipantAction, Role, Subgroup,
};
use shared::jid::{Jid, GROUP_SERVER};

use super::ops::{jid, number_of};
use super::*;

/// The longest subject the network takes (characters).
pub const SUBJECT_LIMIT: usize = 100;
/// The longest description (characters).
pub const DESCRIPTION_LIMIT: usize = 2048;
/// The most members a group holds.
pub const GROUP_SIZE_LIMIT: usize = 1024;

#[derive(Debug, Clone)]
pub(super) struct Group {
    pub subject: String,
    pub description: String,
    pub owner: String,
    pub created_at: DateTime<Utc>,
    pub announce: bool,
    pub locked: bool,
    /// number -> role.
    pub members: BTreeMap<String, Role>,
    pub invite: String,
    /// A community (a parent group that gathers groups).
    pub is_parent: bool,
    /// The community this group is linked to.
    pub parent: Option<String>,
    /// The community's announcement group (made with it; never unlinked).
    pub is_announcement_group: bool,
    /// Disappearing messages: seconds a message lives (0: off).
    pub ephemeral: u32,
    /// The group's picture (its size in bytes), if set.
    pub picture: Option<usize>,
}

type Refusal = (&'static str, &'static str);

fn group_id_of(j: &str) -> Result<String, Refusal> {
    match Jid::parse(j) {
        Ok(g) if g.is_group() => Ok(g.user_part().to_string()),
        _ => Err(("validation_failed", "not a group JID")),
    }
}

fn group_jid(id: &str) -> String {
    format!("{id}@{GROUP_SERVER}")
}

/// The code at the end of an invite link (or the code itself).
fn invite_code(link: &str) -> &str {
    link.trim().trim_end_matches('/').rsplit('/').next().unwrap_or_default()
}

fn new_invite() -> String {
    Alphanumeric.sample_string(&mut rand::thread_rng(), 22)
}

fn check_subject(subject: &str) -> Result<(), Refusal> {
    let n = subject.trim().chars().count();
    if n == 0 || n > SUBJECT_LIMIT {
        return Err(("validation_failed", "the subject must be 1-100 characters"));
    }
    Ok(())
}

fn group_jid_of(id: &str) -> Jid {
    Jid::parse(&group_jid(id)).expect("netsim's group ids are digits")
}

fn user(number: &str) -> Jid {
    Jid::user(number)
}

impl Group {
    /// The group as the worker contract answers it.
    fn info(&self, id: &str) -> GroupInfo {
        GroupInfo {
            jid: group_jid_of(id),
            subject: self.subject.clone(),
            description: (!self.description.is_empty()).then(|| self.description.clone()),
            owner: Some(jid(&self.owner)),
            created_at: Some(self.created_at),
            size: Some(self.members.len() as u64),
            announce: self.announce,
            locked: self.locked,
            approval_required: false,
            ephemeral: self.ephemeral,
            community: CommunityPlace {
                parent: self.parent.as_deref().map(group_jid_of),
                is_parent: self.is_parent,
                is_announcement_group: self.is_announcement_group,
            },
            participants: self
                .members
                .iter()
                .map(|(n, r)| Member { jid: user(n), phone: Some(n.clone()), role: *r })
                .collect(),
            pending_approval: false,
        }
    }
}

impl State {
    /// Tells the devices of `to` about a group change (`group.*` events of the catalog;
    /// `by` is who did it).
    fn group_event(&mut self, to: &[String], event: &'static str, mut data: Value, by: &str) {
        data["by"] = Value::String(jid(by));
        for n in to {
            self.notify_account(n, ServerEv::Event { event: event.to_string(), data: data.clone() });
        }
    }

    /// The members of group `id`.
    fn members_of(&self, id: &str) -> Vec<String> {
        self.groups.get(id).map(|g| g.members.keys().cloned().collect()).unwrap_or_default()
    }

    /// The group `j` as `me`, a member of it, sees it.
    fn member_group(&self, me: &str, j: &str) -> Result<(String, &Group), Refusal> {
        let id = group_id_of(j)?;
        let g = self.groups.get(&id).ok_or(("not_found", "no such group"))?;
        if !g.members.contains_key(me) {
            return Err(("not_found", "no such group"));
        }
        Ok((id, g))
    }

    fn require_admin(&self, me: &str, j: &str) -> Result<String, Refusal> {
        let (id, g) = self.member_group(me, j)?;
        if !g.members[me].is_admin() {
            return Err(("forbidden", "only group admins may do this"));
        }
        Ok(id)
    }

    /// The groups `me` is in, communities (`parents`) or not.
    fn groups_of(&self, me: &str, parents: bool) -> Vec<GroupInfo> {
        self.groups
            .iter()
            .filter(|(_, g)| g.is_parent == parents && g.members.contains_key(me))
            .map(|(id, g)| g.info(id))
            .collect()
    }

    /// Group operations of a linked device.
    pub(super) fn group_op(&mut self, me: &str, op: GroupOp) -> Result<Answer, Refusal> {
        match op {
            GroupOp::Groups(o) => Ok(o.answer(self.groups_of(me, false))),
            GroupOp::Group(o) => self.member_group(me, o.jid.as_str()).map(|(id, g)| o.answer(g.info(&id))),
            GroupOp::CreateGroup(o) => Ok(o.answer(self.create_group(me, &o.subject, &o.participants)?)),
            GroupOp::UpdateGroup(o) => {
                let wire::UpdateGroup { jid: j, subject, description, announce, locked } = o.clone();
                let (id, g) = self.member_group(me, j.as_str())?;
                let info = subject.is_some() || description.is_some();
                let settings = announce.is_some() || locked.is_some();
                if (settings || (info && g.locked)) && !g.members[me].is_admin() {
                    return Err(("forbidden", "only group admins may do this"));
                }
                if let Some(s) = &subject {
                    check_subject(s)?;
                }
                if description.as_ref().is_some_and(|d| d.chars().count() > DESCRIPTION_LIMIT) {
                    return Err(("validation_failed", "the description is over the network's limit"));
                }
                let (has_subject, has_description) = (subject.is_some(), description.is_some());
                let g = self.groups.get_mut(&id).expect("found above");
                if let Some(s) = subject {
                    g.subject = s.trim().to_string();
                }
                if let Some(d) = description {
                    g.description = d;
                }
                if let Some(a) = announce {
                    g.announce = a;
                }
                if let Some(l) = locked {
                    g.locked = l;
                }
                let mut data = json!({ "jid": group_jid(&id) });
                for (k, v) in [
                    ("subject", has_subject.then(|| json!(g.subject))),
                    ("description", has_description.then(|| json!(g.description))),
                    ("announce", announce.map(Value::Bool)),
                    ("locked", locked.map(Value::Bool)),
                ] {
                    if let Some(v) = v {
                        data[k] = v;
                    }
                }
                let to = self.members_of(&id);
                self.group_event(&to, "group.updated", data, me);
                Ok(o.answer(()))
            }
            GroupOp::GroupParticipants(o) => {
                Ok(o.answer(self.participants(me, o.jid.as_str(), o.action, &o.participants)?))
            }
            GroupOp::GroupInviteLink(o) => {
                let id = self.require_admin(me, o.jid.as_str())?;
                let g = self.groups.get_mut(&id).expect("found above");
                if o.reset {
                    g.invite = new_invite();
                }
                Ok(o.answer(wire::InviteLink { link: format!("https://chat.whatsapp.com/{}", g.invite) }))
            }
            GroupOp::JoinGroup(o) => {
                let code = invite_code(&o.link);
                let id = self
                    .groups
                    .iter()
                    .find(|(_, g)| !code.is_empty() && g.invite == code)
                    .map(|(id, _)| id.clone())
                    .ok_or(("not_found", "the invite link is unknown or was reset"))?;
                let g = self.groups.get_mut(&id).expect("found above");
                if !g.members.contains_key(me) {
                    if g.members.len() >= GROUP_SIZE_LIMIT {
                        return Err(("conflict", "the group is full"));
                    }
                    g.members.insert(me.to_string(), Role::Member);
                    let info = g.info(&id);
                    let others: Vec<String> = self.members_of(&id).into_iter().filter(|n| n != me).collect();
                    let data = json!({ "jid": group_jid(&id), "action": "joined", "participants": [jid(me)] });
                    self.group_event(&others, "group.participants_updated", data, me);
                    let data = json!({ "jid": group_jid(&id), "subject": info.subject });
                    self.group_event(&[me.to_string()], "group.joined", data, me);
                    return Ok(o.answer(info));
                }
                Ok(o.answer(g.info(&id)))
            }
            GroupOp::LeaveGroup(o) => {
                let (id, _) = self.member_group(me, o.jid.as_str())?;
                let g = self.groups.get_mut(&id).expect("found above");
                g.members.remove(me);
                let subject = g.subject.clone();
                // The last admin leaving hands the group to the longest-standing member.
                if !g.members.values().any(|r| r.is_admin()) {
                    if let Some(r) = g.members.values_mut().next() {
                        *r = Role::Admin;
                    }
                }
                if g.members.is_empty() {
                    self.groups.remove(&id);
                }
                let others = self.members_of(&id);
                let data = json!({ "jid": group_jid(&id), "action": "left", "participants": [jid(me)] });
                self.group_event(&others, "group.participants_updated", data, me);
                let data = json!({ "jid": group_jid(&id), "subject": subject });
                self.group_event(&[me.to_string()], "group.left", data, me);
                Ok(o.answer(()))
            }
            GroupOp::GroupInviteInfo(o) => {
                let code = invite_code(&o.code);
                let info = self
                    .groups
                    .iter()
                    .find(|(_, g)| !code.is_empty() && g.invite == code)
                    .map(|(id, g)| g.info(id))
                    .ok_or(("not_found", "the invite link is unknown or was reset"))?;
                Ok(o.answer(info))
            }
            GroupOp::GroupEphemeral(o) => {
                let id = self.require_admin(me, o.jid.as_str())?;
                self.groups.get_mut(&id).expect("found above").ephemeral = o.expiration;
                let data = json!({ "jid": group_jid(&id), "ephemeral": o.expiration });
                let members = self.members_of(&id);
                self.group_event(&members, "group.updated", data, me);
                Ok(o.answer(()))
            }
            GroupOp::SetGroupPicture(o) => {
                let id = self.require_admin(me, o.jid.as_str())?;
                let hash = match &o.picture {
                    Some(p) => {
                        let bytes = p.bytes().ok_or(("validation_failed", "the picture is not base64"))?;
                        if !bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
                            return Err(("validation_failed", "the picture must be a JPEG"));
                        }
                        Some(bytes.len())
                    }
                    None => None,
                };
                self.groups.get_mut(&id).expect("found above").picture = hash;
                Ok(o.answer(()))
            }
        }
    }

    /// Community operations of a linked device.
    pub(super) fn community_op(&mut self, me: &str, op: CommunityOp) -> Result<Answer, Refusal> {
        match op {
            CommunityOp::Communities(o) => Ok(o.answer(self.groups_of(me, true))),
            CommunityOp::CreateCommunity(o) => {
                Ok(o.answer(self.create_community(me, &o.name, o.description.clone())?))
            }
            CommunityOp::CommunityGroups(o) => {
                let (id, g) = self.member_group(me, o.jid.as_str())?;
                if !g.is_parent {
                    return Err(("not_found", "no such community"));
                }
                let list: Vec<Subgroup> = self
                    .groups
                    .iter()
                    .filter(|(_, g)| g.parent.as_deref() == Some(id.as_str()))
                    .map(|(gid, g)| Subgroup {
                        jid: group_jid_of(gid),
                        subject: g.subject.clone(),
                        size: g.members.len() as u32,
                        is_announcement_group: g.is_announcement_group,
                    })
                    .collect();
                Ok(o.answer(list))
            }
            CommunityOp::LinkGroups(o) => Ok(o.answer(self.link_groups(me, o.jid.as_str(), &o.groups, o.link)?)),
        }
    }

    /// A community and, with it, its announcement group (only admins send there).
    fn create_community(&mut self, me: &str, name: &str, description: Option<String>) -> Result<GroupInfo, Refusal> {
        check_subject(name)?;
        if description.as_ref().is_some_and(|d| d.chars().count() > DESCRIPTION_LIMIT) {
            return Err(("validation_failed", "the description is over the network's limit"));
        }
        let mut ids = Vec::new();
        for parent in [true, false] {
            self.next_group += 1;
            let id = format!("120363{:012}", self.next_group);
            let g = Group {
                subject: name.trim().to_string(),
                description: description.clone().unwrap_or_default(),
                owner: me.to_string(),
                created_at: Utc::now(),
                announce: !parent,
                locked: true,
                members: BTreeMap::from([(me.to_string(), Role::Superadmin)]),
                invite: new_invite(),
                is_parent: parent,
                parent: (!parent).then(|| ids.first().cloned()).flatten(),
                is_announcement_group: !parent,
                ephemeral: 0,
                picture: None,
            };
            self.groups.insert(id.clone(), g);
            ids.push(id);
        }
        Ok(self.groups[&ids[0]].info(&ids[0]))
    }

    /// Links groups to a community or unlinks them: admins of both only; the
    /// announcement group stays. Those done, and those refused with a status.
    fn link_groups(&mut self, me: &str, j: &str, groups: &[Jid], link: bool) -> Result<Linked, Refusal> {
        let community = self.require_admin(me, j)?;
        if !self.groups[&community].is_parent {
            return Err(("not_found", "no such community"));
        }
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        for gj in groups {
            let status = match group_id_of(gj.as_str()).ok().and_then(|id| self.groups.get(&id).map(|g| (id, g))) {
                None => 404,
                Some((_, g)) if !g.members.get(me).is_some_and(|r| r.is_admin()) => 403,
                Some((_, g)) if g.is_parent || g.is_announcement_group => 403,
                Some((_, g)) if link && g.parent.is_some() => 409,
                Some((_, g)) if !link && g.parent.as_deref() != Some(community.as_str()) => 404,
                Some((id, _)) => {
                    self.groups.get_mut(&id).expect("found above").parent = link.then(|| community.clone());
                    done.push(id);
                    continue;
                }
            };
            failed.push(MemberChange { jid: gj.clone(), status });
        }
        if !done.is_empty() {
            let action = if link { "linked" } else { "unlinked" };
            let groups: Vec<String> = done.iter().map(|g| group_jid(g)).collect();
            let data = json!({ "jid": group_jid(&community), "action": action, "groups": groups });
            self.group_event(&self.members_of(&community), "community.groups_updated", data, me);
        }
        Ok(Linked { done: done.iter().map(|g| group_jid_of(g)).collect(), failed })
    }

    fn create_group(&mut self, me: &str, subject: &str, participants: &[Jid]) -> Result<GroupInfo, Refusal> {
        check_subject(subject)?;
        if participants.len() + 1 > GROUP_SIZE_LIMIT {
            return Err(("validation_failed", "more members than a group may hold"));
        }
        let mut members = BTreeMap::from([(me.to_string(), Role::Superadmin)]);
        for p in participants {
            let n = number_of(p.as_str());
            // Numbers with no account are left out, as on the network.
            if self.phones.contains_key(n) && !self.phones[n].blocked.contains(me) {
                members.entry(n.to_string()).or_insert(Role::Member);
            }
        }
        self.next_group += 1;
        let id = format!("120363{:012}", self.next_group);
        let g = Group {
            subject: subject.trim().to_string(),
            description: String::new(),
            owner: me.to_string(),
            created_at: Utc::now(),
            announce: false,
            locked: false,
            members,
            invite: new_invite(),
            is_parent: false,
            parent: None,
            is_announcement_group: false,
            ephemeral: 0,
            picture: None,
        };
        let info = g.info(&id);
        let added: Vec<String> = g.members.keys().filter(|n| n.as_str() != me).cloned().collect();
        self.groups.insert(id.clone(), g);
        let data = json!({ "jid": group_jid(&id), "subject": info.subject });
        self.group_event(&added, "group.joined", data, me);
        Ok(info)
    }

    /// Adds, removes, promotes or demotes members (admins only): a status per member, 200
    /// when done (404: no account has the number, 409: already a member / not one, 403:
    /// the owner cannot be removed or demoted).
    fn participants(
        &mut self,
        me: &str,
        j: &str,
        action: ParticipantAction,
        participants: &[Jid],
    ) -> Result<Vec<MemberChange>, Refusal> {
        let id = self.require_admin(me, j)?;
        if participants.is_empty() || participants.len() > GROUP_SIZE_LIMIT {
            return Err(("validation_failed", "1 to 1024 participants per call"));
        }
        let mut results = Vec::with_capacity(participants.len());
        let mut done = Vec::new();
        for p in participants {
            let n = number_of(p.as_str()).to_string();
            let exists = self.phones.contains_key(&n);
            let g = self.groups.get_mut(&id).expect("found above");
            let status = match action {
                ParticipantAction::Add if !exists => 404,
                ParticipantAction::Add if g.members.contains_key(&n) => 409,
                ParticipantAction::Add if g.members.len() >= GROUP_SIZE_LIMIT => 409,
                ParticipantAction::Add => {
                    g.members.insert(n.clone(), Role::Member);
                    200
                }
                _ if !g.members.contains_key(&n) => 404,
                _ if n == g.owner => 403,
                ParticipantAction::Remove => {
                    g.members.remove(&n);
                    200
                }
                ParticipantAction::Promote => {
                    g.members.insert(n.clone(), Role::Admin);
                    200
                }
                ParticipantAction::Demote => {
                    g.members.insert(n.clone(), Role::Member);
                    200
                }
            };
            results.push(MemberChange { jid: user(&n), status });
            if status == 200 {
                done.push(n);
            }
        }
        if !done.is_empty() {
            let action = match action {
                ParticipantAction::Add => "added",
                ParticipantAction::Remove => "removed",
                ParticipantAction::Promote => "promoted",
                ParticipantAction::Demote => "demoted",
            };
            let gj = group_jid(&id);
            let subject = self.groups[&id].subject.clone();
            let members = self.members_of(&id);
            let data =
                json!({ "jid": gj, "action": action, "participants": done.iter().map(|n| jid(n)).collect::<Vec<_>>() });
            self.group_event(&members, "group.participants_updated", data, me);
            let membership = match action {
                "added" => Some("group.joined"),
                "removed" => Some("group.left"),
                _ => None,
            };
            if let Some(event) = membership {
                self.group_event(&done, event, json!({ "jid": gj, "subject": subject }), me);
            }
        }
        Ok(results)
    }

    /// The members a message from `from` to group `j` goes to (every member but the
    /// sender), or why it may not be sent.
    pub(super) fn group_recipients(&self, from: &str, j: &str) -> Result<Vec<String>, Refusal> {
        let (_, g) = self.member_group(from, j).map_err(|_| ("not_found", "not a member of this group"))?;
        if g.announce && !g.members[from].is_admin() {
            return Err(("forbidden", "only admins may send to this group"));
        }
        Ok(g.members.keys().filter(|n| n.as_str() != from).cloned().collect())
    }
}

impl super::Net {
    /// A group as netsim keeps it (the control API's view, for tests), if it exists.
    pub fn group(&self, j: &str) -> Option<Value> {
        let s = self.lock();
        let id = group_id_of(j).ok()?;
        s.groups.get(&id).map(|g| {
            let mut v = serde_json::to_value(g.info(&id)).expect("serializes");
            v["picture_size"] = json!(g.picture);
            v
        })
    }
}
