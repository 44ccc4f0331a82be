//! The worker contract: every operation a door asks of an instance's running session,
//! grouped by family, each with its typed reply.
//!
//! - An operation is a struct (`CreateGroup`, `Channel`, ...) implementing [`Operation`],
//!   which names its reply type. The core calls `domain::net::net(core, id, op)` and gets
//!   `op`'s reply, typed; the drivers answer through [`Operation::answer`], which takes
//!   only that reply type. One shape per operation, checked by the compiler on both sides.
//! - [`NetOp`] is the family enum a driver matches on (`NetOp::Group(GroupOp::Create..)`).
//!   It is carried as it is on the bus (`bus::RpcRequest::Net`) and to netsim; its wire
//!   form is flat (`{"op": "create_group", ...}`, one tag across all families), so API
//!   pods and workers of the release before (which had a flat enum) understand each other
//!   during a rolling upgrade.
//! - Replies name JIDs as [`Jid`]; every field a worker of the release before might not
//!   send has a default, for the same reason.
//!
//! Adding an operation: its struct and reply here (one line in [`families!`]), a door's
//! core function calling it, and each driver's answer (the whatsapp driver and netsim);
//! the compiler points at every `match` that misses it.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::jid::Jid;

/// An operation on a running session, and what it answers.
pub trait Operation: Into<NetOp> {
    /// What the session answers (`()` for "done").
    type Reply: Serialize + DeserializeOwned + Send + 'static;

    /// The session's answer to this operation, ready for the bus.
    fn answer(&self, reply: Self::Reply) -> Answer {
        Answer(serde_json::to_value(reply).expect("replies serialize"))
    }
}

/// A session's answer to one operation, made only by [`Operation::answer`] (so of the
/// operation's reply type) or checked against it ([`NetOp::answer_json`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer(serde_json::Value);

impl Answer {
    /// The answer as it crosses the bus.
    pub fn into_value(self) -> serde_json::Value {
        self.0
    }
}

macro_rules! families {
    ($(
        $(#[$fm:meta])*
        $family:ident => $enum:ident {
            $( $(#[$vm:meta])* $op:ident { $($body:tt)* } -> $reply:ty; )*
        }
    )*) => {
        $(
            $(#[$fm])*
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
            #[serde(tag = "op", rename_all = "snake_case")]
            pub enum $enum {
                $( $op($op), )*
            }

            impl $enum {
                /// A reply as JSON (netsim's, over its wire) checked against the
                /// operation's reply type.
                pub fn answer_json(&self, v: serde_json::Value) -> Result<Answer, serde_json::Error> {
                    match self {
                        $( $enum::$op(o) => Ok(o.answer(serde_json::from_value::<$reply>(v)?)), )*
                    }
                }

                /// The operation's name on the wire (`create_group`), for metrics and logs.
                pub fn name(&self) -> &'static str {
                    match self {
                        $( $enum::$op(_) => snake!($op), )*
                    }
                }
            }

            $(
                $(#[$vm])*
                #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
                pub struct $op { $($body)* }

                impl Operation for $op {
                    type Reply = $reply;
                }

                impl From<$op> for NetOp {
                    fn from(o: $op) -> NetOp {
                        NetOp::$family($enum::$op(o))
                    }
                }
            )*
        )*

        /// Every operation, by family. Serialized flat: the families are not on the wire.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(untagged)]
        pub enum NetOp {
            $( $family($enum), )*
        }

        impl NetOp {
            /// A reply as JSON checked against the operation's reply type.
            pub fn answer_json(&self, v: serde_json::Value) -> Result<Answer, serde_json::Error> {
                match self {
                    $( NetOp::$family(o) => o.answer_json(v), )*
                }
            }

            /// The operation's name on the wire.
            pub fn name(&self) -> &'static str {
                match self {
                    $( NetOp::$family(o) => o.name(), )*
                }
            }
        }

        /// The wire tags are one namespace across families (the wire is flat): two
        /// operations of one name would not compile here.
        #[allow(dead_code)]
        enum AllOperations {
            $( $( $op, )* )*
        }
    };
}

/// An operation's wire name: its struct name in snake case.
macro_rules! snake {
    ($op:ident) => {{
        const NAME: &str = stringify!($op);
        const LEN: usize = snake_len(NAME);
        const BYTES: [u8; LEN] = snake_bytes::<LEN>(NAME);
        match std::str::from_utf8(&BYTES) {
            Ok(s) => s,
            Err(_) => unreachable!(),
        }
    }};
}

const fn snake_len(s: &str) -> usize {
    let b = s.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if i > 0 && b[i].is_ascii_uppercase() {
            n += 1;
        }
        n += 1;
        i += 1;
    }
    n
}

const fn snake_bytes<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let (mut i, mut j) = (0, 0);
    while i < b.len() {
        if i > 0 && b[i].is_ascii_uppercase() {
            out[j] = b'_';
            j += 1;
        }
        out[j] = b[i].to_ascii_lowercase();
        j += 1;
        i += 1;
    }
    out
}

families! {
    /// Chats and the account's own messages in them.
    Chat => ChatOp {
        /// Marks a chat read (receipts go to the senders) or unread.
        ReadChat { pub jid: Jid, pub read: bool } -> ();
        /// Archives, pins or mutes a chat (absent fields stay).
        ModifyChat {
            pub jid: Jid,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub archived: Option<bool>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub pinned: Option<bool>,
            /// Some(None) unmutes.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub muted_until: Option<Option<DateTime<Utc>>>,
        } -> ();
        /// Deletes a chat on the account.
        DeleteChat { pub jid: Jid } -> ();
        /// Shows (`composing`) or clears the account's typing indicator in a chat.
        ChatPresence { pub jid: Jid, pub composing: bool } -> ();
        /// Deletes one of the account's own messages for everyone in the chat.
        RevokeMessage { pub jid: Jid, pub wa_message_id: String } -> ();
        /// Replaces the text of one of the account's own text messages.
        EditMessage { pub jid: Jid, pub wa_message_id: String, pub text: String } -> ();
    }

    /// Contacts and the block list.
    Contact => ContactOp {
        /// The account's contacts.
        Contacts {} -> Vec<ContactInfo>;
        /// One contact, or `not_found`.
        Contact { pub jid: Jid } -> ContactInfo;
        /// A contact's profile picture.
        ContactPicture { pub jid: Jid } -> PictureUrl;
        /// A contact's about text and, for business accounts, business profile.
        ContactProfile { pub jid: Jid } -> ContactDetails;
        /// Blocks or unblocks a contact.
        Block { pub jid: Jid, pub blocked: bool } -> ();
        /// The block list.
        Blocklist {} -> Vec<Jid>;
    }

    /// Groups (a community is a parent group: its name, description, settings, link and
    /// participants use these with its JID).
    Group => GroupOp {
        /// Groups the account is in (not communities).
        Groups {} -> Vec<GroupInfo>;
        /// One group.
        Group { pub jid: Jid } -> GroupInfo;
        /// Creates a group with these members.
        CreateGroup { pub subject: String, pub participants: Vec<Jid> } -> GroupInfo;
        /// Changes what is given of a group's subject, description (empty removes it),
        /// announcement mode (only admins send) and lock (only admins edit its info).
        UpdateGroup {
            pub jid: Jid,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub subject: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub description: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub announce: Option<bool>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub locked: Option<bool>,
        } -> ();
        /// Adds, removes, promotes or demotes members: the network's status per member.
        GroupParticipants { pub jid: Jid, pub action: ParticipantAction, pub participants: Vec<Jid> } -> Vec<MemberChange>;
        /// The group's invite link (a new one when `reset`).
        GroupInviteLink { pub jid: Jid, pub reset: bool } -> InviteLink;
        /// A group's record by invite code, without joining.
        GroupInviteInfo { pub code: String } -> GroupInfo;
        /// Disappearing messages: seconds a message lives (0 turns them off). Admins only.
        GroupEphemeral { pub jid: Jid, pub expiration: u32 } -> ();
        /// Sets a group's picture (a JPEG), or removes it (none). Admins only.
        SetGroupPicture { pub jid: Jid, pub picture: Option<Picture> } -> ();
        /// Leaves a group.
        LeaveGroup { pub jid: Jid } -> ();
        /// Joins a group by its invite code: the group, or only its JID with
        /// `pending_approval` when its admins approve members first.
        JoinGroup { pub link: String } -> GroupInfo;
    }

    /// Communities (parent groups).
    Community => CommunityOp {
        /// Communities the account is in.
        Communities {} -> Vec<GroupInfo>;
        /// Creates a community (and with it its announcement group).
        CreateCommunity {
            pub name: String,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub description: Option<String>,
        } -> GroupInfo;
        /// The groups of a community.
        CommunityGroups { pub jid: Jid } -> Vec<Subgroup>;
        /// Links groups to a community, or unlinks them.
        LinkGroups { pub jid: Jid, pub groups: Vec<Jid>, pub link: bool } -> Linked;
    }

    /// Channels (newsletters).
    Channel => ChannelOp {
        /// Followed channels.
        Channels {} -> Vec<ChannelInfo>;
        /// One channel.
        Channel { pub jid: Jid } -> ChannelInfo;
        /// A channel by its invite code (the last part of its link).
        ChannelByInvite { pub code: String } -> ChannelInfo;
        /// Creates a channel the account owns.
        CreateChannel {
            pub name: String,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub description: Option<String>,
        } -> ChannelInfo;
        /// Follows, unfollows, mutes or unmutes a channel.
        ChannelAction { pub jid: Jid, pub action: ChannelVerb } -> ();
        /// Channel posts, newest first; `before` is a `server_id` to page back from.
        ChannelMessages {
            pub jid: Jid,
            pub count: u32,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub before: Option<u64>,
        } -> Vec<ChannelPost>;
        /// Reacts to a channel post (an empty reaction removes it).
        ChannelReaction { pub jid: Jid, pub server_id: u64, pub reaction: String } -> ();
    }

    /// Labels (business accounts).
    Label => LabelOp {
        /// Creates or edits a label (`label_id` chosen by the caller).
        SetLabel { pub label_id: String, pub name: String, pub color: i32 } -> ();
        /// Deletes a label.
        DeleteLabel { pub label_id: String } -> ();
        /// Labels or unlabels a chat.
        LabelChat { pub label_id: String, pub jid: Jid, pub labeled: bool } -> ();
        /// Labels or unlabels a message of a chat.
        LabelMessage { pub label_id: String, pub jid: Jid, pub wa_message_id: String, pub labeled: bool } -> ();
    }

    /// The account itself: profile, privacy, presence and status.
    Account => AccountOp {
        /// The account's own profile.
        Profile {} -> OwnProfile;
        /// The account's privacy settings.
        Privacy {} -> PrivacySettings;
        /// Sets one privacy setting: the settings after.
        SetPrivacy { pub category: String, pub value: String } -> PrivacySettings;
        /// Sets the account's about text or push name (what is given).
        SetProfile {
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub about: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub push_name: Option<String>,
        } -> ();
        /// Sets the account's profile picture (a JPEG), or removes it (none). The API
        /// asks for it with `RpcRequest::SetPicture`, which names stored media.
        SetPicture { pub picture: Option<Picture> } -> ();
        /// The account's presence for everyone: online (`available`) or not.
        SetPresence { pub available: bool } -> ();
        /// Posts a text status to these contacts.
        PostStatus {
            pub text: String,
            /// 0xAARRGGBB.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub background_argb: Option<u32>,
            pub recipients: Vec<Jid>,
        } -> Posted;
    }
}

mod replies;

pub use replies::*;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jid(s: &str) -> Jid {
        Jid::parse(s).unwrap()
    }

    fn group() -> String {
        crate::jid::at("1203", crate::jid::GROUP_SERVER)
    }

    fn channel() -> String {
        crate::jid::at("1", crate::jid::NEWSLETTER_SERVER)
    }

    #[test]
    fn operations_have_a_flat_stable_wire_form() {
        let op: NetOp = GroupParticipants {
            jid: jid(&group()),
            action: ParticipantAction::Promote,
            participants: vec![jid("5511999990002")],
        }
        .into();
        let v = serde_json::to_value(&op).unwrap();
        assert_eq!(
            v,
            json!({ "op": "group_participants", "jid": group(), "action": "promote", "participants": [Jid::user("5511999990002")] })
        );
        assert_eq!(serde_json::from_value::<NetOp>(v).unwrap(), op);
        assert_eq!(op.name(), "group_participants");
        let op: NetOp =
            serde_json::from_value(json!({ "op": "update_group", "jid": group(), "description": "" })).unwrap();
        assert_eq!(
            op,
            NetOp::from(UpdateGroup {
                jid: jid(&group()),
                subject: None,
                description: Some(String::new()),
                announce: None,
                locked: None
            })
        );
        let op: NetOp =
            serde_json::from_value(json!({ "op": "channel_action", "jid": channel(), "action": "unmute" })).unwrap();
        assert_eq!(op, NetOp::from(ChannelAction { jid: jid(&channel()), action: ChannelVerb::Unmute }));
        // Operations without fields are just their tag, as before.
        assert_eq!(serde_json::to_value(NetOp::from(Groups {})).unwrap(), json!({ "op": "groups" }));
        assert_eq!(serde_json::from_value::<NetOp>(json!({ "op": "blocklist" })).unwrap(), Blocklist {}.into());
        assert_eq!(NetOp::from(Blocklist {}).name(), "blocklist");
        // An unknown operation, or a known one with a JID that is none, is refused.
        assert!(serde_json::from_value::<NetOp>(json!({ "op": "format_disk" })).is_err());
        assert!(serde_json::from_value::<NetOp>(json!({ "op": "group", "jid": "x@nowhere" })).is_err());
    }

    #[test]
    fn replies_are_checked_against_their_operation() {
        let op: NetOp = GroupInviteLink { jid: jid(&group()), reset: false }.into();
        let a = op.answer_json(json!({ "link": "https://chat.whatsapp.com/abc" })).unwrap();
        assert_eq!(a.into_value(), json!({ "link": "https://chat.whatsapp.com/abc" }));
        assert!(op.answer_json(json!(null)).is_err(), "a done answer is not an invite link");
        // "Done" is null, as workers of the release before answered.
        let op: NetOp = LeaveGroup { jid: jid(&group()) }.into();
        assert_eq!(op.answer_json(json!(null)).unwrap().into_value(), json!(null));
        // A join waiting for approval is the group's JID only.
        let op: NetOp = JoinGroup { link: "AbCdEf123".into() }.into();
        let a = op.answer_json(json!({ "jid": group(), "pending_approval": true })).unwrap().into_value();
        let g: GroupInfo = serde_json::from_value(a).unwrap();
        assert!(g.pending_approval && g.participants.is_empty());
    }

    #[test]
    fn wire_names_are_snake_case() {
        assert_eq!(snake!(CreateGroup), "create_group");
        assert_eq!(snake!(Groups), "groups");
        assert_eq!(snake!(LabelMessage), "label_message");
    }
}
