//! `ProtocolStore` of `PgStore`: The protocol's own tables: device lists, LID-PN mappings, pending inbound keys, tc tokens and the rest.

use super::*;

#[whatsapp_rust::async_trait]
impl ProtocolStore for PgStore {
    async fn get_sender_key_devices(&self, group_jid: &str) -> Result<Vec<(String, bool)>> {
        let prefix = format!("{group_jid}{SEP}");
        Ok(self
            .list(kind::SKD, &prefix)
            .await?
            .into_iter()
            .map(|(k, v)| (k[prefix.len()..].to_string(), v.first() == Some(&1)))
            .collect())
    }

    async fn set_sender_key_status(&self, group_jid: &str, entries: &[(&str, bool)]) -> Result<()> {
        self.put(kind::SKD, entries.iter().map(|(d, has)| (join(&[group_jid, d]), vec![*has as u8], None)).collect())
            .await
    }

    async fn clear_sender_key_devices(&self, group_jid: &str) -> Result<()> {
        self.sweep(kind::SKD, Sweep::Prefix(&format!("{group_jid}{SEP}"))).await.map(drop)
    }

    async fn delete_sender_key_device_rows(&self, device_jids: &[&str]) -> Result<()> {
        let keys: Vec<String> = self
            .list(kind::SKD, "")
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| k.split_once(SEP).is_some_and(|(_, d)| device_jids.contains(&d)))
            .collect();
        self.delete(kind::SKD, keys).await.map(drop)
    }

    async fn clear_all_sender_key_devices(&self) -> Result<()> {
        self.sweep(kind::SKD, Sweep::Prefix("")).await.map(drop)
    }

    async fn get_lid_mapping(&self, lid: &str) -> Result<Option<LidPnMappingEntry>> {
        self.get_json(kind::LID, lid).await
    }

    /// The most recent mapping of the phone (an index kept with each mapping).
    async fn get_pn_mapping(&self, phone: &str) -> Result<Option<LidPnMappingEntry>> {
        self.get_json(kind::PN, phone).await
    }

    async fn put_lid_mapping(&self, entry: &LidPnMappingEntry) -> Result<()> {
        self.put_lid_mappings(std::slice::from_ref(entry)).await
    }

    /// Keyed by LID; on conflict the first `created_at` stays. The phone's index points
    /// at its most recently updated mapping.
    async fn put_lid_mappings(&self, entries: &[LidPnMappingEntry]) -> Result<()> {
        let lid_keys: Vec<String> = entries.iter().map(|e| e.lid.clone()).collect();
        let pn_keys: Vec<String> = entries.iter().map(|e| e.phone_number.clone()).collect();
        let old_lids: HashMap<String, LidPnMappingEntry> = self.get_json_many(kind::LID, &lid_keys).await?;
        let mut pns: HashMap<String, LidPnMappingEntry> = self.get_json_many(kind::PN, &pn_keys).await?;
        let mut changed_pns = std::collections::HashSet::new();
        let mut lids = Vec::with_capacity(entries.len());
        for e in entries {
            let mut e = e.clone();
            if let Some(old) = old_lids.get(&e.lid) {
                e.created_at = old.created_at;
            }
            if pns.get(&e.phone_number).is_none_or(|p| e.updated_at >= p.updated_at) {
                changed_pns.insert(e.phone_number.clone());
                pns.insert(e.phone_number.clone(), e.clone());
            }
            lids.push((e.lid.clone(), to_json(&e)?, None));
        }
        let pn_entries =
            changed_pns.into_iter().map(|p| Ok((p.clone(), to_json(&pns[&p])?, None))).collect::<Result<Vec<_>>>()?;
        wa_store::put_kinds(&self.db, &self.instance, self.epoch, &[(kind::LID, lids), (kind::PN, pn_entries)])
            .await
            .map_err(write)
    }

    async fn get_all_lid_mappings(&self) -> Result<Vec<LidPnMappingEntry>> {
        self.list(kind::LID, "").await?.iter().map(|(_, v)| from_json(v)).collect()
    }

    async fn save_base_key(&self, address: &str, message_id: &str, base_key: &[u8]) -> Result<()> {
        self.put1(kind::BASE_KEY, join(&[address, message_id]), base_key.to_vec()).await
    }

    async fn has_same_base_key(&self, address: &str, message_id: &str, current_base_key: &[u8]) -> Result<bool> {
        Ok(self.get(kind::BASE_KEY, &join(&[address, message_id])).await?.is_some_and(|v| v == current_base_key))
    }

    async fn delete_base_key(&self, address: &str, message_id: &str) -> Result<()> {
        self.delete(kind::BASE_KEY, vec![join(&[address, message_id])]).await.map(drop)
    }

    async fn update_device_list(&self, record: DeviceListRecord) -> Result<()> {
        self.update_device_lists(vec![record]).await
    }

    async fn update_device_lists(&self, records: Vec<DeviceListRecord>) -> Result<()> {
        let entries = records.iter().map(|r| Ok((r.user.clone(), to_json(r)?, None))).collect::<Result<Vec<_>>>()?;
        self.put(kind::DEVICES, entries).await
    }

    async fn get_devices(&self, user: &str) -> Result<Option<DeviceListRecord>> {
        self.get_json(kind::DEVICES, user).await
    }

    async fn delete_devices(&self, user: &str) -> Result<()> {
        self.delete(kind::DEVICES, vec![user.to_string()]).await.map(drop)
    }

    async fn get_group_metadata(&self, group_jid: &str) -> Result<Option<Vec<u8>>> {
        self.get(kind::GROUP, group_jid).await
    }

    async fn put_group_metadata(&self, group_jid: &str, blob: &[u8]) -> Result<()> {
        self.put1(kind::GROUP, group_jid.to_string(), blob.to_vec()).await
    }

    async fn delete_group_metadata(&self, group_jid: &str) -> Result<()> {
        self.delete(kind::GROUP, vec![group_jid.to_string()]).await.map(drop)
    }

    async fn get_tc_token(&self, jid: &str) -> Result<Option<TcTokenEntry>> {
        self.get_json(kind::TC, jid).await
    }

    async fn put_tc_token(&self, jid: &str, entry: &TcTokenEntry) -> Result<()> {
        self.put1(kind::TC, jid.to_string(), to_json(entry)?).await
    }

    async fn delete_tc_token(&self, jid: &str) -> Result<()> {
        self.delete(kind::TC, vec![jid.to_string()]).await.map(drop)
    }

    async fn get_all_tc_token_jids(&self) -> Result<Vec<String>> {
        Ok(self.list(kind::TC, "").await?.into_iter().map(|(k, _)| k).collect())
    }

    async fn delete_expired_tc_tokens(&self, token_cutoff: i64, sender_cutoff: i64) -> Result<u32> {
        let mut doomed = Vec::new();
        for (k, v) in self.list(kind::TC, "").await? {
            let e: TcTokenEntry = from_json(&v)?;
            let token_old = e.token.is_empty() || e.token_timestamp < token_cutoff;
            let sender_old = e.sender_timestamp.is_none_or(|s| s < sender_cutoff);
            if token_old && sender_old {
                doomed.push(k);
            }
        }
        self.delete(kind::TC, doomed).await.map(|n| n as u32)
    }

    async fn store_sent_message(&self, chat_jid: &str, message_id: &str, payload: &[u8]) -> Result<()> {
        self.put1(kind::SENT, join(&[chat_jid, message_id]), payload.to_vec()).await
    }

    async fn take_sent_message(&self, chat_jid: &str, message_id: &str) -> Result<Option<Vec<u8>>> {
        wa_store::take(&self.db, &self.instance, self.epoch, kind::SENT, &join(&[chat_jid, message_id]))
            .await
            .map_err(write)
    }

    async fn delete_expired_sent_messages(&self, cutoff_timestamp: i64) -> Result<u32> {
        self.sweep(kind::SENT, Sweep::WrittenBefore(cutoff_timestamp)).await
    }

    async fn store_pending_inbound(&self, chat: &str, sender: &str, id: &str, message: &[u8]) -> Result<()> {
        self.put1(kind::PENDING, join(&[chat, sender, id]), message.to_vec()).await
    }

    async fn get_pending_inbound(&self, chat: &str, sender: &str, id: &str) -> Result<Option<Vec<u8>>> {
        self.get(kind::PENDING, &join(&[chat, sender, id])).await
    }

    async fn delete_pending_inbound(&self, chat: &str, sender: &str, id: &str) -> Result<()> {
        self.delete(kind::PENDING, vec![join(&[chat, sender, id])]).await.map(drop)
    }

    async fn delete_expired_pending_inbound(&self, cutoff_timestamp: i64) -> Result<u32> {
        self.sweep(kind::PENDING, Sweep::WrittenBefore(cutoff_timestamp)).await
    }

    async fn store_pending_inbound_batch(&self, rows: &[PendingInboundRow<'_>]) -> Result<()> {
        self.put(
            kind::PENDING,
            rows.iter().map(|r| (join(&[r.chat, r.sender, r.id]), r.message.to_vec(), None)).collect(),
        )
        .await
    }

    async fn delete_pending_inbound_batch(&self, keys: &[PendingInboundKey<'_>]) -> Result<()> {
        self.delete(kind::PENDING, keys.iter().map(|k| join(&[k.chat, k.sender, k.id])).collect()).await.map(drop)
    }
}
