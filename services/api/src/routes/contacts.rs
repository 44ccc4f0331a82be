//! `{inst}/contacts` and `{inst}/blocklist`: asked of the running session through the
//! instance's worker (409 `instance_not_connected` when it is not running). `{jid}` is a
//! JID or a phone number with country code.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::bus::NetOp;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, Path};
use crate::rpc::net;
use crate::state::AppState;
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

/// A contact of the account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContactOut {
    pub jid: String,
    /// The name the account saved for it.
    pub name: Option<String>,
    /// The name the contact set for itself.
    pub push_name: Option<String>,
    pub business: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContactListOut {
    pub contacts: Vec<ContactOut>,
}

/// A contact's profile picture.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PictureOut {
    pub jid: String,
    /// Where the network serves it; null when the contact has none.
    pub url: Option<String>,
}

/// A contact's about text and business profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = ContactProfileOut)]
pub struct ProfileOut {
    pub jid: String,
    pub about: String,
    /// Business accounts only: `description`, `category`, `email`, `website`, `address`.
    pub business_profile: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlockOut {
    pub jid: String,
    pub blocked: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BlocklistOut {
    /// JIDs the account blocked.
    pub jids: Vec<String>,
}

/// A contact is a person: not a group or a channel.
fn person(jid: Jid) -> Result<String, ApiError> {
    if !jid.is_person() {
        return Err(ApiError::validation("the contact must be a user, not a group or channel"));
    }
    Ok(jid.into())
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
async fn list(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<ContactListOut>, ApiError> {
    let contacts = net(&state, &id, NetOp::Contacts).await?;
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
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<ContactOut>, ApiError> {
    let jid = person(ids.1)?;
    Ok(Json(net(&state, &id, NetOp::Contact { jid }).await?))
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
pub(crate) async fn picture(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<PictureOut>, ApiError> {
    let jid = person(ids.1)?;
    #[derive(Deserialize)]
    struct Pic {
        url: Option<String>,
    }
    let p: Pic = net(&state, &id, NetOp::ContactPicture { jid: jid.clone() }).await?;
    Ok(Json(PictureOut { jid, url: p.url }))
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
pub(crate) async fn profile(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<ProfileOut>, ApiError> {
    let jid = person(ids.1)?;
    Ok(Json(net(&state, &id, NetOp::ContactProfile { jid }).await?))
}

async fn set_block(state: &AppState, id: &InstanceId, jid: Jid, blocked: bool) -> Result<Json<BlockOut>, ApiError> {
    let jid = person(jid)?;
    net::<serde_json::Value>(state, id, NetOp::Block { jid: jid.clone(), blocked }).await?;
    Ok(Json(BlockOut { jid, blocked }))
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
pub(crate) async fn block(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<BlockOut>, ApiError> {
    set_block(&state, &id, ids.1, true).await
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
pub(crate) async fn unblock(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<BlockOut>, ApiError> {
    set_block(&state, &id, ids.1, false).await
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
async fn blocklist(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<BlocklistOut>, ApiError> {
    let jids = net(&state, &id, NetOp::Blocklist).await?;
    Ok(Json(BlocklistOut { jids }))
}
