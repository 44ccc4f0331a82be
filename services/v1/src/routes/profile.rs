//! `{inst}/profile` and `{inst}/privacy`, the door to `domain::profile`: the account's own push
//! name and about text, and its privacy settings, asked of and changed through the running
//! session (409 `instance_not_connected` without one).

use axum::extract::State;
use axum::Json;
use domain::profile::{self as core, PrivacyOut, PrivacyPatch, ProfileOut};
use serde::Deserialize;
use shared::contract::Picture;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::message_in::MediaIn;
use door::extract::{InstanceAccess, ValidatedJson};
use door::gate::SlotHeld;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_picture, delete_picture))
        .layer(axum::middleware::from_fn(door::gate::gate))
        .layer(axum::Extension(door::gate::BodyCap(PICTURE_BODY_LIMIT)))
        .layer(axum::extract::DefaultBodyLimit::max(PICTURE_BODY_LIMIT))
        .routes(routes!(get_profile, patch_profile))
        .routes(routes!(get_privacy, patch_privacy))
        .routes(routes!(put_presence))
}

/// Body limit of `PUT {inst}/profile/picture`: a 5 MiB picture as base64, and the rest.
pub const PICTURE_BODY_LIMIT: usize = Picture::LIMIT / 3 * 4 + 64 * 1024;

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
async fn get_profile(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<ProfileOut>, ApiError> {
    Ok(Json(core::get(access.ctx(&state)).await?))
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
async fn patch_profile(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(p): ValidatedJson<ProfilePatch>,
) -> Result<Json<ProfileOut>, ApiError> {
    Ok(Json(core::change(access.ctx(&state), p.push_name, p.about).await?))
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
        (status = 408, description = "`request_timeout`: a body over 1 MB was not received within `large_body.read_timeout_ms`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 413, description = "`media_too_large`: over 5 MiB; `quota_exceeded`", body = ErrorBody),
        (status = 422, description = "`media_fetch_failed`: `url` could not be downloaded", body = ErrorBody),
        (status = 503, description = "`rate_limited`: waited too long for a large-send slot", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn put_picture(
    State(state): State<AppState>,
    access: InstanceAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ValidatedJson(body): ValidatedJson<PictureIn>,
) -> Result<Json<ProfileOut>, ApiError> {
    domain::pictures::set(&state, &access.id, body.media, held.is_some(), None).await?;
    Ok(Json(core::get(access.ctx(&state)).await?))
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
async fn delete_picture(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<ProfileOut>, ApiError> {
    Ok(Json(core::delete_picture(access.ctx(&state)).await?))
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
async fn get_privacy(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<PrivacyOut>, ApiError> {
    Ok(Json(core::privacy(access.ctx(&state)).await?))
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
async fn patch_privacy(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(patch): ValidatedJson<PrivacyPatch>,
) -> Result<Json<PrivacyOut>, ApiError> {
    Ok(Json(core::set_privacy(access.ctx(&state), patch).await?))
}

/// Body of `PUT {inst}/presence`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PresenceIn {
    /// Online (`true`) or not, for everyone.
    pub available: bool,
}

/// Set the account's presence for everyone: online or not.
#[utoipa::path(put, path = "/v1/instances/{id}/presence", tag = "profile",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = PresenceIn,
    responses(
        (status = 204, description = "set"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn put_presence(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(b): ValidatedJson<PresenceIn>,
) -> Result<axum::http::StatusCode, ApiError> {
    core::set_presence(access.ctx(&state), b.available).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
