//! The worker contract's operations on the WhatsApp network, by family: `chats` (chats
//! and contacts), `groups` (groups and communities), `channels`, `account` (labels,
//! privacy, profile, presence, picture, status). Each answers its operation's reply type
//! (`shared::contract`); the mappings from the crate's types are plain functions,
//! unit-tested below. Here the routing, the network's refusals and the JID helpers they
//! share.

use shared::contract::{
    AccountOp, Answer, ChannelOp, ChannelVerb, ChatOp, CommunityOp, ContactOp, GroupOp, LabelOp, NetOp, Operation,
    ParticipantAction,
};
use shared::ids::InstanceId;
use shared::ErrorCode;
use whatsapp_rust::request::IqError;
use whatsapp_rust::{
    Client, CommunitySubgroup, CreateCommunityOptions, GroupCreateOptions, GroupDescription, GroupError, GroupMetadata,
    GroupParticipant, GroupParticipantOptions, GroupSubject, Jid, JoinGroupResult, NewsletterError, NewsletterMessage,
    NewsletterMetadata, NewsletterRole, NewsletterState, NewsletterVerification, ParticipantChangeResponse,
    ParticipantType, PreviousDescription,
};

use super::{contacts as book, failed, jid, map};
use crate::driver::DriverError;

mod account;
mod channels;
mod chats;
mod groups;

use account::*;
use channels::*;
use chats::*;
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

fn jids(list: &[shared::jid::Jid]) -> Result<Vec<Jid>, DriverError> {
    list.iter().map(|s| jid(s.as_str())).collect()
}

/// A JID of the network as ours; none for a form ours does not take (it is left out of
/// an answer rather than failing it).
fn ours(j: &Jid) -> Option<shared::jid::Jid> {
    shared::jid::Jid::parse(&j.to_string()).ok()
}

/// A JID of the network that an answer cannot do without.
fn ours_or_fail(j: &Jid, what: &str) -> Result<shared::jid::Jid, DriverError> {
    ours(j).ok_or_else(|| failed(&format!("name the {what} in a form we take")))
}

fn ts(secs: Option<u64>) -> Option<chrono::DateTime<chrono::Utc>> {
    secs.and_then(|s| chrono::DateTime::from_timestamp(s as i64, 0))
}

/// What the session needs besides the client: the contact book lives in `wa_store`.
pub struct Book<'a> {
    pub db: &'a sqlx::PgPool,
    pub instance: &'a InstanceId,
}

/// Runs an operation of the worker contract, by family.
pub async fn run(c: &Client, book: Book<'_>, op: &NetOp) -> Result<Answer, DriverError> {
    match op {
        NetOp::Chat(op) => chats(c, op).await,
        NetOp::Contact(op) => contacts(c, book, op).await,
        NetOp::Group(op) => groups(c, op).await,
        NetOp::Community(op) => communities(c, op).await,
        NetOp::Channel(op) => channels(c, op).await,
        NetOp::Label(op) => labels(c, op).await,
        NetOp::Account(op) => account(c, op).await,
    }
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
        let v = group_info(&g).unwrap();
        assert_eq!(v.jid.as_str(), "120363000000000001@g.us");
        assert_eq!(v.subject, "Team");
        assert_eq!(v.description.as_deref(), Some("weekly"));
        assert_eq!(v.created_at.unwrap().to_rfc3339(), "2023-11-14T22:13:20+00:00");
        assert_eq!(v.owner.as_deref(), Some(shared::jid::Jid::user("5511999990001").as_str()));
        assert_eq!(v.size, Some(2), "counted when the network gives no size");
        assert!(v.announce && !v.locked);
        assert_eq!(v.community.parent.as_ref().map(|j| j.as_str()), Some("120363000000000009@g.us"));
        assert!(!v.community.is_parent);
        assert_eq!(
            v.participants[0],
            shared::contract::Member {
                jid: shared::jid::Jid::user("5511999990001"),
                phone: Some("5511999990001".into()),
                role: shared::contract::Role::Superadmin
            }
        );
        assert_eq!(v.participants[1].role, shared::contract::Role::Member);
        assert_eq!(role(&ParticipantType::Admin), shared::contract::Role::Admin);
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
        let v = channel_info(&c).unwrap();
        assert_eq!(v.jid.as_str(), "120363000000000777@newsletter");
        assert_eq!(v.subscribers, Some(12));
        assert!(v.verified);
        assert_eq!(v.state, shared::contract::ChannelState::Active);
        assert_eq!(v.role, Some(shared::contract::ChannelRole::Owner));
        assert_eq!(v.invite_code.as_deref(), Some("AbCd"));
        assert_eq!(v.created_at, None);
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
        assert_eq!(
            privacy(&settings),
            shared::contract::PrivacySettings::from([("readreceipts".into(), "none".into())])
        );
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
