//! `DeviceStore` of `PgStore`: The device itself (one row, `self`).

use super::*;

#[whatsapp_rust::async_trait]
impl DeviceStore for PgStore {
    async fn save(&self, device: &Device) -> Result<()> {
        self.put1(kind::DEVICE, SELF.to_string(), to_json(device)?).await
    }

    /// The device, with the runtime-only fields rebuilt (they are not serialized).
    async fn load(&self) -> Result<Option<Device>> {
        let Some(mut d) = self.get_json::<Device>(kind::DEVICE, SELF).await? else { return Ok(None) };
        d.device_props = Arc::new(whatsapp_rust::wacore::store::device::DEVICE_PROPS.clone());
        Ok(Some(d))
    }

    async fn exists(&self) -> Result<bool> {
        Ok(self.get(kind::DEVICE, SELF).await?.is_some())
    }

    /// A new device (fresh keys); one per store, so its id is always 1.
    async fn create(&self) -> Result<i32> {
        self.save(&Device::new()).await?;
        Ok(1)
    }

    async fn resource_report(&self) -> whatsapp_rust::wacore::stats::StorageResourceReport {
        // Everything lives in Postgres: nothing held in this process.
        whatsapp_rust::wacore::stats::StorageResourceReport { memory_bytes: Some(0), ..Default::default() }
    }
}
