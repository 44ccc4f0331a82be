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

use door::AppState;

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

/// Media bytes by signed URL (as the chat history hands them out, valid 1 h), streamed.
/// Raster images, audio, video and PDF are served `inline`, anything else as an
/// `attachment`; always with `X-Content-Type-Options: nosniff` and
/// `Content-Security-Policy: sandbox`.
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
    // Signed, so ours: an id of another form was never handed out.
    let id = MediaId::parse(&id).map_err(|_| ApiError::not_found("media"))?;
    use shared::db::media::{self, Meta};
    let (mime, filename, size) = match media::meta(&state.db, &id).await? {
        None => return Err(ApiError::not_found("media")),
        Some(Meta::Expired) => {
            return Err(ApiError::new(ErrorCode::MediaUnavailable, "the network no longer had this media"))
        }
        Some(Meta::Pending) => return Err(ApiError::new(
            ErrorCode::WorkerError,
            "this media is not downloaded yet: the network did not give it, and the worker retries in the background",
        )
        .with_retryable(true)),
        Some(Meta::Stored { mime_type, filename, size }) => (mime_type, filename, size),
    };
    // The bytes a chunk at a time: a reader never holds more than one in memory.
    use futures::TryStreamExt;
    let chunks = media::chunks(state.db.clone(), id).map_ok(bytes::Bytes::from).map_err(std::io::Error::other);
    let (content_type, disposition) = presentation(&mime, filename.as_deref());
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CONTENT_LENGTH, size.to_string()),
            (header::CACHE_CONTROL, "private, max-age=3600".to_string()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
            (header::CONTENT_SECURITY_POLICY, "sandbox".to_string()),
        ],
        axum::body::Body::from_stream(chunks),
    )
        .into_response())
}

/// How media is presented to a browser. Its type came from a sender, a remote server or
/// a client, so only types a browser shows without running anything (raster images,
/// audio, video, PDF) are served inline; everything else is an attachment. Either way
/// the answer carries `nosniff` and a `sandbox` CSP (set by the caller), so nothing
/// served here runs script on our origin.
fn presentation(mime: &str, filename: Option<&str>) -> (String, String) {
    let essence = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let printable = !essence.is_empty() && essence.bytes().all(|b| b.is_ascii_graphic());
    let content_type = if printable { essence.clone() } else { "application/octet-stream".to_string() };
    let inline = SAFE_INLINE.contains(&essence.as_str())
        || (printable && (essence.starts_with("audio/") || essence.starts_with("video/")));
    let kind = if inline { "inline" } else { "attachment" };
    let disposition = match filename {
        Some(f) => {
            let safe: String = f
                .chars()
                .map(|c| if (c.is_ascii_graphic() && !matches!(c, '"' | '\\' | ';')) || c == ' ' { c } else { '_' })
                .collect();
            format!("{kind}; filename=\"{safe}\"")
        }
        None => kind.to_string(),
    };
    (content_type, disposition)
}

/// Types served inline besides audio and video: raster images and PDF (not SVG, which
/// is a document that can carry script).
const SAFE_INLINE: [&str; 7] =
    ["image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp", "application/pdf"];

#[cfg(test)]
mod tests {
    use super::presentation;

    #[test]
    fn only_safe_types_are_inline() {
        assert_eq!(presentation("image/png", None), ("image/png".into(), "inline".into()));
        assert_eq!(presentation("IMAGE/JPEG; q=1", None).1, "inline");
        assert_eq!(presentation("audio/ogg; codecs=opus", None), ("audio/ogg".into(), "inline".into()));
        assert_eq!(presentation("video/mp4", None).1, "inline");
        assert_eq!(presentation("application/pdf", Some("a.pdf")).1, "inline; filename=\"a.pdf\"");
        for hostile in ["text/html", "image/svg+xml", "application/xhtml+xml", "text/xml", "application/javascript", ""]
        {
            assert!(presentation(hostile, None).1.starts_with("attachment"), "{hostile}");
        }
        assert_eq!(presentation("text/html\r\nX: y", None).0, "application/octet-stream");
        assert_eq!(presentation("x/y", Some("a\"b\r\n.html")).1, "attachment; filename=\"a_b__.html\"");
    }
}
