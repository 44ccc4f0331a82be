//! `PgStore` conformance: every method of whatsapp-rust's `Backend`, run against the
//! crate's own in-memory backend as the reference, gives the same answers (round trip,
//! overwrite, delete); and every write under an old lease epoch is refused.

use std::sync::Arc;

use harness::TestApi;
use serde_json::json;
use shared::ids::InstanceId;
use whatsapp_rust::bytes::Bytes;
use whatsapp_rust::wacore::appstate::hash::HashState;
use whatsapp_rust::wacore::appstate::processor::AppStateMutationMAC;
use whatsapp_rust::wacore::store::traits::*;
use whatsapp_rust::wacore::store::InMemoryBackend;
use worker::db::sessions;
use worker::driver::whatsapp::store::PgStore;

/// An instance claimed once: (store under its epoch, the pool, the instance).
async fn claimed(api: &TestApi, name: &str) -> (PgStore, sqlx::PgPool, InstanceId) {
    let (inst, _) = api.create_instance(name).await;
    let id = InstanceId::parse(inst.id.as_str()).unwrap();
    let db = shared::db::connect(&api.config).await.unwrap();
    api.admin().post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    let c = sessions::claim(&db, &id, 1, "wk").await.unwrap().unwrap();
    (PgStore::new(db.clone(), id.clone(), c.owner_epoch), db, id)
}

/// Runs the same call on both backends and asserts equal answers (by `Debug`).
macro_rules! same {
    ($mem:expr, $pg:expr, |$s:ident| $call:expr) => {{
        let a = {
            let $s = &$mem;
            format!("{:?}", $call.await)
        };
        let b = {
            let $s = &$pg;
            format!("{:?}", $call.await)
        };
        assert_eq!(a, b, "{}", stringify!($call));
        a
    }};
}

fn sorted<K: Ord + std::fmt::Debug, V: std::fmt::Debug>(m: impl IntoIterator<Item = (K, V)>) -> Vec<(K, V)> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_store_answers_like_the_in_memory_backend() {
    let api = TestApi::start().await;
    let (pg, _, _) = claimed(&api, "wa-conform").await;
    let mem = InMemoryBackend::new();
    let addr = "5511987650001:5@c.us.0";

    // SignalStore: identities, sessions, prekeys, signed prekeys, sender keys.
    same!(mem, pg, |s| s.load_identity(addr));
    same!(mem, pg, |s| s.put_identity(addr, [7u8; 32]));
    same!(mem, pg, |s| s.put_identity(addr, [8u8; 32]));
    assert!(same!(mem, pg, |s| s.load_identity(addr)).contains('8'));
    same!(mem, pg, |s| s
        .put_identities_batch(&[(Arc::from("a@c.us.0"), [1u8; 32]), (Arc::from("b@c.us.0"), [2u8; 32])]));
    same!(mem, pg, |s| s.load_identity("b@c.us.0"));
    same!(mem, pg, |s| s.delete_identity("a@c.us.0"));
    same!(mem, pg, |s| s.load_identity("a@c.us.0"));
    same!(mem, pg, |s| s.get_session(addr));
    same!(mem, pg, |s| s.has_session(addr));
    same!(mem, pg, |s| s.put_session(addr, b"session-1"));
    same!(mem, pg, |s| s.put_session(addr, b"session-2"));
    same!(mem, pg, |s| s.get_session(addr));
    same!(mem, pg, |s| s.put_sessions_batch(&[(Arc::from("c@c.us.0"), Bytes::from_static(b"s-c"))]));
    same!(mem, pg, |s| s.has_session("c@c.us.0"));
    same!(mem, pg, |s| s.delete_session("c@c.us.0"));
    same!(mem, pg, |s| s.get_session("c@c.us.0"));
    assert_eq!(same!(mem, pg, |s| s.has_signal_state_for_user("5511987650001")), "Ok(true)");
    // The in-memory backend answers true for anyone (conservative); ours knows.
    assert!(!pg.has_signal_state_for_user("5511000000000").await.unwrap());
    same!(mem, pg, |s| s.get_max_prekey_id());
    same!(mem, pg, |s| s.store_prekey(3, b"pk3", false));
    same!(mem, pg, |s| s
        .store_prekeys_batch(&[(10, Bytes::from_static(b"pk10")), (4, Bytes::from_static(b"pk4"))], true));
    same!(mem, pg, |s| s.load_prekey(3));
    same!(mem, pg, |s| s.load_prekey(99));
    assert_eq!(same!(mem, pg, |s| s.get_max_prekey_id()), "Ok(10)");
    same!(mem, pg, |s| s.load_prekeys_batch(&[3, 4, 5, 10]));
    same!(mem, pg, |s| s.mark_prekeys_uploaded(&[3, 77]));
    same!(mem, pg, |s| s.load_prekey(3));
    same!(mem, pg, |s| s.load_prekey(77));
    same!(mem, pg, |s| s.remove_prekey(10));
    same!(mem, pg, |s| s.load_prekey(10));
    same!(mem, pg, |s| s.store_signed_prekey(2, b"spk2"));
    same!(mem, pg, |s| s.store_signed_prekey(1, b"spk1"));
    same!(mem, pg, |s| s.load_signed_prekey(2));
    let all_mem = mem.load_all_signed_prekeys().await.unwrap();
    let all_pg = pg.load_all_signed_prekeys().await.unwrap();
    assert_eq!(sorted(all_mem), sorted(all_pg));
    same!(mem, pg, |s| s.remove_signed_prekey(2));
    same!(mem, pg, |s| s.load_signed_prekey(2));
    same!(mem, pg, |s| s.put_sender_key("g@g.us:1@lid", b"sk"));
    same!(mem, pg, |s| s.put_sender_keys_batch(&[(Arc::from("g@g.us:2@lid"), Bytes::from_static(b"sk2"))]));
    same!(mem, pg, |s| s.get_sender_key("g@g.us:2@lid"));
    same!(mem, pg, |s| s.delete_sender_key("g@g.us:1@lid"));
    same!(mem, pg, |s| s.get_sender_key("g@g.us:1@lid"));

    // AppSyncStore.
    let key = |n: u8| AppStateSyncKey { key_data: vec![n; 4], fingerprint: vec![n], timestamp: n as i64 };
    same!(mem, pg, |s| s.get_sync_key(b"\x00\x01"));
    same!(mem, pg, |s| s.set_sync_key(b"\x00\x01", key(1)));
    same!(mem, pg, |s| s.set_sync_key(b"\x00\x02", key(2)));
    same!(mem, pg, |s| s.get_sync_key(b"\x00\x01"));
    assert_eq!(same!(mem, pg, |s| s.get_latest_sync_key_id()), "Ok(Some([0, 2]))");
    same!(mem, pg, |s| s.get_version("regular_high"));
    let mut hs = HashState { version: 7, ..Default::default() };
    hs.hash[0] = 9;
    hs.index_value_map.insert("k".into(), vec![1, 2]);
    same!(mem, pg, |s| s.set_version("regular_high", hs.clone()));
    same!(mem, pg, |s| s.get_version("regular_high"));
    let mac = |i: u8, v: u8| AppStateMutationMAC { index_mac: vec![i; 32], value_mac: vec![v; 4] };
    same!(mem, pg, |s| s.put_mutation_macs("regular", 1, &[mac(1, 10), mac(2, 20)]));
    same!(mem, pg, |s| s.put_mutation_macs("regular", 2, &[mac(2, 21)]));
    same!(mem, pg, |s| s.get_mutation_mac("regular", &[2u8; 32]));
    let macs_mem = mem.get_mutation_macs("regular", &[[1u8; 32], [3u8; 32]]).await.unwrap();
    let macs_pg = pg.get_mutation_macs("regular", &[[1u8; 32], [3u8; 32]]).await.unwrap();
    assert_eq!(sorted(macs_mem), sorted(macs_pg));
    same!(mem, pg, |s| s.delete_mutation_macs("regular", &[vec![1u8; 32]]));
    same!(mem, pg, |s| s.get_mutation_mac("regular", &[1u8; 32]));
    same!(mem, pg, |s| s.put_mutation_macs("other", 1, &[mac(5, 50)]));
    same!(mem, pg, |s| s.clear_mutation_macs("regular"));
    same!(mem, pg, |s| s.get_mutation_mac("regular", &[2u8; 32]));
    same!(mem, pg, |s| s.get_mutation_mac("other", &[5u8; 32]));

    // ProtocolStore.
    same!(mem, pg, |s| s.set_sender_key_status("g1@g.us", &[("a:1@lid", true), ("b:2@lid", false)]));
    same!(mem, pg, |s| s.set_sender_key_status("g2@g.us", &[("a:1@lid", false)]));
    let skd = |v: Vec<(String, bool)>| {
        let mut v = v;
        v.sort();
        v
    };
    assert_eq!(
        skd(mem.get_sender_key_devices("g1@g.us").await.unwrap()),
        skd(pg.get_sender_key_devices("g1@g.us").await.unwrap())
    );
    same!(mem, pg, |s| s.delete_sender_key_device_rows(&["a:1@lid"]));
    assert_eq!(
        skd(mem.get_sender_key_devices("g1@g.us").await.unwrap()),
        skd(pg.get_sender_key_devices("g1@g.us").await.unwrap())
    );
    same!(mem, pg, |s| s.get_sender_key_devices("g2@g.us"));
    same!(mem, pg, |s| s.clear_sender_key_devices("g1@g.us"));
    same!(mem, pg, |s| s.get_sender_key_devices("g1@g.us"));
    same!(mem, pg, |s| s.set_sender_key_status("g3@g.us", &[("c:1@lid", true)]));
    same!(mem, pg, |s| s.clear_all_sender_key_devices());
    same!(mem, pg, |s| s.get_sender_key_devices("g3@g.us"));
    let lid = |l: &str, p: &str, t: i64| LidPnMappingEntry {
        lid: l.into(),
        phone_number: p.into(),
        created_at: t,
        updated_at: t,
        learning_source: "usync".into(),
    };
    same!(mem, pg, |s| s.get_lid_mapping("100"));
    same!(mem, pg, |s| s.put_lid_mapping(&lid("100", "5511", 10)));
    same!(mem, pg, |s| s.put_lid_mappings(&[lid("200", "5522", 11), lid("300", "5511", 20)]));
    same!(mem, pg, |s| s.get_lid_mapping("200"));
    assert!(same!(mem, pg, |s| s.get_pn_mapping("5511")).contains("\"300\""), "the most recent mapping of the phone");
    let mut all_mem: Vec<String> = mem.get_all_lid_mappings().await.unwrap().iter().map(|e| format!("{e:?}")).collect();
    let mut all_pg: Vec<String> = pg.get_all_lid_mappings().await.unwrap().iter().map(|e| format!("{e:?}")).collect();
    all_mem.sort();
    all_pg.sort();
    assert_eq!(all_mem, all_pg);
    same!(mem, pg, |s| s.save_base_key(addr, "3EB0A", b"base"));
    same!(mem, pg, |s| s.has_same_base_key(addr, "3EB0A", b"base"));
    same!(mem, pg, |s| s.has_same_base_key(addr, "3EB0A", b"other"));
    same!(mem, pg, |s| s.delete_base_key(addr, "3EB0A"));
    same!(mem, pg, |s| s.has_same_base_key(addr, "3EB0A", b"base"));
    let rec = |u: &str, ts: i64| DeviceListRecord {
        user: u.into(),
        devices: vec![
            DeviceInfo { device_id: 0, key_index: None, is_hosted: false },
            DeviceInfo { device_id: 3, key_index: Some(2), is_hosted: false },
        ],
        timestamp: ts,
        phash: Some("2:abc".into()),
        raw_id: Some(9),
    };
    same!(mem, pg, |s| s.update_device_list(rec("5511", 1)));
    same!(mem, pg, |s| s.update_device_lists(vec![rec("5511", 2), rec("5522", 3)]));
    same!(mem, pg, |s| s.get_devices("5511"));
    same!(mem, pg, |s| s.delete_devices("5522"));
    same!(mem, pg, |s| s.get_devices("5522"));
    same!(mem, pg, |s| s.put_group_metadata("g@g.us", b"meta"));
    same!(mem, pg, |s| s.get_group_metadata("g@g.us"));
    same!(mem, pg, |s| s.delete_group_metadata("g@g.us"));
    same!(mem, pg, |s| s.get_group_metadata("g@g.us"));
    let tc = |t: &[u8], ts: i64, s: Option<i64>| TcTokenEntry {
        token: t.to_vec(),
        token_timestamp: ts,
        sender_timestamp: s,
    };
    same!(mem, pg, |s| s.put_tc_token("1@lid", &tc(b"tok", 100, None)));
    same!(mem, pg, |s| s.put_tc_token("2@lid", &tc(b"", 5, Some(5))));
    same!(mem, pg, |s| s.touch_tc_token_sender_timestamp("1@lid", 150));
    same!(mem, pg, |s| s.touch_tc_token_sender_timestamp("3@lid", 90));
    same!(mem, pg, |s| s.store_received_tc_token("1@lid", b"older", 50));
    same!(mem, pg, |s| s.get_tc_token("1@lid"));
    same!(mem, pg, |s| s.store_received_tc_token("1@lid", b"newer", 200));
    same!(mem, pg, |s| s.get_tc_token("1@lid"));
    same!(mem, pg, |s| s.get_tc_token("3@lid"));
    let mut jm = mem.get_all_tc_token_jids().await.unwrap();
    jm.sort();
    assert_eq!(jm, pg.get_all_tc_token_jids().await.unwrap());
    same!(mem, pg, |s| s.delete_expired_tc_tokens(60, 60));
    same!(mem, pg, |s| s.get_tc_token("2@lid"));
    same!(mem, pg, |s| s.delete_tc_token("1@lid"));
    same!(mem, pg, |s| s.get_tc_token("1@lid"));
    same!(mem, pg, |s| s.store_sent_message(shared::jid::Jid::user("5511").as_str(), "3EB0X", b"payload"));
    same!(mem, pg, |s| s.take_sent_message(shared::jid::Jid::user("5511").as_str(), "3EB0X"));
    same!(mem, pg, |s| s.take_sent_message(shared::jid::Jid::user("5511").as_str(), "3EB0X"));
    same!(mem, pg, |s| s.store_sent_message(shared::jid::Jid::user("5511").as_str(), "3EB0Y", b"p2"));
    same!(mem, pg, |s| s.delete_expired_sent_messages(0));
    let far = chrono::Utc::now().timestamp() + 3600;
    same!(mem, pg, |s| s.delete_expired_sent_messages(far));
    same!(mem, pg, |s| s.take_sent_message(shared::jid::Jid::user("5511").as_str(), "3EB0Y"));
    same!(mem, pg, |s| s.store_pending_inbound("c@lid", "s@lid", "ID1", b"m1"));
    same!(mem, pg, |s| s.store_pending_inbound_batch(&[
        PendingInboundRow { chat: "c@lid", sender: "s@lid", id: "ID2", message: b"m2" },
        PendingInboundRow { chat: "c@lid", sender: "s@lid", id: "ID3", message: b"m3" },
    ]));
    same!(mem, pg, |s| s.get_pending_inbound("c@lid", "s@lid", "ID2"));
    same!(mem, pg, |s| s.delete_pending_inbound("c@lid", "s@lid", "ID1"));
    same!(mem, pg, |s| s.get_pending_inbound("c@lid", "s@lid", "ID1"));
    same!(mem, pg, |s| s.delete_pending_inbound_batch(&[PendingInboundKey {
        chat: "c@lid",
        sender: "s@lid",
        id: "ID2"
    }]));
    same!(mem, pg, |s| s.get_pending_inbound("c@lid", "s@lid", "ID2"));
    same!(mem, pg, |s| s.delete_expired_pending_inbound(far));
    same!(mem, pg, |s| s.get_pending_inbound("c@lid", "s@lid", "ID3"));

    // MsgSecretStore.
    let secret = |id: &str, n: u8, exp: i64, ts: i64| MsgSecretEntry {
        chat: Arc::from("c@lid"),
        sender: Arc::from("s@lid"),
        msg_id: Arc::from(id),
        secret: [n; 32],
        expires_at: exp,
        message_ts: ts,
    };
    same!(mem, pg, |s| s.put_msg_secret("c@lid", "s@lid", "M0", &[1u8; 32]));
    same!(mem, pg, |s| s.put_msg_secrets(vec![secret("M1", 2, 100, 10), secret("M2", 3, 50, 5)]));
    same!(mem, pg, |s| s.put_msg_secrets(vec![secret("M1", 4, 200, 7), secret("M2", 5, 0, 9)]));
    same!(mem, pg, |s| s.get_msg_secret("c@lid", "s@lid", "M1"));
    same!(mem, pg, |s| s.get_msg_secret_with_ts("c@lid", "s@lid", "M1"));
    same!(mem, pg, |s| s.delete_expired_msg_secrets(150));
    same!(mem, pg, |s| s.delete_expired_msg_secrets(250));
    same!(mem, pg, |s| s.get_msg_secret("c@lid", "s@lid", "M1"));
    same!(mem, pg, |s| s.get_msg_secret("c@lid", "s@lid", "M2"));
    same!(mem, pg, |s| s.get_msg_secret("c@lid", "s@lid", "M0"));

    // DeviceStore: create, save, load (runtime-only fields rebuilt).
    same!(mem, pg, |s| s.exists());
    assert!(pg.load().await.unwrap().is_none());
    pg.create().await.unwrap();
    assert!(pg.exists().await.unwrap());
    let mut d = pg.load().await.unwrap().unwrap();
    d.push_name = "Shop".into();
    d.registration_id = 4242;
    d.login_counter = 3;
    pg.save(&d).await.unwrap();
    mem.save(&d).await.unwrap();
    let (a, b) = (mem.load().await.unwrap().unwrap(), pg.load().await.unwrap().unwrap());
    assert_eq!(serde_json::to_value(&a).unwrap(), serde_json::to_value(&b).unwrap());
    assert_eq!((b.push_name.as_str(), b.registration_id), ("Shop", 4242));
    assert_eq!(format!("{:?}", b.device_props), format!("{:?}", a.device_props), "device props rebuilt on load");
    assert_eq!(pg.resource_report().await.memory_bytes, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_owner_cannot_write_the_store_after_a_takeover() {
    let api = TestApi::start().await;
    let (old, db, id) = claimed(&api, "wa-fence").await;
    old.put_session("a@c.us.0", b"mine").await.unwrap();
    old.create().await.unwrap();
    let new_epoch = sessions::claim(&db, &id, 1, "wk_b").await.unwrap().unwrap().owner_epoch;
    let new = PgStore::new(db.clone(), id.clone(), new_epoch);
    new.put_session("a@c.us.0", b"theirs").await.unwrap();

    // Every kind of write from the old owner bounces; reads still work.
    assert!(old.put_session("a@c.us.0", b"stale").await.is_err());
    assert!(old.put_sessions_batch(&[(Arc::from("a@c.us.0"), Bytes::from_static(b"stale"))]).await.is_err());
    assert!(old.delete_session("a@c.us.0").await.is_err());
    assert!(old.put_identity("a@c.us.0", [1; 32]).await.is_err());
    assert!(old.store_prekey(1, b"x", false).await.is_err());
    assert!(old.take_sent_message("c", "m").await.is_err());
    assert!(old.clear_all_sender_key_devices().await.is_err());
    assert!(old.put_msg_secrets(vec![]).await.is_err());
    assert!(old.delete_expired_sent_messages(i64::MAX).await.is_err());
    let d = old.load().await.unwrap().unwrap();
    assert!(old.save(&d).await.is_err());
    assert!(format!("{:?}", old.put_session("a@c.us.0", b"x").await.unwrap_err()).contains("Fenced"));
    assert_eq!(new.get_session("a@c.us.0").await.unwrap().as_deref(), Some(&b"theirs"[..]));
    assert!(new.exists().await.unwrap(), "the device row survived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contact_book_merges_lists_and_is_fenced() {
    use worker::driver::whatsapp::contacts::{self, Change};
    let api = TestApi::start().await;
    let (old, db, id) = claimed(&api, "wa-contacts").await;
    let epoch = old.epoch();
    let (ana, bruno) = (
        shared::jid::Jid::user("5511999990002").as_str().to_string(),
        shared::jid::Jid::user("5511999990003").as_str().to_string(),
    );
    let named = |n: &str| Change { name: Some(Some(n.to_string())), push_name: None };
    let pushed = |n: &str| Change { name: None, push_name: Some(n.to_string()) };
    contacts::record(&db, &id, epoch, &[(bruno.clone(), pushed("Bru")), (ana.clone(), named("Ana (work)"))])
        .await
        .unwrap();
    // A later push name keeps the address-book name.
    contacts::record(&db, &id, epoch, &[(ana.clone(), pushed("Ana"))]).await.unwrap();
    let list = serde_json::to_value(contacts::list(&db, &id).await.unwrap()).unwrap();
    assert_eq!(
        list,
        json!([
            { "jid": ana, "name": "Ana (work)", "push_name": "Ana", "business": null },
            { "jid": bruno, "name": null, "push_name": "Bru", "business": null },
        ])
    );
    // After a takeover the old owner's changes bounce.
    sessions::claim(&db, &id, 1, "wk_b").await.unwrap().unwrap();
    assert!(contacts::record(&db, &id, epoch, &[(ana.clone(), named("stale"))]).await.is_err());
    assert_eq!(contacts::get(&db, &id, &ana).await.unwrap().unwrap().name.as_deref(), Some("Ana (work)"));
}

/// A transport that refuses every dial, as a network that cannot be reached.
struct Refusing;

#[whatsapp_rust::async_trait]
impl whatsapp_rust::transport::TransportFactory for Refusing {
    async fn create_transport(
        &self,
    ) -> Result<
        (
            Arc<dyn whatsapp_rust::transport::Transport>,
            whatsapp_rust::async_channel::Receiver<whatsapp_rust::transport::TransportEvent>,
        ),
        whatsapp_rust::anyhow::Error,
    > {
        Err(whatsapp_rust::anyhow::anyhow!("connection refused"))
    }
}

/// A client on `store` that is built but never connects.
async fn idle_bot(store: &PgStore) -> whatsapp_rust::bot::Bot {
    whatsapp_rust::bot::Bot::builder()
        .with_backend(store.clone())
        .with_transport_factory(Refusing)
        .with_http_client(whatsapp_rust::http::UreqHttpClient::new())
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_on_pg_store_that_cannot_dial_fails_to_open_and_reports_its_memory() {
    use worker::driver::{Driver, OpenTarget};
    let api = TestApi::start().await;
    let (store, db, id) = claimed(&api, "wa-refused").await;
    let epoch = sqlx::query_scalar::<_, i64>("SELECT owner_epoch FROM instances WHERE id = $1")
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
    let driver = worker::driver::whatsapp::WhatsappDriver::with_transport(
        db.clone(),
        Arc::new(Refusing),
        std::time::Duration::from_millis(800),
    );
    let target = OpenTarget { instance: id.clone(), epoch, proxy_url: None };
    let err = match driver.open(&target, None).await {
        Ok(_) => panic!("a session without a network must not open"),
        Err(e) => e,
    };
    assert_eq!(err.code, shared::ErrorCode::WorkerTimeout, "{err}");
    assert!(!err.detail.contains('@'), "no JID in the error: {err}");
    // The client was built on PgStore: it created its device (fresh keys) there.
    assert!(store.exists().await.unwrap());
    let device = store.load().await.unwrap().unwrap();
    assert!(device.pn.is_none(), "not paired");

    // An idle client on PgStore: what it keeps in memory (for sizing worker pods).
    let bot = idle_bot(&store).await;
    let client = bot.client();
    let report = client.memory_report().await;
    println!(
        "memory_report of an idle client on PgStore: {} bytes estimated\n{report}",
        report.total_estimated_bytes()
    );
    assert!(report.total_estimated_bytes() < 4 * 1024 * 1024);

    // The process's resident memory per built (unconnected) client, as a sizing floor.
    let before = rss();
    let mut bots = Vec::new();
    for _ in 0..50 {
        bots.push(idle_bot(&store).await);
    }
    let per = rss().saturating_sub(before) / 50;
    println!("resident memory per idle client object on PgStore: ~{} KiB (50 clients)", per / 1024);
    drop(bots);
}

/// The process's resident memory, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
}

// Memory per whatsapp-rust client, each on its own instance's PgStore (its own device,
// keys written to and loaded from Postgres), for sizing worker pods: RSS over the
// process's before any client, at each count of `PACELINE_WA_MEMORY_CLIENTS` (default
// 1,10; `loadtest/session-memory.sh` runs 1,100,1000). The clients cannot reach the
// network here, so this is what a client holds once its store is loaded, before traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatsapp_clients_on_pg_store_each_hold_under_a_megabyte() {
    let counts: Vec<usize> = std::env::var("PACELINE_WA_MEMORY_CLIENTS")
        .unwrap_or_else(|_| "1,10".into())
        .split(',')
        .map(|n| n.trim().parse().expect("PACELINE_WA_MEMORY_CLIENTS: counts separated by commas"))
        .collect();
    let max = counts.iter().copied().max().unwrap_or(1);
    let api = TestApi::start().await;
    let db = shared::db::connect(&api.config).await.unwrap();
    let admin = api.admin();
    let mut stores = Vec::with_capacity(max);
    for i in 0..max {
        let (inst, _) = api.create_instance(&format!("wa-mem-{i}")).await;
        let id = InstanceId::parse(inst.id.as_str()).unwrap();
        admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
        let c = sessions::claim(&db, &id, 1, "wk").await.unwrap().unwrap();
        stores.push(PgStore::new(db.clone(), id, c.owner_epoch));
    }
    // Warm the allocator and the crate's statics with one client built and dropped.
    drop(idle_bot(&stores[0]).await);
    let before = rss();
    let mut bots = Vec::with_capacity(max);
    let mut estimated = 0;
    for n in counts {
        while bots.len() < n {
            let bot = idle_bot(&stores[bots.len()]).await;
            estimated = bot.client().memory_report().await.total_estimated_bytes();
            bots.push(bot);
        }
        let per = rss().saturating_sub(before) / n as u64;
        println!(
            "whatsapp-rust clients on PgStore: {n}: {} KiB resident each ({} bytes estimated by the crate)",
            per / 1024,
            estimated
        );
        assert!(estimated < 1024 * 1024, "the crate estimates {estimated} bytes for one client");
        if n >= 10 {
            assert!(per < 1024 * 1024, "{n} clients hold {per} bytes each");
        }
    }
    // Each store was loaded: the device the client created is there.
    assert!(stores[max - 1].load().await.unwrap().is_some());
}
