//! `{inst}/contacts` and `{inst}/blocklist`, the door to `domain::contacts`: asked of the
//! running session through the instance's worker (409 `instance_not_connected` when it is not
//! running). `{jid}` is a JID or a phone number with country code.

use axum::extract::State;
use axum::Json;
use domain::contacts::{self as core, BlockOut, ContactOut, PictureOut, ProfileOut};
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::{InstanceAccess, Path};
use door::AppState;
use shared::jid::Jid;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(get_one))
        .routes(routes!(picture))
        .routes(routes!(profile))
        .routes(routes!(block))
        .routes(routes!(unblock))
        .routes(routes!(blocklist))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContactListOut {
    pub contacts: Vec<ContactOut>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlocklistOut {
    /// JIDs the account blocked.
    pub jids: Vec<String>,
}

/// The account's contacts.
#[utoipa::path(get, path = "/v1/instances/{id}/contacts", tag = "contacts",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the contacts", body = ContactListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`: the session is not running", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<ContactListOut>, ApiError> {
    let contacts = core::list(access.ctx(&state)).await?;
    Ok(Json(ContactListOut { contacts }))
}

/// One contact.
#[utoipa::path(get, path = "/v1/instances/{id}/contacts/{jid}", tag = "contacts",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 200, description = "the contact", body = ContactOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`: no account has this number", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<ContactOut>, ApiError> {
    Ok(Json(core::get(access.ctx(&state), ids.1).await?))
}

/// A contact's profile picture.
#[utoipa::path(get, path = "/v1/instances/{id}/contacts/{jid}/picture", tag = "contacts",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 200, description = "where the picture is (null: none)", body = PictureOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn picture(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<PictureOut>, ApiError> {
    Ok(Json(core::picture(access.ctx(&state), ids.1).await?))
}

/// A contact's about text and (business accounts) business profile.
#[utoipa::path(get, path = "/v1/instances/{id}/contacts/{jid}/profile", tag = "contacts",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 200, description = "the profile", body = ProfileOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn profile(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<ProfileOut>, ApiError> {
    Ok(Json(core::profile(access.ctx(&state), ids.1).await?))
}

/// Block a contact: its messages no longer arrive.
#[utoipa::path(post, path = "/v1/instances/{id}/contacts/{jid}/block", tag = "contacts",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 200, description = "blocked", body = BlockOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn block(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<BlockOut>, ApiError> {
    Ok(Json(core::block(access.ctx(&state), ids.1, true).await?))
}

/// Unblock a contact.
#[utoipa::path(post, path = "/v1/instances/{id}/contacts/{jid}/unblock", tag = "contacts",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 200, description = "unblocked", body = BlockOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn unblock(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<BlockOut>, ApiError> {
    Ok(Json(core::block(access.ctx(&state), ids.1, false).await?))
}

/// The account's block list.
#[utoipa::path(get, path = "/v1/instances/{id}/blocklist", tag = "contacts",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "blocked JIDs", body = BlocklistOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn blocklist(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<BlocklistOut>, ApiError> {
    let jids = core::blocklist(access.ctx(&state)).await?;
    Ok(Json(BlocklistOut { jids }))
}
