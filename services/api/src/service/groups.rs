//! Groups as the group and community routes share them: the network's limits, the
//! record of a group, the checks of a subject and a group JID, and the per-instance caps
//! on group actions.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::jid::Jid;
use shared::ApiError;
use utoipa::ToSchema;

use crate::service::caps::Cap;
use crate::state::AppState;

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
    /// Its place in a community: `parent` (the community's JID), `is_parent`,
    /// `is_announcement_group`.
    #[serde(default)]
    pub community: Option<serde_json::Value>,
    /// Joined by a link whose group approves members first: not a member yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending_approval: bool,
}

/// Group creations (communities too) a day.
pub fn cap_create(state: &AppState) -> Cap {
    Cap {
        name: "group_create",
        limit: state.config.group_creates_per_day,
        window: Duration::from_secs(86_400),
        what: "group creations a day",
    }
}

/// Member changes a minute, counted per member.
pub fn cap_participants(state: &AppState) -> Cap {
    Cap {
        name: "group_participants",
        limit: state.config.group_participant_changes_per_minute,
        window: Duration::from_secs(60),
        what: "group member changes a minute",
    }
}

/// Joins by invite link a day.
pub fn cap_joins(state: &AppState) -> Cap {
    Cap {
        name: "group_join",
        limit: state.config.group_joins_per_day,
        window: Duration::from_secs(86_400),
        what: "joins by link a day",
    }
}

/// A subject (or community name) as the network takes it: 1-100 visible characters.
pub fn check_subject(subject: &str) -> Result<String, ApiError> {
    let s = crate::schemas::trim_ecma(subject);
    if s.is_empty() || s.chars().count() > SUBJECT_LIMIT {
        return Err(ApiError::validation(format!("subject must be 1-{SUBJECT_LIMIT} characters")));
    }
    Ok(s.to_string())
}

/// A group's (or community's) JID, refusing any other kind.
pub fn group(jid: Jid) -> Result<String, ApiError> {
    if !jid.is_group() {
        return Err(ApiError::validation("jid must be a group's JID (…@g.us)"));
    }
    Ok(jid.into())
}
