//! Channels (WhatsApp's newsletters): an owner, admins and followers, posts with
//! reactions, and an invite link. The owner or an admin publishes by sending to the
//! channel's JID (a device through its queue, or the phone); each follower's devices
//! receive the post with the channel as its chat. Anyone else's post is refused
//! (`forbidden`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use shared::bus::{ChannelAction, NetOp};

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
    fn role(&self, number: &str) -> &'static str {
        if self.owner == number {
            "owner"
        } else if self.admins.contains(number) {
            "admin"
        } else if self.followers.contains(number) {
            "subscriber"
        } else {
            "guest"
        }
    }

    fn view(&self, jid: &str, me: &str) -> Value {
        json!({
            "jid": jid, "name": self.name, "description": self.description,
            "subscribers": self.followers.len(), "verified": false, "state": "active", "picture_url": null,
            "invite_code": self.invite, "role": self.role(me), "muted": self.muted.contains(me),
            "created_at": self.created_at,
        })
    }
}

/// Whether `to` is a channel's JID.
pub(super) fn is_channel(to: &str) -> bool {
    to.ends_with("@newsletter")
}

impl State {
    /// A channel operation of account `me`.
    pub(super) fn channel_op(&mut self, me: &str, op: NetOp) -> Result<Value, Refusal> {
        match op {
            NetOp::Channels => Ok(Value::Array(
                self.channels
                    .iter()
                    .filter(|(_, c)| c.followers.contains(me) || c.owner == me || c.admins.contains(me))
                    .map(|(j, c)| c.view(j, me))
                    .collect(),
            )),
            NetOp::Channel { jid } => self.channels.get(&jid).map(|c| c.view(&jid, me)).ok_or(NO_CHANNEL),
            NetOp::ChannelByInvite { code } => self
                .channels
                .iter()
                .find(|(_, c)| c.invite == code)
                .map(|(j, c)| c.view(j, me))
                .ok_or(("not_found", "no channel has this invite code")),
            NetOp::CreateChannel { name, description } => self.create_channel(me, name, description),
            NetOp::ChannelAction { jid, action } => self.channel_action(me, &jid, action),
            NetOp::ChannelMessages { jid, count, before } => {
                let Some(c) = self.channels.get(&jid) else { return Err(NO_CHANNEL) };
                let posts: Vec<Value> = c
                    .posts
                    .iter()
                    .rev()
                    .filter(|p| before.is_none_or(|b| p.server_id < b))
                    .take(count.clamp(1, PAGE_MAX) as usize)
                    .map(|p| post_view(p, me))
                    .collect();
                Ok(Value::Array(posts))
            }
            NetOp::ChannelReaction { jid, server_id, reaction } => {
                let Some(c) = self.channels.get_mut(&jid) else { return Err(NO_CHANNEL) };
                if c.role(me) == "guest" {
                    return Err(("forbidden", "follow the channel to react to its posts"));
                }
                let Some(p) = c.posts.iter_mut().find(|p| p.server_id == server_id) else {
                    return Err(("not_found", "no such post"));
                };
                if reaction.is_empty() {
                    p.reactions.remove(me);
                } else {
                    p.reactions.insert(me.to_string(), reaction);
                }
                Ok(Value::Null)
            }
            _ => Err(("not_implemented", "not a channel operation")),
        }
    }

    fn create_channel(&mut self, me: &str, name: String, description: Option<String>) -> Result<Value, Refusal> {
        if name.trim().is_empty() || name.chars().count() > 100 {
            return Err(("validation_failed", "a channel's name is 1-100 characters"));
        }
        if description.as_ref().is_some_and(|d| d.chars().count() > 2048) {
            return Err(("validation_failed", "a channel's description is at most 2,048 characters"));
        }
        let mut rng = rand::thread_rng();
        let jid = format!("1203630{:011}@newsletter", rng.gen_range(0..100_000_000_000u64));
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
        let view = channel.view(&jid, me);
        self.channels.insert(jid, channel);
        Ok(view)
    }

    fn channel_action(&mut self, me: &str, jid: &str, action: ChannelAction) -> Result<Value, Refusal> {
        let c = self.channels.get_mut(jid).ok_or(NO_CHANNEL)?;
        match action {
            ChannelAction::Follow if c.owner != me => {
                c.followers.insert(me.to_string());
            }
            ChannelAction::Unfollow if c.owner == me => {
                return Err(("validation_failed", "the owner cannot unfollow the channel"));
            }
            ChannelAction::Unfollow => {
                c.followers.remove(me);
                c.muted.remove(me);
            }
            ChannelAction::Mute | ChannelAction::Unmute if !c.followers.contains(me) => {
                return Err(("validation_failed", "only followers mute or unmute a channel"));
            }
            ChannelAction::Mute => {
                c.muted.insert(me.to_string());
            }
            ChannelAction::Unmute => {
                c.muted.remove(me);
            }
            ChannelAction::Follow => {}
        }
        Ok(Value::Null)
    }

    /// Who gets a post to channel `jid` from `from`: its followers, admins and owner, when
    /// `from` owns it or is one of its admins.
    pub(super) fn channel_recipients(&self, from: &str, jid: &str) -> Result<Vec<String>, Refusal> {
        let c = self.channels.get(jid).ok_or(NO_CHANNEL)?;
        if !matches!(c.role(from), "owner" | "admin") {
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

fn post_view(p: &Post, me: &str) -> Value {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for r in p.reactions.values() {
        *counts.entry(r.as_str()).or_default() += 1;
    }
    json!({
        "id": p.id, "server_id": p.server_id, "ts": p.ts, "type": p.kind, "from_me": p.from == me, "text": p.text,
        "reactions": counts.into_iter().map(|(reaction, count)| json!({ "reaction": reaction, "count": count })).collect::<Vec<_>>(),
    })
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
