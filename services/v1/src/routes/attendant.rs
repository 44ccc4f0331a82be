//! `{inst}/attendant`: the AI attendant's configuration (contract.md "Attendant"), and
//! resuming it in a chat a human took over. The provider's key or secret is write-only:
//! sealed before it is stored, and shown only as `api_key_set` / `secret_set`. The
//! provider's address must be public unless the admin allows private ones for the
//! instance. The answering itself is the `paceline-attendant` crate, in the attendant role.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared::db::attendants;
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::jid::Jid;
use shared::sealed::Sealer;
use shared::{ApiError, ErrorCode};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::attendant::{self as config, AttendantIn, AttendantOut, AttendantPatch, Stored};
use door::extract::{InstanceAccess, Path, ValidatedJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_one, put, patch, delete)).routes(routes!(resume))
}

fn sealer(state: &AppState) -> Result<Sealer, ApiError> {
    Sealer::from_config(&state.config).ok_or_else(|| ApiError::internal("no key to seal secrets with"))
}

async fn stored(state: &AppState, id: &InstanceId) -> Result<Stored, ApiError> {
    let row = attendants::get(&state.db, id).await?.ok_or_else(|| ApiError::not_found("attendant"))?;
    Ok(Stored::open(row, id, &sealer(state)?)?)
}

async fn shown(state: &AppState, id: &InstanceId) -> Result<AttendantOut, ApiError> {
    let s = stored(state, id).await?;
    Ok(s.shown(attendants::pauses(&state.db, id).await?))
}

/// Checks a configuration, then stores it with its secret sealed. Only the admin turns
/// `allow_private_targets` on, and it holds for the provider's origin then: another
/// token keeps it only while the provider stays at that origin (a change clears it), and
/// asking to turn it on is 403. `approved`: the origin the admin allowed, if any.
async fn save(
    state: &AppState,
    id: &InstanceId,
    admin: bool,
    approved: Option<String>,
    mut c: AttendantIn,
    secret: Option<String>,
) -> Result<AttendantOut, ApiError> {
    c = c.validate()?;
    let origin = c.origin();
    if !admin {
        let kept = approved.is_some() && approved == origin;
        if c.allow_private_targets && approved.is_none() {
            return Err(ApiError::new(ErrorCode::Forbidden, "only the admin may set allow_private_targets"));
        }
        c.allow_private_targets = kept;
    }
    let private_origin = if c.allow_private_targets { origin } else { None };
    config::check_target(&c.target(), private_origin.is_some() || state.config.allow_private_targets).await?;
    let sealed = secret.map(|s| sealer(state).map(|k| k.seal(id.as_str(), s.as_bytes()))).transpose()?;
    let stored = serde_json::to_value(&c).map_err(ApiError::internal)?;
    if !attendants::put(&state.db, id, &stored, sealed.as_deref(), private_origin.as_deref()).await? {
        return Err(ApiError::instance_not_found());
    }
    shown(state, id).await
}

/// The instance's attendant; its secret shows only as set or not.
#[utoipa::path(get, path = "/v1/instances/{id}/attendant", tag = "attendant",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the attendant", body = AttendantOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no attendant set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<Json<AttendantOut>, ApiError> {
    Ok(Json(shown(&state, &id).await?))
}

/// Set the whole attendant (created or replaced).
#[utoipa::path(put, path = "/v1/instances/{id}/attendant", tag = "attendant",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = AttendantIn,
    responses(
        (status = 200, description = "the attendant as stored", body = AttendantOut),
        (status = 400, description = "`validation_failed`: a bad field, or a provider URL that is not public", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: only the admin sets `allow_private_targets`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn put(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    ValidatedJson(mut body): ValidatedJson<AttendantIn>,
) -> Result<Json<AttendantOut>, ApiError> {
    let approved = attendants::get(&state.db, &id).await?.as_ref().and_then(config::approved_origin);
    let secret = body.take_secret();
    Ok(Json(save(&state, &id, principal.is_admin(), approved, body, secret).await?))
}

/// Change part of the attendant: a JSON merge patch over what is stored.
#[utoipa::path(patch, path = "/v1/instances/{id}/attendant", tag = "attendant",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = AttendantPatch,
    responses(
        (status = 200, description = "the attendant as stored", body = AttendantOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: only the admin sets `allow_private_targets`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no attendant set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn patch(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    ValidatedJson(body): ValidatedJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<Json<AttendantOut>, ApiError> {
    let body = serde_json::Value::Object(body);
    // The patch's own shape first, so an unknown field is named as such.
    let _: AttendantPatch = shared::http::parse_json(&serde_json::to_vec(&body).map_err(ApiError::internal)?)?;
    let now = stored(&state, &id).await?;
    let (next, secret) = config::patched(&now, &body)?;
    Ok(Json(save(&state, &id, principal.is_admin(), now.private_origin.clone(), next, secret).await?))
}

/// Remove the attendant (its paused chats and reply records stay until the instance goes).
#[utoipa::path(delete, path = "/v1/instances/{id}/attendant", tag = "attendant",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no attendant set", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn delete(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
) -> Result<StatusCode, ApiError> {
    if !attendants::delete(&state.db, &id).await? {
        return Err(ApiError::not_found("attendant"));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Resume the attendant in a chat a human took over.
#[utoipa::path(post, path = "/v1/instances/{id}/attendant/chats/{jid}/resume", tag = "attendant",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = String, Path, description = "JID or phone number")),
    responses(
        (status = 204, description = "resumed: the chat's next message is answered"),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: the chat is not paused", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn resume(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<StatusCode, ApiError> {
    if !attendants::resume(&state.db, &id, ids.1.as_str()).await? {
        return Err(ApiError::not_found("paused chat"));
    }
    Ok(StatusCode::NO_CONTENT)
}
