//! Reading media: a piece at a time (or a range of it) from Postgres's chunks or the
//! bucket, whole for small media, as base64 inside a JSON text,
//! and how a browser is shown it.

use std::ops::Range;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sqlx::PgExecutor;

use super::{MediaError, Meta, Store, StoredRow, CHUNK, STORED_COLUMNS};
use crate::ids::{InstanceId, MediaId};

/// Chunk `seq` of Postgres-held media `id`, if there is one.
async fn chunk(db: impl PgExecutor<'_>, id: &MediaId, seq: i32) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar("SELECT data FROM media_chunks WHERE media_id = $1 AND seq = $2")
        .bind(id)
        .bind(seq)
        .fetch_optional(db)
        .await
}

/// Bytes of stored media, a piece at a time.
pub type Pieces = BoxStream<'static, Result<Bytes, MediaError>>;

impl Store {
    /// The bytes of stored media `id` (whose [`Meta::Stored`] gave `object_key` and
    /// `size`): all of them, or `range`, in order, a piece at a time: a reader never holds
    /// more than one chunk (or one ranged read of the bucket) of them.
    pub async fn read(
        &self,
        id: &MediaId,
        object_key: &Option<String>,
        size: u64,
        range: Option<Range<u64>>,
    ) -> Result<Pieces, MediaError> {
        if let Some((objects, key)) = self.holding(object_key)? {
            let range = range.unwrap_or(0..size);
            return Ok(objects.read(key, range.start.min(size)..range.end.min(size)).map_err(MediaError::from).boxed());
        }
        let (start, end) = range.map_or((0, size), |r| (r.start, r.end.min(size)));
        let first = (start / CHUNK as u64) as i32;
        let (db, id) = (self.db.clone(), id.clone());
        let pieces = futures::stream::try_unfold(first, move |seq| {
            let (db, id) = (db.clone(), id.clone());
            async move {
                let at = seq as u64 * CHUNK as u64;
                if at >= end {
                    return Ok::<_, MediaError>(None);
                }
                // A chunk missing before the end: the bytes went while being read (moved
                // to the bucket, expired), never a shorter file.
                let Some(c) = chunk(&db, &id, seq).await? else { return Err(MediaError::Gone) };
                let from = start.saturating_sub(at).min(c.len() as u64) as usize;
                let to = (end - at).min(c.len() as u64) as usize;
                Ok(Some((Bytes::from(c).slice(from..to), seq + 1)))
            }
        });
        Ok(pieces.boxed())
    }

    /// The first `n` bytes (or fewer) of stored media `id`.
    pub async fn head(&self, id: &MediaId, n: u64) -> Result<Vec<u8>, MediaError> {
        let Some(Meta::Stored { object_key, size, .. }) = super::meta(&self.db, id).await? else {
            return Ok(Vec::new());
        };
        if n.min(size) == 0 {
            return Ok(Vec::new());
        }
        let mut pieces = self.read(id, &object_key, size, Some(0..n.min(size))).await?;
        let mut out = Vec::new();
        while let Some(p) = pieces.try_next().await? {
            out.extend_from_slice(&p);
        }
        Ok(out)
    }

    /// A presigned URL of media `id`'s object valid at most `within`, when it is in the
    /// bucket and redirects are configured.
    pub async fn presigned(
        &self,
        object_key: &Option<String>,
        within: std::time::Duration,
    ) -> Result<Option<url::Url>, MediaError> {
        match self.holding(object_key)? {
            Some((objects, key)) => Ok(objects.presigned(key, within).await?),
            None => Ok(None),
        }
    }
}

/// Stored media with all its bytes (small media only: see [`Store::get`]).
#[derive(Debug, Clone)]
pub struct MediaRow {
    pub id: MediaId,
    pub instance_id: InstanceId,
    pub mime_type: String,
    pub filename: Option<String>,
    pub size: i64,
    pub sha256: String,
    pub data: Vec<u8>,
}

/// Stored media whose bytes are read when needed, a piece at a time, as often as needed
/// (the worker's upload to the network reads them twice: once for the hashes its request
/// names, once for the body). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Readable {
    store: Store,
    row: StoredRow,
}

impl Readable {
    pub fn row(&self) -> &StoredRow {
        &self.row
    }

    /// Its bytes, all of them, in order, a piece at a time.
    pub async fn pieces(&self) -> Result<Pieces, MediaError> {
        self.store.read(&self.row.id, &self.row.object_key, self.row.size.max(0) as u64, None).await
    }
}

impl Store {
    /// Stored media `id`'s row (`None`: no such media, or none stored).
    async fn stored_row(&self, id: &MediaId) -> Result<Option<StoredRow>, MediaError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {STORED_COLUMNS} FROM media WHERE id = $1 AND NOT expired AND remote IS NULL"
        ))
        .bind(id)
        .fetch_optional(&self.db)
        .await?)
    }

    /// Stored media `id`, to be read later, once its bytes are known to be there: an
    /// object's size is asked of the bucket, so a bucket that is down fails here, before
    /// anything is sent, and an object that is gone (or not whole) is `None`.
    pub async fn open(&self, id: &MediaId) -> Result<Option<Readable>, MediaError> {
        let Some(row) = self.stored_row(id).await? else { return Ok(None) };
        if let Some((objects, key)) = self.holding(&row.object_key)? {
            match objects.size(key).await {
                Ok(n) if n == row.size.max(0) as u64 => {}
                Ok(_) => return Ok(None),
                Err(e) if e.is_not_found() => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(Readable { store: self.clone(), row }))
    }

    /// Stored media `id` with all its bytes (`None`: no such media, or none stored), for
    /// small media only (a profile picture, audio to transcribe): sends read
    /// [`Store::open`]'s pieces instead.
    pub async fn get(&self, id: &MediaId) -> Result<Option<MediaRow>, MediaError> {
        let Some(StoredRow { instance_id, mime_type, filename, size, sha256, object_key, .. }) =
            self.stored_row(id).await?
        else {
            return Ok(None);
        };
        let mut data = Vec::with_capacity(size.max(0) as usize);
        let mut pieces = self.read(id, &object_key, size.max(0) as u64, None).await?;
        while let Some(p) = pieces.try_next().await? {
            data.extend_from_slice(&p);
        }
        Ok(Some(MediaRow { id: id.clone(), instance_id, mime_type, filename, size, sha256, data }))
    }
}

/// Base64 (standard, padded) of bytes that come in pieces: each piece is encoded as far
/// as whole 3-byte groups go, the rest waits for the next, so the text equals the
/// encoding of all the bytes at once without holding them together.
#[derive(Debug, Default)]
pub struct Base64Pieces {
    carry: Vec<u8>,
}

impl Base64Pieces {
    /// Appends the text of `bytes` (after what was carried) to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        let engine = &base64::engine::general_purpose::STANDARD;
        while !self.carry.is_empty() && self.carry.len() < 3 && !bytes.is_empty() {
            self.carry.push(bytes[0]);
            bytes = &bytes[1..];
        }
        if self.carry.len() == 3 {
            append_encoded(engine, &self.carry, out);
            self.carry.clear();
        }
        let whole = bytes.len() / 3 * 3;
        append_encoded(engine, &bytes[..whole], out);
        self.carry.extend_from_slice(&bytes[whole..]);
    }

    /// The text of what is left, padded.
    pub fn finish(self, out: &mut Vec<u8>) {
        append_encoded(&base64::engine::general_purpose::STANDARD, &self.carry, out);
    }

    /// The length of the text of `n` bytes.
    pub fn encoded_len(n: u64) -> u64 {
        n.div_ceil(3) * 4
    }
}

/// A JSON text with a hole where media's base64 text goes: serialize the value with
/// [`Hole::marker`] as that string, then [`Hole::cut`] it there. The marker is random, so
/// nothing else in the text (a sender's caption) can be taken for it.
pub struct Hole {
    marker: String,
}

impl Default for Hole {
    fn default() -> Hole {
        Hole { marker: format!("pl-b64-{:032x}", rand::random::<u128>()) }
    }
}

impl Hole {
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// The text before the marker and after it, if it is there.
    pub fn cut(&self, mut json: Vec<u8>) -> Option<(Vec<u8>, Vec<u8>)> {
        let at = json.windows(self.marker.len()).position(|w| w == self.marker.as_bytes())?;
        let suffix = json.split_off(at + self.marker.len());
        json.truncate(at);
        Some((json, suffix))
    }
}

/// `prefix`, the base64 text of media `id`'s bytes, then `suffix`: the media read and
/// encoded a chunk at a time, so neither it nor its text is ever held whole. (An error
/// ends the stream.)
pub fn base64_stream(
    store: Store,
    id: MediaId,
    prefix: Vec<u8>,
    suffix: Vec<u8>,
) -> impl futures::Stream<Item = Result<bytes::Bytes, MediaError>> + Send {
    let chunks = futures::stream::once(async move {
        let Some(Meta::Stored { object_key, size, .. }) = super::meta(&store.db, &id).await? else {
            return Ok::<_, MediaError>(futures::stream::empty().boxed());
        };
        store.read(&id, &object_key, size, None).await
    })
    .try_flatten()
    .boxed();
    let start = (Some(prefix), chunks, Some(Base64Pieces::default()), suffix);
    futures::stream::unfold(start, |(prefix, mut chunks, mut pieces, suffix)| async move {
        if let Some(p) = prefix {
            return Some((Ok(bytes::Bytes::from(p)), (None, chunks, pieces, suffix)));
        }
        let encoder = pieces.as_mut()?;
        match chunks.try_next().await {
            Ok(Some(c)) => {
                let mut out = Vec::with_capacity(Base64Pieces::encoded_len(c.len() as u64 + 2) as usize);
                encoder.push(&c, &mut out);
                Some((Ok(out.into()), (None, chunks, pieces, suffix)))
            }
            Ok(None) => {
                let mut out = Vec::with_capacity(4 + suffix.len());
                pieces.take().expect("checked").finish(&mut out);
                out.extend_from_slice(&suffix);
                Some((Ok(out.into()), (None, chunks, None, Vec::new())))
            }
            Err(e) => Some((Err(e), (None, chunks, None, Vec::new()))),
        }
    })
}

fn append_encoded(engine: &impl base64::Engine, bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    let start = out.len();
    out.resize(start + Base64Pieces::encoded_len(bytes.len() as u64) as usize, 0);
    let n = engine.encode_slice(bytes, &mut out[start..]).expect("sized for the text");
    out.truncate(start + n);
}

/// How media is presented to a browser. Its type came from a sender, a remote server or
/// a client, so only types a browser shows without running anything (raster images,
/// audio, video, PDF) are served inline; everything else is an attachment. Either way
/// the answer carries `nosniff` and a `sandbox` CSP (set by the caller), so nothing
/// served here runs script on our origin.
pub fn presentation(mime: &str, filename: Option<&str>) -> (String, String) {
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
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Any split of any bytes encodes as the whole does (random lengths and cuts; the
    /// seed is printed so a failure can be repeated).
    #[test]
    fn base64_in_pieces_equals_base64_at_once() {
        use base64::Engine;
        let seed: u64 = std::env::var("PL_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        println!("seed {seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..500 {
            let data: Vec<u8> = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect();
            let mut pieces = Base64Pieces::default();
            let mut out = Vec::new();
            let mut rest = &data[..];
            while !rest.is_empty() {
                let n = rng.gen_range(0..=rest.len().min(9));
                pieces.push(&rest[..n], &mut out);
                rest = &rest[n..];
            }
            pieces.finish(&mut out);
            let want = base64::engine::general_purpose::STANDARD.encode(&data);
            assert_eq!(String::from_utf8(out).unwrap(), want, "seed {seed}");
            assert_eq!(Base64Pieces::encoded_len(data.len() as u64), want.len() as u64);
        }
    }

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
