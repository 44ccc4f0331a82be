//! `{inst}/groups`: the door to `domain::groups` (the account's groups, asked of the
//! running session through the instance's worker: 409 `instance_not_connected` when it
//! is not running). Sending to a group is the ordinary `POST {inst}/messages` with the
//! group's JID. Creating groups, changing members and joining by link carry ban risk:
//! each is capped per instance, cluster-wide (`domain::caps`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::groups::{self as core, GroupChange, GroupOut, ParticipantResult};
use serde::{Deserialize, Serialize};
use shared::contract::ParticipantAction;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::jid::Jid;
use shared::ApiError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::page::{self, PageQuery};
use door::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(join))
        .routes(routes!(invite_info))
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
    /// Disappearing messages: seconds a message lives, one of 0 (off), 86400 (a day),
    /// 604800 (a week) or 7776000 (90 days).
    #[schema(schema_with = ephemeral_schema)]
    pub ephemeral: Option<u32>,
}

/// The lifetimes the network offers, and nothing else: the schema names each.
fn ephemeral_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    let choices = domain::groups::EPHEMERAL_CHOICES.iter().map(|c| serde_json::json!(c));
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .enum_values(Some(choices.chain([serde_json::Value::Null])))
        .description(Some("Disappearing messages: seconds a message lives, one of 0 (off), 86400 (a day), 604800 (a week) or 7776000 (90 days)."))
        .into()
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
async fn list(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<GroupListOut>, ApiError> {
    page::limit(q.limit, 50, 200)?;
    let all = core::list(access.ctx(&state)).await?;
    let (groups, next_cursor) = page::page_by_key(all, &q, "g1", |g| &g.jid)?;
    Ok(Json(GroupListOut { groups, next_cursor }))
}

/// Create a group with the account as its owner. Numbers with no account are left out.
/// At most `groups.creates_per_day` (10) a day per instance.
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
async fn create(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(body): ValidatedJson<GroupIn>,
) -> Result<(StatusCode, Json<GroupOut>), ApiError> {
    let g = core::create(access.ctx(&state), &body.subject, &body.participants, None).await?;
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
async fn get_one(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<GroupOut>, ApiError> {
    Ok(Json(core::get(access.ctx(&state), ids.1).await?))
}

/// Change a group's subject, description, announcement mode, lock or disappearing
/// messages. Settings, and the info of a locked group, are for admins: anyone else gets
/// 403.
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
async fn edit(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedJson(p): ValidatedJson<GroupPatch>,
) -> Result<Json<GroupOut>, ApiError> {
    let GroupPatch { subject, description, announce, locked, ephemeral } = p;
    let change = GroupChange { subject, description, announce, locked, ephemeral };
    Ok(Json(core::edit(access.ctx(&state), ids.1, change).await?))
}

/// Add, remove, promote or demote members (admins only), with a result per member: one
/// refused member stops none of the others. At most
/// `groups.participant_changes_per_minute` (50) members a minute per instance.
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
async fn participants(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedJson(body): ValidatedJson<ParticipantsIn>,
) -> Result<Json<ParticipantsOut>, ApiError> {
    let results = core::participants(access.ctx(&state), ids.1, body.action, &body.participants).await?;
    Ok(Json(ParticipantsOut { results }))
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
async fn invite_link(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedQuery(q): ValidatedQuery<InviteQuery>,
) -> Result<Json<InviteLinkOut>, ApiError> {
    // Reading the link is a read; resetting it changes the group, which no key may do.
    let link = core::invite_link(access.ctx(&state), ids.1, q.reset.unwrap_or(false)).await?;
    Ok(Json(InviteLinkOut { link }))
}

/// Join a group by its invite link. At most `groups.joins_per_day` (20) a day per
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
async fn join(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(body): ValidatedJson<JoinIn>,
) -> Result<Json<GroupOut>, ApiError> {
    Ok(Json(core::join(access.ctx(&state), &body.link).await?))
}

/// What a group invite leads to: the group's record by its invite code, without
/// joining.
#[utoipa::path(get, path = "/v1/instances/{id}/groups/invites/{code}", tag = "groups",
    params(("id" = InstanceId, Path, description = "instance id"),
        ("code" = String, Path, description = "the invite's code (the end of its `https://chat.whatsapp.com/` link)", pattern = "^[A-Za-z0-9]{6,64}$")),
    responses(
        (status = 200, description = "the group", body = GroupOut),
        (status = 400, description = "`validation_failed`: not an invite code", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no group has this invite", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn invite_info(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, String)>,
) -> Result<Json<GroupOut>, ApiError> {
    Ok(Json(core::invite_info(access.ctx(&state), &ids.1).await?))
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
async fn leave(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<StatusCode, ApiError> {
    core::leave(access.ctx(&state), ids.1).await?;
    Ok(StatusCode::NO_CONTENT)
}
