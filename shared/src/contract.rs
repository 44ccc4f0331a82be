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

use std::collections::BTreeMap;

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

/// What `GroupParticipants` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParticipantAction {
    Add,
    Remove,
    Promote,
    Demote,
}

/// What `ChannelAction` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelVerb {
    Follow,
    Unfollow,
    Mute,
    Unmute,
}

/// A picture's bytes, as `SetPicture` and `SetGroupPicture` carry them to a driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Picture {
    pub mime_type: String,
    /// The bytes, base64.
    pub data: String,
}

impl Picture {
    /// The longest picture the network takes (bytes).
    pub const LIMIT: usize = 5 * 1024 * 1024;

    /// A JPEG's bytes (the form WhatsApp keeps profile pictures in) as a picture.
    pub fn jpeg(bytes: &[u8]) -> Result<Picture, &'static str> {
        if bytes.len() > Self::LIMIT {
            return Err("the picture is over 5 MiB");
        }
        if !bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            return Err("the picture must be a JPEG image");
        }
        use base64::Engine;
        Ok(Picture { mime_type: "image/jpeg".into(), data: base64::engine::general_purpose::STANDARD.encode(bytes) })
    }

    pub fn bytes(&self) -> Option<Vec<u8>> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(&self.data).ok()
    }
}

/// A contact as the session knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactInfo {
    pub jid: Jid,
    /// The name the account saved for it.
    #[serde(default)]
    pub name: Option<String>,
    /// The name the contact set for itself.
    #[serde(default)]
    pub push_name: Option<String>,
    /// Null when the session does not know.
    #[serde(default)]
    pub business: Option<bool>,
}

/// Where the network serves a picture; none when there is none.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PictureUrl {
    #[serde(default)]
    pub url: Option<String>,
}

/// A contact's about text and business profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContactDetails {
    pub jid: Jid,
    #[serde(default)]
    pub about: Option<String>,
    /// Business accounts only.
    #[serde(default)]
    pub business_profile: Option<BusinessProfile>,
}

/// A business account's public profile.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BusinessProfile {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub website: Option<String>,
    #[serde(default)]
    pub address: Option<String>,
}

/// A member's role in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    #[default]
    Member,
    Admin,
    Superadmin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Member => "member",
            Role::Admin => "admin",
            Role::Superadmin => "superadmin",
        }
    }

    pub fn is_admin(self) -> bool {
        self != Role::Member
    }
}

/// A member of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub jid: Jid,
    /// The member's number, when the network shows it.
    #[serde(default)]
    pub phone: Option<String>,
    #[serde(default)]
    pub role: Role,
}

/// A group's place in a community.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CommunityPlace {
    /// The community it belongs to.
    #[serde(default)]
    pub parent: Option<Jid>,
    /// It is a community (a parent group).
    #[serde(default)]
    pub is_parent: bool,
    /// It is its community's announcement group.
    #[serde(default)]
    pub is_announcement_group: bool,
}

/// A group (or a community, which is a parent group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupInfo {
    pub jid: Jid,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The creator (a JID or a number, as the network shows it).
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// How many members it has.
    #[serde(default)]
    pub size: Option<u64>,
    /// Only admins send.
    #[serde(default)]
    pub announce: bool,
    /// Only admins edit its info.
    #[serde(default)]
    pub locked: bool,
    /// Admins approve new members.
    #[serde(default)]
    pub approval_required: bool,
    /// Disappearing messages: seconds a message lives (0: off).
    #[serde(default)]
    pub ephemeral: u32,
    #[serde(default)]
    pub community: CommunityPlace,
    #[serde(default)]
    pub participants: Vec<Member>,
    /// Joined by a link whose group approves members first: not a member yet (only
    /// `jid` is known).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending_approval: bool,
}

impl GroupInfo {
    /// A group known by its JID only (a join waiting for approval).
    pub fn pending(jid: Jid) -> GroupInfo {
        GroupInfo {
            jid,
            subject: String::new(),
            description: None,
            owner: None,
            created_at: None,
            size: None,
            announce: false,
            locked: false,
            approval_required: true,
            ephemeral: 0,
            community: CommunityPlace::default(),
            participants: Vec::new(),
            pending_approval: true,
        }
    }
}

/// One member's outcome of a participant change: the network's code (200 when done).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberChange {
    pub jid: Jid,
    pub status: u16,
}

/// A group's invite link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InviteLink {
    pub link: String,
}

/// A group of a community.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subgroup {
    pub jid: Jid,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub size: u32,
    /// The community's announcement group.
    #[serde(default)]
    pub is_announcement_group: bool,
}

/// Groups linked (or unlinked), and those the network refused with its code.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Linked {
    #[serde(default)]
    pub done: Vec<Jid>,
    #[serde(default)]
    pub failed: Vec<MemberChange>,
}

/// A channel's state on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    Active,
    Suspended,
    Geosuspended,
}

/// The account's role in a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelRole {
    Owner,
    Admin,
    Subscriber,
    Guest,
}

/// A channel as the network describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelInfo {
    pub jid: Jid,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub subscribers: Option<u64>,
    #[serde(default)]
    pub verified: bool,
    pub state: ChannelState,
    #[serde(default)]
    pub picture_url: Option<String>,
    /// The last part of the channel's link.
    #[serde(default)]
    pub invite_code: Option<String>,
    #[serde(default)]
    pub role: Option<ChannelRole>,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
}

/// A reaction's count on a channel post.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReactionCount {
    pub reaction: String,
    pub count: u64,
}

/// A channel post.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelPost {
    pub id: String,
    pub server_id: u64,
    #[serde(default)]
    pub ts: Option<DateTime<Utc>>,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub from_me: bool,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub reactions: Vec<ReactionCount>,
}

/// The account's own profile.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OwnProfile {
    #[serde(default)]
    pub push_name: Option<String>,
    #[serde(default)]
    pub about: Option<String>,
    #[serde(default)]
    pub picture_url: Option<String>,
}

/// Privacy settings, by category (e.g. `{"last": "contacts"}`).
pub type PrivacySettings = BTreeMap<String, String>;

/// A posted status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Posted {
    pub wa_message_id: String,
}

/// One number's answer to `bus::RpcRequest::CheckNumbers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumberAnswer {
    /// The number as asked (digits).
    pub number: String,
    pub exists: bool,
    /// Its account's JID, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jid: Option<Jid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jid(s: &str) -> Jid {
        Jid::parse(s).unwrap()
    }

    #[test]
    fn operations_have_a_flat_stable_wire_form() {
        let op: NetOp = GroupParticipants {
            jid: jid("1203@g.us"),
            action: ParticipantAction::Promote,
            participants: vec![jid("5511999990002")],
        }
        .into();
        let v = serde_json::to_value(&op).unwrap();
        assert_eq!(
            v,
            json!({ "op": "group_participants", "jid": "1203@g.us", "action": "promote", "participants": ["5511999990002@s.whatsapp.net"] })
        );
        assert_eq!(serde_json::from_value::<NetOp>(v).unwrap(), op);
        assert_eq!(op.name(), "group_participants");
        let op: NetOp =
            serde_json::from_value(json!({ "op": "update_group", "jid": "1203@g.us", "description": "" })).unwrap();
        assert_eq!(
            op,
            NetOp::from(UpdateGroup {
                jid: jid("1203@g.us"),
                subject: None,
                description: Some(String::new()),
                announce: None,
                locked: None
            })
        );
        let op: NetOp =
            serde_json::from_value(json!({ "op": "channel_action", "jid": "1@newsletter", "action": "unmute" }))
                .unwrap();
        assert_eq!(op, NetOp::from(ChannelAction { jid: jid("1@newsletter"), action: ChannelVerb::Unmute }));
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
        let op: NetOp = GroupInviteLink { jid: jid("1203@g.us"), reset: false }.into();
        let a = op.answer_json(json!({ "link": "https://chat.whatsapp.com/abc" })).unwrap();
        assert_eq!(a.into_value(), json!({ "link": "https://chat.whatsapp.com/abc" }));
        assert!(op.answer_json(json!(null)).is_err(), "a done answer is not an invite link");
        // "Done" is null, as workers of the release before answered.
        let op: NetOp = LeaveGroup { jid: jid("1203@g.us") }.into();
        assert_eq!(op.answer_json(json!(null)).unwrap().into_value(), json!(null));
        // A join waiting for approval is the group's JID only.
        let op: NetOp = JoinGroup { link: "AbCdEf123".into() }.into();
        let a = op.answer_json(json!({ "jid": "1203@g.us", "pending_approval": true })).unwrap().into_value();
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
