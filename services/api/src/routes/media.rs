//! `GET /media/{media_id}?exp=&sig=`: media by signed URL (see `media_urls`). The URL is
//! the credential: no token. A bad or expired signature is 403 `forbidden`; signed URLs
//! disabled (listening beyond loopback with no `public_url`) is 409 `conflict`; media the
//! network no longer had is 410 `media_unavailable`.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shared::error::ErrorBody;
use shared::ids::MediaId;
use shared::{ApiError, ErrorCode};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(serve))
}

/// The signature of a media URL.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Signed {
    /// Expiry, Unix seconds.
    pub exp: Option<i64>,
    /// Hex HMAC-SHA256 signature.
    pub sig: Option<String>,
}

/// Media bytes by signed URL (as the chat history hands them out, valid 1 h).
#[utoipa::path(get, path = "/media/{media_id}", tag = "chats",
    params(("media_id" = MediaId, Path, description = "media id"), Signed),
    responses(
        (status = 200, description = "the bytes, with their Content-Type", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 403, description = "`forbidden`: missing, bad or expired signature", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: signed URLs are disabled (listening beyond loopback without public_url)", body = ErrorBody),
        (status = 410, description = "`media_unavailable`: the network no longer had it", body = ErrorBody),
        (status = 502, description = "`worker_error` (retryable): not downloaded yet; the worker retries the download in the background", body = ErrorBody),
    ),
    security(("signed_url" = [])))]
async fn serve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<Signed>, QueryRejection>,
) -> Result<Response, ApiError> {
    if !state.media_urls.enabled() {
        return Err(ApiError::new(ErrorCode::Conflict, "signed media URLs are disabled: set public_url"));
    }
    let forbidden = || ApiError::new(ErrorCode::Forbidden, "the media URL's signature is invalid or expired");
    // A query that does not parse (e.g. `exp=abc`) is a bad signature too.
    let Ok(Query(q)) = q else { return Err(forbidden()) };
    let (Some(exp), Some(sig)) = (q.exp, q.sig.as_deref()) else { return Err(forbidden()) };
    if !state.media_urls.verify(&id, exp, sig, chrono::Utc::now()) {
        return Err(forbidden());
    }
    use shared::db::messages::Serving;
    let (mime, filename, data) = match shared::db::messages::media_for_serving(&state.db, &id).await? {
        None => return Err(ApiError::not_found("media")),
        Some(Serving::Expired) => {
            return Err(ApiError::new(ErrorCode::MediaUnavailable, "the network no longer had this media"))
        }
        Some(Serving::Pending) => return Err(ApiError::new(
            ErrorCode::WorkerError,
            "this media is not downloaded yet: the network did not give it, and the worker retries in the background",
        )
        .with_retryable(true)),
        Some(Serving::Data { mime_type, filename, data }) => (mime_type, filename, data),
    };
    let disposition = match filename {
        Some(f) => format!("inline; filename=\"{}\"", f.replace(['"', '\\', '\r', '\n'], "_")),
        None => "inline".into(),
    };
    Ok((
        [
            (header::CONTENT_TYPE, mime),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, "private, max-age=3600".to_string()),
        ],
        data,
    )
        .into_response())
}
