//! `{inst}/groups`: the account's groups, asked of the running session through the
//! instance's worker (409 `instance_not_connected` when it is not running). Sending to a
//! group is the ordinary `POST {inst}/messages` with the group's JID. Creating groups,
//! changing members and joining by link carry ban risk: each is capped per instance,
//! cluster-wide (`service::caps`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::bus::{NetOp, ParticipantAction};
use shared::error::{ErrorBody, ErrorDetail};
use shared::ids::InstanceId;
use shared::jid::Jid;
use shared::{ApiError, ErrorCode};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use crate::pagination::{self, PageQuery};
use crate::rpc::net;
use crate::service::caps;
use crate::service::groups::{
    cap_create, cap_joins, cap_participants, check_subject, group, GroupOut, DESCRIPTION_LIMIT, PARTICIPANTS_LIMIT,
};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(join))
        .routes(routes!(get_one, edit))
        .routes(routes!(participants))
        .routes(routes!(invite_link))
        .routes(routes!(leave))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GroupListOut {
    pub groups: Vec<GroupOut>,
    /// Absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Body of `POST {inst}/groups`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupIn {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub subject: String,
    /// Phone numbers with country code, or JIDs of persons: up to 1,024.
    #[schema(max_items = 1024, value_type = Vec<crate::schemas::UserJidOrPhone>)]
    #[serde(default)]
    pub participants: Vec<String>,
}

/// Body of `PATCH {inst}/groups/{jid}`: absent fields stay as they are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupPatch {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub subject: Option<String>,
    /// Up to 2,048 characters; empty removes it.
    #[schema(max_length = 2048)]
    pub description: Option<String>,
    /// Only admins send.
    pub announce: Option<bool>,
    /// Only admins edit the group's info.
    pub locked: Option<bool>,
}

/// Body of `POST {inst}/groups/{jid}/participants`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ParticipantsIn {
    #[schema(value_type = String, pattern = "^(add|remove|promote|demote)$")]
    pub action: ParticipantAction,
    /// 1 to 1,024 phone numbers with country code, or JIDs of persons.
    #[schema(min_items = 1, max_items = 1024, value_type = Vec<crate::schemas::UserJidOrPhone>)]
    pub participants: Vec<String>,
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

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ParticipantsOut {
    pub results: Vec<ParticipantResult>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InviteQuery {
    /// Revoke the current link and make a new one.
    pub reset: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InviteLinkOut {
    pub link: String,
}

/// Body of `POST {inst}/groups/join`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinIn {
    /// `https://chat.whatsapp.com/<code>`, or the code.
    #[schema(min_length = 1, max_length = 256, pattern = r"^(https://chat\.whatsapp\.com/)?[A-Za-z0-9]{6,64}$")]
    pub link: String,
}

/// Persons' JIDs from numbers or JIDs, de-duplicated in order.
fn members(list: &[String], at_least_one: bool) -> Result<Vec<String>, ApiError> {
    if list.len() > PARTICIPANTS_LIMIT || (at_least_one && list.is_empty()) {
        return Err(ApiError::validation(format!("participants must name 1 to {PARTICIPANTS_LIMIT} members")));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for p in list {
        let j = Jid::parse(p).ok().filter(Jid::is_person).ok_or_else(|| {
            ApiError::validation("each participant must be a phone number with country code or a person's JID")
        })?;
        if !out.iter().any(|o| o == j.as_str()) {
            out.push(j.into());
        }
    }
    Ok(out)
}

/// The network's status for one member as our result.
fn member_result(jid: String, status: u16) -> ParticipantResult {
    let error = |code: ErrorCode, message: &str| ParticipantResult {
        jid: jid.clone(),
        ok: None,
        error: Some(ApiError::new(code, message).with_retryable(false).body().error),
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

/// The groups the account is in, by JID.
#[utoipa::path(get, path = "/v1/instances/{id}/groups", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id"), PageQuery),
    responses(
        (status = 200, description = "a page of groups", body = GroupListOut),
        (status = 400, description = "`validation_failed`: a bad limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`: the session is not running", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn list(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<GroupListOut>, ApiError> {
    pagination::limit(q.limit, 50, 200)?;
    let all: Vec<GroupOut> = net(&state, &id, NetOp::Groups).await?;
    let (groups, next_cursor) = pagination::page_by_key(all, &q, "g1", |g| &g.jid)?;
    Ok(Json(GroupListOut { groups, next_cursor }))
}

/// Create a group with the account as its owner. Numbers with no account are left out.
/// At most `group_creates_per_day` (10) a day per instance.
#[utoipa::path(post, path = "/v1/instances/{id}/groups", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = GroupIn,
    responses(
        (status = 201, description = "the group", body = GroupOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the daily cap (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn create(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<GroupIn>,
) -> Result<(StatusCode, Json<GroupOut>), ApiError> {
    let subject = check_subject(&body.subject)?;
    let participants = members(&body.participants, false)?;
    let g =
        caps::capped(&state, &id, cap_create(&state), net(&state, &id, NetOp::CreateGroup { subject, participants }))
            .await?;
    Ok((StatusCode::CREATED, Json(g)))
}

/// One group the account is in.
#[utoipa::path(get, path = "/v1/instances/{id}/groups/{jid}", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the group's JID")),
    responses(
        (status = 200, description = "the group", body = GroupOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such group", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn get_one(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<GroupOut>, ApiError> {
    let jid = group(ids.1)?;
    Ok(Json(net(&state, &id, NetOp::Group { jid }).await?))
}

/// Change a group's subject, description, announcement mode or lock. Settings, and the
/// info of a locked group, are for admins: anyone else gets 403.
#[utoipa::path(patch, path = "/v1/instances/{id}/groups/{jid}", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the group's JID")),
    request_body = GroupPatch,
    responses(
        (status = 200, description = "the group as it is now", body = GroupOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or not an admin of the group", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such group", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn edit(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedJson(p): ValidatedJson<GroupPatch>,
) -> Result<Json<GroupOut>, ApiError> {
    let jid = group(ids.1)?;
    let subject = p.subject.as_deref().map(check_subject).transpose()?;
    if p.description.as_ref().is_some_and(|d| d.chars().count() > DESCRIPTION_LIMIT) {
        return Err(ApiError::validation(format!("description must be at most {DESCRIPTION_LIMIT} characters")));
    }
    let op = NetOp::UpdateGroup {
        jid: jid.clone(),
        subject,
        description: p.description,
        announce: p.announce,
        locked: p.locked,
    };
    let () = net(&state, &id, op).await?;
    Ok(Json(net(&state, &id, NetOp::Group { jid }).await?))
}

/// Add, remove, promote or demote members (admins only), with a result per member: one
/// refused member stops none of the others. At most
/// `group_participant_changes_per_minute` (50) members a minute per instance.
#[utoipa::path(post, path = "/v1/instances/{id}/groups/{jid}/participants", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the group's JID")),
    request_body = ParticipantsIn,
    responses(
        (status = 200, description = "a result per member", body = ParticipantsOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or not an admin of the group", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such group", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the per-minute cap (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn participants(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedJson(body): ValidatedJson<ParticipantsIn>,
) -> Result<Json<ParticipantsOut>, ApiError> {
    let jid = group(ids.1)?;
    let list = members(&body.participants, true)?;
    let n = list.len();
    let taken = caps::take(&state, &id, cap_participants(&state), n as u32).await?;
    #[derive(Deserialize)]
    struct Change {
        jid: String,
        status: u16,
    }
    let op = NetOp::GroupParticipants { jid, action: body.action, participants: list };
    let changes: Vec<Change> = match net(&state, &id, op).await {
        Ok(c) => c,
        Err(e) => {
            taken.give_back(&state, n).await;
            return Err(e);
        }
    };
    // Members the network did not change do not count against the cap.
    let refused = changes.iter().filter(|c| c.status != 200).count();
    taken.give_back(&state, refused).await;
    Ok(Json(ParticipantsOut { results: changes.into_iter().map(|c| member_result(c.jid, c.status)).collect() }))
}

/// The group's invite link (admins only); `reset=true` revokes it and makes a new one.
#[utoipa::path(get, path = "/v1/instances/{id}/groups/{jid}/invite-link", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the group's JID"), InviteQuery),
    responses(
        (status = 200, description = "the link", body = InviteLinkOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, not an admin of the group, or an API key asking for a reset", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such group", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn invite_link(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedQuery(q): ValidatedQuery<InviteQuery>,
) -> Result<Json<InviteLinkOut>, ApiError> {
    // Reading the link is a read; resetting it changes the group, which no key may do.
    if q.reset == Some(true) && matches!(principal, crate::extract::Principal::Key { .. }) {
        return Err(ApiError::forbidden("an API key may read the invite link, not reset it"));
    }
    let jid = group(ids.1)?;
    Ok(Json(net(&state, &id, NetOp::GroupInviteLink { jid, reset: q.reset.unwrap_or(false) }).await?))
}

/// Join a group by its invite link. At most `group_joins_per_day` (20) a day per
/// instance.
#[utoipa::path(post, path = "/v1/instances/{id}/groups/join", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = JoinIn,
    responses(
        (status = 200, description = "the group joined", body = GroupOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: the link is unknown or was reset", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`, or `conflict`: the group is full", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the daily cap (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn join(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<JoinIn>,
) -> Result<Json<GroupOut>, ApiError> {
    let code = invite_code(body.link.trim())
        .ok_or_else(|| ApiError::validation("link must be a group invite link (https://chat.whatsapp.com/<code>)"))?;
    let join = net(&state, &id, NetOp::JoinGroup { link: code.to_string() });
    Ok(Json(caps::capped(&state, &id, cap_joins(&state), join).await?))
}

/// The code of a group invite: the code itself (6-64 letters and digits) or its link
/// `https://chat.whatsapp.com/<code>`.
pub(crate) fn invite_code(link: &str) -> Option<&str> {
    let code = link.strip_prefix("https://chat.whatsapp.com/").unwrap_or(link);
    ((6..=64).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(code)
}

/// Leave a group.
#[utoipa::path(post, path = "/v1/instances/{id}/groups/{jid}/leave", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the group's JID")),
    responses(
        (status = 204, description = "left"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such group", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn leave(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<StatusCode, ApiError> {
    let jid = group(ids.1)?;
    let () = net(&state, &id, NetOp::LeaveGroup { jid }).await?;
    Ok(StatusCode::NO_CONTENT)
}
