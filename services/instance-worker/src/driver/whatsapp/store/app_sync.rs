//! `AppSyncStore` of `PgStore`: App-state sync: keys, versions and mutation MACs.

use super::*;

#[whatsapp_rust::async_trait]
impl AppSyncStore for PgStore {
    async fn get_sync_key(&self, key_id: &[u8]) -> Result<Option<AppStateSyncKey>> {
        self.get_json(kind::SYNC_KEY, &hex::encode(key_id)).await
    }

    async fn set_sync_key(&self, key_id: &[u8], key: AppStateSyncKey) -> Result<()> {
        self.put1(kind::SYNC_KEY, hex::encode(key_id), to_json(&key)?).await
    }

    async fn get_version(&self, name: &str) -> Result<HashState> {
        Ok(self.get_json(kind::VERSION, name).await?.unwrap_or_default())
    }

    async fn set_version(&self, name: &str, state: HashState) -> Result<()> {
        self.put1(kind::VERSION, name.to_string(), to_json(&state)?).await
    }

    async fn put_mutation_macs(&self, name: &str, _version: u64, mutations: &[AppStateMutationMAC]) -> Result<()> {
        let entries =
            mutations.iter().map(|m| (join(&[name, &hex::encode(&m.index_mac)]), m.value_mac.clone(), None)).collect();
        self.put(kind::MAC, entries).await
    }

    async fn get_mutation_mac(&self, name: &str, index_mac: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(kind::MAC, &join(&[name, &hex::encode(index_mac)])).await
    }

    async fn get_mutation_macs(&self, name: &str, index_macs: &[[u8; 32]]) -> Result<HashMap<[u8; 32], Vec<u8>>> {
        let keys: Vec<String> = index_macs.iter().map(|m| join(&[name, &hex::encode(m)])).collect();
        let rows = wa_store::get_many(&self.db, &self.instance, kind::MAC, &keys).await.map_err(db)?;
        let by_key: HashMap<String, Vec<u8>> = rows.into_iter().collect();
        Ok(index_macs.iter().zip(keys).filter_map(|(m, k)| by_key.get(&k).map(|v| (*m, v.clone()))).collect())
    }

    async fn delete_mutation_macs(&self, name: &str, index_macs: &[Vec<u8>]) -> Result<()> {
        self.delete(kind::MAC, index_macs.iter().map(|m| join(&[name, &hex::encode(m)])).collect()).await.map(drop)
    }

    async fn clear_mutation_macs(&self, name: &str) -> Result<()> {
        self.sweep(kind::MAC, Sweep::Prefix(&format!("{name}{SEP}"))).await.map(drop)
    }

    /// The greatest key id in byte order (hex keeps it) whose key decodes.
    async fn get_latest_sync_key_id(&self) -> Result<Option<Vec<u8>>> {
        let rows = self.list(kind::SYNC_KEY, "").await?;
        Ok(rows
            .into_iter()
            .rev()
            .find(|(_, v)| from_json::<AppStateSyncKey>(v).is_ok())
            .and_then(|(k, _)| hex::decode(k).ok()))
    }
}
