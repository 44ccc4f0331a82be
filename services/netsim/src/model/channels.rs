//! Channels (WhatsApp's newsletters): an owner, admins and followers, posts with
//! reactions, and an invite link. The owner or an admin publishes by sending to the
//! channel's JID (a device through its queue, or the phone); each follower's devices
//! receive the post with the channel as its chat. Anyone else's post is refused
//! (`forbidden`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use shared::contract::{
    Answer, ChannelInfo, ChannelOp, ChannelPost, ChannelRole, ChannelState, ChannelVerb, Operation, ReactionCount,
};
use shared::jid::Jid;

use super::*;

type Refusal = (&'static str, &'static str);

/// Posts a follower's device can page through at once.
const PAGE_MAX: u32 = 100;

#[derive(Debug)]
pub(super) struct Channel {
    name: String,
    description: Option<String>,
    owner: String,
    admins: BTreeSet<String>,
    followers: BTreeSet<String>,
    muted: BTreeSet<String>,
    posts: Vec<Post>,
    invite: String,
    created_at: DateTime<Utc>,
}

#[derive(Debug)]
struct Post {
    server_id: u64,
    id: String,
    ts: DateTime<Utc>,
    from: String,
    kind: String,
    text: Option<String>,
    /// Follower's number -> their reaction.
    reactions: BTreeMap<String, String>,
}

impl Channel {
    fn role(&self, number: &str) -> ChannelRole {
        if self.owner == number {
            ChannelRole::Owner
        } else if self.admins.contains(number) {
            ChannelRole::Admin
        } else if self.followers.contains(number) {
            ChannelRole::Subscriber
        } else {
            ChannelRole::Guest
        }
    }

    fn info(&self, jid: &str, me: &str) -> ChannelInfo {
        ChannelInfo {
            jid: Jid::parse(jid).expect("netsim's channel JIDs are valid"),
            name: self.name.clone(),
            description: self.description.clone(),
            subscribers: Some(self.followers.len() as u64),
            verified: false,
            state: ChannelState::Active,
            picture_url: None,
            invite_code: Some(self.invite.clone()),
            role: Some(self.role(me)),
            created_at: Some(self.created_at),
        }
    }
}

/// Whether `to` is a channel's JID.
pub(super) fn is_channel(to: &str) -> bool {
    shared::jid::server_of(to) == shared::jid::NEWSLETTER_SERVER
}

impl State {
    /// A channel operation of account `me`.
    pub(super) fn channel_op(&mut self, me: &str, op: ChannelOp) -> Result<Answer, Refusal> {
        match op {
            ChannelOp::Channels(o) => Ok(o.answer(
                self.channels
                    .iter()
                    .filter(|(_, c)| c.followers.contains(me) || c.owner == me || c.admins.contains(me))
                    .map(|(j, c)| c.info(j, me))
                    .collect(),
            )),
            ChannelOp::Channel(o) => {
                let jid = o.jid.as_str();
                Ok(o.answer(self.channels.get(jid).map(|c| c.info(jid, me)).ok_or(NO_CHANNEL)?))
            }
            ChannelOp::ChannelByInvite(o) => {
                let found = self.channels.iter().find(|(_, c)| c.invite == o.code).map(|(j, c)| c.info(j, me));
                Ok(o.answer(found.ok_or(("not_found", "no channel has this invite code"))?))
            }
            ChannelOp::CreateChannel(o) => {
                Ok(o.answer(self.create_channel(me, o.name.clone(), o.description.clone())?))
            }
            ChannelOp::ChannelAction(o) => {
                self.channel_action(me, o.jid.as_str(), o.action)?;
                Ok(o.answer(()))
            }
            ChannelOp::ChannelMessages(o) => {
                let Some(c) = self.channels.get(o.jid.as_str()) else { return Err(NO_CHANNEL) };
                let posts: Vec<ChannelPost> = c
                    .posts
                    .iter()
                    .rev()
                    .filter(|p| o.before.is_none_or(|b| p.server_id < b))
                    .take(o.count.clamp(1, PAGE_MAX) as usize)
                    .map(|p| post_view(p, me))
                    .collect();
                Ok(o.answer(posts))
            }
            ChannelOp::ChannelReaction(o) => {
                let Some(c) = self.channels.get_mut(o.jid.as_str()) else { return Err(NO_CHANNEL) };
                if c.role(me) == ChannelRole::Guest {
                    return Err(("forbidden", "follow the channel to react to its posts"));
                }
                let Some(p) = c.posts.iter_mut().find(|p| p.server_id == o.server_id) else {
                    return Err(("not_found", "no such post"));
                };
                if o.reaction.is_empty() {
                    p.reactions.remove(me);
                } else {
                    p.reactions.insert(me.to_string(), o.reaction.clone());
                }
                Ok(o.answer(()))
            }
        }
    }

    fn create_channel(&mut self, me: &str, name: String, description: Option<String>) -> Result<ChannelInfo, Refusal> {
        if name.trim().is_empty() || name.chars().count() > 100 {
            return Err(("validation_failed", "a channel's name is 1-100 characters"));
        }
        if description.as_ref().is_some_and(|d| d.chars().count() > 2048) {
            return Err(("validation_failed", "a channel's description is at most 2,048 characters"));
        }
        let mut rng = rand::thread_rng();
        let jid = shared::jid::at(
            &format!("1203630{:011}", rng.gen_range(0..100_000_000_000u64)),
            shared::jid::NEWSLETTER_SERVER,
        );
        let channel = Channel {
            name,
            description,
            owner: me.to_string(),
            admins: BTreeSet::new(),
            followers: BTreeSet::new(),
            muted: BTreeSet::new(),
            posts: Vec::new(),
            invite: Alphanumeric.sample_string(&mut rng, 22),
            created_at: Utc::now(),
        };
        let info = channel.info(&jid, me);
        self.channels.insert(jid, channel);
        Ok(info)
    }

    fn channel_action(&mut self, me: &str, jid: &str, action: ChannelVerb) -> Result<(), Refusal> {
        let c = self.channels.get_mut(jid).ok_or(NO_CHANNEL)?;
        match action {
            ChannelVerb::Follow if c.owner != me => {
                c.followers.insert(me.to_string());
            }
            ChannelVerb::Unfollow if c.owner == me => {
                return Err(("validation_failed", "the owner cannot unfollow the channel"));
            }
            ChannelVerb::Unfollow => {
                c.followers.remove(me);
                c.muted.remove(me);
            }
            ChannelVerb::Mute | ChannelVerb::Unmute if !c.followers.contains(me) => {
                return Err(("validation_failed", "only followers mute or unmute a channel"));
            }
            ChannelVerb::Mute => {
                c.muted.insert(me.to_string());
            }
            ChannelVerb::Unmute => {
                c.muted.remove(me);
            }
            ChannelVerb::Follow => {}
        }
        Ok(())
    }

    /// Who gets a post to channel `jid` from `from`: its followers, admins and owner, when
    /// `from` owns it or is one of its admins.
    pub(super) fn channel_recipients(&self, from: &str, jid: &str) -> Result<Vec<String>, Refusal> {
        let c = self.channels.get(jid).ok_or(NO_CHANNEL)?;
        if !matches!(c.role(from), ChannelRole::Owner | ChannelRole::Admin) {
            return Err(("forbidden", "only the channel's owner or an admin may publish"));
        }
        let mut to: BTreeSet<&String> = c.followers.union(&c.admins).collect();
        to.insert(&c.owner);
        Ok(to.into_iter().filter(|n| n.as_str() != from).cloned().collect())
    }

    /// Keeps a published post (once per network id) for the channel's history.
    pub(super) fn record_post(&mut self, msg: &SimMessage) {
        let Some(c) = self.channels.get_mut(&msg.to) else { return };
        if c.posts.iter().any(|p| p.id == msg.id) {
            return;
        }
        let server_id = c.posts.last().map_or(100, |p| p.server_id + 1);
        c.posts.push(Post {
            server_id,
            id: msg.id.clone(),
            ts: msg.timestamp,
            from: msg.from.clone(),
            kind: msg.kind.clone(),
            text: msg.text.clone(),
            reactions: BTreeMap::new(),
        });
    }
}

const NO_CHANNEL: Refusal = ("not_found", "no such channel");

fn post_view(p: &Post, me: &str) -> ChannelPost {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for r in p.reactions.values() {
        *counts.entry(r.as_str()).or_default() += 1;
    }
    ChannelPost {
        id: p.id.clone(),
        server_id: p.server_id,
        ts: Some(p.ts),
        kind: p.kind.clone(),
        from_me: p.from == me,
        text: p.text.clone(),
        reactions: counts.into_iter().map(|(r, count)| ReactionCount { reaction: r.to_string(), count }).collect(),
    }
}

impl Net {
    /// The owner changes the channel's name or description on the phone: every follower's
    /// and admin's devices are told (`channel.updated`).
    pub fn update_channel(&self, jid: &str, name: Option<String>, description: Option<String>) -> Result<(), NetError> {
        let mut s = self.lock();
        let c = s.channels.get_mut(jid).ok_or(NetError::NotFound)?;
        if name.as_ref().is_some_and(|n| n.trim().is_empty() || n.chars().count() > 100)
            || description.as_ref().is_some_and(|d| d.chars().count() > 2048)
        {
            return Err(NetError::Invalid("a channel's name is 1-100 characters, its description at most 2,048"));
        }
        if let Some(n) = name {
            c.name = n;
        }
        if let Some(d) = description {
            c.description = Some(d);
        }
        let data = json!({ "jid": jid, "name": c.name, "description": c.description });
        let mut to: BTreeSet<String> = c.followers.union(&c.admins).cloned().collect();
        to.insert(c.owner.clone());
        for n in to {
            s.notify_account(&n, ServerEv::Event { event: "channel.updated".into(), data: data.clone() });
        }
        Ok(())
    }

    /// Makes `number` an admin of channel `jid` (the owner's doing on the phone).
    pub fn channel_admin(&self, jid: &str, number: &str, admin: bool) -> Result<(), NetError> {
        let mut s = self.lock();
        if !s.phones.contains_key(number) {
            return Err(NetError::NoAccount);
        }
        let c = s.channels.get_mut(jid).ok_or(NetError::NotFound)?;
        if admin {
            c.admins.insert(number.to_string());
        } else {
            c.admins.remove(number);
        }
        Ok(())
    }

    /// Every channel with its owner, admins, followers and posts (the control API).
    pub fn channels(&self) -> Value {
        let s = self.lock();
        let list: Vec<Value> = s
            .channels
            .iter()
            .map(|(j, c)| {
                json!({
                    "jid": j, "name": c.name, "owner": c.owner, "admins": c.admins, "followers": c.followers,
                    "muted": c.muted, "invite_code": c.invite,
                    "posts": c.posts.iter().map(|p| post_view(p, &c.owner)).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({ "channels": list })
    }
}
