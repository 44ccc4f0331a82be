//! The session operations beyond chats and contacts, on the WhatsApp network: groups,
//! communities, channels (newsletters), labels, privacy, profile and status. Each
//! `NetOp` answers the JSON its doc comment in `shared::bus` gives; the mappings from the
//! crate's types are plain functions, unit-tested below. By family: `groups` (groups and
//! communities), `channels`, `account` (labels, privacy, profile, picture, status); here
//! the routing, the network's refusals and the JID helpers they share.

use serde_json::{json, Value};
use shared::bus::{ChannelAction, NetOp, ParticipantAction};
use shared::ErrorCode;
use whatsapp_rust::request::IqError;
use whatsapp_rust::{
    Client, CommunitySubgroup, CreateCommunityOptions, GroupCreateOptions, GroupDescription, GroupError, GroupMetadata,
    GroupParticipant, GroupParticipantOptions, GroupSubject, Jid, JoinGroupResult, NewsletterError, NewsletterMessage,
    NewsletterMetadata, NewsletterRole, NewsletterState, NewsletterVerification, ParticipantChangeResponse,
    ParticipantType, PreviousDescription,
};

use super::{failed, jid, map};
use crate::driver::DriverError;

mod account;
mod channels;
mod groups;

use account::*;
use channels::*;
use groups::*;

/// The network's answer to a request it refused, as ours: its 404 is `not_found`, its
/// 401/403 `forbidden`, bad input `validation_failed`; the rest a worker error. The
/// crate's own text is never passed on (it may name numbers).
fn iq_error(e: &IqError, what: &str) -> DriverError {
    match e {
        IqError::ServerError { code: 404, .. } | IqError::ServerError { code: 406, .. } => {
            DriverError::new(ErrorCode::NotFound, format!("the network knows no such {what}"))
        }
        IqError::ServerError { code: 401 | 403, .. } => {
            DriverError::new(ErrorCode::Forbidden, format!("the network does not let this account change the {what}"))
        }
        IqError::ServerError { code: 400, .. } => {
            DriverError::new(ErrorCode::ValidationFailed, format!("the network refused the {what} request"))
        }
        IqError::NotConnected => DriverError::new(ErrorCode::InstanceNotConnected, "the session is not connected"),
        IqError::Timeout => DriverError::new(ErrorCode::WorkerTimeout, "the network did not answer in time"),
        _ => failed(&format!("handle the {what} request")),
    }
}

fn jids(list: &[String]) -> Result<Vec<Jid>, DriverError> {
    list.iter().map(|s| jid(s)).collect()
}

fn ts(secs: Option<u64>) -> Value {
    secs.and_then(|s| chrono::DateTime::from_timestamp(s as i64, 0)).map_or(Value::Null, |t| json!(t))
}

/// Runs one of the operations this module carries; `None`: not one of them.
pub async fn run(c: &Client, op: &NetOp) -> Option<Result<Value, DriverError>> {
    Some(match op {
        NetOp::Groups
        | NetOp::Group { .. }
        | NetOp::CreateGroup { .. }
        | NetOp::UpdateGroup { .. }
        | NetOp::GroupParticipants { .. }
        | NetOp::GroupInviteLink { .. }
        | NetOp::LeaveGroup { .. }
        | NetOp::GroupInviteInfo { .. }
        | NetOp::GroupEphemeral { .. }
        | NetOp::SetGroupPicture { .. }
        | NetOp::JoinGroup { .. } => groups(c, op).await,
        NetOp::Communities
        | NetOp::CreateCommunity { .. }
        | NetOp::CommunityGroups { .. }
        | NetOp::LinkGroups { .. } => communities(c, op).await,
        NetOp::Channels
        | NetOp::Channel { .. }
        | NetOp::ChannelByInvite { .. }
        | NetOp::CreateChannel { .. }
        | NetOp::ChannelAction { .. }
        | NetOp::ChannelMessages { .. }
        | NetOp::ChannelReaction { .. } => channels(c, op).await,
        NetOp::SetLabel { .. } | NetOp::DeleteLabel { .. } | NetOp::LabelChat { .. } | NetOp::LabelMessage { .. } => {
            labels(c, op).await
        }
        NetOp::Privacy
        | NetOp::SetPrivacy { .. }
        | NetOp::SetProfile { .. }
        | NetOp::SetPicture { .. }
        | NetOp::PostStatus { .. } => account(c, op).await,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pn(n: &str) -> Jid {
        shared::jid::Jid::user(n).as_str().parse().unwrap()
    }

    fn member(n: &str, t: ParticipantType) -> GroupParticipant {
        GroupParticipant {
            jid: pn(n),
            phone_number: Some(pn(n)),
            lid: None,
            username: None,
            participant_type: t,
            details: None,
        }
    }

    #[test]
    fn groups_map_with_their_members_and_community_place() {
        let g = GroupMetadata {
            id: "120363000000000001@g.us".parse().unwrap(),
            subject: "Team".into(),
            description: Some("weekly".into()),
            creation_time: Some(1_700_000_000),
            creator_pn: Some(pn("5511999990001")),
            participants: vec![
                member("5511999990001", ParticipantType::SuperAdmin),
                member("5511999990002", ParticipantType::Member),
            ],
            is_announcement: true,
            parent_group_jid: Some("120363000000000009@g.us".parse().unwrap()),
            ..Default::default()
        };
        let v = group_json(&g);
        assert_eq!(v["jid"], "120363000000000001@g.us");
        assert_eq!(v["subject"], "Team");
        assert_eq!(v["description"], "weekly");
        assert_eq!(v["created_at"], "2023-11-14T22:13:20Z");
        assert_eq!(v["owner"], shared::jid::Jid::user("5511999990001").as_str());
        assert_eq!(v["size"], 2, "counted when the network gives no size");
        assert_eq!(v["announce"], true);
        assert_eq!(v["locked"], false);
        assert_eq!(v["community"]["parent"], "120363000000000009@g.us");
        assert_eq!(v["community"]["is_parent"], false);
        assert_eq!(
            v["participants"][0],
            json!({ "jid": shared::jid::Jid::user("5511999990001").as_str(), "phone": "5511999990001", "role": "superadmin" })
        );
        assert_eq!(v["participants"][1]["role"], "member");
        assert_eq!(role(&ParticipantType::Admin), "admin");
    }

    #[test]
    fn participant_changes_carry_the_per_member_code() {
        assert_eq!(change_status(Some("200"), None), 200);
        assert_eq!(change_status(None, Some("403")), 403);
        assert_eq!(change_status(None, None), 200);
        assert_eq!(change_status(Some("409"), Some("ignored")), 409);
    }

    #[test]
    fn channels_map_with_role_and_state() {
        let c = NewsletterMetadata {
            jid: "120363000000000777@newsletter".parse().unwrap(),
            name: "News".into(),
            description: None,
            subscriber_count: 12,
            verification: NewsletterVerification::Verified,
            state: NewsletterState::Active,
            picture_url: None,
            preview_url: None,
            invite_code: Some("AbCd".into()),
            role: Some(NewsletterRole::Owner),
            creation_time: None,
        };
        let v = channel_json(&c);
        assert_eq!(v["jid"], "120363000000000777@newsletter");
        assert_eq!(v["subscribers"], 12);
        assert_eq!(v["verified"], true);
        assert_eq!(v["state"], "active");
        assert_eq!(v["role"], "owner");
        assert_eq!(v["invite_code"], "AbCd");
        assert_eq!(v["created_at"], Value::Null);
    }

    #[test]
    fn privacy_settings_are_checked_against_their_category() {
        assert!(privacy_setting("last", "contacts").is_ok());
        assert!(privacy_setting("online", "match_last_seen").is_ok());
        assert_eq!(privacy_setting("online", "contacts").unwrap_err().code, ErrorCode::ValidationFailed);
        assert_eq!(privacy_setting("favourite_colour", "all").unwrap_err().code, ErrorCode::ValidationFailed);
        assert_eq!(privacy_setting("last", "sometimes").unwrap_err().code, ErrorCode::ValidationFailed);
        use whatsapp_rust::wacore::iq::privacy::{PrivacySetting, PrivacySettingsResponse};
        let (category, value) = privacy_setting("readreceipts", "none").unwrap();
        let settings = PrivacySettingsResponse { settings: vec![PrivacySetting { category, value }] };
        assert_eq!(privacy_json(&settings), json!({ "readreceipts": "none" }));
    }

    #[test]
    fn group_and_channel_ids_take_their_server() {
        assert_eq!(group_jid("120363000000000001").unwrap().to_string(), "120363000000000001@g.us");
        assert_eq!(channel_jid("120363000000000777").unwrap().to_string(), "120363000000000777@newsletter");
        assert_eq!(group_jid("120363000000000001@g.us").unwrap().to_string(), "120363000000000001@g.us");
    }

    #[test]
    fn refusals_never_carry_the_networks_text() {
        let e = iq_error(
            &IqError::ServerError {
                code: 404,
                text: "5511999990001 not found".into(),
                error_type: None,
                backoff: None,
            },
            "group",
        );
        assert_eq!(e.code, ErrorCode::NotFound);
        assert!(!e.detail.contains("5511"), "{}", e.detail);
        let e =
            iq_error(&IqError::ServerError { code: 403, text: "x".into(), error_type: None, backoff: None }, "group");
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert_eq!(iq_error(&IqError::Timeout, "group").code, ErrorCode::WorkerTimeout);
    }
}
