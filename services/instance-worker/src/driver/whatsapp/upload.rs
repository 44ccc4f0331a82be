//! Media uploads a piece at a time. WhatsApp's upload request names the ciphertext's
//! hash, and the ciphertext ends with a MAC over all of it, so both are known before the
//! request starts: one pass over the stored bytes encrypts them into nothing but those
//! hashes, and each upload attempt (the crate retries and resumes from an offset)
//! encrypts them again under the same key, straight into the request's body. AES-CBC
//! under a given media key gives the same ciphertext every time. A send holds one piece
//! of its media (a 1 MiB chunk from Postgres or a 4 MiB ranged read of the bucket) and
//! its ciphertext at a time, however large the file.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::TryStreamExt;
use whatsapp_rust::download::MediaType;
use whatsapp_rust::upload::UploadResponse;
use whatsapp_rust::wacore::upload::{encrypted_len, EncryptedMediaInfo, MediaEncryptor, UploadSource};
use whatsapp_rust::Client;

use crate::driver::{DriverError, Media, MediaBytes};

/// Uploads `m` to WhatsApp's media servers as `kind`.
pub async fn upload(client: &Client, m: &Media, kind: MediaType) -> Result<UploadResponse, DriverError> {
    let info = encrypt(m, kind).await?;
    let source = Ciphertext::new(m, info.media_key, kind);
    let unreadable = source.unreadable.clone();
    match client.upload_stream(source, info, kind).await {
        Ok(up) => Ok(up),
        Err(_) if unreadable.load(Ordering::Relaxed) => Err(DriverError::media_unreadable()),
        Err(_) => Err(super::failed("take the media upload")),
    }
}

/// Audio and video carry a streaming sidecar (what the crate decides when not told).
fn sidecar(kind: MediaType) -> bool {
    matches!(kind, MediaType::Audio | MediaType::Video)
}

/// The first pass: the key, hashes and sidecar of `m`'s ciphertext, its bytes checked
/// against the hash and length the store recorded for them.
async fn encrypt(m: &Media, kind: MediaType) -> Result<EncryptedMediaInfo, DriverError> {
    let enc = MediaEncryptor::new_with_sidecar(kind, sidecar(kind)).map_err(|_| super::failed("encrypt the media"))?;
    // Into nothing: a sink never fails.
    let enc = m.bytes.fold(enc, |enc, p| drop(enc.update_to_writer(p, &mut std::io::sink()))).await?;
    let info = enc.finalize_to_writer(&mut std::io::sink()).map_err(|_| super::failed("encrypt the media"))?;
    m.check(info.file_length, &info.file_sha256)?;
    Ok(info)
}

/// The ciphertext of stored media, made again for each upload attempt.
struct Ciphertext {
    bytes: MediaBytes,
    key: [u8; 32],
    kind: MediaType,
    len: u64,
    rt: tokio::runtime::Handle,
    /// Set when the store failed to give the bytes (not the network taking them).
    unreadable: Arc<AtomicBool>,
}

impl Ciphertext {
    fn new(m: &Media, key: [u8; 32], kind: MediaType) -> Ciphertext {
        Ciphertext {
            bytes: m.bytes.clone(),
            key,
            kind,
            len: encrypted_len(m.size as usize) as u64,
            rt: tokio::runtime::Handle::current(),
            unreadable: Arc::default(),
        }
    }
}

impl UploadSource for Ciphertext {
    fn len(&self) -> u64 {
        self.len
    }

    /// Called on a blocking thread (the crate's upload runs its body there).
    fn reader_from(&self, offset: u64) -> std::io::Result<Box<dyn Read + Send>> {
        // This attempt's own: an earlier attempt's failure to read says nothing of it.
        self.unreadable.store(false, Ordering::Relaxed);
        let pieces = self.rt.block_on(self.bytes.pieces()).map_err(|_| {
            self.unreadable.store(true, Ordering::Relaxed);
            std::io::Error::other("the media could not be read")
        })?;
        let enc = MediaEncryptor::with_key_and_sidecar(self.key, self.kind, false).map_err(std::io::Error::other)?;
        Ok(Box::new(CipherReader {
            rt: self.rt.clone(),
            pieces,
            enc: Some(enc),
            out: Vec::new(),
            at: 0,
            skip: offset,
            unreadable: self.unreadable.clone(),
        }))
    }
}

/// The ciphertext from `skip` on, encrypted as the plaintext's pieces arrive.
struct CipherReader {
    rt: tokio::runtime::Handle,
    pieces: BoxStream<'static, Result<bytes::Bytes, DriverError>>,
    /// `None` once finished (padding and MAC written).
    enc: Option<MediaEncryptor>,
    /// Ciphertext made and not yet read, from `at`.
    out: Vec<u8>,
    at: usize,
    /// Ciphertext still to drop before the first byte read (a resumed upload).
    skip: u64,
    unreadable: Arc<AtomicBool>,
}

impl Read for CipherReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.at < self.out.len() {
                let n = buf.len().min(self.out.len() - self.at);
                buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            self.out.clear();
            self.at = 0;
            let Some(enc) = self.enc.as_mut() else { return Ok(0) };
            match self.rt.block_on(self.pieces.try_next()) {
                Ok(Some(p)) => enc.update(&p, &mut self.out),
                Ok(None) => {
                    let enc = self.enc.take().expect("checked above");
                    enc.finalize(&mut self.out).map_err(std::io::Error::other)?;
                }
                Err(_) => {
                    self.unreadable.store(true, Ordering::Relaxed);
                    return Err(std::io::Error::other("the media could not be read"));
                }
            }
            let dropped = self.skip.min(self.out.len() as u64);
            self.at = dropped as usize;
            self.skip -= dropped;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;
    use shared::ErrorCode;

    fn held(data: &[u8]) -> Media {
        Media {
            mime_type: "application/pdf".into(),
            filename: None,
            sha256: hex::encode(sha2::Sha256::digest(data)),
            size: data.len() as u64,
            bytes: MediaBytes::Held(bytes::Bytes::copy_from_slice(data)),
        }
    }

    fn read_all(mut r: Box<dyn Read + Send>) -> Vec<u8> {
        let mut out = Vec::new();
        // Small reads, so reads end inside and across pieces.
        let mut buf = [0u8; 777];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// The two passes give what the crate's whole-buffer encryption gives under the same
    /// key, from the start and from any offset a resumed upload asks for; the hashes the
    /// request names are the ones of those bytes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_streamed_ciphertext_is_the_whole_buffers_from_any_offset() {
        for (kind, len) in
            [(MediaType::Document, 0usize), (MediaType::Document, 16 * 1000), (MediaType::Video, 123_457)]
        {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let m = held(&data);
            let info = encrypt(&m, kind).await.unwrap();
            let whole = whatsapp_rust::wacore::upload::encrypt_media_with_key_and_sidecar(
                &data,
                kind,
                Some(&info.media_key),
                Some(sidecar(kind)),
            )
            .unwrap();
            assert_eq!(info.file_enc_sha256, whole.file_enc_sha256, "{kind:?} {len}");
            assert_eq!(info.streaming_sidecar, whole.streaming_sidecar, "{kind:?} {len}");
            let source = Ciphertext::new(&m, info.media_key, kind);
            assert_eq!(source.len(), whole.data_to_upload.len() as u64);
            for offset in [0, 1, 15, 16, 999, whole.data_to_upload.len() / 2, whole.data_to_upload.len()] {
                let offset = offset.min(whole.data_to_upload.len());
                let got = tokio::task::spawn_blocking({
                    let source = Ciphertext::new(&m, info.media_key, kind);
                    move || read_all(source.reader_from(offset as u64).unwrap())
                })
                .await
                .unwrap();
                assert_eq!(got, whole.data_to_upload[offset..], "{kind:?} {len} from {offset}");
            }
        }
    }

    #[tokio::test]
    async fn bytes_that_are_not_the_recorded_ones_are_refused_before_any_upload() {
        let mut m = held(b"the stored bytes");
        m.sha256 = hex::encode(sha2::Sha256::digest(b"other bytes"));
        let e = encrypt(&m, MediaType::Document).await.err().unwrap();
        assert_eq!(e.code, ErrorCode::ValidationFailed);
        let mut m = held(b"the stored bytes");
        m.size += 1;
        assert_eq!(encrypt(&m, MediaType::Document).await.err().unwrap().code, ErrorCode::ValidationFailed);
    }
}
