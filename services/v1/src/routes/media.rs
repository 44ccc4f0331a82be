//! `GET /media/{media_id}?exp=&sig=`: media by signed URL (see `media_urls`). The URL is
//! the credential: no token. A bad or expired signature is 403 `forbidden`; signed URLs
//! disabled (listening beyond loopback with no `public_url`) is 409 `conflict`; media the
//! network no longer had is 410 `media_unavailable`.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
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

/// Media bytes by signed URL (as the chat history hands them out, valid 1 h), streamed
/// from Postgres or the bucket (one `Range` served), or a redirect to the bucket.
/// Raster images, audio, video and PDF are served `inline`, anything else as an
/// `attachment`; streamed answers always carry `X-Content-Type-Options: nosniff` and
/// `Content-Security-Policy: sandbox` (a redirect's target is the bucket's origin, not
/// ours, with the type and disposition stored on the object).
#[utoipa::path(get, path = "/media/{media_id}", tag = "chats",
    params(("media_id" = MediaId, Path, description = "media id"), Signed),
    responses(
        (status = 200, description = "the bytes, with their Content-Type", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 206, description = "the `Range` asked for (one `bytes=` range), with `Content-Range`", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 307, description = "media in object storage with `media_store.presigned_ttl_ms` set: `Location` is a presigned URL of the object, valid that long"),
        (status = 403, description = "`forbidden`: missing, bad or expired signature", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: signed URLs are disabled (listening beyond loopback without public_url)", body = ErrorBody),
        (status = 410, description = "`media_unavailable`: past its retention, or the network no longer had it", body = ErrorBody),
        (status = 416, description = "the `Range` cannot be served (several ranges, or past the end); `Content-Range: bytes */size`"),
        (status = 502, description = "`worker_error` (retryable): not downloaded yet (the worker retries the download in the background), or the media store did not answer", body = ErrorBody),
    ),
    security(("signed_url" = [])))]
async fn serve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
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
    let (mime, filename, size, object_key) = match media::meta(&state.db, &id).await? {
        None => return Err(ApiError::not_found("media")),
        Some(Meta::Expired) => {
            return Err(ApiError::new(
                ErrorCode::MediaUnavailable,
                "this media is past its retention, or the network no longer had it",
            ))
        }
        Some(Meta::Pending) => return Err(ApiError::new(
            ErrorCode::WorkerError,
            "this media is not downloaded yet: the network did not give it, and the worker retries in the background",
        )
        .with_retryable(true)),
        Some(Meta::Stored { mime_type, filename, size, object_key }) => (mime_type, filename, size, object_key),
    };
    let unreachable = |e: media::MediaError| {
        tracing::warn!(error = %e, "reading media failed");
        ApiError::new(ErrorCode::WorkerError, "the media store did not answer; try again").with_retryable(true)
    };
    // In the bucket, with redirects on: the bucket serves it, by a short-lived URL.
    // Never valid for longer than the signed URL it stands for.
    let within = std::time::Duration::from_secs((exp - chrono::Utc::now().timestamp()).max(1) as u64);
    if let Some(url) = state.media.presigned(&object_key, within).await.map_err(unreachable)? {
        return Ok((
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, url.to_string()), (header::CACHE_CONTROL, "no-store".to_string())],
        )
            .into_response());
    }
    let range = match headers.get(header::RANGE).map(|r| parse_range(r.to_str().unwrap_or_default(), size)) {
        None => None,
        Some(Some(r)) => Some(r),
        Some(None) => {
            return Ok((StatusCode::RANGE_NOT_SATISFIABLE, [(header::CONTENT_RANGE, format!("bytes */{size}"))])
                .into_response())
        }
    };
    // The bytes a piece at a time: a reader never holds more than one in memory.
    use futures::TryStreamExt;
    let pieces = state.media.read(&id, &object_key, size, range.clone()).await.map_err(unreachable)?;
    let (content_type, disposition) = media::presentation(&mime, filename.as_deref());
    let (status, length) = match &range {
        Some(r) => (StatusCode::PARTIAL_CONTENT, r.end - r.start),
        None => (StatusCode::OK, size),
    };
    let mut res = (
        status,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CONTENT_LENGTH, length.to_string()),
            (header::ACCEPT_RANGES, "bytes".to_string()),
            (header::CACHE_CONTROL, "private, max-age=3600".to_string()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
            (header::CONTENT_SECURITY_POLICY, "sandbox".to_string()),
        ],
        axum::body::Body::from_stream(pieces.map_err(std::io::Error::other)),
    )
        .into_response();
    if let Some(r) = range {
        let value = format!("bytes {}-{}/{size}", r.start, r.end - 1);
        res.headers_mut().insert(header::CONTENT_RANGE, value.parse().expect("ascii"));
    }
    Ok(res)
}

/// One `bytes=` range of a `size`-byte body (`a-b`, `a-`, `-n`), as a half-open range;
/// `None` when it cannot be served (several ranges, or past the end): 416.
fn parse_range(header: &str, size: u64) -> Option<std::ops::Range<u64>> {
    let spec = header.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = match (a.is_empty(), b.is_empty()) {
        (true, false) => {
            let n: u64 = b.parse().ok()?;
            (size.saturating_sub(n), size)
        }
        (false, _) => {
            let start: u64 = a.parse().ok()?;
            let end = if b.is_empty() { size } else { b.parse::<u64>().ok()?.saturating_add(1).min(size) };
            (start, end)
        }
        (true, true) => return None,
    };
    (start < end).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges_are_read_as_rfc_9110_says() {
        assert_eq!(parse_range("bytes=0-9", 100), Some(0..10));
        assert_eq!(parse_range("bytes=90-", 100), Some(90..100));
        assert_eq!(parse_range("bytes=-10", 100), Some(90..100));
        assert_eq!(parse_range("bytes=95-200", 100), Some(95..100));
        assert_eq!(parse_range("bytes=-500", 100), Some(0..100));
        for bad in ["bytes=100-", "bytes=0-1,5-6", "items=0-1", "bytes=-", "bytes=a-b", "bytes=5-2", "bytes=-0"] {
            assert_eq!(parse_range(bad, 100), None, "{bad}");
        }
    }
}
