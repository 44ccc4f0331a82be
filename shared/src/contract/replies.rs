//! The worker contract's reply types (and the enums its operations take): what a session
//! answers, with JIDs as `Jid` and defaults for fields a neighbouring release might not
//! send.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::jid::Jid;

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
