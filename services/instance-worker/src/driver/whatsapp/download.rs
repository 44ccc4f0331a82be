//! Downloading received media through the session's guarded client, within the size the
//! message declares.

use super::*;

/// Received media from WhatsApp's servers. The locator is the sender's: it is checked
/// and cleaned first (`map::safe_media`), and the download reads at most the declared
/// length (plus the encryption's overhead), through the session's guarded client.
pub(super) async fn download(client: &Client, media: &RemoteMedia) -> Result<Vec<u8>, DriverError> {
    let cap = media.cap()?;
    let safe = map::safe_media(&media.locator)?;
    let result = http::with_cap(cap + http::ENCRYPTION_OVERHEAD, client.download(safe.downloadable())).await;
    match result {
        Ok(bytes) if bytes.len() as u64 <= cap => Ok(bytes),
        Ok(_) => Err(too_large()),
        Err(e) => {
            if caused_by(&e, &http::WaHttpError::TooLarge) {
                return Err(too_large());
            }
            if caused_by(&e, &http::WaHttpError::Refused) {
                return Err(DriverError::new(
                    ErrorCode::MediaUnavailable,
                    "the media is not on WhatsApp's media hosts",
                ));
            }
            // Media past its lifetime is gone from the servers (404/410): for good.
            let text = e.to_string();
            if text.contains("404") || text.contains("410") {
                Err(DriverError::new(ErrorCode::MediaUnavailable, "the network no longer has this media"))
            } else {
                Err(failed("give the media"))
            }
        }
    }
}

/// Whether our HTTP client's `what` is among an error's causes (by type, or by its text
/// where the crate carried only the message on).
pub(super) fn caused_by(e: &whatsapp_rust::anyhow::Error, what: &http::WaHttpError) -> bool {
    let text = what.to_string();
    e.chain().any(|c| {
        c.downcast_ref::<http::WaHttpError>().is_some_and(|w| std::mem::discriminant(w) == std::mem::discriminant(what))
            || c.to_string().contains(&text)
    })
}

pub(super) fn too_large() -> DriverError {
    DriverError::new(ErrorCode::MediaUnavailable, "the media is larger than it declared")
}

pub(super) struct ClientFetch(pub(super) Arc<Client>);

#[async_trait::async_trait]
impl crate::receive::Fetch for ClientFetch {
    async fn fetch(&self, media: &RemoteMedia) -> Result<Vec<u8>, DriverError> {
        download(&self.0, media).await
    }
}
