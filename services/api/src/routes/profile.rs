//! `{inst}/profile` and `{inst}/privacy`: the account's own push name and about text, and
//! its privacy settings, asked of and changed through the running session (409
//! `instance_not_connected` without one).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::bus::{NetOp, Picture, RpcRequest};
use shared::db::media;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::message::MessageType;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{InstanceAccess, ValidatedJson};
use crate::message_in::{media_source, MediaIn, MediaSource};
use crate::rpc::net;
use crate::semaphore::SlotHeld;
use crate::service::messages::store_media;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_picture, delete_picture))
        .layer(axum::middleware::from_fn(crate::semaphore::gate))
        .layer(axum::Extension(crate::semaphore::BodyCap(PICTURE_BODY_LIMIT)))
        .layer(axum::extract::DefaultBodyLimit::max(PICTURE_BODY_LIMIT))
        .routes(routes!(get_profile, patch_profile))
        .routes(routes!(get_privacy, patch_privacy))
}

/// Body limit of `PUT {inst}/profile/picture`: a 5 MiB picture as base64, and the rest.
pub const PICTURE_BODY_LIMIT: usize = Picture::LIMIT / 3 * 4 + 64 * 1024;

/// The longest push name the network takes (characters).
pub const PUSH_NAME_LIMIT: usize = 25;
/// The longest about text (characters).
pub const ABOUT_LIMIT: usize = 139;

/// The account's own profile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ProfileOut {
    /// The name others see when the account is not in their contacts.
    pub push_name: Option<String>,
    /// The about text; null when the network did not say.
    pub about: Option<String>,
    /// Where the network serves its picture; null when it has none.
    pub picture_url: Option<String>,
}

/// Body of `PATCH {inst}/profile`: absent fields stay as they are.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfilePatch {
    /// 1-25 characters.
    #[schema(min_length = 1, max_length = 25, pattern = r"\S")]
    pub push_name: Option<String>,
    /// Up to 139 characters; empty clears it.
    #[schema(max_length = 139)]
    pub about: Option<String>,
}

/// Body of `PUT {inst}/profile/picture`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PictureIn {
    /// A JPEG of at most 5 MiB (WhatsApp shows it cropped square; 640x640 is what the
    /// phone sends): `data` (base64, with `mime_type` `image/jpeg`) or `url` (fetched
    /// through the SSRF guard).
    #[schema(value_type = PictureSource)]
    pub media: MediaIn,
}

/// Where a picture comes from: exactly one of its bytes and a URL. (The schema of
/// `PictureIn.media`; the route reads it as `MediaIn`.)
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum PictureSource {
    Data(PictureData),
    Url(PictureUrl),
}

/// A JPEG's bytes, base64 (a JPEG starts with FF D8 FF, `/9j/` in base64).
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PictureData {
    #[schema(
        max_length = 6_990_508,
        pattern = "^/9j/([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
    )]
    data: String,
    #[schema(pattern = "^image/jpeg$")]
    mime_type: String,
}

/// A JPEG to fetch: http or https, never a private, loopback or link-local address.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PictureUrl {
    #[schema(format = "uri", pattern = "^https?://[^/?#\\s]+")]
    url: String,
}

/// The privacy settings, by category: `last`, `online`, `profile`, `status`, `groupadd`,
/// `readreceipts`, `calladd`, `messages`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({ "last": "contacts", "online": "all", "readreceipts": "all" }))]
pub struct PrivacyOut(pub BTreeMap<String, String>);

/// Body of `PATCH {inst}/privacy`: the categories to change; absent ones stay as they
/// are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrivacyPatch {
    /// Who sees when the account was last seen.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub last: Option<String>,
    /// Who sees when it is online.
    #[schema(pattern = "^(all|match_last_seen)$")]
    pub online: Option<String>,
    /// Who sees its profile picture.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub profile: Option<String>,
    /// Who sees its statuses.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub status: Option<String>,
    /// Who may add it to groups.
    #[schema(pattern = "^(all|contacts|contact_blacklist|none)$")]
    pub groupadd: Option<String>,
    /// Whether it sends read receipts.
    #[schema(pattern = "^(all|none)$")]
    pub readreceipts: Option<String>,
    /// Who may call it.
    #[schema(pattern = "^(all|known)$")]
    pub calladd: Option<String>,
    /// Who may message it.
    #[schema(pattern = "^(all|contacts)$")]
    pub messages: Option<String>,
}

impl PrivacyPatch {
    fn changes(self) -> Vec<(&'static str, String)> {
        [
            ("last", self.last),
            ("online", self.online),
            ("profile", self.profile),
            ("status", self.status),
            ("groupadd", self.groupadd),
            ("readreceipts", self.readreceipts),
            ("calladd", self.calladd),
            ("messages", self.messages),
        ]
        .into_iter()
        .filter_map(|(c, v)| v.map(|v| (c, v)))
        .collect()
    }
}

/// The account's push name, about text and picture.
#[utoipa::path(get, path = "/v1/instances/{id}/profile", tag = "profile",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the profile", body = ProfileOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`: the session is not running", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_profile(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<ProfileOut>, ApiError> {
    Ok(Json(net(&state, &id, NetOp::Profile).await?))
}

/// Change the push name or about text; answers the profile as it is now.
#[utoipa::path(patch, path = "/v1/instances/{id}/profile", tag = "profile",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = ProfilePatch,
    responses(
        (status = 200, description = "the profile", body = ProfileOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn patch_profile(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(p): ValidatedJson<ProfilePatch>,
) -> Result<Json<ProfileOut>, ApiError> {
    let push_name = p.push_name.map(|n| crate::schemas::trim_ecma(&n).to_string());
    if push_name.as_ref().is_some_and(|n| n.is_empty() || n.chars().count() > PUSH_NAME_LIMIT) {
        return Err(ApiError::validation(format!("push_name must be 1-{PUSH_NAME_LIMIT} characters")));
    }
    if p.about.as_ref().is_some_and(|a| a.chars().count() > ABOUT_LIMIT) {
        return Err(ApiError::validation(format!("about must be at most {ABOUT_LIMIT} characters")));
    }
    if push_name.is_some() || p.about.is_some() {
        let () = net(&state, &id, NetOp::SetProfile { about: p.about, push_name }).await?;
    }
    Ok(Json(net(&state, &id, NetOp::Profile).await?))
}

/// Set the account's profile picture; answers the profile as it is now. The picture is
/// stored only for the change and deleted after it.
#[utoipa::path(put, path = "/v1/instances/{id}/profile/picture", tag = "profile",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = PictureIn,
    responses(
        (status = 200, description = "the profile", body = ProfileOut),
        (status = 400, description = "`validation_failed`: not a JPEG, both or neither of `url` and `data`, a private `url`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 408, description = "`request_timeout`: a body over 1 MB was not received within `large_body_read_timeout_ms`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 413, description = "`media_too_large`: over 5 MiB; `quota_exceeded`", body = ErrorBody),
        (status = 422, description = "`media_fetch_failed`: `url` could not be downloaded", body = ErrorBody),
        (status = 503, description = "`rate_limited`: waited too long for a large-send slot", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn put_picture(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ValidatedJson(body): ValidatedJson<PictureIn>,
) -> Result<Json<ProfileOut>, ApiError> {
    set_picture(&state, &id, body.media, held.is_some(), None).await?;
    Ok(Json(net(&state, &id, NetOp::Profile).await?))
}

/// Sets the account's picture (`group` None) or a group's, from a JPEG's bytes or URL:
/// checked, stored, handed to the worker by id (never on the bus), then deleted.
/// Shared with Evolution's `updateGroupPicture`.
pub(crate) async fn set_picture(
    state: &AppState,
    id: &InstanceId,
    media: MediaIn,
    holds_slot: bool,
    group: Option<String>,
) -> Result<(), ApiError> {
    if media.mime_type.as_deref().is_some_and(|m| m != "image/jpeg") {
        return Err(ApiError::validation("the picture must be a JPEG image (media.mime_type image/jpeg)"));
    }
    let src = media_source(media, MessageType::Image)?;
    if let MediaSource::Bytes { data, .. } = &src {
        check_picture(data)?;
    }
    // Nothing is fetched or stored for a session (or group) that could not take it.
    match &group {
        None => {
            let _: ProfileOut = net(state, id, NetOp::Profile).await?;
        }
        Some(jid) => {
            let _: serde_json::Value = net(state, id, NetOp::Group { jid: jid.clone() }).await?;
        }
    }
    let (media_id, desc) = store_media(state, id, MessageType::Image, src, holds_slot).await?;
    // A downloaded picture is checked like given bytes: its size, then that it is a JPEG.
    let checked = match desc["size"].as_u64() {
        Some(n) if n > Picture::LIMIT as u64 => {
            Err(ApiError::new(shared::ErrorCode::MediaTooLarge, "the picture is over 5 MiB"))
        }
        _ => match media::chunk(&state.db, &media_id, 0).await {
            Ok(first) => check_picture(first.as_deref().unwrap_or_default().get(..3).unwrap_or_default()),
            Err(e) => Err(e.into()),
        },
    };
    if let Err(e) = checked {
        let _ = media::delete(&state.db, id, &media_id).await;
        return Err(e);
    }
    let set = crate::rpc::call(state, id, RpcRequest::SetPicture { media_id: Some(media_id.clone()), group }).await;
    let _ = media::delete(&state.db, id, &media_id).await;
    set.map(drop)
}

fn check_picture(data: &[u8]) -> Result<(), ApiError> {
    match Picture::jpeg(data) {
        Err(why) if data.len() > Picture::LIMIT => Err(ApiError::new(shared::ErrorCode::MediaTooLarge, why)),
        Err(why) => Err(ApiError::validation(why)),
        Ok(_) => Ok(()),
    }
}

/// Remove the account's profile picture; answers the profile as it is now.
#[utoipa::path(delete, path = "/v1/instances/{id}/profile/picture", tag = "profile",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the profile", body = ProfileOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn delete_picture(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<ProfileOut>, ApiError> {
    crate::rpc::call(&state, &id, RpcRequest::SetPicture { media_id: None, group: None }).await?;
    Ok(Json(net(&state, &id, NetOp::Profile).await?))
}

/// The account's privacy settings.
#[utoipa::path(get, path = "/v1/instances/{id}/privacy", tag = "profile",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the settings", body = PrivacyOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn get_privacy(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<PrivacyOut>, ApiError> {
    Ok(Json(PrivacyOut(net(&state, &id, NetOp::Privacy).await?)))
}

/// Change privacy settings, each checked against its category before any is sent (a
/// bad one changes nothing); answers the settings as they are now.
#[utoipa::path(patch, path = "/v1/instances/{id}/privacy", tag = "profile",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = PrivacyPatch,
    responses(
        (status = 200, description = "the settings", body = PrivacyOut),
        (status = 400, description = "`validation_failed`: an unknown category, or a value that does not fit it", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
pub(crate) async fn patch_privacy(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    ValidatedJson(patch): ValidatedJson<PrivacyPatch>,
) -> Result<Json<PrivacyOut>, ApiError> {
    let changes = patch.changes();
    for (category, value) in &changes {
        shared::privacy::check(category, value).map_err(|e| ApiError::validation(e.to_string()))?;
    }
    if changes.is_empty() {
        return Ok(Json(PrivacyOut(net(&state, &id, NetOp::Privacy).await?)));
    }
    let mut now = BTreeMap::new();
    for (category, value) in changes {
        now = net(&state, &id, NetOp::SetPrivacy { category: category.to_string(), value }).await?;
    }
    Ok(Json(PrivacyOut(now)))
}
