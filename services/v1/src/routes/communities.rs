//! `{inst}/communities` (interface.md 4.8), the door to `domain::communities`:
//! communities are parent groups that gather
//! groups; creating one makes its announcement group too. A community's name,
//! description, settings, invite link and members use the group routes with its JID.
//! Asked of the running session (409 `instance_not_connected` without one); creating
//! counts against the instance's group-creation cap.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::communities::{self as core, CommunityGroupOut, LinkResult};
use domain::groups::GroupOut;
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::jid::Jid;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::page::{self, PageQuery};
use door::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(get_one))
        .routes(routes!(groups, link))
        .routes(routes!(unlink))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CommunityListOut {
    pub communities: Vec<GroupOut>,
    /// Absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Body of `POST {inst}/communities`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommunityIn {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    /// Up to 2,048 characters.
    #[schema(max_length = 2048)]
    pub description: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CommunityGroupsOut {
    pub groups: Vec<CommunityGroupOut>,
}

/// Body of `POST {inst}/communities/{jid}/groups`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CommunityLinkIn)]
pub struct LinkIn {
    /// 1 to 50 groups' JIDs; the account must be an admin of each.
    #[schema(min_items = 1, max_items = 50, value_type = Vec<crate::schemas::GroupJid>)]
    pub groups: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = CommunityLinkOut)]
pub struct LinkOut {
    pub results: Vec<LinkResult>,
}

/// The communities the account is in, by JID.
#[utoipa::path(get, path = "/v1/instances/{id}/communities", tag = "communities",
    params(("id" = InstanceId, Path, description = "instance id"), PageQuery),
    responses(
        (status = 200, description = "a page of communities", body = CommunityListOut),
        (status = 400, description = "`validation_failed`: a bad limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<CommunityListOut>, ApiError> {
    page::limit(q.limit, 50, 200)?;
    let all = core::list(access.ctx(&state)).await?;
    let (communities, next_cursor) = page::page_by_key(all, &q, "c1", |g| &g.jid)?;
    Ok(Json(CommunityListOut { communities, next_cursor }))
}

/// Create a community (and its announcement group); the account owns both. Counts
/// against `groups.creates_per_day`.
#[utoipa::path(post, path = "/v1/instances/{id}/communities", tag = "communities",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = CommunityIn,
    responses(
        (status = 201, description = "the community", body = GroupOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the daily creation cap (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(body): ValidatedJson<CommunityIn>,
) -> Result<(StatusCode, Json<GroupOut>), ApiError> {
    let g = core::create(access.ctx(&state), &body.name, body.description).await?;
    Ok((StatusCode::CREATED, Json(g)))
}

/// A community's metadata (its members are the community's participants).
#[utoipa::path(get, path = "/v1/instances/{id}/communities/{jid}", tag = "communities",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the community's JID")),
    responses(
        (status = 200, description = "the community", body = GroupOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such community", body = ErrorBody),
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

/// The groups of a community, its announcement group among them.
#[utoipa::path(get, path = "/v1/instances/{id}/communities/{jid}/groups", tag = "communities",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the community's JID")),
    responses(
        (status = 200, description = "its groups", body = CommunityGroupsOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such community", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn groups(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<CommunityGroupsOut>, ApiError> {
    Ok(Json(CommunityGroupsOut { groups: core::groups(access.ctx(&state), ids.1).await? }))
}

/// Link groups to the community (admins of both), with a result per group.
#[utoipa::path(post, path = "/v1/instances/{id}/communities/{jid}/groups", tag = "communities",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::GroupJid, Path, description = "the community's JID")),
    request_body = LinkIn,
    responses(
        (status = 200, description = "a result per group", body = LinkOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: another instance's token, or not an admin of the community", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such community", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn link(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedJson(body): ValidatedJson<LinkIn>,
) -> Result<Json<LinkOut>, ApiError> {
    Ok(Json(LinkOut { results: core::link(access.ctx(&state), ids.1, &body.groups).await? }))
}

/// Unlink a group from the community (admins of both; the announcement group stays).
#[utoipa::path(delete, path = "/v1/instances/{id}/communities/{jid}/groups/{group}", tag = "communities",
    params(
        ("id" = InstanceId, Path, description = "instance id"),
        ("jid" = crate::schemas::GroupJid, Path, description = "the community's JID"),
        ("group" = crate::schemas::GroupJid, Path, description = "the group's JID"),
    ),
    responses(
        (status = 204, description = "unlinked"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an admin, or the announcement group", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such community, or the group is not in it", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn unlink(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid, Jid)>,
) -> Result<StatusCode, ApiError> {
    core::unlink(access.ctx(&state), ids.1, ids.2).await?;
    Ok(StatusCode::NO_CONTENT)
}
