//! The real WhatsApp network on the `whatsapp-rust` crate, with its session store in
//! Postgres. Not built yet (its own issue): opening a session fails with a clear,
//! non-retryable error, and the instance shows as `disconnected`.

pub mod map;
pub mod store;

use tokio::sync::mpsc;

use super::{Driver, DriverError, DriverEvent, Session};

pub struct WhatsappDriver;

#[async_trait::async_trait]
impl Driver for WhatsappDriver {
    fn name(&self) -> &'static str {
        "whatsapp"
    }

    async fn open(
        &self,
        _credentials: Option<serde_json::Value>,
    ) -> Result<(Box<dyn Session>, mpsc::Receiver<DriverEvent>), DriverError> {
        Err(DriverError::new(
            shared::ErrorCode::NotImplemented,
            "the whatsapp driver is not built yet; run with --network sim",
        ))
    }
}
